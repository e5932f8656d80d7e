import Foundation
import XCTest
@testable import BinderGit

/// Repacks and folds lay a pack out as `git repack` does: commits first, newest first, then
/// trees, then blobs, so that a cold history walk reads the front of the pack in order. What
/// is in a pack, and where, is read by stock git (`git verify-pack -v`), not by our parser.
final class PackOrderTests: XCTestCase {
    /// A save into one of several folders, as the committer makes it (its own small pack).
    @discardableResult
    private func save(_ repo: GitRepository, _ i: Int, onto parent: ObjectID?) throws -> ObjectID {
        let record = Array("{\"content\":\"record \(i) \(String(repeating: "y", count: i % 89))\"}\n".utf8)
        return try repo.commits.commitChanges(onto: parent,
                                      changes: [.write(path: "\(["visits", "labs", "conditions"][i % 3])/r\(i).json",
                                                       blob: try GitObjects.blobID(of: record))],
                                      message: "Save \(i)", author: testAuthor, blobs: [record])
    }

    /// Saves `range` in order, each onto the last commit of `made`.
    private func save(_ repo: GitRepository, _ range: Range<Int>, after made: inout [ObjectID]) throws {
        for i in range { made.append(try save(repo, i, onto: made.last)) }
    }

    private func newRepository() throws -> (TemporaryDirectory, String, GitRepository) {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        return (tmp, path, try GitRepository.create(path: path, bare: true))
    }

    /// The objects of the pack indexed by `index`, by offset, with their types, as git sees them.
    private func layout(_ index: String) throws -> [(id: String, type: String)] {
        let rows = lines(try git("verify-pack", "-v", index)).compactMap { line -> (Int, String, String)? in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 5, fields[0].count == 40, let offset = Int(fields[4]) else { return nil }
            return (offset, String(fields[0]), String(fields[1]))
        }
        return rows.sorted { $0.0 < $1.0 }.map { ($0.1, $0.2) }
    }

    /// Commits, then trees, then blobs; the commits in `commits` order.
    private func assertLaidOut(_ index: String, commits: [ObjectID], objects: Int,
                               file: StaticString = #filePath, line: UInt = #line) throws {
        let objectsInPack = try layout(index)
        XCTAssertEqual(objectsInPack.count, objects, "objects in the pack", file: file, line: line)
        let rank = ["commit": 0, "tree": 1, "blob": 2]
        let ranks = objectsInPack.map { rank[$0.type] ?? 3 }
        XCTAssertEqual(ranks, ranks.sorted(), "commits, then trees, then blobs", file: file, line: line)
        XCTAssertEqual(objectsInPack.prefix(commits.count).map(\.id), commits.map(\.hex), "commits newest first",
                       file: file, line: line)
    }

    func testARepackWritesCommitsNewestFirstThenTreesThenBlobs() throws {
        let (tmp, path, repo) = try newRepository()
        defer { withExtendedLifetime(tmp) {} }  // the folder lives as long as the test
        var made: [ObjectID] = []
        try save(repo, 0..<30, after: &made)
        let result = try repo.packs.repack()
        let packs = GitPacks.packIndexes(in: path + "/objects/pack")
        XCTAssertEqual(packs.count, 1)
        // 30 commits, 30 root trees, 30 changed folder trees, 30 records.
        XCTAssertEqual(result.objects, 120)
        try assertLaidOut(packs[0], commits: made.reversed(), objects: 120)
        try assertRepositoryComplete(path, tip: made.last!, commits: 30)
        // Our own reading of the index agrees with git's offsets.
        XCTAssertEqual(PackOrder.idsInPackOrder(ofIndex: packs[0])?.map(\.hex), try layout(packs[0]).map(\.id))
    }

    func testAFoldKeepsTheOrderAcrossFolds() throws {
        let (tmp, path, repo) = try newRepository()
        defer { withExtendedLifetime(tmp) {} }  // the folder lives as long as the test
        var made: [ObjectID] = []
        try save(repo, 0..<20, after: &made)
        XCTAssertEqual(try GitRepository.open(path: path).packs.foldPacks().packsRemoved, 20)
        // One pack (`FoldCopy`): the commits newest first, the trees, then the blobs.
        func laidOutPacks(_ saves: Int) throws {
            let packs = GitPacks.packIndexes(in: path + "/objects/pack")
            XCTAssertEqual(packs.count, 1)
            try assertLaidOut(try XCTUnwrap(packs.first), commits: made.reversed(), objects: 4 * saves)
        }
        try laidOutPacks(20)
        // Newer small packs folded with the first fold's packs: still one order over all.
        try save(repo, 20..<45, after: &made)
        XCTAssertEqual(try GitRepository.open(path: path).packs.foldPacks().packsRemoved, 26)
        try laidOutPacks(45)
        try assertRepositoryComplete(path, tip: made.last!, commits: 45)
    }

