import Foundation
import XCTest
@testable import BinderGit

/// `deletedFiles` walks two trees side by side in git's order of names (a folder's name
/// compared as if it ended in '/'); names that sort differently as files and as folders are
/// where a walk in the wrong order would report a file removed that is not.
final class DeletedFilesTests: XCTestCase {
    func testDeletedFilesAcrossNamesThatSortByKind() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        func blob(_ text: String) throws -> ObjectID { try repo.writeBlob(Array(text.utf8)) }
        let paths = ["a.json", "a/x.json", "a-b.json", "ab/y.json", "a0.json", "b/c/d.json", "b.json", "z.json"]
        var tip = try repo.commitChanges(onto: nil, changes: try paths.map { .write(path: $0, blob: try blob($0)) },
                                         message: "Add", author: testAuthor)
        // libgit2 wrote the root in git's order: each entry comes before the next.
        let rootEntries = try lines(git("ls-tree", tip.hex, in: path)).map { line -> (String, Bool) in
            let parts = line.split(separator: "\t")
            return (String(parts[1]), parts[0].contains(" tree "))
        }
        for (a, b) in zip(rootEntries, rootEntries.dropFirst()) {
            XCTAssertLessThan(GitRepository.gitOrder(a.0, a.1, b.0, b.1), 0, "\(a.0) before \(b.0)")
            XCTAssertGreaterThan(GitRepository.gitOrder(b.0, b.1, a.0, a.1), 0)
        }
        XCTAssertEqual(GitRepository.gitOrder("a", true, "a", true), 0)
        XCTAssertNotEqual(GitRepository.gitOrder("a", true, "a", false), 0, "a file and a folder of one name differ")

        // Changes in several folders, one deletion each, and a file made a folder.
        tip = try repo.commitChanges(onto: tip, changes: [.delete(path: "a-b.json"), .write(path: "a/x.json", blob: try blob("x2")),
                                                          .delete(path: "b/c/d.json"), .write(path: "ab/y.json", blob: try blob("y2"))],
                                     message: "Edit", author: testAuthor)
        tip = try repo.commitChanges(onto: tip, changes: [.delete(path: "z.json"), .write(path: "z.json/inner.json", blob: try blob("i")),
                                                          .delete(path: "a0.json")],
                                     message: "Move", author: testAuthor)
        let deleted = try repo.deletedFiles(from: tip)
        // z.json is a folder at the tip now: not a deleted file.
        XCTAssertEqual(Set(deleted.map(\.path)), ["a-b.json", "b/c/d.json", "a0.json"])
        XCTAssertEqual(try repo.readBlob(try XCTUnwrap(deleted.first { $0.path == "b/c/d.json" }).lastBlob), Array("b/c/d.json".utf8))
    }
}
