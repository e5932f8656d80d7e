@testable import BinderImport
import XCTest

/// Apple Health's export.zip (Tests/Fixtures/import, made with Python's zipfile in the shape of
/// Apple's export): its clinical records imported, its samples counted and left out, and every
/// hostile archive refused whole before anything is stored.
final class AppleHealthExportTests: XCTestCase {
    func read(_ name: String, limits: AppleHealthExport.Limits = AppleHealthExport.Limits(bytes: ImportLimits.defaultMaximumBytes)) throws(ImportError) -> SourceDocument {
        try AppleHealthExport.read(path: ImportFixtures.path(name), file: name, limits: limits, importDate: "2026-12-06")
    }

    func testTheClinicalRecordsAreImportedAndTheSamplesCounted() throws {
        XCTAssertTrue(AppleHealthExport.isZip(path: ImportFixtures.path("apple-health-export.zip")))
        XCTAssertFalse(AppleHealthExport.isZip(path: ImportFixtures.path("ccd.xml")))
        let export = try read("apple-health-export.zip")
        XCTAssertEqual(export.records.map { "\($0.folder) \($0.title)" }.sorted(),
                       ["conditions Asthma", "immunizations Influenza, seasonal, injectable, preservative free"])
        XCTAssertEqual(export.records.first { $0.folder == "conditions" }?.codes.first?.code, "195967001")
        XCTAssertEqual(export.keptExtension, "ndjson")
        XCTAssertTrue(export.skipped.contains(SkippedItem(file: "apple-health-export.zip", what: "export.xml",
                                                          reason: "1500 samples (steps, heart rate…) are not imported")), "\(export.skipped)")
        XCTAssertTrue(export.skipped.contains { $0.what == "export_cda.xml" })
        // Through SourceReader, as the command reads it: by content, whatever the name.
        let sources = try SourceReader.sources(path: ImportFixtures.path("apple-health-export.zip"), file: "export.zip", importDate: "2026-12-06")
        XCTAssertEqual(sources.first?.records.count, 2)
    }

    func testHostileArchivesAreRefusedWhole() {
        let small = AppleHealthExport.Limits(bytes: 1 << 20)
        let rows: [(String, AppleHealthExport.Limits, String)] = [
            ("zip-slip.zip", small, "leads out of the archive"),
            ("zip-absolute.zip", small, "leads out of the archive"),
            ("zip-bomb.zip", small, "inflate past the import limit of 1048576 bytes"),
            ("zip-lying-bomb.zip", small, "c1.json"),
            ("apple-health-export.zip", AppleHealthExport.Limits(entries: 3, bytes: 1 << 20), "more than 3 entries"),
            ("apple-health-export.zip", AppleHealthExport.Limits(bytes: 1 << 20, sampleBytes: 1000), "export.xml declares"),
        ]
        for (name, limits, reason) in rows {
            XCTAssertThrowsError(try read(name, limits: limits), name) { error in
                guard case .archiveRefused(let file, let why)? = error as? ImportError else { return XCTFail("\(name): \(error)") }
                XCTAssertEqual(file, name)
                XCTAssertTrue(why.contains(reason), "\(name): \(why)")
            }
        }
        // The lying bomb declares 1,000 bytes: it is stopped as it passes them, not inflated to its 4 MiB.
        XCTAssertThrowsError(try read("zip-lying-bomb.zip", limits: small)) { error in
            XCTAssertTrue("\(error)".contains("inflates past the size it declares") || "\(error)".contains("cannot be inflated"), "\(error)")
        }
        XCTAssertEqual(AppleHealthExport.isContained("a/../../b"), false)
        XCTAssertEqual(AppleHealthExport.isContained("a\\..\\b"), false)
        XCTAssertEqual(AppleHealthExport.isContained("apple_health_export/clinical-records/x..json"), true)
    }
}