    /// A pack written by libgit2's builder (a repack, or a fold before folds wrote one pack)
    /// holds commits as deltas of other commits: a fold copies them as they are and still puts
    /// them with the commits, newest first, in the one pack it writes.
    func testAFoldPutsCommitDeltasWithTheCommits() throws {
        let (tmp, path, repo) = try newRepository()
        defer { withExtendedLifetime(tmp) {} }  // the folder lives as long as the test
        var made: [ObjectID] = []
        // Commits long enough alike for the builder to store them as deltas (binder's own
        // messages are short; a merge's or stock git's need not be).
        let body = String(repeating: "a message long enough that a delta is worth it. ", count: 12)
        for i in 0..<30 {
            let record = Array("{\"content\":\"record \(i)\"}\n".utf8)
            made.append(try repo.commits.commitChanges(onto: made.last,
                                               changes: [.write(path: "visits/r\(i).json", blob: try GitObjects.blobID(of: record))],
                                               message: "Save \(i)\n\n\(body)", author: testAuthor, blobs: [record]))
        }
        _ = try repo.packs.repack()
        let repacked = try XCTUnwrap(GitPacks.packIndexes(in: path + "/objects/pack").first)
        // verify-pack gives a delta's depth and base after its offset.
        let commitDeltas = lines(try git("verify-pack", "-v", repacked)).filter { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            return fields.count == 7 && fields[1] == "commit"
        }
        XCTAssertFalse(commitDeltas.isEmpty, "the builder deltified no commit: the case this test is for is missing")
        try save(repo, 30..<60, after: &made)
        XCTAssertEqual(try GitRepository.open(path: path).packs.foldPacks().packsRemoved, 31)
        let packs = GitPacks.packIndexes(in: path + "/objects/pack")
        XCTAssertEqual(packs.count, 1)
        try assertLaidOut(try XCTUnwrap(packs.first), commits: made.reversed(), objects: 240)
        try assertRepositoryComplete(path, tip: made.last!, commits: 60)
    }

    /// A pack `FoldCopy` cannot read as such (here its index is of version 1, which stock git
    /// still writes and libgit2 still reads) goes to the pack builder whole: the fold removes it
    /// all the same, loses nothing, and leaves packs it can copy next time.
    func testAFoldRollsAPackItCannotCopyThroughTheBuilder() throws {
        let (tmp, path, repo) = try newRepository()
        defer { withExtendedLifetime(tmp) {} }  // the folder lives as long as the test
        var made: [ObjectID] = []
        try save(repo, 0..<3, after: &made)
        // Packed by stock git: libgit2's builder, given the same objects, would write the same
        // bytes under the same name, and the fold would keep that pack rather than roll it.
        try git("-c", "repack.writeBitmaps=false", "-c", "pack.writeReverseIndex=false", "repack", "-a", "-d", "-q", in: path)
        let index = try XCTUnwrap(GitPacks.packIndexes(in: path + "/objects/pack").first)
        let pack = String(index.dropLast(4)) + ".pack"
        try FileManager.default.removeItem(atPath: index)
        try git("-c", "pack.writeReverseIndex=false", "index-pack", "--index-version=1", "-o", index, pack, in: path)
        XCTAssertEqual(GitPacks.objectCount(ofIndex: index), 12, "the fold plan counts a version-1 index's objects")
        let cut = tmp.sub("cut.idx")
        try Data(try XCTUnwrap(FileManager.default.contents(atPath: index)).dropLast(1)).write(to: URL(fileURLWithPath: cut))
        XCTAssertNil(GitPacks.objectCount(ofIndex: cut), "a version-1 index one byte short")
        var copy = FoldCopy()
        XCTAssertFalse(FoldCopy.take(index: index, into: &copy), "FoldCopy read a version-1 index: the case this test is for is missing")
        XCTAssertTrue(copy.isEmpty)
        try save(repo, 3..<23, after: &made)
        XCTAssertEqual(try GitRepository.open(path: path).packs.foldPacks().packsRemoved, 21)
        XCTAssertFalse(FileManager.default.fileExists(atPath: pack))
        let packs = GitPacks.packIndexes(in: path + "/objects/pack")
        XCTAssertFalse(packs.isEmpty)
        for index in packs {
            var next = FoldCopy()
            XCTAssertTrue(FoldCopy.take(index: index, into: &next), "a fold wrote \(index) and cannot copy it")
        }
        XCTAssertEqual(packs.reduce(0) { $0 + ((try? self.layout($1).count) ?? 0) }, 4 * 23, "objects in the packs")
        try assertRepositoryComplete(path, tip: made.last!, commits: 23)
    }

    /// A pack index that is short, of another version or cut anywhere gives no order (the
    /// fold then takes the ids as the pack lists them), never a crash.
    func testAMalformedIndexGivesNoOrder() throws {
        let (tmp, path, repo) = try newRepository()
        var made: [ObjectID] = []
        try save(repo, 0..<3, after: &made)
        _ = try repo.packs.repack()
        let index = try XCTUnwrap(GitPacks.packIndexes(in: path + "/objects/pack").first)
        let bytes = try XCTUnwrap(FileManager.default.contents(atPath: index))
        XCTAssertEqual(PackOrder.idsInPackOrder(ofIndex: index)?.count, 12)
        let broken = tmp.sub("broken.idx")
        for length in [0, 7, 8, 1031, 1032, bytes.count / 2, bytes.count - 41] {
            try Data(bytes.prefix(length)).write(to: URL(fileURLWithPath: broken))
            XCTAssertNil(PackOrder.idsInPackOrder(ofIndex: broken), "cut at \(length)")
        }
        var otherVersion = bytes
        otherVersion[7] = 3
        try otherVersion.write(to: URL(fileURLWithPath: broken))
        XCTAssertNil(PackOrder.idsInPackOrder(ofIndex: broken))
        // A count in the fan-out far beyond the file.
        var huge = bytes
        huge.replaceSubrange(8 + 255 * 4..<8 + 256 * 4, with: [0xFF, 0xFF, 0xFF, 0xFF])
        try huge.write(to: URL(fileURLWithPath: broken))
        XCTAssertNil(PackOrder.idsInPackOrder(ofIndex: broken))
    }
}
