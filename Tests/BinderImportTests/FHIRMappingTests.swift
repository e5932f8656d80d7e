@testable import BinderImport
import XCTest

/// The FHIR bundle fixture made records: references resolved inside it, panels through
/// `hasMember`, attachments' bytes intact, refuted and planned items left out.
final class FHIRMappingTests: XCTestCase {
    func testEveryClinicalResourceIsARecordInItsFolderWithItsCode() throws {
        let document = try ImportFixtures.read("fhir-bundle.json")
        let rows: [(folder: String, code: String, title: String, created: String?, body: [String])] = [
            ("conditions", "59621000", "Hypertension", "2019-03-12", ["Status: active"]),
            // medicationReference resolved to the bundle's Medication.
            ("medications", "197361", "Amlodipine 5 MG Oral Tablet", "2024-11-02", ["Dose: 5 mg", "Instructions: One tablet by mouth daily"]),
            ("allergies", "7982", "Penicillin G benzathine", nil, ["Reaction: Hives", "Severity: moderate"]),
            ("immunizations", "115", "Tdap", "2023-05-20", ["Lot: TD77"]),
            // The panel is one record; its members are rows, not records of their own.
            ("labs", "58410-2", "CBC panel - Blood by Automated count", "2024-11-02T14:30:00.000Z",
             ["| Hemoglobin [Mass/volume] in Blood | 13.2 g/dL | 12 g/dL – 16 g/dL |  |", "| Leukocytes [#/volume] in Blood | 6.1 10*3/uL |"]),
            ("procedures", "73761001", "Colonoscopy", "2024-11-03", []),
            ("visits", "32485007", "Hospital admission", "2024-11-02", ["Location: Riverside Hospital"]),
            ("documents", "18842-5", "Discharge letter", "2024-11-04T12:00:00.000Z", []),
        ]
        for row in rows {
            guard let found = document.records.first(where: { $0.folder == row.folder && $0.codes.contains { $0.code == row.code } }) else {
                XCTFail("no \(row.folder) record with code \(row.code)")
                continue
            }
            XCTAssertEqual(found.title, row.title)
            XCTAssertEqual(found.created, row.created, row.title)
            for fragment in row.body { XCTAssertTrue(found.value.contains(fragment), "\(row.title): \(fragment) not in\n\(found.value)") }
            XCTAssertEqual(found.source.organisation, "Riverside Hospital")
        }
        let coverage = try XCTUnwrap(document.records.first { $0.folder == "insurance" })
        XCTAssertEqual(coverage.title, "Good Health Insurance")
        XCTAssertTrue(coverage.value.contains("Member id: 1138345") && coverage.value.contains("Group: GRP-4471"), coverage.value)
        XCTAssertEqual(document.records.filter { $0.folder == "labs" }.count, 1)
        XCTAssertEqual(document.records.count, 9)
        XCTAssertEqual(Set(document.skipped.map(\.what)), ["Diabetes mellitus", "Lisinopril 10 MG Oral Tablet", "allergies"])
        let letter = try XCTUnwrap(document.records.first { $0.folder == "documents" })
        XCTAssertEqual(letter.attachments.map(\.fileName), ["discharge-letter.pdf"])
        XCTAssertEqual(letter.attachments.first?.bytes, try ImportFixtures.bytes("discharge-letter.pdf"))
        XCTAssertEqual(document.patient, PatientFacts(name: "Mei-Ling Chen", birthDate: "1985-02-14"))
    }

    func testNDJSONIsAResourceALine() throws {
        let document = try ImportFixtures.read("resources.ndjson")
        XCTAssertEqual(document.records.map(\.folder).sorted(), ["conditions", "immunizations"])
        XCTAssertEqual(document.skipped.map(\.what), ["Diabetes mellitus"])
    }

    /// DSTU2, as older Apple Health clinical records are: MedicationOrder, an allergy's
    /// `substance` and string status, an immunization's `date` and `wasNotGiven`.
    func testDSTU2ResourcesAreRead() throws {
        let lines = [
            #"{"resourceType": "MedicationOrder", "id": "m", "dateWritten": "2016-04-02", "status": "active", "medicationCodeableConcept": {"coding": [{"system": "http://www.nlm.nih.gov/research/umls/rxnorm", "code": "197361", "display": "Amlodipine 5 MG Oral Tablet"}]}}"#,
            #"{"resourceType": "AllergyIntolerance", "id": "a", "status": "confirmed", "onset": "2001-05-01", "substance": {"coding": [{"system": "http://www.nlm.nih.gov/research/umls/rxnorm", "code": "7980", "display": "Penicillin G"}]}}"#,
            #"{"resourceType": "Immunization", "id": "i", "status": "completed", "date": "2015-10-01", "wasNotGiven": false, "vaccineCode": {"coding": [{"system": "http://hl7.org/fhir/sid/cvx", "code": "140", "display": "Influenza"}]}}"#,
            #"{"resourceType": "Immunization", "id": "j", "status": "completed", "date": "2015-10-01", "wasNotGiven": true, "vaccineCode": {"text": "Zoster"}}"#,
            #"{"resourceType": "Condition", "id": "c", "clinicalStatus": "active", "verificationStatus": "refuted", "code": {"text": "Gout"}}"#,
        ]
        let document = try SourceReader.parse(Array(lines.joined(separator: "\n").utf8), file: "dstu2.ndjson", importDate: "2026-12-06")
        XCTAssertEqual(document.records.map { "\($0.folder) \($0.title) \($0.created ?? "-")" }, [
            "medications Amlodipine 5 MG Oral Tablet 2016-04-02", "allergies Penicillin G 2001-05-01", "immunizations Influenza 2015-10-01",
        ])
        XCTAssertEqual(document.records[1].status, "confirmed")
        XCTAssertEqual(document.skipped.map(\.what), ["Zoster", "Gout"])
    }

