@testable import BinderServer
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging

/// `binder serve` in this process on loopback (Hummingbird's live test setup, port 0), on a
/// fresh folder: the sync client's real counterpart without a mount or a second process.
struct InProcessServer: Sendable {
    let folder: String
    let server: BinderServer

    init(faultRate: Double = 0) throws {
        folder = NSTemporaryDirectory() + "binder-sync-tests-" + UUID().uuidString
        server = try BinderServer(options: .init(repositories: folder, port: 0, faultRate: faultRate),
                                  logger: Logger(label: "binder-serve-test") { _ in SwiftLogNoOpLogHandler() })
    }

    var repositories: any RepositoryStorage { server.routes.environment.storage.repositories }

    /// Runs `body` with the server's base URL while it listens.
    func serving<Value: Sendable>(_ body: @Sendable (String) async throws -> Value) async throws -> Value {
        defer { try? FileManager.default.removeItem(atPath: folder) }
        return try await server.application { _ in }.test(.live) { client in
            try await body("http://localhost:\(client.port ?? 0)")
        }
    }

    /// Makes repository `id` owned by `owner` with one commit, as push-to-create would.
    func makeRepository(_ id: String, owner: String) throws {
        let store = (repositories as! FolderRepositories).store
        let staging = try store.stage(id, owner: owner)
        let work = try LocalGit.commitOnce(in: folder + "/work-" + UUID().uuidString)
        try LocalGit.run(["-C", work, "push", "-q", staging, "main"])
        guard store.publish(staging, as: id) else { throw LocalGit.Failure(message: "cannot publish \(id)") }
    }
}

/// The git command line, for the repositories the tests start from.
enum LocalGit {
    struct Failure: Error { let message: String }

    /// A new work tree at `path` with one commit on main; returns `path`.
    static func commitOnce(in path: String, note: String = "hello") throws -> String {
        try run(["init", "-q", "-b", "main", path])
        try Data((note + "\n").utf8).write(to: URL(fileURLWithPath: path + "/note.md"))
        try run(["-C", path, "add", "note.md"])
        try run(["-C", path, "-c", "user.name=Test", "-c", "user.email=test@example.invalid", "commit", "-q", "-m", note])
        return path
    }

    @discardableResult
    static func run(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["git"] + arguments
        var environment = ProcessInfo.processInfo.environment
        environment["GIT_CONFIG_NOSYSTEM"] = "1"
        environment["HOME"] = NSTemporaryDirectory()
        process.environment = environment
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let error = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw Failure(message: "git \(arguments.joined(separator: " ")): \(error)") }
        return text
    }
}

/// Runs blocking client code (the sync client is synchronous) on a thread of its own, so that
/// the in-process server's tasks keep the cooperative pool.
func onThread<Value: Sendable>(_ body: @escaping @Sendable () throws -> Value) async throws -> Value {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}
