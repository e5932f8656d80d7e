import BinderCore
import BinderCrypto
import BinderFormat
import BinderGit
import Foundation
import XCTest

/// The `.binder/` views as tables (docs/DESIGN.md, "Views"). Each timeline row writes records
/// into a fresh binder through the view and says what `.binder/timeline` lists, in order
/// (newest first), and where each link leads. A new naming rule is a new row.
final class RecordViewsTests: XCTestCase {
    struct TimelineRow {
        let rule: String
        /// Written in this order, one commit each.
        let records: [(path: String, text: String)]
        /// (name, link target) as listed, newest first; patient-info.md left out.
        let timeline: [(String, String)]
    }

    static func record(created: String, _ body: String, tags: [String] = []) -> String {
        let tagLines = tags.isEmpty ? "" : "tags:\n" + tags.map { "  - \"\($0)\"\n" }.joined()
        return "---\ntype: visit\ncreated: \"\(created)\"\n\(tagLines)---\n\(body)"
    }

    static let rows: [TimelineRow] = [
        TimelineRow(rule: "newest first by created (not by file name or save order); title from the first heading",
                    records: [("visits/b.md", record(created: "2024-01-01T10:00:00Z", "# Older\n")),
                              ("visits/a.md", record(created: "2025-06-01T10:00:00Z", "# Newer\n"))],
                    timeline: [("2025-06-01 visits Newer.md", "../../visits/a.md"),
                               ("2024-01-01 visits Older.md", "../../visits/b.md")]),
        TimelineRow(rule: "no heading: the file name; '#tag' is not a heading; closing hashes dropped",
                    records: [("labs/2024-03-01-lipids.md", record(created: "2024-03-01T08:00:00Z", "#fasting\nno heading\n")),
                              ("labs/x.md", record(created: "2024-03-02T08:00:00Z", "intro\n\n## Panel ##\n"))],
                    timeline: [("2024-03-02 labs Panel.md", "../../labs/x.md"),
                               ("2024-03-01 labs 2024-03-01-lipids.md", "../../labs/2024-03-01-lipids.md")]),
        TimelineRow(rule: "the day is created's own (its offset), not UTC's",
                    records: [("visits/late.md", record(created: "2024-05-01T23:30:00-05:00", "# Late\n"))],
                    timeline: [("2024-05-01 visits Late.md", "../../visits/late.md")]),
        TimelineRow(rule: "equal names: the older record keeps the name, the newer gets -2",
                    records: [("visits/one.md", record(created: "2024-02-02T12:00:00Z", "# Checkup\n")),
                              ("visits/two.md", record(created: "2024-02-02T09:00:00Z", "# Checkup\n"))],
                    timeline: [("2024-02-02 visits Checkup-2.md", "../../visits/one.md"),
                               ("2024-02-02 visits Checkup.md", "../../visits/two.md")]),
        TimelineRow(rule: "'/' and control characters in a title become '-' and a space; the category is the top folder",
                    records: [("conditions/back/x.md", record(created: "2024-07-07T00:00:00Z", "# A/B\ttest  \n"))],
                    timeline: [("2024-07-07 conditions A-B test.md", "../../conditions/back/x.md")]),
    ]

    func testTimelineNames() throws {
        for row in Self.rows {
            let binder = try TestBinder()
            defer { binder.remove() }
            for (path, text) in row.records {
                let folder = (path as NSString).deletingLastPathComponent
                if (try? binder.view.attributes(folder)) == nil { try makeFolders(binder.view, folder) }
                try binder.write(path, Array(text.utf8))
            }
            let listed = try binder.view.list(".binder/timeline").map(\.name)
            let links = try listed.map { ($0, try binder.view.readLink(".binder/timeline/" + $0)) }.filter { $0.1 != "../../patient-info.md" }
            XCTAssertEqual(links.map(\.0), row.timeline.map(\.0), row.rule)
            XCTAssertEqual(links.map(\.1), row.timeline.map(\.1), row.rule)
            for (name, _) in links {
                XCTAssertEqual(try binder.view.attributes(".binder/timeline/" + name).kind, .symlink, row.rule)
            }
        }
    }

    func testAttachmentsAndLongTitlesFitTheTimeline() throws {
        let binder = try TestBinder()
        defer { binder.remove() }
        try binder.view.makeDirectory("visits")
        try binder.write("visits/scan.pdf", Array("%PDF-1.4\n".utf8))
        let long = String(repeating: "é", count: 200)
        try binder.write("visits/long.md", Array(Self.record(created: "2024-01-01T00:00:00Z", "# \(long)\n").utf8))
        let names = try binder.view.list(".binder/timeline").map(\.name)
        let scan = try XCTUnwrap(names.first { $0.hasSuffix(" visits scan.pdf") })
        XCTAssertEqual(try binder.view.readLink(".binder/timeline/" + scan), "../../visits/scan.pdf")
        let longName = try XCTUnwrap(names.first { $0.hasPrefix("2024-01-01 visits é") })
        XCTAssertLessThanOrEqual(longName.utf8.count, 255)
        XCTAssertTrue(longName.hasSuffix("é.md"), longName)
    }

