@testable import BinderImport
import XCTest

/// A health card's ES256 signature against its issuer's keys (Tests/Fixtures/import:
/// signed-card.* signed by Python's `cryptography` with a throwaway P-256 key whose public half
/// is issuer-keys.json; other-issuer-keys.json names the same kid with another key).
final class IssuerKeysTests: XCTestCase {
    func keys(_ name: String) throws -> IssuerKeys { try IssuerKeys.parse(try ImportFixtures.bytes(name), file: name) }

    func card(_ name: String, keys: IssuerKeys?) throws(ImportError) -> SourceDocument {
        let bytes = (try? ImportFixtures.bytes(name)) ?? []
        return try SourceReader.parse(bytes, file: name, importDate: "2026-12-06", issuerKeys: keys)
    }

    func testASignedCardIsCheckedAndSaysSo() throws {
        let issuer = try keys("issuer-keys.json")
        for name in ["signed-card.smart-health-card", "signed-card.shc.txt"] {
            let card = try card(name, keys: issuer)
            XCTAssertEqual(card.signature, "checked (ES256, the issuer's key)", name)
            XCTAssertFalse(card.skipped.contains { $0.what == "the card's signature" }, name)
            XCTAssertEqual(card.records.count, 2, name)
            let record = ImportPlanner(importDate: "2026-12-06").sourceRecord(card, made: [])
            XCTAssertTrue(record.body.contains("- Signature: checked (ES256, the issuer's key)\n"), record.body)
        }
    }

    func testWithoutKeysOrWithoutItsKeyASignatureIsSaidNotChecked() throws {
        let rows: [(String, IssuerKeys?, String)] = [
            ("signed-card.smart-health-card", nil, "not checked (no issuer keys given)"),
            ("covid-card.smart-health-card", try keys("issuer-keys.json"), "not checked (its key is not among the issuer keys given)"),
        ]
        for (name, keys, says) in rows {
            let card = try card(name, keys: keys)
            XCTAssertEqual(card.signature, says, name)
            XCTAssertTrue(card.skipped.contains { $0.what == "the card's signature" && $0.reason.hasPrefix("not checked") }, name)
        }
    }

    func testABadSignatureRefusesTheCard() throws {
        let jws = try XCTUnwrap(String(decoding: try ImportFixtures.bytes("signed-card.smart-health-card"), as: UTF8.self)
            .split(separator: "\"").first { $0.split(separator: ".").count == 3 })
        let parts = jws.split(separator: ".").map(String.init)
        // Another payload under the same signature: the first character of the compressed payload changed.
        let altered = parts[0] + "." + (parts[1].hasPrefix("A") ? "B" : "A") + parts[1].dropFirst() + "." + parts[2]
        let zeroSignature = parts[0] + "." + parts[1] + "." + String(repeating: "A", count: 86)
        let issuer = try keys("issuer-keys.json")
        XCTAssertEqual(issuer.check(String(jws)), .valid)
        XCTAssertEqual(issuer.check(altered), .invalid)
        XCTAssertEqual(issuer.check(zeroSignature), .invalid)
        XCTAssertEqual(issuer.check(parts[0] + "." + parts[1] + ".bm90IGEgc2lnbmF0dXJl"), .invalid)
        XCTAssertEqual(try keys("other-issuer-keys.json").check(String(jws)), .invalid)
        XCTAssertThrowsError(try card("signed-card.smart-health-card", keys: try keys("other-issuer-keys.json"))) { error in
            XCTAssertEqual(error as? ImportError, .signatureRefused(file: "signed-card.smart-health-card"))
            XCTAssertTrue("\(error)".contains("signature does not verify"), "\(error)")
        }
    }

    func testAKeysFileThatIsNoJWKSIsRefused() {
        let rows: [(String, String)] = [
            ("not json", "not JSON"),
            (#"{"keys": []}"#, "no keys"),
            (#"{"keys": [{"kty": "RSA", "kid": "a", "n": "AQAB", "e": "AQAB"}]}"#, "an RSA key only"),
            (#"{"keys": [{"kty": "EC", "crv": "P-256", "kid": "a", "x": "AAAA", "y": "AAAA"}]}"#, "coordinates too short"),
            (#"{"keys": [{"kty": "EC", "crv": "P-256", "x": "MpO_qcAvkMqdyyrkY_BOIWdB0QQhHDTCtjw4xVSpO4w", "y": "6uENtyyNh3lP2s8VyGK3mhpDg5HdbbJvSfLs3JZlz-U"}]}"#,
             "no kid"),
        ]
        for (text, what) in rows {
            XCTAssertThrowsError(try IssuerKeys.parse(Array(text.utf8), file: "keys.json"), what) { error in
                guard case .malformedJSON(let file, _, _)? = error as? ImportError else { return XCTFail("\(what): \(error)") }
                XCTAssertEqual(file, "keys.json", what)
            }
        }
    }
}
