import Foundation
import XCTest

/// Runs the real `binder` binary as a user would, with its own temporary BINDER_HOME.
struct BinderRun {
    let status: Int32
    let stdout: String
    let stderr: String
}

final class BinderSandbox {
    let root: URL
    var home: URL { root.appendingPathComponent("home") }

    init() throws {
        _ = TestWatchdog.shared
        root = FileManager.default.temporaryDirectory.appendingPathComponent("binder-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: root) }

    /// The binder binary built beside the test bundle (or BINDER_BIN).
    static var binary: String {
        if let path = ProcessInfo.processInfo.environment["BINDER_BIN"] { return path }
        let testBundleDir = Bundle.main.bundleURL.deletingLastPathComponent()
        for candidate in [Bundle.main.bundleURL.appendingPathComponent("binder"),
                          testBundleDir.appendingPathComponent("binder")] where FileManager.default.isExecutableFile(atPath: candidate.path) {
            return candidate.path
        }
        let thisFile = URL(fileURLWithPath: #filePath)
        return thisFile.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/debug/binder").path
    }

    /// Writes `text` to a file in the sandbox (for --passphrase-file) and returns its path.
    func file(_ name: String, _ text: String) throws -> String {
        let url = root.appendingPathComponent(name)
        try Data(text.utf8).write(to: url)
        return url.path
    }

    @discardableResult
    func run(_ arguments: [String], stdin: String? = nil, environment extra: [String: String] = [:]) throws -> BinderRun {
        // Retries wait 50 ms, 100 ms … 3 s instead of 1 s … 60 s: a dead server in a test is
        // reported within a second or two, not a minute.
        try Self.run(executable: Self.binary, arguments, stdin: stdin,
                     environment: ["BINDER_HOME": home.path, "BINDER_RETRY_BASE": "0.05"].merging(extra) { $1 })
    }

    /// `executable` run to its end, or killed with its descendants after `deadline` seconds
    /// (status 124, and stderr says so).
    static func run(executable: String, _ arguments: [String], stdin: String? = nil,
                    environment extra: [String: String] = [:], deadline: Double = ChildDeadline.seconds) throws -> BinderRun {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment.merge(extra) { $1 }
        process.environment = environment
        // Output goes to files (read after exit) so a chatty child can never block on a pipe.
        let outURL = FileManager.default.temporaryDirectory.appendingPathComponent("binder-out-\(UUID().uuidString)")
        let errURL = FileManager.default.temporaryDirectory.appendingPathComponent("binder-err-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: outURL); try? FileManager.default.removeItem(at: errURL) }
        let out = try FileHandle(forWritingTo: outURL), err = try FileHandle(forWritingTo: errURL)
        let input = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        try process.run()
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        try input.fileHandleForWriting.close()
        let ended = ChildDeadline.wait(process, exited: exited, seconds: deadline, label: ([executable] + arguments).joined(separator: " "))
        try out.close()
        try err.close()
        let outData = try Data(contentsOf: outURL), errData = try Data(contentsOf: errURL)
        return BinderRun(status: ended ? process.terminationStatus : 124,
                         stdout: String(decoding: outData, as: UTF8.self),
                         stderr: String(decoding: errData, as: UTF8.self)
                            + (ended ? "" : "\n(test harness: killed after \(Int(deadline)) s without exiting)"))
    }
}

/// Asserts a failure: non-zero exit, exactly one line on stderr containing `fragment`.
func assertFails(_ run: BinderRun, mentioning fragment: String, file: StaticString = #filePath, line: UInt = #line) {
    XCTAssertNotEqual(run.status, 0, "expected failure, stdout: \(run.stdout)", file: file, line: line)
    let lines = run.stderr.split(separator: "\n", omittingEmptySubsequences: true)
    XCTAssertEqual(lines.count, 1, "expected one line on stderr, got: \(run.stderr)", file: file, line: line)
    XCTAssertTrue(run.stderr.contains(fragment), "stderr '\(run.stderr)' lacks '\(fragment)'", file: file, line: line)
}