    /// A report's results that are panels themselves (SMART Health Cards' example-02: a report of a
    /// CBC panel and a chemistry panel): their members' values are rows of the report's table with
    /// their codes, as they are records of no other kind; a cycle of `hasMember` references ends.
    func testPanelsInsideAReportBringTheirMembersAsRows() throws {
        func observation(_ id: String, _ code: String, _ name: String, value: String? = nil, members: [String] = []) -> String {
            let valuePart = value.map { #", "valueQuantity": {"value": \#($0), "unit": "g/dL"}"# } ?? ""
            let memberPart = members.isEmpty ? "" : #", "hasMember": ["# + members.map { #"{"reference": "Observation/\#($0)"}"# }.joined(separator: ", ") + "]"
            return #"{"resource": {"resourceType": "Observation", "id": "\#(id)", "status": "final", "code": {"coding": [{"system": "http://loinc.org", "code": "\#(code)", "display": "\#(name)"}]}\#(valuePart)\#(memberPart)}}"#
        }
        func report(_ results: [String]) -> String {
            #"{"resource": {"resourceType": "DiagnosticReport", "id": "r", "status": "final", "effectiveDateTime": "2015-08-16", "code": {"text": "General health panel"}, "result": ["#
                + results.map { #"{"reference": "Observation/\#($0)"}"# }.joined(separator: ", ") + "]}}"
        }
        let rows: [(name: String, entries: [String], table: [String], codes: [String])] = [
            ("a panel in a report", [report(["cbc"]), observation("cbc", "58410-2", "CBC panel", members: ["hgb", "wbc"]),
                                     observation("hgb", "718-7", "Hemoglobin", value: "13.2"), observation("wbc", "6690-2", "Leukocytes", value: "6.1")],
             ["| CBC panel |  |  |  |", "| Hemoglobin | 13.2 g/dL |  |  |", "| Leukocytes | 6.1 g/dL |  |  |"], ["58410-2", "718-7", "6690-2"]),
            ("a panel with a value and members, alone", [observation("p", "24357-6", "Urinalysis", value: "1", members: ["m"]),
                                                         observation("m", "5811-5", "Specific gravity", value: "1.02")],
             ["| Urinalysis | 1 g/dL |  |  |", "| Specific gravity | 1.02 g/dL |  |  |"], ["24357-6", "5811-5"]),
            ("a cycle of members", [report(["a"]), observation("a", "1-1", "A", members: ["b"]), observation("b", "2-2", "B", members: ["a"])],
             ["| A |  |  |  |", "| B |  |  |  |"], ["1-1", "2-2"]),
        ]
        for row in rows {
            let text = #"{"resourceType": "Bundle", "type": "collection", "entry": ["# + row.entries.joined(separator: ", ") + "]}"
            let document = try SourceReader.parse(Array(text.utf8), file: "panels.json", importDate: "2026-12-06")
            let labs = document.records.filter { $0.folder == "labs" }
            XCTAssertEqual(labs.count, 1, row.name)
            guard let record = labs.first else { continue }
            for line in row.table { XCTAssertTrue(record.value.contains(line), "\(row.name): \(line) not in\n\(record.value)") }
            XCTAssertTrue(Set(row.codes).isSubset(of: Set(record.codes.map(\.code))), "\(row.name): \(record.codes.map(\.code))")
            XCTAssertEqual(record.value.components(separatedBy: "\n").filter { $0.hasPrefix("| ") && !$0.hasPrefix("| Test ") }.count, row.table.count,
                           "\(row.name): each row once\n\(record.value)")
        }
    }

    /// The International Patient Summary says "nothing to list" with a code of its absent/unknown
    /// system (HL7's 2022 example bundle-no-info-required-sections.json): a statement, not an
    /// allergy, problem, medication, immunization or procedure; it is listed as left out.
    func testAStatementThatThereIsNothingMakesNoRecord() throws {
        func concept(_ code: String, _ display: String) -> String {
            #"{"coding": [{"system": "http://hl7.org/fhir/uv/ips/CodeSystem/absent-unknown-uv-ips", "code": "\#(code)", "display": "\#(display)"}]}"#
        }
        let rows: [(resource: String, folder: String, said: String)] = [
            (#"{"resourceType": "AllergyIntolerance", "id": "a", "code": \#(concept("no-allergy-info", "No information about allergies"))}"#,
             "allergies", "No information about allergies"),
            (#"{"resourceType": "AllergyIntolerance", "id": "k", "code": \#(concept("no-known-allergies", "No known allergies"))}"#,
             "allergies", "No known allergies"),
            (#"{"resourceType": "Condition", "id": "c", "code": \#(concept("no-problem-info", "No information about problems"))}"#,
             "conditions", "No information about problems"),
            (#"{"resourceType": "MedicationStatement", "id": "m", "status": "unknown", "medicationCodeableConcept": \#(concept("no-medication-info", "No information about medications"))}"#,
             "medications", "No information about medications"),
            (#"{"resourceType": "Immunization", "id": "i", "status": "completed", "vaccineCode": \#(concept("no-immunization-info", "No information about immunizations"))}"#,
             "immunizations", "No information about immunizations"),
            (#"{"resourceType": "Procedure", "id": "p", "status": "completed", "code": \#(concept("no-procedure-info", "No information about past history of procedures"))}"#,
             "procedures", "No information about past history of procedures"),
        ]
        for row in rows {
            let document = try SourceReader.parse(Array(row.resource.utf8), file: "ips.json", importDate: "2026-12-06")
            XCTAssertEqual(document.records.map(\.folder), [], row.resource)
            XCTAssertEqual(document.skipped.map(\.what), [row.folder], row.resource)
            XCTAssertTrue(document.skipped.first?.reason.contains("it says there is nothing to list (\(row.said))") == true, "\(document.skipped)")
        }
        // A real allergy beside them is still one.
        let real = #"{"resourceType": "AllergyIntolerance", "id": "r", "code": {"coding": [{"system": "http://snomed.info/sct", "code": "91936005", "display": "Allergy to penicillin"}]}}"#
        XCTAssertEqual(try SourceReader.parse(Array(real.utf8), file: "ips.json", importDate: "2026-12-06").records.map(\.folder), ["allergies"])
    }

    func testFHIRDatesBecomeCreated() {
        let rows: [(String, String?)] = [
            ("2019-03-12", "2019-03-12"), ("2019-03", "2019-03-01"), ("2019", "2019-01-01"),
            ("2024-11-02T09:30:00-05:00", "2024-11-02T14:30:00.000Z"), ("2024-11-02T09:30:00.25Z", "2024-11-02T09:30:00.250Z"),
            ("2019-13-01", nil), ("yesterday", nil), ("20", nil),
            // Found by the import fuzzer: ten digits of year are not a FHIR date.
            ("0309062634", nil), ("2019-02-30", nil), ("2020-02-29", "2020-02-29"), ("2019-3-1", nil), ("2019-", nil), ("2019-03-", nil),
        ]
        for (text, expected) in rows { XCTAssertEqual(FHIRValues.created(.string(text)), expected, text) }
    }
}

/// A record path read from a FHIR file (binder's own export marks) is used only when binder
/// could have written it: a crafted one never names a place outside a folder of records.
final class BinderExportMarksTests: XCTestCase {
    func testOnlyPathsBinderCouldHaveWrittenAreUsed() {
        let rows: [(String, Bool)] = [
            ("conditions/2019-03-12-essential-hypertension.md", true),
            ("conditions/back-acne/2026-02-10-note.md", true),
            ("my-info/allergies/peanuts 🥜.md", true),
            ("patient-info.md", false),
            ("../outside.md", false),
            ("conditions/../../outside.md", false),
            ("/etc/passwd.md", false),
            (".binder/status.md", false),
            ("conditions/.hidden.md", false),
            ("conditions//double.md", false),
            ("conditions/photo.jpg", false),
            ("conditions/x.json", false),
            ("conditions/line\nbreak.md", false),
            ("conditions/tab\there.md", false),
            ("conditions/" + String(repeating: "a", count: 201) + ".md", false),
            ("", false),
        ]
        for (path, kept) in rows {
            XCTAssertEqual(BinderExportMarks.safeRecordPath(path) != nil, kept, path)
        }
    }

    func testACraftedPathIsIgnoredAndTheRecordGoesToItsFolder() throws {
        let resource = #"{"resourceType": "Condition", "code": {"text": "Asthma"}, "identifier": [{"system": "urn:binder:record-path", "value": "../../escape.md"}], "note": [{"text": "crafted"}]}"#
        let document = try SourceReader.parse(Array(resource.utf8), file: "crafted.json", importDate: "2026-12-06")
        XCTAssertEqual(document.records.first?.folder, "conditions")
        XCTAssertNil(document.records.first?.preferredPath)
        XCTAssertFalse(document.records.first?.body.contains("crafted") ?? true)
    }
}
