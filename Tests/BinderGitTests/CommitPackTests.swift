import Foundation
import XCTest
@testable import BinderGit

/// Each commit's new objects go to disk as one small pack (no loose objects, one fsync of a
/// pack, its index and the folder), which stock git reads; folding keeps packs few; kill -9
/// at any point of a stream of commits loses no commit that was acknowledged.
final class CommitPackTests: XCTestCase {
    /// One save the way the committer makes it: a record and an index file, stored with the commit.
    @discardableResult
    private func save(_ repo: GitRepository, _ i: Int, onto parent: ObjectID?) throws -> ObjectID {
        let record = Array("{\"content\":\"record \(i) \(String(repeating: "x", count: i % 97))\"}\n".utf8)
        let index = Array("entries \(i)\n".utf8)
        return try repo.commits.commitChanges(onto: parent,
                                      changes: [.write(path: "visits/\(i % 40)/r\(i).json", blob: try GitObjects.blobID(of: record)),
                                                .write(path: "index.json", blob: try GitObjects.blobID(of: index))],
                                      message: "Save \(i)", author: testAuthor, blobs: [record, index])
    }

    private func counts(_ path: String) throws -> (loose: Int, packs: Int) {
        let text = lines(try git("count-objects", "-v", in: path))
        func value(_ key: String) -> Int { Int(text.first { $0.hasPrefix(key + ": ") }!.dropFirst(key.count + 2))! }
        return (value("count"), value("packs"))
    }

    private func packIndexes(_ path: String) -> Set<String> {
        Set(GitPacks.packIndexes(in: path + "/objects/pack"))
    }

