@testable import BinderImport
import BinderFormat
import XCTest

/// Identity by clinical content: a second download with new ids adds only what is new, the same
/// file again adds nothing, and an item two sources name is one record naming both.
final class ImportPlannerTests: XCTestCase {
    let planner = ImportPlanner(importDate: "2026-12-06")

    /// The binder after `plan` was stored (records only; attachments are not compared).
    func apply(_ plan: ImportPlan, to existing: [ExistingRecord]) -> [ExistingRecord] {
        var records = existing
        for updated in plan.updated {
            if let index = records.firstIndex(where: { $0.gitPath == updated.gitPath }) { records[index] = updated }
        }
        return records + plan.created.map { ExistingRecord(gitPath: $0.gitPath, document: $0.document) }
    }

    func testAFirstImportMakesARecordPerItemAndOneForTheDocument() throws {
        let plan = planner.plan([try ImportFixtures.read("ccd.xml")], existing: [])
        XCTAssertEqual(plan.createdPerFolder.map { "\($0.folder) \($0.count)" },
                       ["allergies 1", "conditions 2", "documents 1", "immunizations 1", "insurance 1", "labs 2", "medications 2", "procedures 1", "visits 1"])
        let hypertension = try XCTUnwrap(plan.created.first { $0.gitPath == "conditions/2019-03-12-essential-hypertension.json" })
        let metadata = hypertension.document.metadata
        XCTAssertEqual(metadata["type"], "condition")
        XCTAssertEqual(metadata["created"], "2019-03-12")
        XCTAssertEqual(metadata["imported"], true)
        XCTAssertEqual(metadata["source"], "Good Health Clinic")
        XCTAssertEqual(metadata["importDate"], "2026-12-06")
        XCTAssertEqual(metadata["status"], "active")
        XCTAssertEqual(metadata["codes"]?.arrayValue?.first?.objectValue?["code"], "59621000")
        let sources = try XCTUnwrap(metadata["provenance"]?.objectValue?["sources"]?.arrayValue)
        XCTAssertEqual(sources.count, 1)
        XCTAssertEqual(sources[0].objectValue?["entryId"], "ab1791b0-5c71-11db-b0de-0800200c9a66")
        XCTAssertEqual(sources[0].objectValue?["author"], "Dr. Henry Seven")
        XCTAssertTrue(hypertension.document.value.hasPrefix("# Essential hypertension\n\n- Status: active\n"))
        // The document itself, once, attached to the record listing what was made from it.
        let kept = try XCTUnwrap(plan.created.first { $0.gitPath.hasPrefix("documents/") })
        XCTAssertEqual(kept.gitPath, "documents/2024-10-15-continuity-of-care-document-from-good-health-clinic.json")
        XCTAssertEqual(kept.attachments.map(\.fileName), ["continuity-of-care-document-from-good-health-clinic.xml"])
        XCTAssertEqual(kept.attachments.first?.bytes, try ImportFixtures.bytes("ccd.xml"))
        XCTAssertTrue(kept.document.value.contains("- conditions/2019-03-12-essential-hypertension.md"), kept.document.value)
        XCTAssertTrue(kept.document.value.contains("## SOCIAL HISTORY\n\nNever smoker."), kept.document.value)
        XCTAssertTrue(kept.document.value.contains("Lisinopril 10 MG Oral Tablet: planned"), kept.document.value)
        XCTAssertEqual(plan.newFolders.sorted(), ["allergies", "conditions", "documents", "immunizations", "insurance", "labs", "medications", "procedures", "visits"])
    }

    func testTheSameFileAgainAddsNothingAndASecondDownloadOnlyWhatIsNew() throws {
        let first = planner.plan([try ImportFixtures.read("ccd.xml")], existing: [])
        let binder = apply(first, to: [])
        let again = planner.plan([try ImportFixtures.read("ccd.xml")], existing: binder)
        XCTAssertTrue(again.isEmpty, "\(again.created.map(\.gitPath)) \(again.updated.map(\.gitPath))")
        XCTAssertEqual(again.unchanged, 12, "11 items and the document")
        // New document and entry ids, a month later, one immunization more.
        let second = planner.plan([try ImportFixtures.read("ccd-second-download.xml")], existing: binder)
        XCTAssertEqual(second.created.map(\.gitPath).sorted(), [
            "documents/2024-11-15-continuity-of-care-document-from-good-health-clinic.json",
            "immunizations/2024-11-05-sars-cov-2-covid-19-vaccine-mrna-spike-protein-lnp-preservative-free-2024-2025-f.json",
        ])
        XCTAssertTrue(second.updated.isEmpty)
    }

