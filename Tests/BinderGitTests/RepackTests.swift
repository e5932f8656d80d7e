import Foundation
import XCTest
@testable import BinderGit

/// `GitPacks.repack()`: loose objects and packs folded into one pack that stock git
/// reads, with nothing lost when the process is killed at any point of it.
final class RepackTests: XCTestCase {
    /// `count` commits on `main`, each writing one record and rewriting an index file. The
    /// blobs are written loose first (as sync's merges and `binder new` do), so each commit
    /// leaves two loose objects and a pack of its trees and commit.
    @discardableResult
    private func makeHistory(_ repo: GitRepository, commits count: Int, from start: Int = 0) throws -> [ObjectID] {
        var parent = try repo.refs.branchTip()
        var made: [ObjectID] = []
        for i in start..<(start + count) {
            let record = try repo.objects.writeBlob(Array("{\"content\":\"record \(i) \(String(repeating: "x", count: i % 97))\"}\n".utf8))
            let index = try repo.objects.writeBlob(Array("entries \(i)\n".utf8))
            let commit = try repo.commits.commitChanges(onto: parent, changes: [.write(path: "visits/\(i % 40)/r\(i).json", blob: record),
                                                                        .write(path: "index.json", blob: index)],
                                                message: "Save \(i)", author: Signature(name: "T", email: "t@example.com"))
            made.append(commit)
            parent = commit
        }
        return made
    }

    private func looseCount(_ path: String) throws -> Int {
        let counts = try git("count-objects", "-v", in: path)
        return Int(lines(counts).first { $0.hasPrefix("count: ") }!.dropFirst(7))!
    }

    private func packCount(_ path: String) throws -> Int {
        let counts = try git("count-objects", "-v", in: path)
        return Int(lines(counts).first { $0.hasPrefix("packs: ") }!.dropFirst(7))!
    }

    private func assertComplete(_ path: String, commits: [ObjectID], file: StaticString = #filePath, line: UInt = #line) throws {
        try assertRepositoryComplete(path, tip: commits.last!, commits: commits.count, file: file, line: line)
    }

    /// Repacking folds all loose objects into one pack; stock git reads it (fsck, cat-file),
    /// and the same instance keeps reading and committing.
    func testRepackLeavesOnePackThatGitReads() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        var commits = try makeHistory(repo, commits: 60)
        let loose = try looseCount(path)
        XCTAssertEqual(loose, 120)
        XCTAssertEqual(try packCount(path), 60)
        let diskBefore = try directorySize(path + "/objects")

        let result = try repo.packs.repack()
        XCTAssertEqual(result.looseRemoved, loose)
        XCTAssertEqual(try looseCount(path), 0)
        XCTAssertEqual(try packCount(path), 1)
        XCTAssertEqual(repo.packs.packCount(), 1)
        try assertComplete(path, commits: commits)
        XCTAssertLessThan(try directorySize(path + "/objects"), diskBefore / 2, "a pack should be far smaller than loose objects")