    func testACommitWritesOnePackOfItsNewObjectsAndNoLooseOnes() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        var tip: ObjectID?
        for i in 0..<5 {
            let before = packIndexes(path)
            tip = try save(repo, i, onto: tip)
            let added = packIndexes(path).subtracting(before)
            XCTAssertEqual(added.count, 1, "commit \(i): one new pack")
            XCTAssertEqual(try counts(path).loose, 0, "commit \(i): no loose objects")
            // The pack holds exactly what is new: 2 blobs, the trees of `visits/N`, `visits`
            // and the root, the commit. (Unchanged folders are not written again.)
            let index = try Data(contentsOf: URL(fileURLWithPath: added.first!))
            let entries = lines(String(decoding: try gitData(["show-index"], in: path, input: index), as: UTF8.self)).filter { !$0.isEmpty }
            XCTAssertEqual(entries.count, 6, "commit \(i)")
        }
        try assertRepositoryComplete(path, tip: tip!, commits: 5)
        // Stock git reads the contents.
        XCTAssertEqual(try git("cat-file", "-p", "main:index.json", in: path), "entries 4")
        XCTAssertEqual(try git("cat-file", "-t", "main", in: path), "commit")
        // binder reads them, through this instance and a new one, and commits on top.
        XCTAssertEqual(try repo.objects.readBlob(try XCTUnwrap(try repo.trees.entry(at: "visits/3/r3.json", commit: tip!)).id),
                       Array("{\"content\":\"record 3 xxx\"}\n".utf8))
        let other = try GitRepository.open(path: path)
        tip = try save(other, 5, onto: tip)
        XCTAssertEqual(try repo.objects.readBlob(try XCTUnwrap(try repo.trees.entry(at: "index.json", commit: tip!)).id), Array("entries 5\n".utf8))
        // A blob named but not stored is refused (strict object creation), and nothing moves.
        XCTAssertThrowsError(try repo.commits.commitChanges(onto: tip, changes: [.write(path: "a.json", blob: try GitObjects.blobID(of: [1]))],
                                                    message: "Broken", author: testAuthor))
        XCTAssertEqual(try repo.refs.branchTip(), tip)
        // Git's own gc agrees.
        try git("gc", "--quiet", in: path)
        try assertRepositoryComplete(path, tip: tip!, commits: 6)
    }

    /// A fold writes one pack (`FoldCopy`: commits and blobs copied as they were, trees as
    /// deltas against the newest version of their folder).
    func testFoldingSmallPacksLeavesOneAndLosesNothing() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        var tip: ObjectID?
        for i in 0..<40 { tip = try save(repo, i, onto: tip) }
        XCTAssertEqual(try counts(path).packs, 40)
        let result = try GitRepository.open(path: path).packs.foldPacks()
        XCTAssertEqual(result.packsRemoved, 40)
        XCTAssertEqual(try counts(path).packs, 1)
        let types = try GitPacks.packIndexes(in: path + "/objects/pack").map { index in
            Set(lines(try git("verify-pack", "-v", index, in: path)).compactMap { line -> String? in
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                return fields.count >= 5 && fields[0].count == 40 ? String(fields[1]) : nil
            })
        }
        XCTAssertEqual(types, [["commit", "tree", "blob"]])
        try assertRepositoryComplete(path, tip: tip!, commits: 40)
        // The instance that committed still reads everything and commits on top; a full
        // repack then folds the rest.
        for i in 40..<45 { tip = try save(repo, i, onto: tip) }
        XCTAssertEqual(try repo.packs.repack().packsRemoved, 6)
        XCTAssertEqual(try counts(path).packs, 1)
        try assertRepositoryComplete(path, tip: tip!, commits: 45)
    }

    /// Which packs a geometric fold rolls up (object counts, smallest first; loose objects
    /// join the roll). A row per case; add one for a case you meet.
    func testGeometricRollUpTable() {
        let rows: [(counts: [Int], loose: Int, rolled: Int, line: UInt)] = [
            ([], 0, 0, #line),
            ([5], 0, 0, #line),                       // one pack: nothing to fold
            ([5], 3, 1, #line),                       // loose objects join the one pack
            ([5, 5], 0, 2, #line),
            ([5, 5, 5, 5], 0, 4, #line),              // a fold's worth of saves
            ([5, 10, 20, 40], 0, 0, #line),           // already a progression
            ([5, 5, 1_000], 0, 2, #line),             // the big pack stays
            (Array(repeating: 5, count: 32) + [160, 1_000], 0, 33, #line),  // 160 < 2 x 160 joins
            (Array(repeating: 5, count: 32) + [480, 1_000], 0, 32, #line),  // 480 >= 2 x 160 stays
            (Array(repeating: 5, count: 32) + [160, 320, 1_000], 0, 35, #line),  // 160, 320, 640 all join
            ([6, 100, 300], 0, 0, #line),             // 300 >= 200, 100 >= 12
            ([90, 100, 300], 0, 3, #line),            // 100 < 180: both roll; 300 < 380 joins
            ([50, 1_000], 400, 1, #line),             // 450 loose and small: 1,000 >= 900 stays
        ]
        for row in rows {
            XCTAssertEqual(GitPacks.geometricRollUp(row.counts, extra: row.loose), row.rolled, "\(row.counts) + \(row.loose)", line: row.line)
        }
    }

    /// Folding after every 32 saves keeps packs logarithmic; loose objects are packed too.
    func testRepeatedFoldsKeepPacksFewAndPackLooseObjects() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        var tip: ObjectID?
        var rewritten = 0
        for i in 0..<640 {
            tip = try save(repo, i, onto: tip)
            guard i % 32 == 31 else { continue }
            let before = packIndexes(path)
            rewritten += try GitRepository.open(path: path).packs.foldPacks().objects
            // One pack a fold, after which the packs are a geometric progression again: the
            // next fold rolls up only what saves add. (A fold that wrote two packs of about as
            // many objects each had the next one roll both again, and every fold rewrote every
            // object saved so far.)
            XCTAssertEqual(packIndexes(path).subtracting(before).count, 1, "fold after save \(i)")
            let sizes = GitPacks.packIndexes(in: path + "/objects/pack").compactMap(GitPacks.objectCount(ofIndex:)).sorted()
            XCTAssertEqual(GitPacks.geometricRollUp(sizes), 0, "packs after the fold after save \(i): \(sizes)")
        }
        // Each of the 3,840 objects (a save writes six: two blobs, three trees, a commit)
        // rewritten a few times (10,752 in all when this was written), not once per fold:
        // folding everything each time writes 192 + 384 + … + 3,840 = 40,320.
        XCTAssertLessThan(rewritten, 16_000, "objects the 20 folds wrote")
        XCTAssertLessThanOrEqual(try counts(path).packs, 8, "640 saves folded 20 times")
        try assertRepositoryComplete(path, tip: tip!, commits: 640)
        // A loose object (as a merge or stock git writes) is packed by the next fold.
        let loose = try XCTUnwrap(ObjectID(hex: String(decoding: try gitData(["hash-object", "-w", "--stdin"], in: path, input: Data("loose\n".utf8)),
                                                      as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)))
        XCTAssertEqual(try counts(path).loose, 1)
        let result = try GitRepository.open(path: path).packs.foldPacks()
        XCTAssertEqual(result.looseRemoved, 1)
        XCTAssertEqual(try counts(path).loose, 0)
        XCTAssertEqual(try repo.objects.readBlob(loose), Array("loose\n".utf8))
        try assertRepositoryComplete(path, tip: tip!, commits: 640)
    }

    /// Packs a fold removed are let go by every instance of the process before its next use:
    /// libgit2 itself never drops a pack from a database, so an instance that commits while
    /// another folds kept each removed pack open and mapped (11,500 of them after importing
    /// 10,000 records), and searched them all on every lookup.
    func testInstancesLetGoOfPacksFoldsRemoved() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        let reader = try GitRepository.open(path: path)
        var tip: ObjectID?
        for i in 0..<96 {
            tip = try save(repo, i, onto: tip)
            XCTAssertEqual(try reader.objects.readBlob(try GitObjects.blobID(of: Array("entries \(i)\n".utf8))), Array("entries \(i)\n".utf8))
            if i % 32 == 31 { XCTAssertGreaterThan(try GitRepository.open(path: path).packs.foldPacks().packsRemoved, 0) }
        }
        // Removed packs only (`objects/pack/pack-*`): a save's next pack files, made ahead with
        // no name, show as `objects/pack/#<inode> (deleted)` (`SparePackFiles`).
        func removedPacksHeld() throws -> Int {
            try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").filter { fd in
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + fd) else { return false }
                return target.hasPrefix(path + "/objects/pack/pack-") && target.hasSuffix("(deleted)")
            }.count + String(decoding: try Data(contentsOf: URL(fileURLWithPath: "/proc/self/maps")), as: UTF8.self)
                .split(separator: "\n").filter { $0.contains(path + "/objects/pack/pack-") && $0.hasSuffix("(deleted)") }.count
        }
        // Both instances read and write on after the folds, and hold no removed pack once the
        // databases they replaced are freed (on a queue of their own).
        tip = try save(repo, 96, onto: tip)
        XCTAssertEqual(try reader.objects.readBlob(try GitObjects.blobID(of: Array("entries 96\n".utf8))), Array("entries 96\n".utf8))
        GitRepository.waitForReplacedDatabases()
        XCTAssertEqual(try removedPacksHeld(), 0)
        try assertRepositoryComplete(path, tip: tip!, commits: 97)
    }

    /// A blob handed out of the lock (`StoredBlob`, how the mount decrypts without copying the
    /// ciphertext) keeps its bytes after a fold removed the pack it came from and the database
    /// that read it was freed, and after the freed memory was used again.
    func testABlobHandedOutKeepsItsBytesAfterItsPackIsFoldedAway() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        let reader = try GitRepository.open(path: path)
        var tip: ObjectID?
        for i in 0..<32 { tip = try save(repo, i, onto: tip) }
        let contents = (0..<32).map { Array("entries \($0)\n".utf8) }
        let held = try contents.map { try reader.objects.blob(try GitObjects.blobID(of: $0)) }
        let packsBefore = packIndexes(path)
        XCTAssertGreaterThan(try GitRepository.open(path: path).packs.foldPacks().packsRemoved, 0)
        XCTAssertTrue(packsBefore.isDisjoint(with: packIndexes(path)), "the fold left none of the packs the blobs came from")
        // The reader's next use replaces its database; the old one is freed on its queue.
        XCTAssertEqual(try reader.objects.readBlob(try GitObjects.blobID(of: contents[0])), contents[0])
        GitRepository.waitForReplacedDatabases()
        // Memory freed with the database is used again before the blobs are read.
        let churn = (0..<2_000).map { [UInt8](repeating: UInt8($0 % 251), count: 64 + $0 % 700) }
        withExtendedLifetime(churn) {
            for (blob, content) in zip(held, contents) {
                XCTAssertEqual(blob.count, content.count)
                XCTAssertEqual(blob.withUnsafeBytes { [UInt8]($0) }, content)
            }
        }
        try assertRepositoryComplete(path, tip: tip!, commits: 32)
    }

    /// kill -9 of a process committing in a loop, at many points: every commit it had
    /// acknowledged (written to a file after `commitChanges` returned) is on `main`, and git
    /// finds the repository sound. Folds run in between, so some kills land in them.
    func testKillDuringCommitsLosesNoAcknowledgedCommit() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let start = try save(try GitRepository.create(path: path, bare: true), 0, onto: nil)
        let (_, total) = try killDuringCommits(path: path, from: start, rounds: 8, in: tmp,
                                               acknowledgements: { 3 + $0 }, delay: { UInt32(1_000 * ($0 * 3 % 11)) }) { child, round, i, parent in
            // Fold now and then, so that some kills land in a fold.
            let id = try self.save(child, 1_000 * (round + 1) + i, onto: parent)
            if i % 7 == 6 { _ = try? child.packs.foldPacks() }
            return id
        }
        XCTAssertGreaterThan(total, 8)
    }
}
