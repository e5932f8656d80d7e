import XCTest
@testable import BinderGit

/// git's fsck rules for pushed trees (`receive.fsckObjects` with `--strict`), as binder serve's
/// git engine applies them: one row per rule, each a tree of raw entries.
final class TreeEntryRulesTests: XCTestCase {
    static let id = [UInt8](repeating: 0xAB, count: 20)

    /// `entries` as a tree's bytes: `<mode> <name>\0<20-byte id>` each.
    func tree(_ entries: [(mode: String, name: String)], id: [UInt8] = id) -> [UInt8] {
        entries.flatMap { Array("\($0.mode) \($0.name)".utf8) + [0] + id }
    }

    func testEachRuleOnItsOwn() {
        let rows: [(entries: [(mode: String, name: String)], problem: IncomingObjectRefusal.Problem?)] = [
            ([("100644", "a.json"), ("40000", "b"), ("120000", "link"), ("100755", "run"), ("160000", "sub")], nil),
            ([("100664", "old-git")], nil),
            ([("100644", "")], .emptyName),
            ([("100644", "a/b")], .fullPathname),
            ([("40000", ".")], .hasDot),
            ([("40000", "..")], .hasDotdot),
            ([("40000", ".git")], .hasDotgit),
            ([("40000", ".GiT")], .hasDotgit),
            ([("40000", "git~1")], .hasDotgit),
            ([("40000", ".git. ")], .hasDotgit),
            ([("100644", ".gitignore")], nil),
            ([("100600", "odd")], .badFilemode),
            ([("040000", "padded")], .zeroPaddedFilemode),
            ([("100644", "b"), ("100644", "a")], .treeNotSorted),
            ([("100644", "a"), ("100644", "a")], .duplicateEntries),
            // A tree sorts as if its name ended in '/': "a.c" < "a/" but "a" (file) < "a.c".
            ([("100644", "a.c"), ("40000", "a")], nil),
            ([("40000", "a"), ("100644", "a.c")], .treeNotSorted),
            ([("100644", "a"), ("100644", "a.c"), ("40000", "a")], .duplicateEntries),
        ]
        for row in rows {
            XCTAssertEqual(TreeEntryRules.problem(in: tree(row.entries)), row.problem, "\(row.entries)")
        }
        XCTAssertEqual(TreeEntryRules.problem(in: tree([("100644", "a")], id: [UInt8](repeating: 0, count: 20))), .nullSha1)
    }

    func testBytesThatAreNotATreeAreUnparsable() {
        for bytes in [Array("100644 a".utf8), Array("100644 a".utf8) + [0, 1, 2], Array("1x0644 a".utf8) + [0] + Self.id, Array(" a".utf8) + [0] + Self.id] {
            XCTAssertEqual(TreeEntryRules.problem(in: bytes), .unparsable, "\(bytes)")
        }
        XCTAssertNil(TreeEntryRules.problem(in: []), "the empty tree")
    }
}