    func testAnItemTwoSourcesNameIsOneRecordNamingBoth() throws {
        let plan = planner.plan([try ImportFixtures.read("ccd.xml"), try ImportFixtures.read("fhir-bundle.json")], existing: [])
        let hypertension = plan.created.filter { $0.gitPath.hasPrefix("conditions/") && $0.document.value.contains("59621000") }
        XCTAssertEqual(hypertension.count, 1)
        let organisations = hypertension.first?.document.metadata["provenance"]?.objectValue?["sources"]?.arrayValue?
            .compactMap { $0.objectValue?["organisation"]?.stringValue }
        XCTAssertEqual(organisations, ["Good Health Clinic", "Riverside Hospital"])
        XCTAssertEqual(hypertension.first?.document.metadata["source"], "Good Health Clinic")
        XCTAssertEqual(plan.created.filter { $0.gitPath.hasPrefix("allergies/") }.count, 1)
        XCTAssertEqual(plan.created.filter { $0.gitPath.hasPrefix("insurance/") }.count, 1)
        // Imported later into a binder that has the CCD's records: the existing record gains the source.
        let binder = apply(planner.plan([try ImportFixtures.read("ccd.xml")], existing: []), to: [])
        let later = planner.plan([try ImportFixtures.read("fhir-bundle.json")], existing: binder)
        XCTAssertEqual(Set(later.updated.map(\.gitPath)), ["conditions/2019-03-12-essential-hypertension.json",
                                                           "allergies/2010-03-01-penicillin-g-benzathine.json",
                                                           "insurance/2024-10-15-good-health-insurance.json"])
        let twice = planner.plan([try ImportFixtures.read("fhir-bundle.json")], existing: apply(later, to: binder))
        XCTAssertTrue(twice.isEmpty)
    }

    func testIdentityTable() {
        func id(_ folder: String, _ codes: [(String, String)], day: String? = nil, title: String = "x", dose: String? = nil) -> ClinicalIdentity {
            ClinicalIdentity(folder: folder, codes: codes.map { ClinicalCode(system: $0.0, code: $0.1) }, day: day, title: title, distinguishing: dose)
        }
        let rx = "rxnorm", sct = "sct", icd = "icd"
        let rows: [(ClinicalIdentity, ClinicalIdentity, Bool, String)] = [
            (id("medications", [(rx, "866924")]), id("medications", [(rx, "866427")]), false, "tartrate is not succinate"),
            (id("medications", [(rx, "866924")], dose: "25 mg"), id("medications", [(rx, "866924")], dose: "50 mg"), false, "another dose"),
            (id("medications", [(rx, "866924")], dose: "25 mg"), id("medications", [(rx, "866924")]), true, "a dose on one side only"),
            (id("conditions", [(sct, "1"), (icd, "I10")]), id("conditions", [(icd, "I10")]), true, "a shared code"),
            (id("conditions", [(sct, "1")], day: "2020-01-01"), id("conditions", [(sct, "1")], day: "2024-01-01"), true, "a condition on another day"),
            (id("labs", [(sct, "1")], day: "2020-01-01"), id("labs", [(sct, "1")], day: "2024-01-01"), false, "a panel on another day"),
            (id("conditions", [(sct, "1")]), id("allergies", [(sct, "1")]), false, "another folder"),
            (id("conditions", [], title: "Back acne"), id("conditions/skin", [(sct, "2")], title: "back  ACNE"), true, "the same name, uncoded"),
            (id("conditions", [(sct, "1")], title: "Asthma"), id("conditions", [(sct, "2")], title: "Asthma"), false, "same name, codes differ"),
            (id("labs", [("loinc", "24323-8"), ("loinc", "2345-7")], day: "2024-01-01"),
             id("labs", [("loinc", "51990-0"), ("loinc", "2345-7")], day: "2024-01-01"), false, "two panels of a day sharing a row"),
            (id("labs", [("loinc", "24323-8"), ("loinc", "2345-7")], day: "2024-01-01"),
             id("labs", [("loinc", "24323-8")], day: "2024-01-01"), true, "a panel by its own code"),
        ]
        for (a, b, same, what) in rows {
            XCTAssertEqual(a.isSameItem(as: b), same, what)
            XCTAssertEqual(b.isSameItem(as: a), same, what + " (reversed)")
            // The index finds exactly what a scan finds.
            var index = IdentityIndex()
            index.insert(a, at: 0)
            XCTAssertEqual(index.first(sameAs: b) != nil, same, what + " (index)")
        }
    }
}

