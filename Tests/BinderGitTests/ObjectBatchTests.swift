import Foundation
import XCTest
@testable import BinderGit

/// `ObjectBatch` makes trees and commits byte for byte as libgit2 does (so their ids are the
/// same), writes them as one pack that stock git reads, and refuses what a tree cannot hold.
final class ObjectBatchTests: XCTestCase {
    func testTreesAndCommitsAreLibgit2sAndOnePackHoldsThem() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        let file = try repo.objects.writeBlob(Array("file\n".utf8)), other = try repo.objects.writeBlob(Array("other\n".utf8))
        let folder = try repo.trees.writeTree([FolderEntry(name: "x.json", mode: 0o100644, id: file)])
        // Names whose order differs when a folder's is read as ending with '/': "a" the folder
        // sorts after "a.json" and "a-b", before "a0".
        let entries = [FolderEntry(name: "a0", mode: 0o100644, id: file), FolderEntry(name: "a", mode: 0o040000, id: folder),
                       FolderEntry(name: "a.json", mode: 0o100755, id: other), FolderEntry(name: "a-b", mode: 0o120000, id: file),
                       FolderEntry(name: "Z", mode: 0o100644, id: other)]
        let batch = repo.objects.batch()
        let blob = try batch.blob(Array("new\n".utf8))
        let tree = try batch.tree(entries.reversed())
        XCTAssertEqual(tree, try repo.trees.writeTree(entries), "the same tree as libgit2's")
        let author = Signature(name: "Pat Example", email: "pat@example.org", seconds: 1_700_000_000, timeZoneOffsetMinutes: -90)
        let committer = Signature(name: "Binder", email: "binder@localhost", seconds: 1_700_000_500, timeZoneOffsetMinutes: 330)
        let commit = try batch.commit(tree: tree, parents: [], author: author, committer: committer, message: "Add\n\nbody\n")
        XCTAssertFalse(repo.objects.objectExists(blob), "nothing readable before write()")
        try batch.write()
        XCTAssertTrue(batch.isEmpty)
        XCTAssertEqual(commit, try repo.commits.writeCommit(tree: tree, parents: [], author: author, committer: committer,
                                                            message: "Add\n\nbody\n"), "the same commit as libgit2's")
        XCTAssertEqual(try repo.commits.commit(commit).committer, committer)
        XCTAssertEqual(try repo.objects.readBlob(blob), Array("new\n".utf8))
        XCTAssertEqual(GitPacks.packIndexes(in: path + "/objects/pack").count, 1)
        XCTAssertNoThrow(try git("fsck", "--strict", "--no-dangling", in: path))

        // What a tree cannot hold is refused, nothing gathered.
        for bad in [FolderEntry(name: "", mode: 0o100644, id: file), FolderEntry(name: "a/b", mode: 0o100644, id: file),
                    FolderEntry(name: "..", mode: 0o100644, id: file), FolderEntry(name: "m", mode: 0o100664, id: file)] {
            XCTAssertThrowsError(try batch.tree([bad]), bad.name)
        }
        XCTAssertThrowsError(try batch.tree([FolderEntry(name: "d", mode: 0o100644, id: file), FolderEntry(name: "d", mode: 0o100644, id: other)]))
        XCTAssertTrue(batch.isEmpty)
    }
}
