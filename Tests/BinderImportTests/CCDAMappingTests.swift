@testable import BinderImport
import XCTest

/// The CCD fixture's entries made records: each coded item in its folder with its code, the
/// facts a person reads in its body, and what says "nothing" or "planned" left out.
final class CCDAMappingTests: XCTestCase {
    static let snomed = "http://snomed.info/sct", rxnorm = "http://www.nlm.nih.gov/research/umls/rxnorm", loinc = "http://loinc.org"
    static let cvx = "http://hl7.org/fhir/sid/cvx", icd10 = "http://hl7.org/fhir/sid/icd-10-cm", cpt = "http://www.ama-assn.org/go/cpt"

    func record(_ document: SourceDocument, _ folder: String, code: String, file: StaticString = #filePath, line: UInt = #line) -> ImportedRecord? {
        let found = document.records.first { $0.folder == folder && $0.codes.contains { $0.code == code } }
        XCTAssertNotNil(found, "no record in \(folder) with code \(code)", file: file, line: line)
        return found
    }

    func testEveryCodedEntryIsARecordInItsFolderWithItsCode() throws {
        let document = try ImportFixtures.read("ccd.xml")
        let rows: [(folder: String, system: String, code: String, title: String, created: String?, body: [String])] = [
            ("allergies", Self.rxnorm, "7982", "Penicillin G benzathine", "2010-03-01", ["Reaction: Hives", "Severity: Moderate", "Status: active"]),
            ("medications", Self.rxnorm, "866924", "Metoprolol Tartrate 25 MG Oral Tablet", "2020-01-05",
             ["Dose: 25 mg", "Frequency: every 12 hours", "Route: ORAL", "Status: active"]),
            // No displayName: the name is the narrative its originalText references.
            ("medications", Self.rxnorm, "866427", "Metoprolol succinate 25 mg extended release", "2023-06-10", ["Dose: 25 mg"]),
            ("conditions", Self.snomed, "59621000", "Essential hypertension", "2019-03-12", ["Onset: 2019-03-12", "Codes: SNOMED CT 59621000, ICD-10-CM I10"]),
            ("conditions", Self.snomed, "426979002", "Mild persistent asthma", "2005-01-01", ["Onset: 2005"]),
            ("immunizations", Self.cvx, "140", "Influenza, seasonal, injectable, preservative free", "2024-10-01", ["Lot: FLU2024A", "Manufacturer: Vaccine Maker Inc"]),
            ("labs", Self.loinc, "57698-3", "Lipid panel with direct LDL - Serum or Plasma", "2024-10-01",
             ["| Cholesterol [Mass/volume] in Serum or Plasma | 212 mg/dL | ≤ 200 mg/dL | High |", "| HDL Cholesterol | 55 mg/dL | ≥ 40 mg/dL | Normal |"]),
            ("labs", Self.snomed, "46680005", "Vital signs", "2024-10-01", ["| Systolic blood pressure | 128 mm[Hg] |", "| Body weight | 61 kg |"]),
            ("procedures", Self.snomed, "80146002", "Appendectomy", "2010-03-15", ["Site: Appendix structure"]),
            ("visits", Self.cpt, "99213", "Office outpatient visit 15 minutes", "2024-10-01",
             ["Provider: Henry Seven", "Location: Good Health Clinic, Main Street", "Diagnoses: Essential hypertension"]),
            ("insurance", "http://terminology.hl7.org/CodeSystem/v3-RoleCode", "", "Good Health Insurance", nil, ["Member id: 1138345", "Group: GRP-4471"]),
        ]
        for row in rows {
            let found = row.code.isEmpty ? document.records.first { $0.folder == row.folder } : record(document, row.folder, code: row.code)
            guard let found else { continue }
            if !row.code.isEmpty { XCTAssertTrue(found.codes.contains(ClinicalCode(system: row.system, code: row.code, display: found.codes.first { $0.code == row.code }?.display))) }
            XCTAssertEqual(found.title, row.title)
            XCTAssertEqual(found.created, row.created, row.title)
            for fragment in row.body { XCTAssertTrue(found.value.contains(fragment), "\(row.title): \(fragment) not in\n\(found.value)") }
            XCTAssertEqual(found.source.organisation, "Good Health Clinic")
            XCTAssertEqual(found.source.documentID, "2.16.840.1.113883.19.5.99999.1^DOC-0001")
        }
        XCTAssertTrue(record(document, "conditions", code: "I10") != nil, "the ICD-10 translation is kept")
        // Tartrate and succinate: two medications. The planned lisinopril and the refused zoster shot: none.
        XCTAssertEqual(document.records.filter { $0.folder == "medications" }.count, 2)
        XCTAssertEqual(document.records.count, 11)
        XCTAssertEqual(document.skipped.map(\.what).sorted(), ["Lisinopril 10 MG Oral Tablet", "Zoster vaccine recombinant"])
        XCTAssertTrue(document.skipped.contains { $0.reason.hasPrefix("planned (moodCode INT)") })
        XCTAssertEqual(document.patient, PatientFacts(name: "Mei-Ling Chen", birthDate: "1985-02-14"))
        XCTAssertEqual(document.created, "2024-10-15T15:30:00.000Z")
        XCTAssertEqual(document.narrative.map(\.title), ["SOCIAL HISTORY"])
        XCTAssertEqual(document.narrative.first?.text, "Never smoker. Walks 30 minutes a day.")
    }