/// `patient-info` gains what it lacks from a source's patient, and nothing it has is changed.
final class PatientInfoFillTests: XCTestCase {
    func info(_ value: String) -> ExistingRecord {
        ExistingRecord(gitPath: "patient-info.json", document: MedicalDocument(value: value, metadata: ["type": "patient-info", "created": "2025-01-01"]))
    }

    func testWhatPatientInfoLacksIsFilledAndNothingElse() throws {
        let source = try ImportFixtures.read("fhir-bundle.json")
        let planner = ImportPlanner(importDate: "2026-12-06")
        let rows: [(String, String?)] = [
            ("# Mei-Ling Chen\n", "# Mei-Ling Chen\n\nDOB: 1985-02-14\n"),
            ("", "# Mei-Ling Chen\n\nDOB: 1985-02-14\n"),
            ("DOB: 1985-02-14\nAllergic to cats.", "# Mei-Ling Chen\n\nDOB: 1985-02-14\nAllergic to cats."),
            ("# 陈美玲 (Mei-Ling Chen)\n\nDOB: 1985-02-14\n", nil),
            ("# Mei\n\nDate of birth: 1985-02-14 (as written)\n", nil),
        ]
        for (value, expected) in rows {
            let filled = planner.fillPatientInfo([info(value)], from: [source])
            XCTAssertEqual(filled?.document.value, expected, value)
            XCTAssertEqual(filled.map { _ in "patient-info.json" }, expected.map { _ in "patient-info.json" })
        }
    }
}

/// A record past the format's 65,535 bytes keeps its details in an attachment, so the import
/// stores instead of failing at the commit.
final class OversizedRecordTests: XCTestCase {
    func testABodyPastTheLimitGoesIntoAnAttachment() throws {
        var source = try ImportFixtures.read("ccd.xml")
        let rows = (0..<3000).map { "| Test \($0) | \($0) mg/dL | 0 – 10000 mg/dL |  |" }.joined(separator: "\n")
        source.records[0].body = "| Test | Value | Reference range | Flag |\n|---|---|---|---|\n" + rows + "\n"
        let plan = ImportPlanner(importDate: "2026-12-06").plan([source], existing: [])
        let record = try XCTUnwrap(plan.created.first { $0.attachments.contains { $0.fileName == "details.md" } })
        XCTAssertLessThanOrEqual(record.document.serializedBytes().count, 65_535)
        XCTAssertTrue(record.document.value.contains("attachment details.md"))
        let details = try XCTUnwrap(record.attachments.first { $0.fileName == "details.md" })
        XCTAssertTrue(String(decoding: details.bytes, as: UTF8.self).contains("| Test 2999 | 2999 mg/dL |"))
        XCTAssertNotNil(record.document.metadata["codes"], "the codes stay in the record")
    }
}

/// A name an attachment's reference holds is taken: a new record never replaces it.
final class TakenNamesTests: XCTestCase {
    func testARecordIsNeverNamedAsAnAttachmentsReference() throws {
        let reference = MedicalDocument(value: "2024-10-15-continuity-of-care-document-from-good-health-clinic.jpg.enc",
                                        metadata: ["type": "attachment_ref", "created": "2024-10-15", "format": "jpeg"])
        let existing = [ExistingRecord(gitPath: "documents/2024-10-15-continuity-of-care-document-from-good-health-clinic.json", document: reference)]
        let plan = ImportPlanner(importDate: "2026-12-06").plan([try ImportFixtures.read("ccd.xml")], existing: existing)
        XCTAssertTrue(plan.created.contains { $0.gitPath == "documents/2024-10-15-continuity-of-care-document-from-good-health-clinic-2.json" })
        XCTAssertFalse(plan.created.contains { $0.gitPath == existing[0].gitPath })
        XCTAssertTrue(plan.updated.isEmpty)
        XCTAssertFalse(plan.newFolders.contains("documents"))
    }

