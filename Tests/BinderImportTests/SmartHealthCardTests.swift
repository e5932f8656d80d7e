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
        for text in [numeric, chunked] {
            let card = try SourceReader.parse(Array(text.utf8), file: "card.txt", importDate: "2026-12-06")
            XCTAssertEqual(card.records.map(\.created), ["2021-01-01", "2021-01-29"])
            XCTAssertEqual(card.keptExtension, "txt")
        }
    }

    func testABadCardIsRefusedByName() {
        let rows: [(String, String)] = [
            (#"{"verifiableCredential": ["not.a-jws"]}"#, "a JWS that is not three parts"),
            (#"{"verifiableCredential": ["e30.AAAA.AAAA"]}"#, "a payload that is not JSON"),
            ("shc:/12345", "an odd number of digits"),
            ("shc:/9999", "codes out of range"),
        ]
        for (text, what) in rows {
            XCTAssertThrowsError(try SourceReader.parse(Array(text.utf8), file: "card", importDate: "2026-12-06"), what) { error in
                guard case .malformedJSON(let file, _, _)? = error as? ImportError else { return XCTFail("\(what): \(error)") }
                XCTAssertEqual(file, "card")
            }
        }
        // A few KB that inflate to megabytes: cut at the cap.
        XCTAssertThrowsError(try ImportFixtures.read("inflation-bomb.smart-health-card")) { error in
            XCTAssertEqual(error as? ImportError, .payloadTooLarge(file: "inflation-bomb.smart-health-card", limit: SmartHealthCard.maximumPayload))
        }
    }
}