        // The instance that repacked reads the moved objects and commits on top.
        XCTAssertEqual(try repo.objects.readBlob(try repo.trees.listTree(commit: commits[10]).first { $0.path == "visits/10/r10.json" }!.id),
                       Array("{\"content\":\"record 10 \(String(repeating: "x", count: 10))\"}\n".utf8))
        commits += try makeHistory(repo, commits: 20, from: 60)
        // A second repack folds the first pack, the commits' packs and the new loose objects into one.
        let second = try repo.packs.repack()
        XCTAssertEqual(second.packsRemoved, 21)
        XCTAssertEqual(try looseCount(path), 0)
        XCTAssertEqual(try packCount(path), 1)
        try assertComplete(path, commits: commits)
        // Git's own gc agrees nothing is lost.
        try git("gc", "--quiet", in: path)
        try assertComplete(path, commits: commits)
    }

    /// A crafted folder (an entry with an empty name, which libgit2 refuses to parse, beside a
    /// folder's mode on a blob) does not stop a repack, and every object it names is packed:
    /// the crafted tree and the blob behind the folder's mode are still there, byte for byte.
    func testACraftedFolderIsRepackedWithWhatItNames() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        let commits = try makeHistory(repo, commits: 3)
        let hidden = try repo.objects.writeBlob(Array("behind a folder's mode\n".utf8))
        let record = try repo.objects.writeBlob(Array("{\"content\":\"kept\"}\n".utf8))
        func entry(_ mode: String, _ name: String, _ id: ObjectID) -> [UInt8] { Array("\(mode) \(name)".utf8) + [0] + id.bytes }
        let crafted = entry("100644", "", record) + entry("100644", "a.json", record) + entry("40000", "odd", hidden)
        let craftedID = try gitData(["hash-object", "-t", "tree", "-w", "--literally", "--stdin"], in: path, input: Data(crafted))
        let craftedHex = String(decoding: craftedID, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let root = try gitData(["mktree", "--missing"], in: path,
                               input: Data("040000 tree \(craftedHex)\tvisits\n".utf8))
        let rootHex = String(decoding: root, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let commit = try git("commit-tree", rootHex, "-p", commits.last!.hex, "-m", "crafted", in: path)
        _ = try git("update-ref", "refs/heads/main", commit, in: path)
        let before = try gitData(["cat-file", "tree", craftedHex], in: path)

        XCTAssertNoThrow(try repo.packs.repack())
        XCTAssertEqual(try looseCount(path), 0)
        XCTAssertEqual(try gitData(["cat-file", "tree", craftedHex], in: path), before, "the crafted tree, byte for byte")
        XCTAssertEqual(try git("cat-file", "-p", hidden.hex, in: path), "behind a folder's mode")
        XCTAssertEqual(try git("cat-file", "-t", record.hex, in: path), "blob")
    }

    /// Repacking a second instance while the first commits: the commits made meanwhile stay
    /// loose and complete.
    func testCommitsDuringRepackStay() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        var commits = try makeHistory(repo, commits: 80)
        let other = try GitRepository.open(path: path)
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            _ = try? other.packs.repack()
            done.signal()
        }
        commits += try makeHistory(repo, commits: 30, from: 80)
        done.wait()
        try assertComplete(path, commits: commits)
        XCTAssertEqual(try repo.objects.readBlob(try repo.trees.listTree(commit: commits.last!).first { $0.path == "index.json" }!.id),
                       Array("entries 109\n".utf8))
    }

    /// kill -9 at many points of a repack (spread over its length, measured by one whole run
    /// first): every commit and object stays readable by git and by binder, and the next
    /// repack finishes the job.
    func testKillDuringRepackLosesNothing() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        var commits = try makeHistory(repo, commits: 150)

        // How long one repack takes here (a copy, so the real one starts loose).
        try FileManager.default.copyItem(atPath: path, toPath: tmp.sub("probe.git"))
        let started = Date()
        _ = try GitRepository.open(path: tmp.sub("probe.git")).packs.repack()
        let length = max(Date().timeIntervalSince(started), 0.005)

        var killedMidway = 0
        for step in 0..<12 {
            if step % 4 == 3 { commits += try makeHistory(repo, commits: 10, from: 1_000 + step * 10) }
            let delay = length * Double(step % 6) / 5 * 1.2
            // The child: a fresh instance, repack, and leave without running anything else.
            if killChild(after: delay, running: {
                if let child = try? GitRepository.open(path: path) { _ = try? child.packs.repack() }
            }) { killedMidway += 1 }
            try assertComplete(path, commits: commits)
            let reader = try GitRepository.open(path: path)
            for commit in commits.suffix(5) {
                for entry in try reader.trees.listTree(commit: commit) where entry.kind == .blob { _ = try reader.objects.readBlob(entry.id) }
            }
        }
        XCTAssertGreaterThan(killedMidway, 0, "no repack was killed before it finished")
        _ = try repo.packs.repack()
        XCTAssertEqual(try packCount(path), 1)
        XCTAssertEqual(try looseCount(path), 0)
        try assertComplete(path, commits: commits)
    }

    private func directorySize(_ path: String) throws -> Int {
        var total = 0
        let enumerator = FileManager.default.enumerator(atPath: path)
        while let name = enumerator?.nextObject() as? String {
            let attributes = try FileManager.default.attributesOfItem(atPath: path + "/" + name)
            if attributes[.type] as? FileAttributeType == .typeRegular {
                // Loose objects each take at least a 4 KiB block on disk.
                total += max(((attributes[.size] as? Int ?? 0) + 4095) / 4096 * 4096, 4096)
            }
        }
        return total
    }
}
