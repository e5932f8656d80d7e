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
        func blob(_ text: String) throws -> ObjectID { try repo.objects.writeBlob(Array(text.utf8)) }
        let paths = ["a.json", "a/x.json", "a-b.json", "ab/y.json", "a0.json", "b/c/d.json", "b.json", "z.json"]
        var tip = try repo.commits.commitChanges(onto: nil, changes: try paths.map { .write(path: $0, blob: try blob($0)) },
                                         message: "Add", author: testAuthor)
        // libgit2 wrote the root in git's order: each entry comes before the next.
        let rootEntries = try lines(git("ls-tree", tip.hex, in: path)).map { line -> (String, Bool) in
            let parts = line.split(separator: "\t")
            return (String(parts[1]), parts[0].contains(" tree "))
        }
        for (a, b) in zip(rootEntries, rootEntries.dropFirst()) {
            XCTAssertLessThan(GitHistory.gitOrder(a.0, a.1, b.0, b.1), 0, "\(a.0) before \(b.0)")
            XCTAssertGreaterThan(GitHistory.gitOrder(b.0, b.1, a.0, a.1), 0)
        }
        XCTAssertEqual(GitHistory.gitOrder("a", true, "a", true), 0)
        XCTAssertNotEqual(GitHistory.gitOrder("a", true, "a", false), 0, "a file and a folder of one name differ")

        // Changes in several folders, one deletion each, and a file made a folder.
        tip = try repo.commits.commitChanges(onto: tip, changes: [.delete(path: "a-b.json"), .write(path: "a/x.json", blob: try blob("x2")),
                                                          .delete(path: "b/c/d.json"), .write(path: "ab/y.json", blob: try blob("y2"))],
                                     message: "Edit", author: testAuthor)
        tip = try repo.commits.commitChanges(onto: tip, changes: [.delete(path: "z.json"), .write(path: "z.json/inner.json", blob: try blob("i")),
                                                          .delete(path: "a0.json")],
                                     message: "Move", author: testAuthor)
        let deleted = try repo.history.removals(from: tip).deleted
        // z.json is a folder at the tip now: not a deleted file.
        XCTAssertEqual(Set(deleted.map(\.path)), ["a-b.json", "b/c/d.json", "a0.json"])
        XCTAssertEqual(try repo.objects.readBlob(try XCTUnwrap(deleted.first { $0.path == "b/c/d.json" }).lastBlob), Array("b/c/d.json".utf8))
    }

    /// After each commit, the answer extended from the previous tip's (the commits since
    /// walked, the rest taken from it) equals a walk over the whole history: random writes,
    /// removals, files that come back, a file that becomes a folder and back, and merges
    /// (which walk the whole history again).
    func testDeletedFilesExtendedFromAnEarlierTipEqualAWholeWalk() throws {
        let tmp = try TemporaryDirectory()
        let repo = try GitRepository.create(path: tmp.sub("r.git"), bare: true)
        var earlier: Removals?
        var mostDeleted = 0
        _ = try randomHistory(in: repo, paths: ["a.json", "b.json", "v/c.json", "v/d.json", "v/w/e.json", "x.json", "x.json/inner.json", "y/f.json"],
                              steps: 200, changesAtMost: 3, removeOneIn: 2, contents: 1_000, mergeEvery: 20) { tip, step in
            let whole = try repo.history.removals(from: tip).deleted
            let extended = try repo.history.removals(from: tip, extending: earlier)
            XCTAssertEqual(extended.deleted, whole, "step \(step)")
            XCTAssertEqual(try repo.history.removals(from: tip, extending: extended).deleted, whole, "step \(step), same tip")
            earlier = extended
            mostDeleted = max(mostDeleted, whole.count)
        }
        XCTAssertGreaterThan(mostDeleted, 2, "little was deleted: the test tested little")
    }
}