    func testTagsListTheRecordsThatHoldThem() throws {
        let binder = try TestBinder()
        defer { binder.remove() }
        try binder.view.makeDirectory("labs")
        try binder.write("labs/a.md", Array(Self.record(created: "2024-01-01T00:00:00Z", "# A\n", tags: ["lipids", "fasting"]).utf8))
        try binder.write("labs/b.md", Array(Self.record(created: "2024-01-02T00:00:00Z", "# B\n", tags: ["lipids", "a/b"]).utf8))
        // A tag that cannot be a folder name ("a/b") has no folder.
        XCTAssertEqual(try binder.view.list(".binder/tags").map(\.name), ["fasting", "lipids"])
        XCTAssertEqual(try binder.view.list(".binder/tags/lipids").map(\.name), ["2024-01-02 labs B.md", "2024-01-01 labs A.md"])
        XCTAssertEqual(try binder.view.readLink(".binder/tags/fasting/2024-01-01 labs A.md"), "../../../labs/a.md")
        XCTAssertThrowsError(try binder.view.list(".binder/tags/none"))
    }

    func testHistoryHoldsEveryVersionAndDeletedTheLast() throws {
        let binder = try TestBinder()
        defer { binder.remove() }
        try binder.view.makeDirectory("visits")
        var versions: [[UInt8]] = []
        for body in ["# One\n", "# Two\n", "# Three\n"] {
            try binder.write("visits/x.md", Array(Self.record(created: "2024-01-01T00:00:00Z", body).utf8))
            versions.append(try TestBinder.read(binder.view, "visits/x.md"))
        }
        let history = try binder.view.list(".binder/history/visits/x.md")
        XCTAssertEqual(history.count, 3)
        XCTAssertTrue(history.allSatisfy { $0.attributes.readOnly && $0.name.hasSuffix(".md") })
        let pattern = #"^\d{4}-\d{2}-\d{2}T\d{6}Z-[0-9a-f]{7}\.md$"#
        XCTAssertTrue(history.allSatisfy { $0.name.range(of: pattern, options: .regularExpression) != nil }, "\(history.map(\.name))")
        // Newest first, each exactly as it was read then.
        for (entry, expected) in zip(history, versions.reversed()) {
            XCTAssertEqual(try TestBinder.read(binder.view, ".binder/history/visits/x.md/" + entry.name), expected)
            XCTAssertEqual(entry.attributes.size, expected.count)
        }
        XCTAssertEqual(try binder.view.list(".binder/deleted").map(\.name), [])

        try binder.view.remove("visits/x.md")
        XCTAssertEqual(try binder.view.list(".binder/deleted").map(\.name), ["visits"])
        XCTAssertEqual(try TestBinder.read(binder.view, ".binder/deleted/visits/x.md"), versions[2])
        XCTAssertEqual(try binder.view.list(".binder/history/visits").map(\.name), ["x.md"])
        XCTAssertEqual(try binder.view.list(".binder/history/visits/x.md").count, 3)

        // A record moved keeps its ciphertext: it is not deleted, and its history starts anew.
        try binder.write("visits/y.md", Array(Self.record(created: "2024-01-01T00:00:00Z", "# Y\n").utf8))
        try binder.view.rename("visits/y.md", to: "visits/z.md")
        XCTAssertEqual(try binder.view.list(".binder/deleted/visits").map(\.name), ["x.md"])
        // A record held now is looked up without the deleted records' walk; the folder lists both.
        XCTAssertEqual(try binder.view.list(".binder/history/visits/z.md").count, 1)
        XCTAssertEqual(try binder.view.list(".binder/history/visits").map(\.name), ["z.md", "x.md"])
        XCTAssertEqual(try binder.view.list(".binder/history/visits/x.md").count, 3)
    }

    func testEverythingInBinderIsReadOnly() throws {
        let binder = try TestBinder()
        defer { binder.remove() }
        XCTAssertThrowsError(try binder.view.openForWriting(".binder/status", truncate: false))
        XCTAssertThrowsError(try binder.write(".binder/timeline/x.md", Array("x".utf8)))
        XCTAssertThrowsError(try binder.view.makeDirectory(".binder/tags/new"))
        XCTAssertEqual(try binder.view.list(".binder").map(\.name), ["status", "timeline", "tags", "history", "deleted"])
        XCTAssertFalse(try binder.view.list("").map(\.name).contains(".binder"))
        let visible = try TestBinder(options: BinderView.Options(viewsVisible: true))
        defer { visible.remove() }
        XCTAssertTrue(try visible.view.list("").map(\.name).contains(".binder"))
    }

    private func makeFolders(_ view: BinderView, _ folder: String) throws {
        var path = ""
        for component in folder.split(separator: "/") {
            path = path.isEmpty ? String(component) : path + "/" + component
            if (try? view.attributes(path)) == nil { try view.makeDirectory(path) }
        }
    }
}
