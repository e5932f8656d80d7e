import Foundation

/// Git's own Smart HTTP service: `git upload-pack` / `git receive-pack --stateless-rpc`, one
/// process per request, the request body on stdin and the response on stdout.
struct GitBackend: Sendable {
    enum Service: String, Sendable {
        case uploadPack = "git-upload-pack"
        case receivePack = "git-receive-pack"

        var subcommand: String { self == .uploadPack ? "upload-pack" : "receive-pack" }
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The ref advertisement for `GET info/refs?service=…`, with the Smart HTTP preamble.
    func advertisement(_ service: Service, repository: String, protocolHeader: String?) throws -> [UInt8] {
        let refs = try run(service, ["--stateless-rpc", "--advertise-refs", repository], input: [], protocolHeader: protocolHeader)
        // Protocol v2 answers with its own capability advertisement, without the preamble.
        if protocolHeader?.contains("version=2") == true { return refs }
        return Self.packetLine("# service=\(service.rawValue)\n") + Array("0000".utf8) + refs
    }

    /// The response to `POST git-upload-pack` / `git-receive-pack`.
    func serve(_ service: Service, repository: String, body: [UInt8], protocolHeader: String?) throws -> [UInt8] {
        try run(service, ["--stateless-rpc", repository], input: body, protocolHeader: protocolHeader)
    }

    /// `git` from PATH (the server runs git itself for the pack protocol).
    static let gitPath: String = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for folder in path.split(separator: ":") where FileManager.default.isExecutableFile(atPath: "\(folder)/git") {
            return "\(folder)/git"
        }
        return "/usr/bin/git"
    }()

    static func packetLine(_ text: String) -> [UInt8] {
        let bytes = Array(text.utf8)
        return Array(String(format: "%04x", bytes.count + 4).utf8) + bytes
    }

    private func run(_ service: Service, _ arguments: [String], input: [UInt8], protocolHeader: String?) throws -> [UInt8] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.gitPath)
        process.arguments = [service.subcommand] + arguments
        var environment = ProcessInfo.processInfo.environment
        environment["GIT_CONFIG_NOSYSTEM"] = "1"
        environment.removeValue(forKey: "GIT_PROTOCOL")
        // Only a well-formed protocol request is passed on (`version=2`).
        if let header = protocolHeader, header.range(of: #"^version=[0-9]$"#, options: .regularExpression) != nil {
            environment["GIT_PROTOCOL"] = header
        }
        process.environment = environment
        let stdin = Pipe(), stdout = Pipe(), stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        // Feed stdin and drain stderr on their own threads: git may block on either.
        let writer = Thread {
            if !input.isEmpty { try? stdin.fileHandleForWriting.write(contentsOf: input) }
            try? stdin.fileHandleForWriting.close()
        }
        writer.start()
        let errors = ErrorCollector()
        let drain = Thread { errors.set(stderr.fileHandleForReading.readDataToEndOfFile()) }
        drain.start()
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let message = String(decoding: errors.wait().prefix(500), as: UTF8.self)
            throw Failure(description: "git \(service.subcommand) exited \(process.terminationStatus): \(message)")
        }
        return [UInt8](output)
    }
}

/// Hands stderr's bytes from the thread that drains it to the one that waits.
private final class ErrorCollector: @unchecked Sendable {
    private let condition = NSCondition()
    private var data: Data?   // guarded by condition

    func set(_ value: Data) {
        condition.lock(); data = value; condition.signal(); condition.unlock()
    }

    func wait() -> Data {
        condition.lock(); defer { condition.unlock() }
        while data == nil { condition.wait() }
        return data!
    }
}