    /// A document that cannot be read (damaged, another key's) keeps its name and is never
    /// replaced, patient-info included; sidecars and folders' display data count as names in use.
    func testUnreadableDocumentsAndOtherFilesKeepTheirNames() throws {
        let unreadable = MedicalDocument(value: "", metadata: ["type": "unreadable", "created": ""])
        let existing = [
            ExistingRecord(gitPath: "patient-info.json", document: unreadable),
            ExistingRecord(gitPath: "conditions/2019-03-12-essential-hypertension.json", document: unreadable),
            ExistingRecord(gitPath: "conditions/.meta.json", document: unreadable),
        ]
        let plan = ImportPlanner(importDate: "2026-12-06").plan([try ImportFixtures.read("ccd.xml")], existing: existing)
        XCTAssertTrue(plan.updated.isEmpty, "\(plan.updated.map(\.gitPath))")
        XCTAssertTrue(plan.created.contains { $0.gitPath == "conditions/2019-03-12-essential-hypertension-2.json" })
        XCTAssertFalse(plan.created.contains { existing.map(\.gitPath).contains($0.gitPath) })
        XCTAssertFalse(plan.newFolders.contains("conditions"), "its .meta.json is there")
    }
}

/// A newer version from the same organisation brings the record it made up to date; one the
/// patient edited since keeps their words and gets the new version beside it as a conflict copy;
/// an older version changes nothing.
final class NewerVersionTests: XCTestCase {
    let planner = ImportPlanner(importDate: "2026-12-06", now: 1_796_342_400)  // 2026-12-04 00:00 UTC

    /// The binder after the first CCD, and the second download with hypertension resolved.
    func binderAndResolvedDownload(edited: Bool, secondIsOlder: Bool = false) throws -> ([ExistingRecord], SourceDocument) {
        let first = planner.plan([try ImportFixtures.read("ccd.xml")], existing: [])
        var binder = first.created.map { ExistingRecord(gitPath: $0.gitPath, document: $0.document) }
        if edited, let index = binder.firstIndex(where: { $0.gitPath == "conditions/2019-03-12-essential-hypertension.json" }) {
            binder[index].document.value += "\nMy own note.\n"
            binder[index].document.metadata["updated"] = "2025-01-01T10:00:00.000Z"
        }
        var second = try ImportFixtures.read("ccd-second-download.xml")
        let index = try XCTUnwrap(second.records.firstIndex { $0.title == "Essential hypertension" })
        second.records[index].status = "completed"
        second.records[index].body = second.records[index].body.replacingOccurrences(of: "Status: active", with: "Status: completed")
        if secondIsOlder {
            for i in second.records.indices { second.records[i].source.documentDate = "2024-01-01" }
        }
        return (binder, second)
    }

    func testAnUneditedRecordIsBroughtUpToDate() throws {
        let (binder, second) = try binderAndResolvedDownload(edited: false)
        let plan = planner.plan([second], existing: binder)
        let updated = try XCTUnwrap(plan.updated.first { $0.gitPath == "conditions/2019-03-12-essential-hypertension.json" })
        XCTAssertEqual(updated.document.metadata["status"], "completed")
        XCTAssertTrue(updated.document.value.contains("- Status: completed"))
        let sources = updated.document.metadata["provenance"]?.objectValue?["sources"]?.arrayValue ?? []
        XCTAssertEqual(sources.count, 1)
        XCTAssertEqual(sources.first?.objectValue?["documentId"], "2.16.840.1.113883.19.5.99999.1^DOC-0002")
        XCTAssertFalse(plan.created.contains { $0.gitPath.contains("(conflict") })
    }

    func testAnEditedRecordKeepsItsWordsAndGetsAConflictCopy() throws {
        let (binder, second) = try binderAndResolvedDownload(edited: true)
        let plan = planner.plan([second], existing: binder)
        XCTAssertFalse(plan.updated.contains { $0.gitPath == "conditions/2019-03-12-essential-hypertension.json" })
        let copy = try XCTUnwrap(plan.created.first { $0.gitPath.hasPrefix("conditions/") })
        XCTAssertEqual(copy.gitPath, "conditions/2019-03-12-essential-hypertension (conflict 2026-12-04 0000).json")
        XCTAssertEqual(copy.document.metadata["conflict_of"], "conditions/2019-03-12-essential-hypertension.json")
        XCTAssertTrue(copy.document.value.contains("- Status: completed"))
    }

    func testAnOlderVersionChangesNothing() throws {
        let (binder, second) = try binderAndResolvedDownload(edited: false, secondIsOlder: true)
        let plan = planner.plan([second], existing: binder)
        XCTAssertTrue(plan.updated.isEmpty)
        XCTAssertFalse(plan.created.contains { $0.gitPath.hasPrefix("conditions/") })
    }
}
