import Foundation
import Synchronization

/// Git's own Smart HTTP service: `git upload-pack` / `git receive-pack --stateless-rpc`, one
/// process per request. Its stdin is the request body's spool file and its stdout another spool
/// file, so nothing is held in memory and no thread waits on a pipe; the request's task only
/// awaits the exit. The repository is always an absolute path after `--`: never an option.
struct GitBackend: Sendable {
    typealias Service = GitService

    /// What git wrote: stdout (rewound, to be sent) and the exit status.
    struct Output: Sendable {
        let stdout: SpoolFile
        let status: Int32
        let errors: String
    }

    /// Where request bodies and git's output are spooled.
    let spool: String
    /// At most this many git processes at once; the others wait their turn.
    let slots: ProcessSlots
    /// A git process running longer than this is stopped (SIGKILL).
    let timeout: Duration

    /// The ref advertisement for `GET info/refs?service=…`, with the Smart HTTP preamble.
    func advertisement(_ service: Service, repository: String, protocolHeader: String?) async throws -> [UInt8] {
        let output = try await run(service, ["--stateless-rpc", "--advertise-refs"], repository: repository, input: nil,
                                   protocolHeader: protocolHeader)
        guard output.status == 0 else { throw GitFailure(description: "git \(service.subcommand) exited \(output.status): \(output.errors)") }
        let refs = try output.stdout.read(upTo: 16 << 20)
        // Protocol v2 answers with its own capability advertisement, without the preamble.
        if protocolHeader?.contains("version=2") == true { return refs }
        return PacketLine.line("# service=\(service.rawValue)\n") + PacketLine.flush + refs
    }

    /// The response to `POST git-upload-pack` / `git-receive-pack`, the body read from `input`.
    func serve(_ service: Service, repository: String, input: SpoolFile, protocolHeader: String?) async throws -> Output {
        try await run(service, ["--stateless-rpc"], repository: repository, input: input, protocolHeader: protocolHeader)
    }

    /// `git` from PATH (the server runs git itself for the pack protocol).
    static let gitPath: String = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for folder in path.split(separator: ":") where FileManager.default.isExecutableFile(atPath: "\(folder)/git") {
            return "\(folder)/git"
        }
        return "/usr/bin/git"
    }()

    /// `git --git-dir=REPOSITORY ARGUMENTS…` (plumbing such as `update-ref`), stdout and exit status.
    func command(_ arguments: [String], repository: String) async throws -> Output {
        guard repository.hasPrefix("/") else { throw GitFailure(description: "repository path is not absolute") }
        return try await launch(["--git-dir=" + repository] + arguments, input: nil, protocolHeader: nil)
    }

    private func run(_ service: Service, _ arguments: [String], repository: String, input: SpoolFile?,
                     protocolHeader: String?) async throws -> Output {
        guard repository.hasPrefix("/") else { throw GitFailure(description: "repository path is not absolute") }
        // Every push is kept as the pack it came in (unpackLimit 1), never unpacked into loose
        // objects: a push of a few hundred deltas could otherwise take a hundred times its size
        // on disk, past the quota it was checked against.
        let settings = service == .receivePack ? ["-c", "receive.unpackLimit=1"] : []
        return try await launch(settings + [service.subcommand] + arguments + ["--", repository], input: input,
                                protocolHeader: protocolHeader)
    }

    private func launch(_ arguments: [String], input: SpoolFile?, protocolHeader: String?) async throws -> Output {
        await slots.acquire()
        defer { slots.release() }
        let stdout = try SpoolFile(folder: spool), stderr = try SpoolFile(folder: spool)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.gitPath)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["GIT_CONFIG_NOSYSTEM"] = "1"
        environment.removeValue(forKey: "GIT_PROTOCOL")
        // Only a well-formed protocol request is passed on (`version=2`).
        if let header = protocolHeader, header.range(of: #"^version=[0-9]$"#, options: .regularExpression) != nil {
            environment["GIT_PROTOCOL"] = header
        }
        process.environment = environment
        if let input { try input.rewind() }
        process.standardInput = input?.handle ?? FileHandle.nullDevice
        process.standardOutput = stdout.handle
        process.standardError = stderr.handle
        let exited = ExitSignal()
        process.terminationHandler = { _ in exited.fire() }
        try process.run()
        let pid = process.processIdentifier
        let watchdog = Task { [timeout] in
            try await Task.sleep(for: timeout)
            if !exited.hasFired { kill(pid, SIGKILL) }
        }
        await exited.wait()
        watchdog.cancel()
        try stdout.rewind()
        try stderr.rewind()
        let errors = String(decoding: (try? stderr.read(upTo: 500)) ?? [], as: UTF8.self)
        return Output(stdout: stdout, status: process.terminationStatus, errors: errors)
    }
}

struct GitFailure: Error, CustomStringConvertible {
    let description: String
}

/// A one-shot signal from git's termination handler to the task awaiting it (either may come first).
private final class ExitSignal: Sendable {
    /// Guards whether the process has exited and who waits for that.
    private let state = Mutex<(fired: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    var hasFired: Bool { state.withLock { $0.fired } }

    func fire() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.fired = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { state -> Bool in
                if state.fired { return true }
                state.waiter = continuation
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }
}

/// A counting semaphore for tasks: at most `count` holders at once, the rest wait in order.
final class ProcessSlots: Sendable {
    /// Guards the free slots and the queue of waiters.
    private let state: Mutex<(free: Int, waiters: [CheckedContinuation<Void, Never>])>

    init(_ count: Int) { state = Mutex((max(1, count), [])) }

    func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let granted = state.withLock { state -> Bool in
                if state.free > 0 { state.free -= 1; return true }
                state.waiters.append(continuation)
                return false
            }
            if granted { continuation.resume() }
        }
    }

    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiters.isEmpty { state.free += 1; return nil }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}