    func testNoKnownAllergiesMakesNoAllergy() throws {
        let negated = """
        <templateId root="2.16.840.1.113883.10.20.22.2.6.1"/><code code="48765-2" codeSystem="2.16.840.1.113883.6.1"/>
        <entry><act classCode="ACT" moodCode="EVN"><templateId root="2.16.840.1.113883.10.20.22.4.30"/><statusCode code="active"/>
          <entryRelationship typeCode="SUBJ"><observation classCode="OBS" moodCode="EVN" negationInd="true">
            <templateId root="2.16.840.1.113883.10.20.22.4.7"/>
            <value xsi:type="CD" code="419199007" codeSystem="2.16.840.1.113883.6.96" displayName="Allergy to substance"/>
            <participant typeCode="CSM"><participantRole classCode="MANU"><playingEntity classCode="MMAT">
              <code nullFlavor="NA"/></playingEntity></participantRole></participant>
          </observation></entryRelationship></act></entry>
        <entry><act classCode="ACT" moodCode="EVN"><templateId root="2.16.840.1.113883.10.20.22.4.30"/><statusCode code="active"/>
          <entryRelationship typeCode="SUBJ"><observation classCode="OBS" moodCode="EVN">
            <templateId root="2.16.840.1.113883.10.20.22.4.7"/>
            <value xsi:type="CD" code="419199007" codeSystem="2.16.840.1.113883.6.96" displayName="Allergy to substance"/>
            <participant typeCode="CSM"><participantRole classCode="MANU"><playingEntity classCode="MMAT">
              <code nullFlavor="UNK"/></playingEntity></participantRole></participant>
          </observation></entryRelationship></act></entry>
        """
        let document = try SourceReader.parse(ImportFixtures.ccd(section: negated), file: "nka.xml", importDate: "2026-12-06")
        XCTAssertEqual(document.records.count, 0)
        XCTAssertEqual(document.skipped.map { String($0.reason.prefix(17)) }, ["no known allergies", "no known allergy "].map { String($0.prefix(17)) })
    }

    func testHL7TimesBecomeCreated() {
        let rows: [(String?, String?)] = [
            ("20120806", "2012-08-06"), ("201208061530-0500", "2012-08-06T20:30:00.000Z"), ("20120806233000+0200", "2012-08-06T21:30:00.000Z"),
            ("201208062330", "2012-08-06"), ("201208", "2012-08-01"), ("2012", "2012-01-01"), ("20121340", nil), ("x2012", nil), ("", nil), (nil, nil),
            ("20120806153000.123-0500", "2012-08-06T20:30:00.000Z"), ("20120231", nil), ("20000229", "2000-02-29"), ("19000229", nil),
        ]
        for (ts, expected) in rows { XCTAssertEqual(CCDAValues.created(ts), expected, ts ?? "nil") }
    }

    func testAnotherPersonIsToldApart() {
        let binder = PatientFacts(name: "陈美玲 (Mei-Ling Chen)", birthDate: "1985-02-14")
        let rows: [(PatientFacts, Bool)] = [
            (PatientFacts(name: "Mei-Ling Chen", birthDate: "1985-02-14"), false),
            (PatientFacts(name: "MEI-LING CHEN", birthDate: nil), false),
            (PatientFacts(name: nil, birthDate: nil), false),
            (PatientFacts(name: "Lily Chen", birthDate: "2015-06-01"), true),
            (PatientFacts(name: "Adam Smith", birthDate: nil), true),
            (PatientFacts(name: "Mei-Ling Chen", birthDate: "1985-02-15"), true),
        ]
        for (other, differs) in rows { XCTAssertEqual(binder.difference(from: other) != nil, differs, "\(other)") }
        XCTAssertNil(PatientFacts().difference(from: PatientFacts(name: "Anyone", birthDate: "2000-01-01")))
    }
}

/// HL7's own "nothing to report" allergy sections (Tests/Fixtures/import/hl7, CC0), inside a
/// document of binder's tests: neither makes an allergy.
final class HL7AllergySectionTests: XCTestCase {
    func section(_ name: String) throws -> String {
        let text = String(decoding: try ImportFixtures.bytes("hl7/" + name), as: UTF8.self)
        let start = try XCTUnwrap(text.range(of: "<section>")), end = try XCTUnwrap(text.range(of: "</section>", options: .backwards))
        return String(text[start.upperBound..<end.lowerBound])
    }

    func testNoKnownAllergiesAndNotAllergicToPeanutsMakeNoAllergy() throws {
        for name in ["No Known Allergies section.xml", "Not Allergic to Peanuts section.xml"] {
            let document = try SourceReader.parse(ImportFixtures.ccd(section: try section(name)), file: name, importDate: "2026-12-06")
            XCTAssertEqual(document.records.map(\.title), [], name)
            XCTAssertEqual(document.skipped.count, 1, name)
            XCTAssertTrue(document.skipped.first?.reason.hasPrefix("no known allerg") == true, "\(name): \(document.skipped)")
        }
    }
}
