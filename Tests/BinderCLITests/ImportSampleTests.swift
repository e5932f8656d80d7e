import BinderCrypto
import BinderFormat
import Foundation
import XCTest

/// `binder import` of samples nobody here wrote (Tests/Fixtures/import/ips, smart-health-cards, a
/// Synthea patient; beside it one generated in Synthea's shape, see its README), each into a new binder with the real
/// binary, checked by code that shares nothing with binder: Tests/interop/fhir_codes.py lists
/// each sample's coded items and finds them in the records' front matter (read with rust-nostr),
/// check_export.py validates `binder export --format fhir` with fhir.resources.
final class ImportSampleTests: MountedFixtureTestCase {
    static let fixtures = ImportCommandTests.fixtures
    static let codeChecker = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("interop/fhir_codes.py").path
    static let issuerKeys = fixtures + "/smart-health-cards/jwks.json"

    /// The fixture binder's key and sandbox; the samples go into binders made with `binder create`.
    override func setUpWithError() throws {
        binder = try MountedBinder()
        key = try NIP44.ConversationKey(selfOf: try SecretKey(nsec: Fixtures.nsec))
    }

    func fixture(_ name: String) -> String { Self.fixtures + "/" + name }

    /// A new binder of the fixture's key (another patient: the samples' patients differ anyway).
    func newBinder(_ name: String) throws -> String {
        let created = try binder.sandbox.run(["create", name, "--patient-name", "-", "--dob", "-", "--passphrase-file", binder.passphraseFile],
                                             stdin: "Sam Ple\n1970-01-01\n")
        XCTAssertEqual(created.status, 0, created.stderr)
        return binder.sandbox.home.appendingPathComponent("binders/" + name).path
    }

    func importing(_ arguments: [String], into repository: String) throws -> BinderRun {
        try binder.sandbox.run(["import"] + arguments + ["--binder", repository, "--passphrase-file", binder.passphraseFile, "--force"])
    }

