import Foundation
import XCTest
@testable import BinderGit

/// What a save's pack holds (`writeSplicedPackLocked`): every folder on the path that changed,
/// written without asking the object database whether it has that tree already; a folder left
/// as the parent had it, and a blob already stored, not again.
final class SplicedPackContentsTests: XCTestCase {
    /// The ids of the objects in the pack the last commit added to `path`.
    private func newPackObjects(_ path: String, before: Set<String>) throws -> Set<String> {
        let added = GitPacks.packIndexes(in: path + "/objects/pack").filter { !before.contains($0) }
        XCTAssertEqual(added.count, 1, "one pack a commit")
        let listing = try git("verify-pack", "-v", try XCTUnwrap(added.first), in: path)
        let ids = lines(listing).compactMap { line -> String? in
            let id = line.prefix(40)
            return id.count == 40 && id.allSatisfy(\.isHexDigit) ? String(id) : nil
        }
        XCTAssertEqual(ids.count, Set(ids).count, "no object twice in one pack: \(ids)")
        return Set(ids)
    }

    /// Two folders that held the same and change alike in one commit are one new tree, written once.
    func testTwoFoldersChangedAlikeAreOneObjectInThePack() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        let first = Array("first".utf8), second = Array("second".utf8)
        let firstID = try GitObjects.blobID(of: first), secondID = try GitObjects.blobID(of: second)
        let start = try repo.commits.commitChanges(onto: nil, changes: [.write(path: "a/x.json", blob: firstID), .write(path: "b/x.json", blob: firstID)],
                                                   message: "Start", author: testAuthor, blobs: [first])
        let packs = Set(GitPacks.packIndexes(in: path + "/objects/pack"))
        let both = try repo.commits.commitChanges(onto: start, changes: [.write(path: "a/x.json", blob: secondID), .write(path: "b/x.json", blob: secondID)],
                                                  message: "Save", author: testAuthor, blobs: [second])
        XCTAssertEqual(repo.splicedCommitCount, 1)
        let folder = try git("rev-parse", "\(both.hex):a", in: path)
        XCTAssertEqual(try git("rev-parse", "\(both.hex):b", in: path), folder)
        XCTAssertEqual(try newPackObjects(path, before: packs),
                       [both.hex, try git("rev-parse", "\(both.hex)^{tree}", in: path), folder, secondID.hex])
        try assertRepositoryComplete(path, tip: both, commits: 2)
    }

    func testChangedFoldersAreWrittenEvenWhenStoredAndUnchangedOnesAreNot() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        let first = Array("first".utf8), second = Array("second".utf8)
        let firstID = try GitObjects.blobID(of: first), secondID = try GitObjects.blobID(of: second)
        let start = try repo.commits.commitChanges(onto: nil, changes: [.write(path: "visits/r.json", blob: firstID),
                                                                        .write(path: "labs/l.json", blob: firstID)],
                                                   message: "Start", author: testAuthor, blobs: [first])
        let changed = try repo.commits.commitChanges(onto: start, changes: [.write(path: "visits/r.json", blob: secondID)],
                                                     message: "Save", author: testAuthor, blobs: [second])
        let firstTrees = try [start, changed].map { commit in
            (root: try git("rev-parse", "\(commit.hex)^{tree}", in: path), visits: try git("rev-parse", "\(commit.hex):visits", in: path))
        }

        // Back to the first blob: both trees on the path are ones the repository holds (the
        // start's), and the save's pack holds them again, beside its commit; the blob, stored, is not.
        var packs = Set(GitPacks.packIndexes(in: path + "/objects/pack"))
        let back = try repo.commits.commitChanges(onto: changed, changes: [.write(path: "visits/r.json", blob: firstID)],
                                                  message: "Save", author: testAuthor, blobs: [first])
        XCTAssertEqual(repo.splicedCommitCount, 2)
        XCTAssertEqual(try git("rev-parse", "\(back.hex)^{tree}", in: path), firstTrees[0].root)
        XCTAssertEqual(try newPackObjects(path, before: packs), [back.hex, firstTrees[0].root, firstTrees[0].visits])

        // The same blob again: no folder changed, so the pack holds the commit alone.
        packs = Set(GitPacks.packIndexes(in: path + "/objects/pack"))
        let same = try repo.commits.commitChanges(onto: back, changes: [.write(path: "visits/r.json", blob: firstID)],
                                                  message: "Save", author: testAuthor, blobs: [first])
        XCTAssertEqual(try newPackObjects(path, before: packs), [same.hex])

        // Objects stored twice are read as once: stock git finds the repository sound, before
        // and after its own repack.
        try assertRepositoryComplete(path, tip: same, commits: 4)
        try git("gc", "--quiet", in: path)
        try assertRepositoryComplete(path, tip: same, commits: 4)
        XCTAssertEqual(try git("cat-file", "-p", "main:visits/r.json", in: path), "first")
    }
}
