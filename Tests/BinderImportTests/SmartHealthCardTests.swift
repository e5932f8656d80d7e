@testable import BinderImport
import XCTest

/// SMART Health Cards (Tests/Fixtures/import: a card of binder's tests in the spec's shape, its
/// signature zeros): the file, its shc:/ text whole or in chunks, a payload that inflates too far.
final class SmartHealthCardTests: XCTestCase {
    func testACardsImmunizationsAreRecordsAndItsSignatureIsSaidUnchecked() throws {
        let card = try ImportFixtures.read("covid-card.smart-health-card")
        XCTAssertEqual(card.records.map { "\($0.folder) \($0.title) \($0.created ?? "-")" },
                       ["immunizations CVX 207 2021-01-01", "immunizations CVX 207 2021-01-29"])
        XCTAssertEqual(card.records.first?.codes, [ClinicalCode(system: "http://hl7.org/fhir/sid/cvx", code: "207")])
        XCTAssertEqual(card.records.first?.source.organisation, "https://spec.smarthealth.cards/examples/issuer")
        XCTAssertEqual(card.records.first?.source.format, "SMART Health Card")
        XCTAssertEqual(card.created, "2021-01-01T00:00:00.000Z")
        XCTAssertEqual(card.patient, PatientFacts(name: "Mei-Ling Chen", birthDate: "1985-02-14"))
        XCTAssertTrue(card.skipped.contains { $0.what == "the card's signature" && $0.reason.hasPrefix("not checked") })
        XCTAssertEqual(card.keptExtension, "json")
    }

