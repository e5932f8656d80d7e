@testable import BinderImport
import BinderCore
import BinderFormat
import Foundation
import XCTest

/// Folders of PDFs, photos, recordings and notes: formats by their first bytes, a folder tree
/// made categories by name, hostile names made safe, file times as `created`, and the same
/// file again (under any name) adding nothing.
final class SourceFilesTests: XCTestCase {
    let planner = ImportPlanner(importDate: "2026-12-06")
    var folder = ""

    override func setUpWithError() throws {
        folder = NSTemporaryDirectory() + "binder-files-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: folder) }

    /// Writes `bytes` at `relative` under the test folder, last modified at `modified`.
    @discardableResult
    func write(_ relative: String, _ bytes: [UInt8], modified: Int = 1_700_000_000) throws -> String {
        let path = folder + "/" + relative
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: TimeInterval(modified))], ofItemAtPath: path)
        return path
    }

    func testFormatsByTheirFirstBytesNotTheirNames() {
        let rows: [([UInt8], SourceFiles.Kind?, String)] = [
            (Array("%PDF-1.7\n".utf8), .attachment(format: "pdf"), "PDF"),
            ([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0], .attachment(format: "png"), "PNG"),
            ([0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10], .attachment(format: "jpeg"), "JPEG"),
            (Array("GIF89a..".utf8), .attachment(format: "gif"), "GIF"),
            ([0, 0, 0, 0x18] + Array("ftypheic".utf8), .attachment(format: "heic"), "HEIC photo"),
            ([0, 0, 0, 0x18] + Array("ftypisom".utf8), .attachment(format: "mp4"), "MP4 video"),
            ([0, 0, 0, 0x18] + Array("ftypqt  ".utf8), .attachment(format: "mov"), "QuickTime video"),
            ([0, 0, 0, 0x18] + Array("ftypM4A ".utf8), .attachment(format: "m4a"), "voice memo"),
            (Array("ID3\u{3}".utf8), .attachment(format: "mp3"), "MP3"),
            (Array("RIFF\0\0\0\0WAVEfmt ".utf8), .attachment(format: "wav"), "WAV"),
            (Array("OggS\0".utf8), .attachment(format: "ogg"), "Ogg"),
            ([0x1A, 0x45, 0xDF, 0xA3, 1], .attachment(format: "webm"), "WebM"),
            (Array("# Knee\n\nBetter since May.\n".utf8), .text, "markdown"),
            (Array("---\ntags: [knee]\n---\nnotes\n".utf8), .text, "front matter"),
            (Array("Blood pressure 120/80\r\n".utf8), .text, "plain text"),
            ([], nil, "empty"),
            ([0x00, 0x01, 0x02, 0x03], nil, "binary"),
            (Array("note\u{1B}[31m".utf8), nil, "a terminal escape"),
            ([0x68, 0x69, 0xC3, 0x28], nil, "not UTF-8"),
            (Array("<html><body/></html>".utf8), nil, "HTML: XML's, refused there"),
            (Array(#"{"name": 1}"#.utf8), nil, "JSON: FHIR's, refused there"),
        ]
        for (bytes, kind, what) in rows { XCTAssertEqual(SourceFiles.kind(of: bytes), kind, what) }
    }

    func testHostileNamesAreMadeSafe() {
        let rows: [(String, String)] = [
            ("scan.pdf", "scan.pdf"),
            ("..", "file"),
            (".", "file"),
            ("...pdf", "pdf"),
            (".hidden.pdf", "hidden.pdf"),
            ("bell\u{7}name\n.pdf", "bell name .pdf"),
            ("invoice\u{202E}fdp.exe", "invoice fdp.exe"),
            ("", "file"),
            ("\u{1}\u{2}", "file"),
            ("Résultats d’analyse.pdf", "Résultats d’analyse.pdf"),
        ]
        for (name, safe) in rows { XCTAssertEqual(SourceFiles.safeName(name), safe, name.debugDescription) }
        let long = SourceFiles.safeName(String(repeating: "é", count: 300) + ".pdf")
        XCTAssertLessThanOrEqual(long.utf8.count, SourceFiles.maximumNameBytes)
        XCTAssertTrue(long.hasSuffix("é.pdf"), long)
    }

    func testAFolderTreeMapsToCategoriesByName() {
        let rows: [([String], String?, String)] = [
            ([], nil, "documents"),
            (["Labs"], nil, "labs"),
            (["VISITS", "2024"], nil, "visits/2024"),
            (["Dental records"], nil, "Dental records"),
            ([".."], nil, "file"),
            (["x\u{0}y"], nil, "x y"),
            ([], "inbox", "inbox"),
            (["labs"], "inbox", "inbox/labs"),
        ]
        for (relative, into, expected) in rows { XCTAssertEqual(SourceFiles.folder(for: relative, into: into), expected, "\(relative) \(into ?? "-")") }
    }

    func testAFolderOfFilesBecomesRecordsAndTheSameFilesAgainAddNothing() throws {
        let pdf = Array("%PDF-1.4\n% made up\n%%EOF\n".utf8)
        let photo: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0] + Array(repeating: 7, count: 100)
        try write("Labs/lipid panel.pdf", pdf, modified: 1_717_243_200)   // 2024-06-01T12:00:00Z
        try write("visits/2024/knee.md", Array("---\ntags:\n  - knee\ncreated: \"2024-05-02\"\n---\n# Knee follow-up\n\nBetter.\n".utf8))
        try write("rash\u{7}.jpg", photo, modified: 1_700_000_000)
        try write("plain.txt", Array("Fasting glucose 5.1\n".utf8))
        try write("unknown.bin", [0, 1, 2, 3])
        let sources = try SourceFolder.read(path: folder, file: "records", importDate: "2026-12-06")
        XCTAssertEqual(sources.map(\.format), [.file, .file, .file, .file])
        let plan = planner.plan(sources, existing: [])
        XCTAssertEqual(plan.created.map(\.gitPath).sorted(), [
            "documents/2023-11-14-plain.json", "documents/2023-11-14-rash.json", "labs/2024-06-01-lipid-panel.json", "visits/2024/2024-05-02-knee-follow-up.json",
        ])
        XCTAssertEqual(plan.skipped.map(\.what), ["unknown.bin"])
        XCTAssertEqual(plan.newFolders.sorted(), ["documents", "labs", "visits", "visits/2024"])

        let lab = try XCTUnwrap(plan.created.first { $0.gitPath.hasPrefix("labs/") })
        XCTAssertEqual(lab.attachments.map(\.fileName), ["lipid panel.pdf"])
        XCTAssertEqual(lab.attachments.first?.bytes, pdf)
        XCTAssertEqual(lab.document.metadata["type"], "lab")
        XCTAssertEqual(lab.document.metadata["created"], "2024-06-01T12:00:00.000Z")
        XCTAssertEqual(lab.document.metadata["source"], .string(SourceFiles.organisation))
        XCTAssertTrue(lab.document.value.hasPrefix("# lipid panel\n"), lab.document.value)
        let hash = lab.document.metadata["codes"]?.arrayValue?.first?.objectValue
        XCTAssertEqual(hash?["system"], .string(SourceFiles.contentHashSystem))
        XCTAssertEqual(hash?["code"]?.stringValue?.count, 64)

        let note = try XCTUnwrap(plan.created.first { $0.gitPath.hasPrefix("visits/") })
        XCTAssertEqual(note.document.value, "# Knee follow-up\n\nBetter.\n")
        XCTAssertEqual(note.document.metadata["tags"], .array(["knee"]))
        XCTAssertEqual(note.document.metadata["created"], "2024-05-02", "the note's own front matter wins over the file's time")
        XCTAssertEqual(note.document.metadata["type"], "visit")
        XCTAssertTrue(note.attachments.isEmpty)

        let rash = try XCTUnwrap(plan.created.first { $0.gitPath.contains("rash") })
        XCTAssertEqual(rash.attachments.map(\.fileName), ["rash.jpg"])
        let plain = try XCTUnwrap(plan.created.first { $0.gitPath.contains("plain") })
        XCTAssertEqual(plain.document.value, "# plain\n\nFasting glucose 5.1\n")

        // Again, and the same PDF under another name, in another folder, touched since: nothing new.
        try write("copies/renamed.pdf", pdf, modified: 1_800_000_000)
        let existing = plan.created.map { ExistingRecord(gitPath: $0.gitPath, document: $0.document) }
        let again = planner.plan(try SourceFolder.read(path: folder, file: "records", importDate: "2026-12-07"), existing: existing)
        XCTAssertTrue(again.isEmpty, "\(again.created.map(\.gitPath)) \(again.updated.map(\.gitPath))")
        XCTAssertEqual(again.unchanged, 5)
        XCTAssertEqual(again.skipped.filter { $0.what == "the file" }.count, 5)
    }

    func testAFileGivenAloneGoesWhereIntoSaysAndUnknownBytesAreRefused() throws {
        let path = try write("scan.dat", Array("%PDF-1.4\n%%EOF\n".utf8))
        let sources = try SourceReader.sources(path: path, file: "scan.dat", importDate: "2026-12-06", into: "documents/letters")
        let plan = planner.plan(sources, existing: [])
        XCTAssertEqual(plan.created.map(\.gitPath), ["documents/letters/2023-11-14-scan.json"])
        XCTAssertEqual(plan.created.first?.attachments.map(\.fileName), ["scan.pdf"], "named for what the bytes are")
        let unknown = try write("blob", [0, 0, 0, 1])
        XCTAssertThrowsError(try SourceReader.sources(path: unknown, file: "blob", importDate: "2026-12-06")) { error in
            XCTAssertEqual(error as? ImportError, .notRecognised(file: "blob"))
        }
        let unclosed = try write("bad.md", Array("---\ntitle: x\nno end\n".utf8))
        XCTAssertThrowsError(try SourceReader.sources(path: unclosed, file: "bad.md", importDate: "2026-12-06")) { error in
            guard case .malformedFrontMatter(let file, _)? = error as? ImportError else { return XCTFail("\(error)") }
            XCTAssertEqual(file, "bad.md")
        }
        let big = try write("big.pdf", Array("%PDF-".utf8) + Array(repeating: 0x20, count: 2000))
        XCTAssertThrowsError(try SourceReader.sources(path: big, file: "big.pdf", maximumBytes: 1000, importDate: "2026-12-06")) { error in
            XCTAssertEqual(error as? ImportError, .tooLarge(file: "big.pdf", bytes: 2005, limit: 1000))
        }
    }

    /// A file's modification time is its record's `created` and `updated` (the apps' keys); a
    /// note's own front matter wins over either; no `updated` is earlier than its `created`.
    func testFileTimesBecomeCreatedAndUpdated() throws {
        let rows: [(name: String, bytes: String, created: String, updated: JSONValue?)] = [
            ("scan.pdf", "%PDF-1.4\n%%EOF\n", "2023-11-14T22:13:20.000Z", "2023-11-14T22:13:20.000Z"),
            ("plain.txt", "Fasting glucose 5.1\n", "2023-11-14T22:13:20.000Z", "2023-11-14T22:13:20.000Z"),
            ("dated.md", "---\ncreated: \"2020-01-02\"\n---\n# Dated\n", "2020-01-02", "2023-11-14T22:13:20.000Z"),
            ("edited.md", "---\ncreated: \"2020-01-02\"\nupdated: \"2021-03-04T05:06:07.000Z\"\n---\n# Edited\n", "2020-01-02", "2021-03-04T05:06:07.000Z"),
            ("later.md", "---\ncreated: \"2025-01-02\"\n---\n# Later\n", "2025-01-02", nil),
        ]
        for row in rows {
            let path = try write(row.name, Array(row.bytes.utf8), modified: 1_700_000_000)
            let sources = try SourceReader.sources(path: path, file: row.name, importDate: "2026-12-06")
            // The same through a mount: the request crossing its control socket keeps the times.
            let crossed = try ImportRequest(decoding: try ImportRequest(sources: sources, documentsFolder: "documents", importDate: "2026-12-06", force: false, dryRun: false).encoded()).sources
            for given in [sources, crossed] {
                let metadata = try XCTUnwrap(planner.plan(given, existing: []).created.first?.document.metadata, row.name)
                XCTAssertEqual(metadata["created"], .string(row.created), row.name)
                XCTAssertEqual(metadata["updated"], row.updated, row.name)
            }
        }
    }
}
