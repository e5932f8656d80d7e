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

    /// A new bare repository, and the two texts its commits write.
    private struct Saves {
        let tmp: TemporaryDirectory
        let path: String
        let repo: GitRepository
        let first = Array("first".utf8), second = Array("second".utf8)

        init() throws {
            tmp = try TemporaryDirectory()
            path = tmp.sub("r.git")
            repo = try GitRepository.create(path: path, bare: true)
        }

        /// A commit onto `parent` writing `text` at each of `paths`.
        func commit(onto parent: ObjectID?, _ paths: [String], _ text: [UInt8], message: String = "Save") throws -> ObjectID {
            let id = try GitObjects.blobID(of: text)
            return try repo.commits.commitChanges(onto: parent, changes: paths.map { .write(path: $0, blob: id) },
                                                  message: message, author: testAuthor, blobs: [text])
        }

        var packs: Set<String> { Set(GitPacks.packIndexes(in: path + "/objects/pack")) }
    }

    /// Two folders that held the same and change alike in one commit are one new tree, written once.
    func testTwoFoldersChangedAlikeAreOneObjectInThePack() throws {
        let saves = try Saves(), path = saves.path
        let start = try saves.commit(onto: nil, ["a/x.json", "b/x.json"], saves.first, message: "Start")
        let packs = saves.packs
        let both = try saves.commit(onto: start, ["a/x.json", "b/x.json"], saves.second)
        XCTAssertEqual(saves.repo.splicedCommitCount, 1)
        let folder = try git("rev-parse", "\(both.hex):a", in: path)
        XCTAssertEqual(try git("rev-parse", "\(both.hex):b", in: path), folder)
        XCTAssertEqual(try newPackObjects(path, before: packs),
                       [both.hex, try git("rev-parse", "\(both.hex)^{tree}", in: path), folder, try GitObjects.blobID(of: saves.second).hex])
        try assertRepositoryComplete(path, tip: both, commits: 2)
    }

    func testChangedFoldersAreWrittenEvenWhenStoredAndUnchangedOnesAreNot() throws {
        let saves = try Saves(), path = saves.path, repo = saves.repo
        let start = try saves.commit(onto: nil, ["visits/r.json", "labs/l.json"], saves.first, message: "Start")
        let changed = try saves.commit(onto: start, ["visits/r.json"], saves.second)
        let firstTrees = try [start, changed].map { commit in
            (root: try git("rev-parse", "\(commit.hex)^{tree}", in: path), visits: try git("rev-parse", "\(commit.hex):visits", in: path))
        }

        // Back to the first blob: both trees on the path are ones the repository holds (the
        // start's), and the save's pack holds them again, beside its commit; the blob, stored, is not.
        var packs = saves.packs
        let back = try saves.commit(onto: changed, ["visits/r.json"], saves.first)
        XCTAssertEqual(repo.splicedCommitCount, 2)
        XCTAssertEqual(try git("rev-parse", "\(back.hex)^{tree}", in: path), firstTrees[0].root)
        XCTAssertEqual(try newPackObjects(path, before: packs), [back.hex, firstTrees[0].root, firstTrees[0].visits])

        // The same blob again: no folder changed, so the pack holds the commit alone.
        packs = saves.packs
        let same = try saves.commit(onto: back, ["visits/r.json"], saves.first)
        XCTAssertEqual(try newPackObjects(path, before: packs), [same.hex])

        // Objects stored twice are read as once: stock git finds the repository sound, before
        // and after its own repack.
        try assertRepositoryComplete(path, tip: same, commits: 4)
        try git("gc", "--quiet", in: path)
        try assertRepositoryComplete(path, tip: same, commits: 4)
        XCTAssertEqual(try git("cat-file", "-p", "main:visits/r.json", in: path), "first")
    }
}