    func testTheShcTextWholeOrInChunksIsTheSameCard() throws {
        let numeric = String(decoding: try ImportFixtures.bytes("covid-card.shc.txt"), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let digits = numeric.dropFirst("shc:/".count)
        let half = digits.index(digits.startIndex, offsetBy: (digits.count / 4) * 2)
        let chunked = "shc:/2/2/\(digits[half...])\nshc:/1/2/\(digits[..<half])\n"
        let third = digits.index(digits.startIndex, offsetBy: (digits.count / 6) * 2), twoThirds = digits.index(third, offsetBy: (digits.count / 6) * 2)
        let inThree = "\u{FEFF}shc:/3/3/\(digits[twoThirds...])  shc:/1/3/\(digits[..<third])\r\nSHC:/2/3/\(digits[third..<twoThirds])"
        for text in [numeric, chunked, inThree] {
            let card = try SourceReader.parse(Array(text.utf8), file: "card.txt", importDate: "2026-12-06")
            XCTAssertEqual(card.records.map(\.created), ["2021-01-01", "2021-01-29"], text)
            XCTAssertEqual(card.keptExtension, "txt")
        }
        // Two whole codes given together are two cards (here the same one twice: its items twice, the planner keeps one each).
        let twice = try SourceReader.parse(Array((numeric + "\n" + numeric).utf8), file: "cards.txt", importDate: "2026-12-06")
        XCTAssertEqual(twice.records.count, 4)
    }

    /// Each bad card is refused naming its file and what is wrong with it (not "malformed JSON").
    func testABadCardIsRefusedNamingWhatIsWrong() {
        let rows: [(text: String, fault: HealthCardFault)] = [
            (#"{"verifiableCredential": ["not.a-jws"]}"#, .notJWS),
            (#"{"verifiableCredential": ["e30.AAAA.AAAA"]}"#, .noFHIRBundle),
            (#"{"verifiableCredential": ["eyJ6aXAiOiJERUYifQ.____.AAAA"]}"#, .payloadNotDeflate),
            ("shc:/", .noDigits),
            ("shc:/12345", .oddDigitCount),
            ("shc:/12a4", .notDigits),
            ("shc:/9999", .pairOutOfRange(value: 99)),
            ("shc:/5678", .pairOutOfRange(value: 78)),
            ("shc:/5656", .notJWS),
            ("shc:/1/2", .badChunkMarker),
            ("shc:/1/2/3/5656", .badChunkMarker),
            ("shc:/0/2/5656", .badChunkMarker),
            ("shc:/3/2/5656", .badChunkMarker),
            ("shc:/1/1/5656", .badChunkMarker),
            ("shc:/1/x/5656", .badChunkMarker),
            ("shc:/1/99999/5656", .badChunkMarker),
            ("shc:/1/2/565", .oddDigitCount),
            ("shc:/1/2/5656\nshc:/1/3/5656", .chunkTotalsDisagree),
            ("shc:/2/3/5656", .missingChunks([1, 3], total: 3)),
            ("shc:/1/2/5656\r\nshc:/1/2/5656", .duplicateChunk(index: 1, total: 2)),
            ("shc:/5656\nshc:/1/2/56\nshc:/2/2/56", .wholeCodeAmongChunks),
            ("shc:/1/2/56\nshc:/2/2/56\nshc:/5656", .wholeCodeAmongChunks),
        ]
        for row in rows {
            XCTAssertThrowsError(try SourceReader.parse(Array(row.text.utf8), file: "card", importDate: "2026-12-06"), row.text) { error in
                XCTAssertEqual(error as? ImportError, .malformedHealthCard(file: "card", fault: row.fault), row.text)
            }
        }
        XCTAssertEqual(ImportError.malformedHealthCard(file: "card.txt", fault: .missingChunks([1, 3], total: 3)).description,
                       "card.txt: not a readable SMART Health Card: chunks 1, 3 of 3 missing (give every shc:/I/3/ line together)")
        // Text that is no card at all is not recognised (a note may start with an s).
        for text in ["shc:", "shc:/1/2/5656 and a word", "some note"] {
            XCTAssertThrowsError(try SourceReader.parse(Array(text.utf8), file: "card", importDate: "2026-12-06"), text) { error in
                XCTAssertEqual(error as? ImportError, .notRecognised(file: "card"), text)
            }
        }
        // A few KB that inflate to megabytes: cut at the cap.
        XCTAssertThrowsError(try ImportFixtures.read("inflation-bomb.smart-health-card")) { error in
            XCTAssertEqual(error as? ImportError, .payloadTooLarge(file: "inflation-bomb.smart-health-card", limit: SmartHealthCard.maximumPayload))
        }
    }

    /// Cards met while walking a folder are read as cards by their content, whatever their
    /// names (a `.smart-health-card` file's JSON as `scan.dat`, shc:/ chunks in a `.txt`), their
    /// signatures checked when keys are given; other text stays a note.
    func testCardsInAFolderAreCardsByContent() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("cards-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder + "/Immunizations", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let numeric = String(decoding: try ImportFixtures.bytes("covid-card.shc.txt"), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let digits = numeric.dropFirst("shc:/".count)
        let half = digits.index(digits.startIndex, offsetBy: (digits.count / 4) * 2)
        try Data("shc:/2/2/\(digits[half...])\nshc:/1/2/\(digits[..<half])\n".utf8).write(to: URL(fileURLWithPath: folder + "/Immunizations/scanned.txt"))
        try Data(try ImportFixtures.bytes("signed-card.smart-health-card")).write(to: URL(fileURLWithPath: folder + "/scan.dat"))
        try Data("shc is short for a card; this is a note\n".utf8).write(to: URL(fileURLWithPath: folder + "/shc note.txt"))
        let keys = try IssuerKeys.parse(try ImportFixtures.bytes("issuer-keys.json"), file: "issuer-keys.json")
        let sources = try SourceFolder.read(path: folder, file: "records", importDate: "2026-12-06", issuerKeys: keys)
        let summary = sources.map { "\($0.file) \($0.title) \($0.records.map(\.folder)) \($0.signature ?? "-")" }.sorted()
        XCTAssertEqual(summary, [
            "records/Immunizations/scanned.txt SMART Health Card [\"immunizations\", \"immunizations\"] not checked (its key is not among the issuer keys given)",
            "records/scan.dat SMART Health Card [\"immunizations\", \"immunizations\"] checked (ES256, the issuer's key)",
            "records/shc note.txt shc note [\"documents\"] -",
        ])
        XCTAssertEqual(sources.first { $0.file.hasSuffix("scanned.txt") }?.keptExtension, "txt")
        XCTAssertEqual(sources.first { $0.file.hasSuffix("scan.dat") }?.keptExtension, "json")
        // A broken card in a folder is refused naming its file: the import stores nothing.
        try Data("shc:/1/2/5656\n".utf8).write(to: URL(fileURLWithPath: folder + "/Immunizations/half.txt"))
        XCTAssertThrowsError(try SourceFolder.read(path: folder, file: "records", importDate: "2026-12-06")) { error in
            XCTAssertEqual(error as? ImportError, .malformedHealthCard(file: "records/Immunizations/half.txt", fault: .missingChunks([2], total: 2)))
        }
    }
}
