import BinderExport
import XCTest

/// How the ncryptsec is printed for a person to type back: the prefix whole, then groups of
/// six, six groups a line; nothing added or lost.
final class RecoverySheetPDFTests: XCTestCase {
    func testGroupedLines() {
        let rows: [(text: String, lines: [String])] = [
            ("ncryptsec1abcdef", ["ncryptsec1 abcdef"]),
            ("ncryptsec1abcdefgh", ["ncryptsec1 abcdef gh"]),
            ("ncryptsec1" + String(repeating: "q", count: 31), ["ncryptsec1 qqqqqq qqqqqq qqqqqq qqqqqq qqqqqq", "q"]),
            ("abcdefghijklm", ["abcdef ghijkl m"]),  // no separator: all in groups
            ("", []),
        ]
        for row in rows {
            let lines = RecoverySheetPDF.groupedLines(row.text)
            XCTAssertEqual(lines, row.lines, row.text)
            XCTAssertEqual(lines.joined().filter { $0 != " " }, row.text, row.text)
        }
    }

    func testRendersAPDFAndRefusesABadCodeOrTooMuchText() throws {
        let pdf = try RecoverySheetPDF.render(title: "Sheet", ncryptsec: "ncryptsec1qqqq", npub: "npub1x", date: "today",
                                              instructions: ["Keep <it> & safe."], qrModules: [[true, false], [false, true]])
        XCTAssertTrue(pdf.starts(with: Array("%PDF".utf8)))
        XCTAssertThrowsError(try RecoverySheetPDF.render(title: "", ncryptsec: "", npub: "", date: "", instructions: [],
                                                         qrModules: [[true], [false, true]]))
        XCTAssertThrowsError(try RecoverySheetPDF.render(title: "", ncryptsec: "", npub: "", date: "", instructions: [],
                                                         qrModules: []))
        // Instructions longer than a page are refused rather than cut.
        XCTAssertThrowsError(try RecoverySheetPDF.render(title: "", ncryptsec: "", npub: "", date: "",
                                                         instructions: Array(repeating: "A long paragraph. ", count: 80).map { String(repeating: $0, count: 3) },
                                                         qrModules: [[true]]))
    }
}
