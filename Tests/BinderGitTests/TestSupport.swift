import Foundation
import XCTest
@testable import BinderGit

/// A temporary folder removed at the end of the test.
final class TemporaryDirectory {
    let path: String

    init() throws {
        let base = URL(fileURLWithPath: NSTemporaryDirectory())
            .appendingPathComponent("binder-git-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        path = base.path
    }

    func sub(_ name: String) -> String { path + "/" + name }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

struct GitCommandError: Error, CustomStringConvertible {
    let arguments: [String]
    let status: Int32
    let stderr: String
    var description: String { "git \(arguments.joined(separator: " ")) exited \(status): \(stderr)" }
}

/// Runs the `git` command line, isolated from the user's and system config.
@discardableResult
func gitData(_ arguments: [String], in directory: String? = nil, input: Data? = nil) throws -> Data {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["git"] + arguments
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    var environment = ProcessInfo.processInfo.environment
    environment["GIT_CONFIG_NOSYSTEM"] = "1"
    environment["GIT_CONFIG_GLOBAL"] = "/dev/null"
    environment["GIT_AUTHOR_NAME"] = "CLI Tester"
    environment["GIT_AUTHOR_EMAIL"] = "cli@example.com"
    environment["GIT_COMMITTER_NAME"] = "CLI Tester"
    environment["GIT_COMMITTER_EMAIL"] = "cli@example.com"
    environment["LC_ALL"] = "C"
    process.environment = environment
    // stdin and stderr go through files, so only stdout is a pipe to drain.
    let scratch = NSTemporaryDirectory() + "binder-git-cmd-\(UUID().uuidString)"
    defer {
        try? FileManager.default.removeItem(atPath: scratch + ".in")
        try? FileManager.default.removeItem(atPath: scratch + ".err")
    }
    if let input {
        _ = FileManager.default.createFile(atPath: scratch + ".in", contents: input)
        process.standardInput = FileHandle(forReadingAtPath: scratch + ".in")
    } else {
        process.standardInput = FileHandle.nullDevice
    }
    _ = FileManager.default.createFile(atPath: scratch + ".err", contents: nil)
    process.standardError = FileHandle(forWritingAtPath: scratch + ".err")
    let stdout = Pipe()
    process.standardOutput = stdout
    try process.run()
    let outData = stdout.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let errData = FileManager.default.contents(atPath: scratch + ".err") ?? Data()
    guard process.terminationStatus == 0 else {
        throw GitCommandError(arguments: arguments, status: process.terminationStatus,
                              stderr: String(decoding: errData, as: UTF8.self))
    }
    return outData
}

/// Runs `git` and returns its standard output as text, trailing newline removed.
@discardableResult
func git(_ arguments: String..., in directory: String? = nil) throws -> String {
    var text = String(decoding: try gitData(arguments, in: directory), as: UTF8.self)
    if text.hasSuffix("\n") { text.removeLast() }
    return text
}

func lines(_ text: String) -> [String] {
    text.isEmpty ? [] : text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
}

/// The sample binder bundle shipped with the tests.
func fixtureBundlePath() throws -> String {
    let url = try XCTUnwrap(Bundle.module.url(forResource: "sample-binder", withExtension: "bundle",
                                              subdirectory: "Fixtures"))
    return url.path
}

/// Clones the sample binder into `directory` (non-bare, or bare with `bare`).
func cloneFixture(into directory: String, bare: Bool = false) throws {
    var arguments = ["clone", "--quiet"]
    if bare { arguments.append("--bare") }
    arguments += [try fixtureBundlePath(), directory]
    try gitData(arguments)
}

let testAuthor = Signature(name: "Limbo Health", email: "app@limbo.health")

func oid(_ hex: String, file: StaticString = #filePath, line: UInt = #line) throws -> ObjectID {
    try XCTUnwrap(ObjectID(hex: hex), "not an object id: \(hex)", file: file, line: line)
}

/// Every commit of `main` (`commits` of them, `tip` last), every tree and blob they reach:
/// present and intact for stock git (fsck, and cat-file of each object).
func assertRepositoryComplete(_ path: String, tip: ObjectID, commits: Int, file: StaticString = #filePath, line: UInt = #line) throws {
    XCTAssertEqual(try git("fsck", "--strict", "--no-progress", "--no-dangling", "--full", in: path), "", file: file, line: line)
    XCTAssertEqual(try git("rev-parse", "main", in: path), tip.hex, file: file, line: line)
    XCTAssertEqual(Int(try git("rev-list", "--count", "main", in: path)), commits, file: file, line: line)
    // rev-list --objects reads every object reachable; cat-file checks each is readable.
    let objects = lines(try git("rev-list", "--objects", "main", in: path)).map { String($0.prefix(40)) }
    let batch = try gitData(["cat-file", "--batch-check"], in: path, input: Data(objects.joined(separator: "\n").utf8 + [10]))
    XCTAssertFalse(String(decoding: batch, as: UTF8.self).contains("missing"), file: file, line: line)
}