/// `ParsedTree.differences` skips what two trees hold alike at their start and end. Held to
/// the plain side-by-side walk over every entry (the walk libgit2's parsed trees get), on
/// random pairs of trees: in git's order, and not (repeated names, entries out of order,
/// modes in other spellings), where it must either answer the same or leave them to that walk.
final class TreeDifferencesTests: XCTestCase {
    /// The entry-by-entry walk: for each entry of `old`, its counterpart of the same name and
    /// kind in `new` (searched forward, as `removedParsedLocked` does).
    static func plainWalk(_ old: ParsedTree, _ new: ParsedTree) -> [ParsedTree.Difference] {
        old.bytes.withUnsafeBytes { a in
            new.bytes.withUnsafeBytes { b in
                var found: [ParsedTree.Difference] = []
                var j = 0
                for entry in old.entries {
                    var counterpart: RawTree.Entry?
                    while j < new.entries.count {
                        let order = RawTree.compare(b, new.entries[j], a, entry)
                        if order < 0 { j += 1; continue }
                        if order == 0 { counterpart = new.entries[j]; j += 1 }
                        break
                    }
                    if let counterpart, Array(b[counterpart.id]) == Array(a[entry.id]) { continue }
                    guard entry.isTree || counterpart == nil else { continue }
                    found.append((Array(RawTree.name(of: entry, in: a)), entry.isTree,
                                  ObjectID(bytes: UnsafeRawBufferPointer(rebasing: a[entry.id]))!,
                                  counterpart.map { ObjectID(bytes: UnsafeRawBufferPointer(rebasing: b[$0.id]))! }))
                }
                return found
            }
        }
    }

    func testDifferencesEqualThePlainWalk() throws {
        var random = SystemRandomNumberGenerator()
        let names = ["a", "a.json", "a-b.json", "ab", "b.json", "c.json", "d", "e.md", "z.json"]
        let canonical = ["100644", "40000", "100755", "120000", "160000"]
        func tree(from entries: [(mode: String, name: String, id: UInt8)], sorted: Bool) -> [UInt8] {
            var list = entries
            if sorted {
                list.sort { x, y in
                    Array(x.name.utf8).withUnsafeBufferPointer { p in Array(y.name.utf8).withUnsafeBufferPointer { q in
                        RawTree.compare(p, x.mode == "40000", q, y.mode == "40000") < 0 } }
                }
            }
            return list.flatMap { Array("\($0.mode) \($0.name)".utf8) + [0] + [UInt8](repeating: $0.id, count: 20) }
        }
        var answered = 0, compared = 0
        for round in 0..<3_000 {
            let hostile = round % 3 == 0
            var entries: [(mode: String, name: String, id: UInt8)] = []
            for name in names where Bool.random(using: &random) {
                let mode = hostile && Int.random(in: 0..<6, using: &random) == 0 ? ["040000", "100664", "644"].randomElement(using: &random)!
                                                                               : canonical.randomElement(using: &random)!
                entries.append((mode, name, UInt8.random(in: 1...3, using: &random)))
                if hostile && Int.random(in: 0..<5, using: &random) == 0 { entries.append((mode, name, 9)) }  // the name again
            }
            // The next version: most entries kept, some changed, removed or added.
            var next = entries.filter { _ in Int.random(in: 0..<5, using: &random) > 0 }.map { entry -> (mode: String, name: String, id: UInt8) in
                Int.random(in: 0..<4, using: &random) == 0 ? (entry.mode, entry.name, UInt8.random(in: 1...3, using: &random)) : entry
            }
            if Bool.random(using: &random), let name = names.randomElement(using: &random), !next.contains(where: { $0.name == name }) {
                next.append(("100644", name, 5))
            }
            if hostile { entries.shuffle(using: &random) }
            let old = try XCTUnwrap(ParsedTree(tree(from: entries, sorted: !hostile)))
            let new = try XCTUnwrap(ParsedTree(tree(from: next, sorted: !hostile || Bool.random(using: &random))))
            let expected = Self.plainWalk(old, new)
            guard let found = ParsedTree.differences(from: old, to: new) else {
                XCTAssertTrue(hostile, "trees in git's order and spelling left to the entry-by-entry walk")
                continue
            }
            answered += 1
            compared += expected.count
            XCTAssertEqual(found.map(\.name), expected.map(\.name), "round \(round)")
            XCTAssertEqual(found.map(\.old), expected.map(\.old), "round \(round)")
            XCTAssertEqual(found.map(\.new), expected.map(\.new), "round \(round)")
            XCTAssertEqual(found.map(\.isTree), expected.map(\.isTree), "round \(round)")
        }
        XCTAssertGreaterThan(answered, 1_500)
        XCTAssertGreaterThan(compared, 1_000)
    }
}
