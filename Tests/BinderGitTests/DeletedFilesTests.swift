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

    /// After each commit, the answer extended from the previous tip's (the commits since
    /// walked, the rest taken from it) equals a walk over the whole history: random writes,
    /// removals, files that come back, a file that becomes a folder and back, and merges
    /// (which walk the whole history again).
    func testDeletedFilesExtendedFromAnEarlierTipEqualAWholeWalk() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        var random = SystemRandomNumberGenerator()
        let paths = ["a.json", "b.json", "v/c.json", "v/d.json", "v/w/e.json", "x.json", "x.json/inner.json", "y/f.json"]
        var present: [String: Int] = [:]  // path -> version
        var tip = try repo.commitChanges(onto: nil, changes: [.write(path: "root.json", blob: try repo.writeBlob([0]))],
                                         message: "Add", author: testAuthor)
        var earlier = try repo.removals(from: tip)
        var side: ObjectID? = nil
        for step in 0..<200 {
            var changes: [TreeChange] = []
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                let chosen = paths.randomElement(using: &random)!
                // A path and its folder-or-file twin never both exist.
                let twin = chosen == "x.json" ? "x.json/inner.json" : chosen == "x.json/inner.json" ? "x.json" : nil
                guard !changes.contains(where: { $0.path == chosen || $0.path == twin }) else { continue }
                if present[chosen] != nil, Bool.random(using: &random) {
                    changes.append(.delete(path: chosen))
                    present[chosen] = nil
                } else {
                    if let twin, present[twin] != nil { changes.append(.delete(path: twin)); present[twin] = nil }
                    let version = (present[chosen] ?? 0) + 1
                    changes.append(.write(path: chosen, blob: try repo.writeBlob(Array("\(chosen) \(step) \(version)".utf8))))
                    present[chosen] = version
                }
            }
            guard !changes.isEmpty else { continue }
            if step % 20 == 10 { side = tip }
            if step % 20 == 15, let other = side {
                // A merge of a line that left from an older tip (its tree: this one's).
                tip = try repo.commitChanges(onto: tip, changes: changes, message: "Merge", author: testAuthor, mergedParents: [other])
            } else {
                tip = try repo.commitChanges(onto: tip, changes: changes, message: "Edit", author: testAuthor)
            }
            let whole = try repo.deletedFiles(from: tip)
            let extended = try repo.removals(from: tip, extending: earlier)
            XCTAssertEqual(extended.deleted, whole, "step \(step)")
            XCTAssertEqual(try repo.removals(from: tip, extending: extended).deleted, whole, "step \(step), same tip")
            earlier = extended
        }
        XCTAssertFalse(earlier.deleted.isEmpty, "nothing was deleted: the test tested nothing")
    }
}
