import BinderCrypto
import BinderFormat
import Foundation
import XCTest

/// `binder import` with the real binary on a copy of the apps' sample binder: C-CDA and FHIR
/// sources made records in one commit, read back by git and the crypto core alone.
final class ImportCommandTests: MountedFixtureTestCase {
    static let fixtures = Fixtures.directory.appendingPathComponent("import").path

    /// The fixture binder, not mounted (import writes straight into git; a test mounts when it needs to).
    override func setUpWithError() throws {
        binder = try MountedBinder()
        key = try NIP44.ConversationKey(selfOf: try SecretKey(nsec: Fixtures.nsec))
    }

    func fixture(_ name: String) -> String { Self.fixtures + "/" + name }

    func importing(_ arguments: [String]) throws -> BinderRun {
        try binder.sandbox.run(["import"] + arguments + ["--binder", binder.repository, "--passphrase-file", binder.passphraseFile])
    }

    func tree() throws -> String { try git("rev-parse main^{tree}") }

    func codes(_ document: MedicalDocument) -> [String] {
        (document.metadata["codes"]?.arrayValue ?? []).compactMap { $0.objectValue?["code"]?.stringValue }
    }

    func testACCDBecomesARecordPerCodedItemInOneCommit() throws {
        let before = try commits()
        let run = try importing([fixture("ccd.xml")])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.hasPrefix("Imported 12 records (allergies 1, conditions 2, documents 1, immunizations 1, insurance 1, labs 2, "
                                           + "medications 2, procedures 1, visits 1), 1 attachment\n"), run.stdout)
        XCTAssertTrue(run.stdout.contains("Lisinopril 10 MG Oral Tablet: planned (moodCode INT)"), run.stdout)
        XCTAssertEqual(run.stderr, "", "no progress line off a terminal")
        XCTAssertEqual(try commits(), before + 1)
        XCTAssertEqual(try git("log -1 --format=%s main"), "Import records\n")
        // The fixture clone's work tree (ciphertext) follows the commit, as it does a mount's saves.
        XCTAssertEqual(try git("status --porcelain"), "", "the work tree follows the import")
        let rows: [(path: String, code: String, type: String, created: String)] = [
            ("allergies/2010-03-01-penicillin-g-benzathine.json", "7982", "allergy", "2010-03-01"),
            ("conditions/2019-03-12-essential-hypertension.json", "59621000", "condition", "2019-03-12"),
            ("conditions/2005-01-01-mild-persistent-asthma.json", "426979002", "condition", "2005-01-01"),
            ("medications/2020-01-05-metoprolol-tartrate-25-mg-oral-tablet.json", "866924", "medication", "2020-01-05"),
            ("medications/2023-06-10-metoprolol-succinate-25-mg-extended-release.json", "866427", "medication", "2023-06-10"),
            ("immunizations/2024-10-01-influenza-seasonal-injectable-preservative-free.json", "140", "immunization", "2024-10-01"),
            ("labs/2024-10-01-lipid-panel-with-direct-ldl-serum-or-plasma.json", "2093-3", "lab", "2024-10-01"),
            ("labs/2024-10-01-vital-signs.json", "8480-6", "lab", "2024-10-01"),
            ("procedures/2010-03-15-appendectomy.json", "80146002", "procedure", "2010-03-15"),
            ("visits/2024-10-01-office-outpatient-visit-15-minutes.json", "99213", "visit", "2024-10-01"),
        ]
        for row in rows {
            let document = try stored(row.path)
            XCTAssertTrue(codes(document).contains(row.code), "\(row.path): \(codes(document))")
            XCTAssertEqual(document.type, row.type)
            XCTAssertEqual(document.created, row.created)
            // The apps' own keys, with the apps' types.
            XCTAssertEqual(document.metadata["imported"], true)
            XCTAssertEqual(document.metadata["source"], "Good Health Clinic")
            XCTAssertEqual(document.metadata["importDate"]?.stringValue?.count, 10)
            XCTAssertEqual(document.metadata["provenance"]?.objectValue?["sources"]?.arrayValue?.count, 1)
        }
        XCTAssertTrue(try stored("allergies/2010-03-01-penicillin-g-benzathine.json").value.contains("- Reaction: Hives\n- Severity: Moderate"))
        // The document, once, attached to the record that lists what was made from it; its bytes intact.
        let kept = try stored("documents/2024-10-15-continuity-of-care-document-from-good-health-clinic.json")
        XCTAssertTrue(kept.value.contains("- medications/2020-01-05-metoprolol-tartrate-25-mg-oral-tablet.md"), kept.value)
        let sidecar = try XCTUnwrap(kept.children.first?.value)
        XCTAssertEqual(try sidecarBytes("documents/" + sidecar), Array(try Data(contentsOf: URL(fileURLWithPath: fixture("ccd.xml")))))
        let verified = try binder.sandbox.run(["verify", binder.repository, "--passphrase-file", binder.passphraseFile])
        XCTAssertEqual(verified.status, 0, verified.stdout + verified.stderr)
    }

    func sidecarBytes(_ gitPath: String, in repository: String? = nil) throws -> [UInt8] {
        let base64 = try shell("git -C '\(repository ?? binder.repository)' cat-file blob 'main:\(gitPath)' | base64 -w0").stdout
        return try Sidecar.decrypt(try XCTUnwrap(Base64.decode(Array(base64.trimmingCharacters(in: .whitespacesAndNewlines).utf8))), key: key).copyBytes()
    }

    func testTheSameFileAgainAddsNothingAndASecondDownloadOnlyWhatIsNew() throws {
        XCTAssertEqual(try importing([fixture("ccd.xml")]).status, 0)
        let after = try commits()
        let again = try importing([fixture("ccd.xml")])
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertTrue(again.stdout.contains("12 item(s) already in the binder\n"), again.stdout)
        XCTAssertTrue(again.stdout.hasSuffix("Nothing new: the binder is unchanged\n"), again.stdout)
        XCTAssertEqual(try commits(), after)
        // Every document and entry id new, one immunization more.
        let second = try importing([fixture("ccd-second-download.xml"), "--json"])
        XCTAssertEqual(second.status, 0, second.stderr)
        let summary = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(second.stdout.utf8)) as? [String: Any])
        XCTAssertEqual((summary["created"] as? [String])?.sorted(), [
            "documents/2024-11-15-continuity-of-care-document-from-good-health-clinic.md",
            "immunizations/2024-11-05-sars-cov-2-covid-19-vaccine-mrna-spike-protein-lnp-preservative-free-2024-2025-f.md",
        ])
        XCTAssertEqual(summary["unchanged"] as? Int, 11)
        XCTAssertEqual(try commits(), after + 1)
    }

    func testAFHIRBundleAfterTheCCDNamesBothSourcesAndKeepsThePDFIntact() throws {
        XCTAssertEqual(try importing([fixture("ccd.xml")]).status, 0)
        let run = try importing([fixture("fhir-bundle.json")])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("3 record(s) already in the binder now name this source too"), run.stdout)
        let hypertension = try stored("conditions/2019-03-12-essential-hypertension.json")
        XCTAssertEqual(hypertension.metadata["provenance"]?.objectValue?["sources"]?.arrayValue?
            .compactMap { $0.objectValue?["organisation"]?.stringValue }, ["Good Health Clinic", "Riverside Hospital"])
        XCTAssertEqual(hypertension.metadata["source"], "Good Health Clinic")
        let amlodipine = try stored("medications/2024-11-02-amlodipine-5-mg-oral-tablet.json")
        XCTAssertEqual(codes(amlodipine), ["197361"])
        let panel = try stored("labs/2024-11-02-cbc-panel-blood-by-automated-count.json")
        XCTAssertTrue(panel.value.contains("| Hemoglobin [Mass/volume] in Blood | 13.2 g/dL | 12 g/dL – 16 g/dL |"), panel.value)
        XCTAssertNotEqual(try shell("git -C '\(binder.repository)' cat-file -e main:labs/2024-11-02-hemoglobin-mass-volume-in-blood.json").status, 0,
                          "a panel's member is a row of the panel, not a record")
        let letter = try stored("documents/2024-11-04-discharge-letter.json")
        let child = try XCTUnwrap(letter.children.first)
        XCTAssertEqual(child.metadata["format"], "pdf")
        XCTAssertEqual(try sidecarBytes("documents/" + child.value), Array(try Data(contentsOf: URL(fileURLWithPath: fixture("discharge-letter.pdf")))))
    }

    /// Each bad source: a clear error naming the file (and line), exit 1, and the binder as it was,
    /// even when a good source came with it.
    func testBadInputIsRefusedAndNothingIsStored() throws {
        let sandbox = binder.sandbox
        let bomb = try sandbox.file("bomb.xml", "<?xml version=\"1.0\"?>\n<!DOCTYPE d [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;\">]>\n"
                                    + "<ClinicalDocument xmlns=\"urn:hl7-org:v3\"><title>&b;</title></ClinicalDocument>\n")
        let external = try sandbox.file("external.xml", "<?xml version=\"1.0\"?>\n<!DOCTYPE d [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>\n"
                                        + "<ClinicalDocument xmlns=\"urn:hl7-org:v3\"><title>&x;</title></ClinicalDocument>\n")
        let broken = try sandbox.file("broken.xml", "<ClinicalDocument xmlns=\"urn:hl7-org:v3\">\n<title>x\n</ClinicalDocument>\n")
        let badJSON = try sandbox.file("bundle.json", "{\"resourceType\": \"Bundle\",\n\"entry\": [}\n")
        let unknown = try sandbox.file("data.bin", "\u{0}\u{1}\u{2} no format binder imports\n")
        let rows: [(arguments: [String], message: String)] = [
            ([bomb], "bomb.xml, line 2: a DOCTYPE or ENTITY declaration is refused"),
            ([external], "external.xml, line 2: a DOCTYPE or ENTITY declaration is refused"),
            ([fixture("ccd.xml"), broken], "broken.xml, line "),
            ([badJSON], "bundle.json, line 2: malformed JSON"),
            ([unknown], "data.bin: format not recognised"),
            ([fixture("ccd.xml"), "--max-size", "1000"], "ccd.xml: 25508 bytes is over the import limit of 1000 bytes"),
        ]
        let tree = try tree(), count = try commits()
        for row in rows {
            let run = try importing(row.arguments)
            XCTAssertEqual(run.status, 1, "\(row.arguments): \(run.stdout)")
            XCTAssertTrue(run.stderr.contains(row.message) && run.stderr.contains("nothing was imported"), run.stderr)
            XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, run.stderr)
            XCTAssertFalse(run.stderr.contains("root:"), "an external entity was read")
        }
        XCTAssertEqual(try self.tree(), tree)
        XCTAssertEqual(try commits(), count)
    }

    func testADocumentAboutSomeoneElseIsRefusedUnlessForced() throws {
        let text = try String(contentsOfFile: fixture("ccd.xml"), encoding: .utf8)
            .replacingOccurrences(of: "<given>Mei-Ling</given>", with: "<given>Lily</given>")
            .replacingOccurrences(of: "<birthTime value=\"19850214\"/>", with: "<birthTime value=\"20150601\"/>")
        let child = try binder.sandbox.file("child-ccd.xml", text)
        let count = try commits()
        let refused = try importing([child])
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.stderr.contains("child-ccd.xml is about a different person than this binder's patient-info (born 2015-06-01, not 1985-02-14); --force"),
                      refused.stderr)
        XCTAssertEqual(try commits(), count)
        let forced = try importing([child, "--force"])
        XCTAssertEqual(forced.status, 0, forced.stderr)
        XCTAssertEqual(try commits(), count + 1)
    }

    func testDryRunPrintsTheTreeAndStoresNothing() throws {
        let tree = try tree()
        let run = try importing([fixture("ccd.xml"), "--dry-run", "--into", "documents/portal"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.hasPrefix("allergies/\n  2010-03-01-penicillin-g-benzathine.md\nconditions/\n"), run.stdout)
        XCTAssertTrue(run.stdout.contains("documents/portal/\n  2024-10-15-continuity-of-care-document-from-good-health-clinic.md\n"
                                          + "    + continuity-of-care-document-from-good-health-clinic.xml\n"), run.stdout)
        XCTAssertTrue(run.stdout.contains("Would import 12 records"), run.stdout)
        XCTAssertEqual(try self.tree(), tree)
    }

    /// HL7's published documents (CC0, Tests/Fixtures/import/hl7), imported one after another:
    /// every coded item Python's ElementTree finds in them (Tests/interop/ccda_codes.py, which
    /// shares no code with binder) is in a record of its folder with its code.
    func testEveryCodedItemOfHL7sExamplesIsARecordOfItsFolder() throws {
        var decrypted: [String: [String]] = [:]
        for name in ["CCD-1.xml", "CCD-2.xml", "Discharge_Summary.xml", "Referral_Note.xml"] {
            let path = fixture("hl7/" + name)
            let run = try importing([path, "--force"])
            XCTAssertEqual(run.status, 0, "\(name): \(run.stderr)")
            let listed = try BinderSandbox.run(executable: "/usr/bin/env", ["python3", ImportCommandTests.codeLister, path])
            XCTAssertEqual(listed.status, 0, listed.stderr)
            let expected = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [String: [[String]]])
            let stored = try codesByFolder(decrypted: &decrypted)
            var count = 0
            for (folder, codes) in expected {
                for code in codes {
                    count += 1
                    XCTAssertTrue(stored[folder]?.contains(code[1]) == true, "\(name): \(folder) has no record with code \(code[1])")
                }
            }
            XCTAssertGreaterThan(count, 3, name)
        }
    }

    static let codeLister = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("interop/ccda_codes.py").path

    /// The codes of every record on main, by top folder, read by git and the crypto core alone.
    /// `decrypted`: the codes of the records an earlier call read, by blob id (the same bytes),
    /// so that each record is read once however many imports come after it.
    func codesByFolder(decrypted: inout [String: [String]]) throws -> [String: Set<String>] {
        var result: [String: Set<String>] = [:]
        // "MODE TYPE OBJECT\tPATH" per line.
        for line in try git("ls-tree -r main").split(separator: "\n") {
            let fields = line.split(separator: "\t", maxSplits: 1).map(String.init)
            guard fields.count == 2, let object = fields[0].split(separator: " ").last.map(String.init) else { continue }
            let path = fields[1]
            guard path.hasSuffix(".json") && !path.hasSuffix(".meta.json") && path.contains("/") else { continue }
            if decrypted[object] == nil { decrypted[object] = codes(try stored(path)) }
            result[String(path.split(separator: "/")[0]), default: []].formUnion(decrypted[object] ?? [])
        }
        return result
    }

    /// `binder export --format fhir` of a binder (the apps' sample binder with a CCD imported),
    /// imported into a new binder: each record comes back at its path with its title, body, day
    /// and codes, and its attachments with their bytes. Text children (addenda, doctor's notes)
    /// are not made again: their records are compared without them and counted.
    func testAFHIRExportImportedIntoANewBinderGivesTheSameRecords() throws {
        XCTAssertEqual(try importing([fixture("ccd.xml")]).status, 0)
        let exported = binder.sandbox.root.appendingPathComponent("export.fhir.json").path
        let export = try binder.sandbox.run(["export", "--binder", binder.repository, "--passphrase-file", binder.passphraseFile,
                                             "--format", "fhir", "--output", exported])
        XCTAssertEqual(export.status, 0, export.stderr)
        let created = try binder.sandbox.run(["create", "returned", "--patient-name", "-", "--dob", "-", "--passphrase-file", binder.passphraseFile],
                                             stdin: "Mei-Ling Chen\n1985-02-14\n")
        XCTAssertEqual(created.status, 0, created.stderr)
        let returned = binder.sandbox.home.appendingPathComponent("binders/returned").path
        let run = try binder.sandbox.run(["import", exported, "--binder", returned, "--passphrase-file", binder.passphraseFile])
        XCTAssertEqual(run.status, 0, run.stderr)
        var compared = 0, withChildren = 0
        for path in try git("ls-tree -r --name-only main").split(separator: "\n").map(String.init)
        where path.hasSuffix(".json") && !path.hasSuffix(".meta.json") && path.contains("/") {
            let original = try stored(path)
            if original.isAttachmentRef { continue }
            let copyRun = try shell("git -C '\(returned)' show 'main:\(path)'")
            XCTAssertEqual(copyRun.status, 0, "\(path) did not come back")
            guard copyRun.status == 0 else { continue }
            let copy = try MedicalDocument(plaintext: try NIP44.decrypt(payload: copyRun.stdout, key: key).copyBytes())
            let texts = original.children.filter { !$0.isAttachmentRef && !$0.isInlineAttachment }
            if texts.isEmpty {
                XCTAssertEqual(copy.value.trimmingCharacters(in: .whitespacesAndNewlines), original.value.trimmingCharacters(in: .whitespacesAndNewlines), path)
            } else {
                withChildren += 1
            }
            XCTAssertEqual(copy.created?.prefix(10), original.created?.prefix(10), path)
            XCTAssertEqual(Set(codes(copy)), Set(codes(original)), path)
            // Attachments: as many (an inline one of the apps' comes back as a sidecar), bytes intact.
            XCTAssertEqual(copy.children.filter(\.isAttachmentRef).count, original.children.filter { $0.isAttachmentRef || $0.isInlineAttachment }.count, path)
            let folder = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
            for (mine, theirs) in zip(copy.children.filter(\.isAttachmentRef), original.children.filter(\.isAttachmentRef)) {
                XCTAssertEqual(try sidecarBytes(folder + "/" + mine.value, in: returned), try sidecarBytes(folder + "/" + theirs.value), path)
            }
            compared += 1
        }
        XCTAssertGreaterThan(compared, 40)
        XCTAssertLessThan(withChildren, compared / 4, "records with text children (not made again)")
    }

    /// On a terminal (a pty from util-linux's script) a progress line ends with what was done.
    func testATerminalShowsAProgressLine() throws {
        let command = "'\(BinderSandbox.binary)' import '\(fixture("ccd.xml"))' --binder '\(binder.repository)' --passphrase-file '\(binder.passphraseFile)'"
        let run = try shell("script -qec \"\(command)\" /dev/null", environment: ["BINDER_HOME": binder.sandbox.home.path])
        XCTAssertEqual(run.status, 0, run.stdout + run.stderr)
        XCTAssertTrue(run.stdout.contains("Reading 1 of 1: "), run.stdout)
        XCTAssertTrue(run.stdout.contains("\u{1B}[KRead 1 file(s), stored in one commit"), run.stdout)
        XCTAssertTrue(run.stdout.contains("Imported 12 records"), run.stdout)
    }

    /// A folder of a PDF, a photo with a hostile name and a note: a record each in the folder
    /// its subfolder names, in one commit; a dry run first stores nothing; again adds nothing.
    func testAFolderOfFilesBecomesRecordsOnceInOneCommit() throws {
        let folder = binder.sandbox.root.path + "/records"
        try FileManager.default.createDirectory(atPath: folder + "/Labs", withIntermediateDirectories: true)
        let pdf = try Data(contentsOf: URL(fileURLWithPath: fixture("discharge-letter.pdf")))
        try pdf.write(to: URL(fileURLWithPath: folder + "/Labs/cholesterol.pdf"))
        try Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 1, 2, 3]).write(to: URL(fileURLWithPath: folder + "/rash\u{1B}[2J.png"))
        try Data("---\ntags: [knee]\n---\n# Knee\n\nBetter since May.\n".utf8).write(to: URL(fileURLWithPath: folder + "/knee.md"))
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_717_243_200)], ofItemAtPath: folder + "/Labs/cholesterol.pdf")
        let tree = try tree(), count = try commits()
        let dry = try importing([folder, "--dry-run"])
        XCTAssertEqual(dry.status, 0, dry.stderr)
        XCTAssertTrue(dry.stdout.contains("labs/\n  2024-06-01-cholesterol.md\n    + cholesterol.pdf\n"), dry.stdout)
        XCTAssertTrue(dry.stdout.contains("Would import 3 records (documents 2, labs 1), 2 attachments"), dry.stdout)
        XCTAssertFalse(dry.stdout.contains("\u{1B}"), "a control character reached the terminal")
        XCTAssertEqual(try self.tree(), tree)
        let run = try importing([folder])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(try commits(), count + 1)
        let lab = try stored("labs/2024-06-01-cholesterol.json")
        XCTAssertEqual(lab.type, "lab")
        XCTAssertEqual(lab.created, "2024-06-01T12:00:00.000Z")
        XCTAssertEqual(try sidecarBytes("labs/" + (try XCTUnwrap(lab.children.first?.value))), Array(pdf))
        let noteName = try XCTUnwrap(try git("ls-tree --name-only main documents/").split(separator: "\n").first { $0.hasSuffix("-knee.json") })
        let note = try stored(String(noteName))
        XCTAssertEqual(note.value, "# Knee\n\nBetter since May.\n")
        XCTAssertEqual(note.metadata["tags"], .array(["knee"]))
        let again = try importing([folder])
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertTrue(again.stdout.contains("3 item(s) already in the binder\n"), again.stdout)
        XCTAssertEqual(try commits(), count + 1)
    }

    /// `-` reads a card's shc:/ text from standard input (never argv); with the issuer's keys its
    /// signature is checked and said so; another key's card is refused and nothing stored.
    func testACardOnStandardInputIsCheckedAgainstTheIssuersKeys() throws {
        let text = try String(contentsOfFile: fixture("signed-card.shc.txt"), encoding: .utf8)
        let count = try commits()
        let arguments = ["import", "-", "--binder", binder.repository, "--passphrase-file", binder.passphraseFile, "--issuer-keys"]
        let forged = try binder.sandbox.run(arguments + [fixture("other-issuer-keys.json")], stdin: text)
        XCTAssertEqual(forged.status, 1, forged.stdout)
        XCTAssertTrue(forged.stderr.contains("standard input: the health card's signature does not verify") && forged.stderr.contains("nothing was imported"),
                      forged.stderr)
        XCTAssertEqual(try commits(), count)
        let notCard = try binder.sandbox.run(arguments + [fixture("issuer-keys.json")], stdin: "# a note\n")
        XCTAssertEqual(notCard.status, 1)
        XCTAssertTrue(notCard.stderr.contains("standard input: format not recognised"), notCard.stderr)
        let run = try binder.sandbox.run(arguments + [fixture("issuer-keys.json")], stdin: text)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("standard input: signature checked (ES256, the issuer's key)\n"), run.stdout)
        XCTAssertEqual(try commits(), count + 1)
        let kept = try XCTUnwrap(try git("ls-tree --name-only main documents/").split(separator: "\n").first { $0.contains("smart-health-card") && $0.hasSuffix(".json") })
        XCTAssertTrue(try stored(String(kept)).value.contains("- Signature: checked"), String(kept))
        XCTAssertEqual(try git("ls-tree --name-only main immunizations/").split(separator: "\n").filter { $0.contains("cvx-207") }.count, 2)
    }

    /// Apple Health's export.zip: its clinical records in one commit, its samples counted and
    /// left out; an archive with a '../' path refused and nothing stored.
    func testAnAppleHealthExportZipGivesItsClinicalRecords() throws {
        let count = try commits()
        let slip = try importing([fixture("zip-slip.zip")])
        XCTAssertEqual(slip.status, 1)
        XCTAssertTrue(slip.stderr.contains("zip-slip.zip: zip archive refused: an entry's path leads out of the archive"), slip.stderr)
        XCTAssertEqual(try commits(), count)
        let run = try importing([fixture("apple-health-export.zip")])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("export.xml: 1500 samples (steps, heart rate…) are not imported"), run.stdout)
        XCTAssertEqual(try commits(), count + 1)
        XCTAssertTrue(codes(try stored("conditions/2012-04-03-asthma.json")).contains("195967001"))
    }
}
