@testable import BinderImport
import Foundation
import XCTest

/// Formats recognised by content, and every kind of bad input refused with the file and the
/// line named, before anything could be stored.
final class SourceReaderTests: XCTestCase {
    func parse(_ text: String, file: String = "input") throws(ImportError) -> SourceDocument {
        try SourceReader.parse(Array(text.utf8), file: file, importDate: "2026-12-06")
    }

    func testFormatsAreRecognisedByContentNotName() throws {
        XCTAssertEqual(try ImportFixtures.read("ccd.xml").format, .ccda)
        XCTAssertEqual(try ImportFixtures.read("fhir-bundle.json").format, .fhir)
        XCTAssertEqual(try ImportFixtures.read("resources.ndjson").format, .fhir)
        // The same CCD under a name that says otherwise.
        let renamed = try SourceReader.parse(try ImportFixtures.bytes("ccd.xml"), file: "photo.jpg", importDate: "2026-12-06")
        XCTAssertEqual(renamed.format, .ccda)
        XCTAssertEqual(try parse(#"{"resourceType": "Condition", "code": {"text": "Asthma"}}"#).records.map(\.title), ["Asthma"])
    }

    func testWhatIsNeitherCCDANorFHIRIsRefusedByName() {
        let rows: [(String, String)] = [
            ("", "empty"),
            ("hello, this is a note", "plain text"),
            ("<html><body>portal page</body></html>", "HTML"),
            (#"<ClinicalDocument xmlns="urn:example:other"/>"#, "another namespace"),
            ("<ClinicalDocument/>", "no namespace"),
            (#"{"name": "not a resource"}"#, "JSON without resourceType"),
            (#"[{"resourceType": "Patient"}]"#, "a JSON array"),
            ("%PDF-1.4 ...", "a PDF"),
        ]
        for (text, what) in rows {
            XCTAssertThrowsError(try parse(text, file: "x.dat"), what) { error in
                XCTAssertEqual(error as? ImportError, .notRecognised(file: "x.dat"), what)
                XCTAssertTrue("\(error)".contains("x.dat: format not recognised"), what)
            }
        }
    }

    func testDoctypeAndEntityDeclarationsAreRefusedBeforeParsing() {
        let laughs = """
        <?xml version="1.0"?>
        <!DOCTYPE lolz [
         <!ENTITY lol "lol">
         <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
         <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
         <!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
        ]>
        <ClinicalDocument xmlns="urn:hl7-org:v3"><title>&lol9;</title></ClinicalDocument>
        """
        let external = """
        <?xml version="1.0"?>
        <!DOCTYPE ClinicalDocument [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
        <ClinicalDocument xmlns="urn:hl7-org:v3"><title>&secret;</title></ClinicalDocument>
        """
        let rows: [(String, Int, String)] = [
            (laughs, 2, "an entity-expansion bomb"),
            (external, 2, "an external entity"),
            ("<?xml version=\"1.0\"?>\n\n<!doctype html>\n<ClinicalDocument xmlns=\"urn:hl7-org:v3\"/>", 3, "a lowercase doctype"),
            ("<ClinicalDocument xmlns=\"urn:hl7-org:v3\">\n<!ENTITY x \"y\">\n</ClinicalDocument>", 2, "an ENTITY in the body"),
        ]
        for (text, line, what) in rows {
            XCTAssertThrowsError(try parse(text, file: "bomb.xml"), what) { error in
                XCTAssertEqual(error as? ImportError, .declarationRefused(file: "bomb.xml", line: line), what)
            }
        }
    }

    func testMalformedXMLAndJSONNameTheFileAndLine() {
        XCTAssertThrowsError(try parse("<ClinicalDocument xmlns=\"urn:hl7-org:v3\">\n<title>x</titel>\n</ClinicalDocument>", file: "bad.xml")) { error in
            guard case .malformedXML(let file, let line, _, _)? = error as? ImportError else { return XCTFail("\(error)") }
            XCTAssertEqual(file, "bad.xml")
            XCTAssertEqual(line, 2)
        }
        XCTAssertThrowsError(try parse("{\n \"resourceType\": \"Bundle\",\n \"entry\": [,]\n}", file: "bad.json")) { error in
            guard case .malformedJSON(let file, let line, _)? = error as? ImportError else { return XCTFail("\(error)") }
            XCTAssertEqual(file, "bad.json")
            XCTAssertEqual(line, 3)
        }
        let ndjson = #"{"resourceType": "Patient"}"# + "\n" + #"{"resourceType": "Condition"}"# + "\n" + #"{"resourceType": "#
        XCTAssertThrowsError(try parse(ndjson, file: "bulk.ndjson")) { error in
            guard case .malformedJSON(let file, let line, _)? = error as? ImportError else { return XCTFail("\(error)") }
            XCTAssertEqual(file, "bulk.ndjson")
            XCTAssertEqual(line, 3)
        }
    }

    /// Hostile or broken XML that crashed a parser before (Foundation's XMLParser handed a
    /// processing instruction's missing data to strlen; it trapped on names not UTF-8): each row
    /// is refused as malformed, naming the line and saying why in words, and nothing traps.
    func testBrokenXMLIsRefusedWithTheLineAndAReasonInWords() {
        let open = "<ClinicalDocument xmlns=\"urn:hl7-org:v3\">"
        let rows: [(text: String, line: Int, words: String)] = [
            ("<?R?>!", 1, "the document does not end where it should"),
            ("<?R?>", 1, "the document does not end where it should"),
            (open + "\n<title>x</titel>\n</ClinicalDocument>", 2, "an end tag does not match its start tag"),
            (open + "\n<title>x", 2, "the document does not end where it should"),
            (open + "</ClinicalDocument>\n<extra/>", 2, "the document does not end where it should"),
            (open + "\n<title>&nbsp;</title></ClinicalDocument>", 2, "an entity reference (&name;) that is not one of XML's five"),
            (open + "\n<code code=\"1\" code=\"2\"/></ClinicalDocument>", 2, "an attribute written twice on one element"),
            (open + "\n<code code=1/></ClinicalDocument>", 2, "an attribute's value is not in quotes"),
            (open + "\n<x:code/></ClinicalDocument>", 2, "a namespace prefix that is not declared"),
            (open + "\n<title>&#0;</title></ClinicalDocument>", 2, "a character XML does not allow"),
            (open + "\n<!-- never closed", 2, "a comment that is not closed"),
        ]
        for row in rows {
            XCTAssertThrowsError(try parse(row.text, file: "broken.xml"), row.text) { error in
                guard case .malformedXML(let file, let line, _, let reason)? = error as? ImportError else { return XCTFail("\(row.text): \(error)") }
                XCTAssertEqual(file, "broken.xml", row.text)
                XCTAssertEqual(line, row.line, row.text)
                XCTAssertTrue(reason.hasPrefix(row.words) && reason.hasSuffix(")") && reason.contains("libxml2 error "), "\(row.text): \(reason)")
            }
        }
    }

    /// Bytes libxml2 takes for another encoding (UCS-4 or UTF-16 by their first bytes, NULs
    /// being valid UTF-8) fail its conversion, which it reports outside the reader, quoting four
    /// of the document's bytes, to stderr by default: the terminal, or a mount's log. Nothing of
    /// it reaches stderr; the document is refused as malformed.
    func testEncodingFailuresPrintNothingOfTheDocument() throws {
        let rows: [(bytes: [UInt8], what: String)] = [
            ([0x3C, 0, 0, 0, 0x61, 0, 0, 0, 0x2F, 0, 0, 0, 0x3E, 0, 0, 0, 0x7E, 0x6F, 0x64, 0x65], "UCS-4, little-endian"),
            ([0x3C, 0, 0x61, 0, 0x3E, 0, 0x0B, 0, 0, 0, 0, 0], "UTF-16, little-endian"),
            (Array("<?xml version=\"1.0\" encoding=\"UTF-16\"?>\n<ClinicalDocument xmlns=\"urn:hl7-org:v3\"/>".utf8) + [0, 0, 0, 0x0B],
             "a declaration naming another encoding"),
        ]
        for row in rows {
            var outcome: Result<SourceDocument, ImportError>?
            let printed = try capturingStandardError {
                outcome = Result { () throws(ImportError) in try SourceReader.parse(row.bytes, file: "enc.xml", importDate: "2026-12-06") }
            }
            XCTAssertEqual(printed, "", row.what)
            guard case .failure(let error)? = outcome else { return XCTFail("\(row.what): read") }
            switch error {
            case .malformedXML(let file, let line, let column, let reason):
                XCTAssertEqual(file, "enc.xml", row.what)
                XCTAssertGreaterThanOrEqual(line, 1, row.what)
                XCTAssertGreaterThanOrEqual(column, 1, row.what)
                XCTAssertFalse(reason.hasPrefix("libxml2 error"), "\(row.what): said in words: \(reason)")
            case .notRecognised(let file): XCTAssertEqual(file, "enc.xml", row.what)
            default: XCTFail("\(row.what): \(error)")
            }
        }
    }

    /// What `body` writes to file descriptor 2.
    private func capturingStandardError(_ body: () -> Void) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("stderr-\(UUID().uuidString)").path
        let file = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        XCTAssertGreaterThanOrEqual(file, 0)
        defer { close(file); unlink(path) }
        fflush(nil)
        let saved = dup(2)
        dup2(file, 2)
        body()
        fflush(nil)
        dup2(saved, 2)
        close(saved)
        return try String(contentsOfFile: path, encoding: .utf8)
    }

    /// Processing instructions, comments and CDATA around and inside a C-CDA document are read
    /// past: a PI with no data (the input that crashed Foundation's parser) and a stylesheet's.
    func testProcessingInstructionsCommentsAndCDATAAreReadPast() throws {
        let text = """
        <?xml version="1.0" encoding="UTF-8"?>
        <?xml-stylesheet type="text/xsl" href="CDA.xsl"?>
        <?R?>
        <!-- exported by a portal -->
        <ClinicalDocument xmlns="urn:hl7-org:v3" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><?empty?>
        <title>Summary <![CDATA[of <care>]]> &amp; more</title>
        </ClinicalDocument>
        """
        let root = try XMLTree.parse(Array(text.utf8), file: "pi.xml")
        XCTAssertEqual(root.name, "ClinicalDocument")
        XCTAssertEqual(root.namespace, "urn:hl7-org:v3")
        XCTAssertEqual(root.attributes, [:], "namespace declarations are not attributes")
        XCTAssertEqual(root.child("title")?.text, "Summary of <care> & more")
        XCTAssertEqual(root.child("title")?.line, 6)
    }

    /// Bytes that are not UTF-8 are refused at their line, before libxml2 reads them.
    func testBytesThatAreNotUTF8AreRefusedBeforeParsing() {
        let latin1 = Array("<ClinicalDocument xmlns=\"urn:hl7-org:v3\">\n<title va".utf8) + [0xE9] + Array("ue=\"x\"/>\n</ClinicalDocument>".utf8)
        XCTAssertThrowsError(try SourceReader.parse(latin1, file: "latin1.xml", importDate: "2026-12-06")) { error in
            XCTAssertEqual(error as? ImportError, .notUTF8(file: "latin1.xml", line: 2))
        }
    }

    /// Given to libxml2 all at once, a document over 10 MB was refused as an internal error
    /// ("huge input lookup"): it is fed in chunks.
    func testADocumentOver10MBIsRead() throws {
        let paragraph = "<paragraph>" + String(repeating: "Walks every day. ", count: 60) + "</paragraph>\n"
        let section = "<templateId root=\"2.16.840.1.113883.10.20.22.2.17\"/><title>SOCIAL HISTORY</title><text>"
            + String(repeating: paragraph, count: 11_000) + "</text>"
        let bytes = ImportFixtures.ccd(section: section)
        XCTAssertGreaterThan(bytes.count, 10_500_000)
        let document = try SourceReader.parse(bytes, file: "big.xml", importDate: "2026-12-06")
        XCTAssertEqual(document.narrative.first?.title, "SOCIAL HISTORY")
        XCTAssertGreaterThan(document.narrative.first?.text.utf8.count ?? 0, 10_000_000, "the narrative whole")
    }

    func testNestingPastTheLimitIsRefused() {
        let deep = String(repeating: "<a>", count: 300) + String(repeating: "</a>", count: 300)
        XCTAssertThrowsError(try parse("<ClinicalDocument xmlns=\"urn:hl7-org:v3\">" + deep + "</ClinicalDocument>", file: "deep.xml")) { error in
            guard case .tooDeep(let file, _)? = error as? ImportError else { return XCTFail("\(error)") }
            XCTAssertEqual(file, "deep.xml")
        }
    }

    func testAFileOverTheLimitIsRefusedBeforeItIsRead() throws {
        XCTAssertThrowsError(try SourceReader.read(path: ImportFixtures.path("ccd.xml"), file: "ccd.xml", maximumBytes: 1000, importDate: "2026-12-06")) { error in
            guard case .tooLarge(let file, let bytes, let limit)? = error as? ImportError else { return XCTFail("\(error)") }
            XCTAssertEqual(file, "ccd.xml")
            XCTAssertGreaterThan(bytes, 1000)
            XCTAssertEqual(limit, 1000)
        }
        XCTAssertThrowsError(try SourceReader.read(path: "/nonexistent/ccd.xml", file: "ccd.xml", importDate: "2026-12-06")) { error in
            XCTAssertEqual(error as? ImportError, .unreadable(file: "ccd.xml", errno: ENOENT))
        }
        XCTAssertThrowsError(try SourceReader.read(path: "/tmp", file: "tmp", importDate: "2026-12-06")) { error in
            XCTAssertEqual(error as? ImportError, .unreadable(file: "tmp", errno: EISDIR))
        }
    }

    /// Cut and damaged copies of the fixtures: each is read or refused with a typed error,
    /// never a trap (the fuzz target goes further).
    func testDamagedSourcesNeverTrap() throws {
        var generator = SystemRandomNumberGenerator()
        for name in ["ccd.xml", "fhir-bundle.json", "resources.ndjson"] {
            let original = try ImportFixtures.bytes(name)
            for round in 0..<60 {
                var bytes = original
                if round % 3 == 0 { bytes = Array(bytes.prefix(Int.random(in: 0..<bytes.count, using: &generator))) }
                for _ in 0..<(round % 7) where !bytes.isEmpty {
                    bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
                }
                do { _ = try SourceReader.parse(bytes, file: name, importDate: "2026-12-06") } catch { XCTAssertEqual(error.file, name) }
            }
        }
    }
}

/// A folder as a source: its FHIR files one source together (references resolved across them,
/// the resources kept once as NDJSON), a C-CDA in it a source of its own, other files listed.
final class SourceFolderTests: XCTestCase {
    func testAFolderOfResourcesIsOneSource() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("binder-import-folder-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let bundle = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(try ImportFixtures.bytes("fhir-bundle.json"))) as? [String: Any])
        for (index, entry) in (bundle["entry"] as? [[String: Any]] ?? []).enumerated() {
            // Apple Health's way: one resource a file, referring to each other as Type/id.
            var resource = try XCTUnwrap(entry["resource"] as? [String: Any])
            if var reference = resource["medicationReference"] as? [String: Any] { reference["reference"] = "Medication/med-1"; resource["medicationReference"] = reference }
            if let members = resource["hasMember"] as? [[String: Any]] {
                resource["hasMember"] = members.map { ["reference": "Observation/" + (($0["reference"] as? String) ?? "").dropFirst("urn:uuid:".count)] }
            }
            try JSONSerialization.data(withJSONObject: resource).write(to: folder.appendingPathComponent("resource-\(index).json"))
        }
        try Data(try ImportFixtures.bytes("ccd.xml")).write(to: folder.appendingPathComponent("ccd.xml"))
        try Data("not a record".utf8).write(to: folder.appendingPathComponent("notes.txt"))
        try Data("x".utf8).write(to: folder.appendingPathComponent(".DS_Store"))
        // Apple Health's export folder: export.xml (samples, with a DTD) beside clinical-records/.
        try Data("<?xml version=\"1.0\"?>\n<!DOCTYPE HealthData [<!ELEMENT HealthData ANY>]>\n<HealthData/>\n".utf8)
            .write(to: folder.appendingPathComponent("export.xml"))
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("clinical-records"), withIntermediateDirectories: true)
        try Data(#"{"resourceType": "Procedure", "id": "p9", "status": "completed", "code": {"text": "Tonsillectomy"}, "performedDateTime": "1995-06-01"}"#.utf8)
            .write(to: folder.appendingPathComponent("clinical-records/procedure.json"))
        try FileManager.default.createSymbolicLink(at: folder.appendingPathComponent("link.json"), withDestinationURL: URL(fileURLWithPath: "/etc/passwd"))

        let sources = try SourceReader.sources(path: folder.path, file: "records", importDate: "2026-12-06")
        // A plain text note is a record of its own (a file source), not left out.
        XCTAssertEqual(sources.map(\.format), [.fhir, .ccda, .file])
        XCTAssertEqual(sources[0].records.count, 10, "\(sources[0].records.map(\.title))")
        XCTAssertTrue(sources[0].records.contains { $0.title == "Tonsillectomy" }, "a subfolder's file")
        XCTAssertTrue(sources[0].records.contains { $0.codes.contains { $0.code == "197361" } }, "medicationReference resolved across files")
        XCTAssertEqual(sources[0].keptExtension, "ndjson")
        XCTAssertEqual(String(decoding: sources[0].bytes, as: UTF8.self).split(separator: "\n").count, 18)
        XCTAssertEqual(Set(sources[0].skipped.filter { $0.file.hasPrefix("records/") }.map(\.what)), ["export.xml", "link.json"])
        XCTAssertEqual(sources[1].file, "records/ccd.xml")
        XCTAssertTrue(sources[2].file.hasSuffix("notes.txt"), sources[2].file)

        XCTAssertThrowsError(try SourceReader.sources(path: folder.path, file: "records", maximumBytes: 30_000, importDate: "2026-12-06")) { error in
            guard case .folderTooLarge(let folder, let bytes, 30_000)? = error as? ImportError else { return XCTFail("\(error)") }
            XCTAssertEqual(folder, "records")
            XCTAssertGreaterThan(bytes, 30_000)
        }
    }
}
