import BinderCrypto
import BinderFormat
import Foundation
import XCTest

/// `binder export` of the apps' sample binder, checked by tools that share no code with binder:
/// poppler (pdftotext, pdfinfo, pdfimages), Python's html.parser, and fhir.resources.
final class ExportTests: XCTestCase {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("interop/check_export.py").path
    static let manifest = Fixtures.directory.appendingPathComponent("sample-binder.manifest.json").path
    /// JPEG sidecars (4: three photos, one photo child) and the inline PNG child of the lipid panel.
    static let fixtureImages = 5

    var binder: MountedBinder!

    override func setUpWithError() throws {
        binder = try MountedBinder()
    }

    override func tearDown() {
        binder?.unmount()
        binder = nil
    }

    func export(_ arguments: [String]) throws -> BinderRun {
        try binder.sandbox.run(["export", "--binder", binder.repository, "--passphrase-file", binder.passphraseFile] + arguments)
    }

    func output(_ name: String) -> String { binder.sandbox.root.appendingPathComponent(name).path }

    /// The checker's JSON answer.
    func check(_ arguments: [String]) throws -> [String: Any] {
        let run = try BinderSandbox.run(executable: "/usr/bin/env", ["python3", Self.script] + arguments)
        XCTAssertEqual(run.status, 0, run.stderr)
        return try XCTUnwrap(JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], run.stdout + run.stderr)
    }

    func mode(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    func testPDFHoldsEveryRecordAsTextWithItsPictures() throws {
        try XCTSkipIf(try shell("command -v pdftotext pdfimages pdfinfo").status != 0, "poppler-utils missing (scripts/setup)")
        let file = output("records.pdf")
        let run = try export(["--format", "pdf", "--output", file])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains(file), run.stdout)
        XCTAssertEqual(try mode(file), 0o600)
        let report = try check(["pdf", file, Self.manifest])
        XCTAssertEqual(report["missing"] as? [String], [], "text pdftotext did not find")
        XCTAssertEqual(report["images"] as? Int, Self.fixtureImages)
        let pages = try XCTUnwrap(report["pages"] as? Int)
        XCTAssertGreaterThan(pages, 3)
        // Every page's footer: the patient's name, then its number of the total.
        XCTAssertEqual(report["footers"] as? Int, pages)
        XCTAssertTrue((report["title"] as? String ?? "").contains("Mei-Ling Chen"))
        let text = try shell("pdftotext -enc UTF-8 '\(file)' -").stdout
        for fragment in ["陈美玲 (Mei-Ling Chen)", "1985-02-14", "Emergency contact", "Contents", "2025-03-03-recording.m4a",
                         "audio/mp4", "Peanuts 🥜", "背中のにきびは改善"] {
            XCTAssertTrue(text.contains(fragment), "PDF text lacks \(fragment)")
        }
    }

    /// Pango and Cairo are opened when a PDF is drawn, not at start (CPangoCairo's shim.h): on a
    /// machine without them (here /dev/null over the library's file, in a mount namespace of the
    /// export's own) the PDF export fails with one line naming what is missing and writes
    /// nothing, and the exports that need no drawing still work.
    func testWithoutPangoThePDFExportSaysSoAndTheOthersWork() throws {
        let found = try shell("ldconfig -p | awk '$1 == \"libpangocairo-1.0.so.0\" { print $NF; exit }'").stdout
        let library = found.trimmingCharacters(in: .whitespacesAndNewlines)
        try XCTSkipIf(library.isEmpty || (try shell("command -v unshare").status) != 0, "no libpangocairo or unshare here")
        func exportWithoutPango(_ arguments: [String]) throws -> BinderRun {
            try BinderSandbox.run(executable: "/usr/bin/unshare",
                                  ["-m", "sh", "-c", "mount --bind /dev/null \"$0\" && exec \"$@\"", library, BinderSandbox.binary,
                                   "export", "--binder", binder.repository, "--passphrase-file", binder.passphraseFile] + arguments,
                                  environment: ["BINDER_HOME": binder.sandbox.home.path])
        }
        let pdf = output("records.pdf")
        let refused = try exportWithoutPango(["--format", "pdf", "--output", pdf])
        assertFails(refused, mentioning: "Pango, Cairo and libjpeg are needed to draw")
        XCTAssertFalse(FileManager.default.fileExists(atPath: pdf))
        let html = output("records.html")
        let written = try exportWithoutPango(["--format", "html", "--output", html])
        XCTAssertEqual(written.status, 0, written.stderr)
        XCTAssertTrue(try String(contentsOfFile: html, encoding: .utf8).contains("Mei-Ling Chen"))
    }

    func testHTMLIsOneFileWithEveryRecordAndNothingActive() throws {
        let file = output("records.html")
        let run = try export(["--format", "html", "--output", file])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(try mode(file), 0o600)
        let report = try check(["html", file, Self.manifest])
        XCTAssertEqual(report["missing"] as? [String], [])
        XCTAssertEqual(report["records"] as? Int, report["expected"] as? Int)
        XCTAssertEqual(report["active"] as? [String], [])
        let images = try XCTUnwrap(report["images"] as? [String])
        XCTAssertEqual(images.count, Self.fixtureImages)
        XCTAssertTrue(images.allSatisfy { $0.hasPrefix("data:image/") }, "\(images)")
        // Text children (addenda, notes, a correction nested in an addendum), each its own article.
        XCTAssertEqual(report["children"] as? Int, 15)
        let html = try String(contentsOfFile: file, encoding: .utf8)
        XCTAssertTrue(html.contains("<table>") && html.contains("<li>") && html.contains("@media print"))
    }

    /// The templates' header lines ("Date: …", "Provider: …") are one line each in the HTML
    /// and the PDF (markdown alone would join them into one), and the record stays as written.
    func testTemplateHeaderLinesAreSeparateLinesInHTMLAndPDF() throws {
        let created = try binder.sandbox.run(["new", "visits", "--title", "-", "--binder", binder.repository,
                                              "--passphrase-file", binder.passphraseFile], stdin: "Knee check\n")
        XCTAssertEqual(created.status, 0, created.stderr)
        let day = String(ISO8601DateFormatter().string(from: Date()).prefix(10))
        let html = output("visit.html")
        XCTAssertEqual(try export(["--format", "html", "--output", html, "visits/\(day)-knee-check.md"]).status, 0)
        let page = try String(contentsOfFile: html, encoding: .utf8)
        XCTAssertTrue(page.contains("<p>Date: \(day)<br>Provider:"), page)
        try XCTSkipIf(try shell("command -v pdftotext").status != 0, "poppler-utils missing (scripts/setup)")
        let pdf = output("visit.pdf")
        let exported = try export(["--format", "pdf", "--output", pdf, "visits/\(day)-knee-check.md"])
        XCTAssertEqual(exported.status, 0, exported.stderr)
        let lines = try shell("pdftotext -enc UTF-8 '\(pdf)' -").stdout.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        XCTAssertTrue(lines.contains("Date: \(day)"), "\(lines)")
        XCTAssertTrue(lines.contains("Provider:"), "\(lines)")
    }

    func testFHIRBundleValidatesAndMapsCategories() throws {
        try XCTSkipIf(try shell("python3 -c 'import fhir.resources'").status != 0, "fhir.resources missing (scripts/setup)")
        let file = output("records.fhir.json")
        let run = try export(["--format", "fhir", "--output", file])
        XCTAssertEqual(run.status, 0, run.stderr)
        let report = try check(["fhir", file])
        XCTAssertEqual(report["type"] as? String, "document")
        XCTAssertEqual(report["first"] as? String, "Composition")
        let resources = try XCTUnwrap(report["resources"] as? [String: Int])
        // From the manifest: records typed condition, medication, allergy, immunization; the
        // lipid panel's table is structured; every attachment is a DocumentReference.
        XCTAssertEqual(resources["Patient"], 1)
        XCTAssertEqual(resources["Condition"], 2)
        XCTAssertEqual(resources["MedicationStatement"], 7)
        XCTAssertEqual(resources["AllergyIntolerance"], 5)
        XCTAssertEqual(resources["Immunization"], 4)
        XCTAssertEqual(resources["Observation"], 1)
        XCTAssertEqual(report["sections"] as? [String], ["Visits", "Labs", "Conditions", "Medications", "Allergies",
                                                         "Immunizations", "Procedures", "My info"])
        let patient = try XCTUnwrap(report["patient"] as? [String: Any])
        XCTAssertEqual(patient["birthDate"] as? String, "1985-02-14")
        let bundle = try String(contentsOfFile: file, encoding: .utf8)
        XCTAssertTrue(bundle.contains("\"contentType\" : \"image/jpeg\""), "attachments inline")
    }

    func testSelectionByPathCategoryAndDate() throws {
        let file = output("labs.html")
        var run = try export(["--format", "html", "--output", file, "--category", "labs", "--since", "2025-03-14"])
        XCTAssertEqual(run.status, 0, run.stderr)
        var html = try String(contentsOfFile: file, encoding: .utf8)
        XCTAssertEqual(html.components(separatedBy: "<article class=\"record\"").count - 1, 3, "labs 16, 20 and 25 March")
        XCTAssertFalse(html.contains("Lipid Panel"))
        run = try export(["--format", "html", "--output", file, "visits/2025-02-25-annual-physical.md", "conditions/back-acne"])
        XCTAssertEqual(run.status, 0, run.stderr)
        html = try String(contentsOfFile: file, encoding: .utf8)
        XCTAssertEqual(html.components(separatedBy: "<article class=\"record\"").count - 1, 8)
        XCTAssertTrue(html.contains("Annual Physical") && !html.contains("Knee pain consult"))
        assertFails(try export(["--format", "html", "--output", file, "visits/nothing-here.md"]), mentioning: "no such record or folder")
        XCTAssertEqual(try export(["--format", "html", "--since", "2025-13-01"]).status, 64)
        XCTAssertEqual(try export(["--format", "docx"]).status, 64)
    }

    /// A selection reads only what it names: a file that cannot be read (a sidecar whose
    /// authentication fails) stops an export of everything, naming it, but not one of a
    /// category or of records beside it.
    func testUnselectedRecordsAreNotRead() throws {
        let own = try NIP44.ConversationKey(selfOf: try SecretKey(nsec: Fixtures.nsec))
        var tampered = try Sidecar.encrypt(Array("photo ".utf8) + [UInt8](repeating: 7, count: 5000), key: own)
        tampered[400] ^= 0x01
        let url = URL(fileURLWithPath: binder.repository).appendingPathComponent("visits/2025-01-05-tampered.jpg.enc")
        try Data(tampered).write(to: url)
        let commit = try shell("git add -A && git -c user.name=t -c user.email=t@t commit -qm 'Add entry'", in: binder.repository)
        XCTAssertEqual(commit.status, 0, commit.stderr)
        let file = output("some.html")
        assertFails(try export(["--format", "html", "--output", file]), mentioning: "visits/2025-01-05-tampered.jpg")
        var run = try export(["--format", "html", "--output", file, "--category", "labs"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(try String(contentsOfFile: file, encoding: .utf8).contains("Lipid Panel"))
        run = try export(["--format", "html", "--output", file, "visits/2025-02-25-annual-physical.md", "labs"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let html = try String(contentsOfFile: file, encoding: .utf8)
        XCTAssertTrue(html.contains("Annual Physical") && html.contains("Lipid Panel") && !html.contains("Knee pain consult"))
    }

    func testDefaultNameIsThePatientAndTheDayWhileMounted() throws {
        try binder.mount()
        let folder = output("out")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let run = try shell("BINDER_HOME='\(binder.sandbox.home.path)' '\(BinderSandbox.binary)' export --binder '\(binder.repository)' "
                            + "--passphrase-file '\(binder.passphraseFile)' --format html", in: folder)
        XCTAssertEqual(run.status, 0, run.stderr)
        let day = String(ISO8601DateFormatter().string(from: Date()).prefix(10))
        let name = "陈美玲-Mei-Ling-Chen-records-\(day).html"
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder), [name])
        XCTAssertTrue(run.stdout.contains(folder + "/" + name), run.stdout)
        XCTAssertEqual(try mode(folder + "/" + name), 0o600)
        // A second export does not replace the first.
        XCTAssertEqual(try shell("BINDER_HOME='\(binder.sandbox.home.path)' '\(BinderSandbox.binary)' export --binder '\(binder.repository)' "
                                 + "--passphrase-file '\(binder.passphraseFile)' --format fhir", in: folder).status, 0)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder).count, 2)
    }

    /// The manifest's canaries (strings found only in plaintext) are nowhere in the sandbox
    /// after exports to all three formats (state folder, temporary and cache folders, the clone's
    /// work tree), except in the files asked for.
    func testNothingDecryptedIsWrittenButTheExport() throws {
        let canaries = try XCTUnwrap(try Fixtures.manifest()["canaries"] as? [String])
        let scratch = output("scratch")
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        let environment = ["TMPDIR": scratch, "XDG_CACHE_HOME": scratch + "/cache", "HOME": scratch + "/home"]
        var exports: [String] = []
        for format in ["pdf", "html", "fhir"] {
            let file = output("export.\(format)")
            let run = try binder.sandbox.run(["export", "--binder", binder.repository, "--passphrase-file", binder.passphraseFile,
                                              "--format", format, "--output", file], environment: environment)
            XCTAssertEqual(run.status, 0, run.stderr)
            XCTAssertFalse(canaries.contains { run.stdout.contains($0) || run.stderr.contains($0) }, run.stdout)
            exports.append(file)
        }
        XCTAssertTrue(try String(contentsOfFile: exports[1], encoding: .utf8).contains(canaries[0]), "the canary test can fail")
        for canary in canaries {
            let found = try shell("grep -rlF -- '\(canary)' '\(binder.sandbox.root.path)' | grep -v -e '/export\\.' || true").stdout
            XCTAssertEqual(found, "", "\(canary) written outside the exports")
        }
    }

    func testHostileRecordTextStaysText() throws {
        try binder.mount()
        let hostile = """
        # <script>alert('title')</script>

        <script>alert(1)</script><img src=x onerror=alert(2)>
        [click](javascript:alert(3)) [ok](https://example.org/a"onclick="alert(4)) <iframe src="https://x"></iframe>
        ![pic](https://tracker.example/p.png)

        | a | <b onmouseover=alert(5)>b</b> |
        |---|---|
        | 1 | 2 |
        """
        try Data(hostile.utf8).write(to: URL(fileURLWithPath: binder.path("visits/hostile.md")))
        let file = output("hostile.html")
        let run = try export(["--format", "html", "--output", file, "visits/hostile.md"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let report = try check(["html", file, Self.manifest])
        XCTAssertEqual(report["active"] as? [String], [])
        XCTAssertEqual(report["images"] as? [String], [])
        let html = try String(contentsOfFile: file, encoding: .utf8)
        XCTAssertTrue(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "shown as text")
        let pdf = output("hostile.pdf")
        XCTAssertEqual(try export(["--format", "pdf", "--output", pdf, "visits/hostile.md"]).status, 0)
        if try shell("command -v pdftotext").status == 0 {
            XCTAssertTrue(try shell("pdftotext -enc UTF-8 '\(pdf)' -").stdout.contains("<script>alert(1)</script>"))
        }
    }
}