    func commits(in repository: String) throws -> Int {
        Int(try git("rev-list --count main", in: repository).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    func json(_ run: BinderRun) throws -> [String: Any] {
        XCTAssertEqual(run.status, 0, run.stderr)
        return try XCTUnwrap(JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], run.stdout + run.stderr)
    }

    /// Each sample in a new binder: every coded item fhir_codes.py finds in it is in a record of
    /// its folder with its code system and code; a second import of it adds nothing.
    func testEveryCodedItemOfEachSampleIsARecordOfItsFolder() throws {
        let nsecFile = try binder.sandbox.file("nsec", Fixtures.nsec)
        // (sample, at least this many coded items, folders that must hold records, folders that must hold none)
        let rows: [(sample: String, items: Int, folders: Set<String>, none: Set<String>)] = [
            ("ips/Bundle-IPS-examples-Bundle-01.json", 15, ["conditions", "medications", "allergies", "labs"], []),
            ("ips/bundle-minimal.json", 7, ["conditions", "medications", "allergies"], []),
            ("ips/bundle-no-info-required-sections.json", 1, ["immunizations"], []),
            // Its 2022 version says "no information" about allergies, problems, medications with IPS codes: no records.
            ("ips/bundle-no-info-required-sections-2022.json", 1, ["immunizations"], ["allergies", "conditions", "medications"]),
            // A Synthea patient (v2.4, SMART's sample data) and a patient generated in Synthea's shape.
            ("synthea/Buster_Hoeger_ad2e3fc5-2b5d-4cb9-8d03-9ea0f4ac8423.json", 30, ["conditions", "medications", "immunizations", "labs", "procedures", "visits"], []),
            ("synthea/synthea-shaped-patient.json", 30, ["conditions", "medications", "allergies", "immunizations", "labs", "procedures", "visits"], []),
            ("smart-health-cards/example-00-e-file.smart-health-card", 2, ["immunizations"], []),
            ("smart-health-cards/example-01-e-file.smart-health-card", 2, ["immunizations"], []),
            // A report of a CBC and a chemistry panel: their members' values are rows of the report.
            ("smart-health-cards/example-02-e-file.smart-health-card", 70, ["labs"], []),
            ("smart-health-cards/example-03-e-file.smart-health-card", 1, ["immunizations"], []),
        ]
        for (index, row) in rows.enumerated() {
            let repository = try newBinder("sample-\(index)")
            let arguments = [fixture(row.sample)] + (row.sample.hasSuffix(".smart-health-card") ? ["--issuer-keys", Self.issuerKeys] : [])
            let run = try importing(arguments, into: repository)
            XCTAssertEqual(run.status, 0, "\(row.sample): \(run.stderr)")
            let checked = try json(try BinderSandbox.run(executable: "/usr/bin/env",
                                                         ["python3", Self.codeChecker, "check", fixture(row.sample), repository, nsecFile]))
            XCTAssertEqual(checked["missing"] as? [[String]], [], "\(row.sample): coded items with no record of their folder")
            XCTAssertGreaterThanOrEqual(checked["expected"] as? Int ?? 0, row.items, row.sample)
            let records = checked["records"] as? [String: Int] ?? [:]
            XCTAssertTrue(row.folders.isSubset(of: Set(records.keys)), "\(row.sample): \(records)")
            XCTAssertTrue(row.none.isDisjoint(with: Set(records.keys)), "\(row.sample): \(records)")
            let count = try commits(in: repository)
            let again = try importing(arguments, into: repository)
            XCTAssertEqual(again.status, 0, again.stderr)
            XCTAssertTrue(again.stdout.hasSuffix("Nothing new: the binder is unchanged\n"), "\(row.sample): \(again.stdout)")
            XCTAssertEqual(try commits(in: repository), count, row.sample)
        }
    }

    /// A second download of the same records, as a portal makes one: every id, fullUrl and
    /// reference (the samples' UUIDs) new. Nothing is added and nothing is changed.
    func testASecondDownloadWithNewIdsAddsNothing() throws {
        let rows: [(sample: String, items: Int)] = [("ips/Bundle-IPS-examples-Bundle-01.json", 8), ("ips/bundle-minimal.json", 3),
                                                      ("synthea/Buster_Hoeger_ad2e3fc5-2b5d-4cb9-8d03-9ea0f4ac8423.json", 35), ("synthea/synthea-shaped-patient.json", 48)]
        for (index, row) in rows.enumerated() {
            let repository = try newBinder("download-\(index)")
            XCTAssertEqual(try importing([fixture(row.sample)], into: repository).status, 0, row.sample)
            let count = try commits(in: repository)
            let text = try String(contentsOfFile: fixture(row.sample), encoding: .utf8)
            var renamed: [Substring: String] = [:]
            let second = text.replacing(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/) { match -> String in
                if let new = renamed[match.output] { return new }
                let new = UUID().uuidString.lowercased()
                renamed[match.output] = new
                return new
            }
            XCTAssertGreaterThan(renamed.count, 5, row.sample)
            let download = try binder.sandbox.file("second-download-\(index).json", second)
            let summary = try json(try importing([download, "--json"], into: repository))
            XCTAssertEqual(summary["created"] as? [String], [], row.sample)
            XCTAssertEqual(summary["updated"] as? [String], [], row.sample)
            XCTAssertEqual(summary["unchanged"] as? Int, row.items, "\(row.sample): items already in the binder")
            XCTAssertEqual(try commits(in: repository), count, row.sample)
        }
    }

    /// The specification's example cards: with its issuer's keys (jwks.json) each signature is
    /// checked and said so; without keys, "not checked"; a card whose signature or payload was
    /// changed is refused with the keys and nothing is stored.
    func testTheSpecificationsCardsAreCheckedAgainstItsIssuersKeys() throws {
        let repository = try newBinder("cards")
        let cards = (0...3).map { fixture("smart-health-cards/example-0\($0)-e-file.smart-health-card") }
        for card in cards {
            let checked = try importing([card, "--issuer-keys", Self.issuerKeys, "--dry-run"], into: repository)
            XCTAssertEqual(checked.status, 0, checked.stderr)
            XCTAssertTrue(checked.stdout.contains(card + ": signature checked (ES256, the issuer's key)\n"), checked.stdout)
            let unchecked = try importing([card, "--dry-run"], into: repository)
            XCTAssertEqual(unchecked.status, 0, unchecked.stderr)
            XCTAssertTrue(unchecked.stdout.contains(card + ": signature not checked (no issuer keys given)\n"), unchecked.stdout)
        }
        let stored = try importing([cards[0], "--issuer-keys", Self.issuerKeys], into: repository)
        XCTAssertEqual(stored.status, 0, stored.stderr)
        let kept = try XCTUnwrap(try git("ls-tree --name-only main documents/", in: repository).split(separator: "\n")
            .first { $0.contains("smart-health-card") && $0.hasSuffix(".json") })
        let record = try MedicalDocument(plaintext: try NIP44.decrypt(payload: try git("show 'main:\(kept)'", in: repository), key: key).copyBytes())
        XCTAssertTrue(record.value.contains("- Signature: checked"), record.value)

        // One character changed in the signature, then in the payload (the JWS's third and second parts).
        let card = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: cards[3]))) as? [String: [String]])
        let parts = try XCTUnwrap(card["verifiableCredential"]?.first).split(separator: ".").map(String.init)
        XCTAssertEqual(parts.count, 3)
        func changed(_ text: String) -> String {
            var characters = Array(text)
            characters[20] = characters[20] == "A" ? "B" : "A"
            return String(characters)
        }
        let count = try commits(in: repository)
        for (name, jws) in [("signature", [parts[0], parts[1], changed(parts[2])]), ("payload", [parts[0], changed(parts[1]), parts[2]])] {
            let tampered = try binder.sandbox.file("tampered-\(name).smart-health-card",
                                                   "{\"verifiableCredential\":[\"" + jws.joined(separator: ".") + "\"]}\n")
            let run = try importing([tampered, "--issuer-keys", Self.issuerKeys], into: repository)
            XCTAssertEqual(run.status, 1, "\(name): \(run.stdout)")
            XCTAssertTrue(run.stderr.contains("tampered-\(name).smart-health-card") && run.stderr.contains("nothing was imported"), "\(name): \(run.stderr)")
            XCTAssertEqual(try commits(in: repository), count, name)
        }
    }

    /// HL7's C-CDA examples, the IPS bundles and the Synthea-shaped patient imported into one new
    /// binder, then `binder export --format fhir`: the bundle validates against fhir.resources'
    /// R4 models (R4B, R4's technical correction) and has a resource for each record of the
    /// folders FHIR has a resource type for.
    func testAFHIRExportOfTheImportedSamplesValidates() throws {
        try XCTSkipIf(try shell("python3 -c 'import fhir.resources'").status != 0, "fhir.resources missing (scripts/setup)")
        let repository = try newBinder("exported")
        let sources = ["hl7/CCD-1.xml", "hl7/Discharge_Summary.xml", "hl7/Referral_Note.xml", "ips/Bundle-IPS-examples-Bundle-01.json", "ips/bundle-minimal.json",
                       "ips/bundle-no-info-required-sections.json", "synthea/Buster_Hoeger_ad2e3fc5-2b5d-4cb9-8d03-9ea0f4ac8423.json", "synthea/synthea-shaped-patient.json"].map(fixture)
        for source in sources {
            let run = try importing([source], into: repository)
            XCTAssertEqual(run.status, 0, "\(source): \(run.stderr)")
        }
        let file = binder.sandbox.root.appendingPathComponent("samples.fhir.json").path
        let export = try binder.sandbox.run(["export", "--binder", repository, "--passphrase-file", binder.passphraseFile,
                                             "--format", "fhir", "--output", file])
        XCTAssertEqual(export.status, 0, export.stderr)
        let report = try json(try BinderSandbox.run(executable: "/usr/bin/env", ["python3", ExportTests.script, "fhir", file]))
        XCTAssertEqual(report["type"] as? String, "document")
        let resources = try XCTUnwrap(report["resources"] as? [String: Int])
        let paths = try git("ls-tree -r --name-only main", in: repository).split(separator: "\n")
        func records(_ folder: String) -> Int { paths.filter { $0.hasPrefix(folder + "/") && $0.hasSuffix(".json") && !$0.hasSuffix("/.meta.json") }.count }
        for (folder, type) in [("conditions", "Condition"), ("medications", "MedicationStatement"), ("allergies", "AllergyIntolerance"),
                               ("immunizations", "Immunization")] {
            XCTAssertGreaterThan(records(folder), 0, folder)
            XCTAssertEqual(resources[type], records(folder), "\(type) for each record of \(folder)/")
        }
    }
}
