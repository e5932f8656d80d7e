import BinderGit
import XCTest

/// Paths are cut at the byte `/`: a row per case. Names beginning with a combining mark
/// (U+0301) or after a prepended mark (U+0600) are where `Character`-wise cutting went wrong.
final class PathBytesTests: XCTestCase {
    func same(_ a: String, _ b: String) -> Bool { a.utf8.elementsEqual(b.utf8) }

    func testSplit() {
        let rows: [(path: String, parent: String, name: String)] = [
            ("a/b/c", "a/b", "c"),
            ("c", "", "c"),
            ("", "", ""),
            ("a/", "a", ""),
            ("a/\u{301}x", "a", "\u{301}x"),
            ("a\u{600}/b", "a\u{600}", "b"),
            ("visits/2024 é.md", "visits", "2024 é.md"),
        ]
        for row in rows {
            let (parent, name) = PathBytes.split(row.path)
            XCTAssertTrue(same(parent, row.parent) && same(name, row.name), "\(row.path.debugDescription) -> \(parent.debugDescription), \(name.debugDescription)")
        }
    }

    func testComponentsFirstAncestors() {
        XCTAssertEqual(PathBytes.components("a//b").map { Array($0.utf8) }, [[97], [], [98]])
        XCTAssertEqual(PathBytes.components("a/\u{301}x").count, 2)
        XCTAssertEqual(PathBytes.components("").count, 1)
        XCTAssertTrue(same(PathBytes.first("a/\u{301}x/y").name, "a") && !PathBytes.first("a/\u{301}x/y").isLast)
        XCTAssertTrue(same(PathBytes.first("\u{301}x").name, "\u{301}x") && PathBytes.first("\u{301}x").isLast)
        XCTAssertEqual(PathBytes.ancestors(of: "a/\u{301}b/c").map { Array($0.utf8) },
                       [Array("a/\u{301}b".utf8), Array("a".utf8), []])
        XCTAssertEqual(GitTrees.ancestors(of: "a/\u{301}b/c").map { Array($0.utf8) }, [Array("a".utf8), Array("a/\u{301}b".utf8)])
    }

    func testInsideAndBelow() {
        let rows: [(path: String, folder: String, below: String?)] = [
            ("a/b", "a", "b"),
            ("a/\u{301}b/c", "a", "\u{301}b/c"),
            ("a", "a", nil),
            ("ab/c", "a", nil),
            ("a/b", "", nil),
            (".binder/\u{301}x", ".binder", "\u{301}x"),
        ]
        for row in rows {
            XCTAssertEqual(PathBytes.isInside(row.path, folder: row.folder), row.below != nil, row.path.debugDescription)
            XCTAssertEqual(PathBytes.below(row.path, folder: row.folder).map { Array($0.utf8) }, row.below.map { Array($0.utf8) }, row.path.debugDescription)
        }
    }
}
