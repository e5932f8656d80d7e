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

/// A bare repository at `tmp/r.git` whose one commit (`message`) holds `file` with `content`:
/// its path, the repository and the commit.
func bareRepositoryWithOneCommit(in tmp: TemporaryDirectory, file: String, content: String,
                                 message: String) throws -> (path: String, repo: GitRepository, tip: ObjectID) {
    let path = tmp.sub("r.git")
    let repo = try GitRepository.create(path: path, bare: true)
    let bytes = Array(content.utf8)
    let tip = try repo.commits.commitChanges(onto: nil, changes: [.write(path: file, blob: try GitObjects.blobID(of: bytes))],
                                             message: message, author: testAuthor, blobs: [bytes])
    return (path, repo, tip)
}

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

/// Runs `body` in a forked child that exits when it is done, sends it SIGKILL after `delay`
/// seconds and waits for it; true when the kill stopped it before it finished.
func killChild(after delay: Double, running body: () -> Void, file: StaticString = #filePath, line: UInt = #line) -> Bool {
    let pid = fork()
    if pid == 0 {
        body()
        _exit(0)
    }
    XCTAssertGreaterThan(pid, 0, file: file, line: line)
    usleep(UInt32(delay * 1_000_000))
    kill(pid, SIGKILL)
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    return (status & 0x7F) == SIGKILL
}

/// kill -9 of a child process committing in a loop (`commit(repository, round, i, parent)`
/// returns the new commit), once per round, after `acknowledgements(round)` commits and a
/// further `delay(round)` microseconds: every commit the child acknowledged (written to a file
/// after `commitChanges` returned) is on `main`, and stock git finds the repository sound.
/// Returns the tip and the number of commits on `main` at the end.
func killDuringCommits(path: String, from start: ObjectID, rounds: Int, in tmp: TemporaryDirectory,
                       acknowledgements: (Int) -> Int, delay: (Int) -> UInt32,
                       commit: (GitRepository, Int, Int, ObjectID?) throws -> ObjectID,
                       file: StaticString = #filePath, line: UInt = #line) throws -> (tip: ObjectID, total: Int) {
    var tip = start
    var total = 1
    for round in 0..<rounds {
        let acked = tmp.sub("acked-\(round)")
        _ = FileManager.default.createFile(atPath: acked, contents: nil)
        let parentAtStart = tip
        let pid = fork()
        if pid == 0 {
            let fd = open(acked, O_WRONLY | O_APPEND)
            guard fd >= 0, let child = try? GitRepository.open(path: path) else { _exit(1) }
            var parent: ObjectID? = parentAtStart
            for i in 0..<100_000 {
                guard let id = try? commit(child, round, i, parent) else { _exit(2) }
                let line = Array((id.hex + "\n").utf8)
                _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                parent = id
            }
            _exit(0)
        }
        XCTAssertGreaterThan(pid, 0, file: file, line: line)
        var waited = 0
        while ((try? String(contentsOfFile: acked, encoding: .utf8))?.count ?? 0) < 41 * acknowledgements(round) && waited < 3_000 {
            usleep(10_000)
            waited += 1
        }
        usleep(delay(round))
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        XCTAssertEqual(status & 0x7F, SIGKILL, "round \(round): the child should have been killed (status \(status))", file: file, line: line)
        // A kill while the branch was being moved leaves git's ref lock: its owner is dead, so
        // it goes (as the mount clears it).
        try? FileManager.default.removeItem(atPath: path + "/refs/heads/main.lock")

        let acknowledged = lines(try String(contentsOfFile: acked, encoding: .utf8)).filter { !$0.isEmpty }
        XCTAssertGreaterThan(acknowledged.count, 0, file: file, line: line)
        let onMain = Set(lines(try git("rev-list", "main", in: path)))
        for id in acknowledged {
            XCTAssertTrue(onMain.contains(id), "round \(round): acknowledged commit \(id) lost", file: file, line: line)
        }
        tip = try XCTUnwrap(try GitRepository.open(path: path).refs.branchTip(), file: file, line: line)
        total = onMain.count
        try assertRepositoryComplete(path, tip: tip, commits: total, file: file, line: line)
    }
    return (tip, total)
}

/// A random history for walks to be checked against: commits of one to `changesAtMost` writes
/// and removals of `paths` (a removal one time in `removeOneIn`; writes with one of `contents`
/// contents, so that a version can repeat an older one), where `x.json` is a file at times and
/// a folder (`x.json/inner.json`) at others, and every `mergeEvery` commits a merge of a
/// line that left from an older tip. `afterEach` is told each commit and its step.
func randomHistory(in repo: GitRepository, paths: [String], steps: Int, changesAtMost: Int, removeOneIn: Int,
                   contents: Int, mergeEvery: Int, afterEach: (ObjectID, Int) throws -> Void) throws -> ObjectID {
    var random = SystemRandomNumberGenerator()
    var present = Set<String>()
    var tip = try repo.commits.commitChanges(onto: nil, changes: [.write(path: "root.json", blob: try repo.objects.writeBlob([0]))],
                                     message: "Add", author: testAuthor)
    try afterEach(tip, -1)
    var side: ObjectID? = nil
    for step in 0..<steps {
        var changes: [TreeChange] = []
        for _ in 0..<Int.random(in: 1...changesAtMost, using: &random) {
            let chosen = paths.randomElement(using: &random)!
            // A path and its folder-or-file twin never both exist.
            let twin = chosen == "x.json" ? "x.json/inner.json" : chosen == "x.json/inner.json" ? "x.json" : nil
            guard !changes.contains(where: { $0.path == chosen || $0.path == twin }) else { continue }
            if present.contains(chosen), Int.random(in: 0..<removeOneIn, using: &random) == 0 {
                changes.append(.delete(path: chosen))
                present.remove(chosen)
            } else {
                if let twin, present.contains(twin) { changes.append(.delete(path: twin)); present.remove(twin) }
                let content = Int.random(in: 0..<contents, using: &random)
                changes.append(.write(path: chosen, blob: try repo.objects.writeBlob(Array("\(chosen) \(content)".utf8))))
                present.insert(chosen)
            }
        }
        guard !changes.isEmpty else { continue }
        if step % mergeEvery == mergeEvery / 4 { side = tip }
        if step % mergeEvery == mergeEvery * 3 / 4, let other = side {
            // Its tree: this commit's changes on the tip (the other line's are left out).
            tip = try repo.commits.commitChanges(onto: tip, changes: changes, message: "Merge", author: testAuthor, mergedParents: [other])
        } else {
            tip = try repo.commits.commitChanges(onto: tip, changes: changes, message: "Edit", author: testAuthor)
        }
        try afterEach(tip, step)
    }
    return tip
}
