import BinderFormat
import XCTest

@testable import BinderExport

/// The markdown layer every format shares: Ink's HTML, sanitised, and the PDF's blocks.
final class MarkdownExportTests: XCTestCase {
    func testRawHTMLAndScriptLinksNeverReachThePage() {
        let html = Markdown.html("""
        Hi <script>alert(1)</script> and <img src=x onerror=alert(2)>

        [a](javascript:alert(3)) [b](https://example.org/x"onclick="alert(4)) [c](data:text/html,hi) [d](mailto:dr@example.org)

        ![tracker](https://tracker.example/p.png)
        """)
        // As elements and attributes (the words may stay, as text).
        for token in HTMLTokenizer.tokens(html) {
            guard case .start(let name, let attributes) = token else { continue }
            XCTAssertFalse(["script", "img", "iframe"].contains(name), html)
            for (key, value) in attributes {
                XCTAssertFalse(key.hasPrefix("on"), html)
                XCTAssertTrue(value.hasPrefix("https:") || value.hasPrefix("mailto:"), "\(key)=\(value)")
            }
        }
        XCTAssertFalse(html.contains("tracker.example"), html)
        XCTAssertTrue(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), html)
        XCTAssertTrue(html.contains("<a href=\"https://example.org/x\">b</a>"), html)
        XCTAssertTrue(html.contains("<a href=\"mailto:dr@example.org\">d</a>"), html)
        XCTAssertTrue(html.contains("<a>a</a>"), "a link to script keeps its text, not its target: \(html)")
        XCTAssertTrue(html.contains("[picture: tracker]"), html)
    }

    func testSanitiserClosesWhatItOpensAndDropsUnknownElements() {
        XCTAssertEqual(Markdown.sanitize("<p><strong>x<em>y</p>z<style>p{}</style><u>w</u>"),
                       "<p><strong>x<em>y</em></strong></p>zw")
        XCTAssertEqual(Markdown.sanitize("<td align=\"left\" style=\"x\">1</td><ol start=\"3\" onclick=\"x\">"),
                       "<td align=\"left\">1</td><ol start=\"3\"></ol>")
    }

    func testValueFrontMatterIsKeptAsCode() {
        let html = Markdown.html("---\ntitle: x\n---\n# Body")
        XCTAssertTrue(html.contains("<pre><code>title: x"), html)
        XCTAssertTrue(html.contains("<h1>Body</h1>"), html)
    }

    func testPDFBlocksCarryHeadingsListsTablesEmphasisAndLinks() {
        let blocks = PDFBlock.blocks(markdown: """
        ## Plan

        - Start **lisinopril** 10 mg
        - Recheck in *3 months*
          1. nested

        | Test | Value |
        |---|---|
        | LDL | 131 mg/dL |

        See [the guide](https://example.org/guide) & `code`.
        """)
        XCTAssertEqual(blocks.first, .heading(level: 2, markup: "Plan"))
        XCTAssertTrue(blocks.contains(.listItem(marker: "•", markup: "Start <b>lisinopril</b> 10 mg", depth: 0)), "\(blocks)")
        XCTAssertTrue(blocks.contains { if case .listItem(_, "Recheck in <i>3 months</i>", 0) = $0 { return true } else { return false } },
                      "\(blocks)")
        XCTAssertTrue(blocks.contains(.table([[.init(markup: "Test", isHeader: true), .init(markup: "Value", isHeader: true)],
                                              [.init(markup: "LDL", isHeader: false), .init(markup: "131 mg/dL", isHeader: false)]])),
                      "\(blocks)")
        XCTAssertTrue(blocks.contains { block in
            if case .paragraph(let markup, 0) = block {
                return markup.contains("underline=\"single\">the guide</span> (https://example.org/guide)")
                    && markup.contains("&amp;") && markup.contains("<tt>code</tt>")
            }
            return false
        }, "\(blocks)")
    }

    func testLabTablesBecomeObservationComponents() {
        let components = LabTable.components("| Test | Value |\n|---|---|\n| LDL | 131 mg/dL |\n| Note | see below |\n")
        XCTAssertEqual(components.count, 2)
        XCTAssertEqual(components[0].code.text, "LDL")
        XCTAssertEqual(components[0].valueQuantity?.value, 131)
        XCTAssertEqual(components[0].valueQuantity?.unit, "mg/dL")
        XCTAssertEqual(components[1].valueString, "see below")
        XCTAssertTrue(LabTable.components("LDL 131").isEmpty)
    }

    func testPatientInfoFromMarkdownAndFromLegacyMetadata() {
        let apps = PatientSummary(metadata: ["type": "patient-info"], markdown: "# Alex Doe\n\nDOB: 1984-07-12\n\nEmergency contact: Sam, 555-0100\n\nMRN: 42")
        XCTAssertEqual(apps.name, "Alex Doe")
        XCTAssertEqual(apps.dateOfBirth, "1984-07-12")
        XCTAssertEqual(apps.emergencyContact, "Sam, 555-0100")
        XCTAssertEqual(apps.details.map(\.label), ["MRN"])
        let legacy = PatientSummary(metadata: ["name": "Old Binder", "dob": "1950-01-01",
                                               "emergencyContact": ["name": "Kim", "phone": "555-0199"]], markdown: "")
        XCTAssertEqual(legacy.name, "Old Binder")
        XCTAssertEqual(legacy.emergencyContact, "Kim, 555-0199")
    }

    func testTitlesComeFromTheFirstHeading() {
        XCTAssertEqual(ExportReader.title("# Lipid Panel\n\n| a |", fallback: "x").title, "Lipid Panel")
        XCTAssertEqual(ExportReader.title("# Lipid Panel\n\n| a |", fallback: "x").body, "| a |")
        XCTAssertEqual(ExportReader.title("no heading", fallback: "Doctor note").title, "Doctor note")
        XCTAssertEqual(ExportReader.humanized(type: "doctor_note", name: "01-doctor-note.md"), "Doctor note")
        XCTAssertEqual(ExportReader.humanized(type: "visit", name: "2025-02-25-annual-physical.md"), "Annual physical")
    }

    /// Lines of a paragraph stay lines (the templates' "Date: …" then "Provider: …"); other
    /// blocks keep markdown's rules. A row is the record's markdown and the HTML it gives.
    func testLinesOfAParagraphStaySeparateLines() {
        let rows: [(markdown: String, html: String)] = [
            ("Date: 2025-03-01\nProvider: Dr. Lee\n", "<p>Date: 2025-03-01<br>Provider: Dr. Lee</p>"),
            ("Drug: \nDosage: \nPrescriber: \nStarted: 2025-03-01", "<p>Drug:<br>Dosage:<br>Prescriber:<br>Started: 2025-03-01</p>"),
            ("One paragraph.\n\nAnother.", "<p>One paragraph.</p><p>Another.</p>"),
            ("Already broken  \nhere", "<p>Already broken<br>here</p>"),
            ("# Title\nText", "<h1>Title</h1><p>Text</p>"),
            ("Reason:\n- cough\n- fever", "<p>Reason:</p><ul><li>cough</li><li>fever</li></ul>"),
            ("```\na\nb\n```", "<pre><code>a\nb\n</code></pre>"),
            ("| A | B |\n|---|---|\n| 1 | 2 |", "<table><thead><tr><th>A</th><th>B</th></tr></thead><tbody><tr><td>1</td><td>2</td></tr></tbody></table>"),
            ("Text\n\n> quoted\n> more", "<p>Text</p><blockquote><p>quoted more</p></blockquote>"),
        ]
        for row in rows {
            XCTAssertEqual(Markdown.html(row.markdown), row.html, row.markdown)
        }
        // The PDF is laid out from the same HTML: one line each.
        XCTAssertEqual(PDFBlock.blocks(markdown: "Date: 2025-03-01\nProvider: Dr. Lee"),
                       [.paragraph(markup: "Date: 2025-03-01\nProvider: Dr. Lee", quoteDepth: 0)])
    }
}
