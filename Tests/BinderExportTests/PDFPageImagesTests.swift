@testable import BinderExport
import XCTest

/// A PDF's pages drawn as gray pixels by poppler-glib (`binder key import --qr` and `binder
/// import` read QR codes in them): the size a page is drawn at, and what a PDF that cannot be
/// drawn gives.
final class PDFPageImagesTests: XCTestCase {
    /// 300 dpi, or less to stay within 20 million pixels and 20,000 a side; under 100 dpi the page is refused.
    func testTheResolutionAPageIsDrawnAt() {
        let limits = PDFPageImages.Limits()
        let rows: [(width: Double, height: Double, drawn: (dotsPerInch: Double, width: Int, height: Int)?, failure: PDFPageImages.Failure?)] = [
            (612, 792, (300, 2550, 3300), nil),  // Letter
            (595.28, 841.89, (300, 2480, 3507), nil),  // A4: rounded down
            (841.89, 1190.55, (300, 3507, 4960), nil),  // A3: 17.4 million pixels
            (1190.55, 1683.78, (227.4, 3760, 5318), nil),  // A2: drawn smaller, within 20 million
            (14_400, 72, (100, 20_000, 100), nil),  // 200 × 1 inches: the side's limit, at the least resolution
            (14_472, 72, nil, .pageTooLarge(page: 1, widthInches: 201, heightInches: 1, maximumPixels: 20_000_000)),
            (7_200_000, 7_200_000, nil, .pageTooLarge(page: 1, widthInches: 100_000, heightInches: 100_000, maximumPixels: 20_000_000)),
            (0, 792, nil, .unreadable("page 1 has no size")),
            (-612, 792, nil, .unreadable("page 1 has no size")),
            (.nan, 792, nil, .unreadable("page 1 has no size")),
            (.infinity, 792, nil, .unreadable("page 1 has no size")),
        ]
        for row in rows {
            let name = "\(row.width) × \(row.height)"
            do {
                let drawn = try PDFPageImages.pixels(page: 1, widthPoints: row.width, heightPoints: row.height, limits: limits)
                let expected = try XCTUnwrap(row.drawn, "\(name) drawn at \(drawn)")
                XCTAssertEqual(drawn.dotsPerInch, expected.dotsPerInch, accuracy: 0.05, name)
                XCTAssertEqual(drawn.width, expected.width, name)
                XCTAssertEqual(drawn.height, expected.height, name)
                XCTAssertLessThanOrEqual(drawn.width * drawn.height, limits.maximumPixels, name)
            } catch {
                XCTAssertEqual(error as? PDFPageImages.Failure, row.failure, name)
            }
        }
    }

    /// The recovery sheet's page comes out at 300 dpi, its code's modules black pixels a
    /// module's width apart (drawn as vectors: no picture in the PDF).
    func testTheSheetsPageIsDrawnWithItsModules() throws {
        let modules = (0..<21).map { row in (0..<21).map { column in (row / 3 + column / 3) % 2 == 0 } }
        let pdf = try RecoverySheetPDF.render(title: "Sheet", ncryptsec: "ncryptsec1qqqq", npub: "npub1x", date: "today",
                                              instructions: ["Keep it safe."], qrModules: modules)
        let pages = try PDFPageImages(pdf)
        XCTAssertEqual(pages.pageCount, 1)
        let page = try pages.page(0)
        XCTAssertEqual([page.width, page.height], [2480, 3507])
        XCTAssertEqual(page.pixels.count, page.width * page.height)
        // The code: 21 modules of 3 points, 262.5 pixels, centred; its dark squares (25 of the 49
        // blocks of 3 × 3 modules) are the only black of the page.
        var box = (left: page.width, right: 0, top: page.height, bottom: 0), black = 0
        for y in 0..<page.height {
            for x in 0..<page.width where page.pixels[y * page.width + x] < 16 {
                box = (min(box.left, x), max(box.right, x), min(box.top, y), max(box.bottom, y))
                black += 1
            }
        }
        XCTAssertEqual(Double(box.right - box.left), 262.5, accuracy: 3)
        XCTAssertEqual(Double(box.bottom - box.top), 262.5, accuracy: 3)
        XCTAssertEqual(Double(box.left + box.right) / 2, Double(page.width) / 2, accuracy: 3)
        XCTAssertEqual(Double(black), 262.5 * 262.5 * 25 / 49, accuracy: 3_000)
        XCTAssertGreaterThan(page.pixels.filter { $0 > 240 }.count, page.pixels.count * 9 / 10, "over white")
        XCTAssertThrowsError(try pages.page(1)) { XCTAssertEqual($0 as? PDFPageImages.Failure, .render(page: 2, "past the pages drawn")) }
    }

    func testAPDFThatCannotBeOpenedIsAFailureNotATrap() {
        let rows: [(bytes: [UInt8], failure: PDFPageImages.Failure)] = [
            (Array("%PDF-1.4\ngarbage\n".utf8), .unreadable("PDF document is damaged")),
            ([], .unreadable("PDF document is damaged")),
            (Array("%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj 2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n".utf8),
             .noPages),
        ]
        for row in rows {
            XCTAssertThrowsError(try PDFPageImages(row.bytes), "\(row.bytes.prefix(20))") {
                XCTAssertEqual($0 as? PDFPageImages.Failure, row.failure, "\(row.bytes.prefix(20))")
            }
        }
    }
}
