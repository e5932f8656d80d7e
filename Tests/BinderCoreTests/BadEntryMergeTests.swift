import BinderCore
import BinderCrypto
import BinderFormat
import BinderGit
import Foundation
import XCTest

/// A sync's merge beside bad tree entries (a folder mode on a blob, an empty name: what another
/// program may commit): the merge commit keeps them byte for byte where they are, and one that
/// arrives from the other device does not stop the merge.
extension BinderMergerTests {
    /// `git` on the test's repository, `input` on its standard input; its standard output.
    private func gitOutput(_ arguments: [String], input: Data = Data()) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["git", "--git-dir=" + directory.path] + arguments
        let stdin = Pipe(), out = FileManager.default.temporaryDirectory.appendingPathComponent("git-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: out) }
        process.standardInput = stdin
        process.standardOutput = try FileHandle(forWritingTo: out)
        try process.run()
        stdin.fileHandleForWriting.write(input)
        try stdin.fileHandleForWriting.close()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "git \(arguments)")
        return try Data(contentsOf: out)
    }

    private func text(_ data: Data) -> String { String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) }

    /// The bytes of the bad entries: a folder `bad` that is a blob, and an entry with no name.
    private func badEntries(_ blob: ObjectID) -> [UInt8] {
        Array("40000 bad".utf8) + [0] + blob.bytes + Array("100644 ".utf8) + [0] + blob.bytes
    }

    /// A commit on `parent` whose `visits` tree has the bad entries after its own.
    private func crafted(on parent: ObjectID) throws -> ObjectID {
        let visits = text(try gitOutput(["rev-parse", parent.hex + ":visits"]))
        let blob = try XCTUnwrap(try repository.trees.entry(at: "visits/a.json", commit: parent)).id
        let bytes = try gitOutput(["cat-file", "tree", visits]) + Data(badEntries(blob))
        let tree = text(try gitOutput(["hash-object", "-t", "tree", "--literally", "-w", "--stdin"], input: bytes))
        let listing = text(try gitOutput(["ls-tree", parent.hex])).replacingOccurrences(of: visits, with: tree)
        let root = text(try gitOutput(["mktree"], input: Data((listing + "\n").utf8)))
        let commit = text(try gitOutput(["-c", "user.name=t", "-c", "user.email=t@t", "commit-tree", root, "-p", parent.hex, "-m", "crafted"]))
        return try XCTUnwrap(ObjectID(hex: commit))
    }

    private func visitsBytes(_ commit: ObjectID) throws -> [UInt8] {
        [UInt8](try gitOutput(["cat-file", "tree", text(try gitOutput(["rev-parse", commit.hex + ":visits"]))]))
    }

    func testAMergeKeepsBadEntriesBesideIt() throws {
        let blob = try XCTUnwrap(try repository.trees.entry(at: "visits/a.json", commit: base)).id
        // Here: the bad entries; there: an edit and a deletion beside them.
        let local = try crafted(on: base)
        let remote = try branch(from: base, ["visits/b.json": ("B remote", "2026-02-02T00:00:00.000Z")], delete: ["visits/c.json"])
        guard case .merged(let commit, _, let conflicts) = try merge(local: local, remote: remote) else { return XCTFail("not merged") }
        XCTAssertEqual(conflicts, [])
        XCTAssertEqual(try value("visits/b.json", at: commit), "B remote")
        XCTAssertNil(try repository.trees.entry(at: "visits/c.json", commit: commit))
        let merged = try visitsBytes(commit)
        XCTAssertEqual(Array(merged.suffix(badEntries(blob).count)), badEntries(blob))

        // The other way round: the bad entries arrive; the merge goes through, the local edit kept.
        let edited = try branch(from: base, ["visits/a.json": ("A local", "2026-02-03T00:00:00.000Z")])
        let arriving = try crafted(on: base)
        guard case .merged(let other, _, _) = try merge(local: edited, remote: arriving) else { return XCTFail("not merged") }
        XCTAssertEqual(try value("visits/a.json", at: other), "A local")
        XCTAssertEqual(try value("visits/b.json", at: other), "B")
        // What cannot be read is not merged in as something else: a folder stays a folder (or
        // stays in the other side's commit, a parent of the merge).
        if let bad = try repository.trees.entry(at: "visits/bad", commit: other) { XCTAssertEqual(bad.mode, 0o040000) }
        XCTAssertEqual(try repository.commits.commit(other).parents, [edited, arriving])
    }
}
