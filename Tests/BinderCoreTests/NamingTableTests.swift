@testable import BinderCore
import BinderFormat
import Foundation
import XCTest

/// `BinderNaming`, the one rule of how a view name maps to a git path and back: a new rule is a
/// new row here. The last test holds the sources to it: no other file spells the suffixes.
final class NamingTableTests: XCTestCase {
    // MARK: Records: X.md <-> X.json

    func testRecordNamesBothWays() {
        let rows: [(view: String, git: String, line: UInt)] = [
            ("x.md", "x.json", #line),
            ("visits/2026-02-09-follow-up.md", "visits/2026-02-09-follow-up.json", #line),
            ("a.b.md", "a.b.json", #line),                       // only the last extension is the record's
            ("labs.2024/x.md", "labs.2024/x.json", #line),       // a dot in a folder's name stays
            ("patient-info.md", "patient-info.json", #line),
            ("陈美玲.md", "陈美玲.json", #line),
        ]
        for row in rows {
            XCTAssertTrue(BinderNaming.isRecordName(row.view), line: row.line)
            XCTAssertEqual(BinderNaming.documentName(shownAs: row.view), row.git, line: row.line)
            XCTAssertEqual(BinderNaming.recordName(ofDocument: row.git), row.view, line: row.line)
            XCTAssertEqual(BinderNaming.storedName(shownAs: row.view), row.git, line: row.line)
            XCTAssertTrue(BinderNaming.isDocumentPath(row.git), line: row.line)
            XCTAssertEqual(BinderNaming.documentStem(row.git), BinderNaming.recordStem(row.view), line: row.line)
            XCTAssertEqual(BinderNaming.documentName(stem: BinderNaming.recordStem(row.view) ?? ""), row.git, line: row.line)
        }
        XCTAssertEqual(BinderNaming.patientInfoPath, "patient-info.json")
        XCTAssertEqual(BinderNaming.patientInfoViewPath, "patient-info.md")
        XCTAssertNil(BinderNaming.recordStem("photo.jpg"))
        XCTAssertNil(BinderNaming.documentStem("photo.jpg.enc"))
    }

    /// Which git paths are documents: `.meta.json` is a folder's display data, not a record.
    func testDocumentPaths() {
        let rows: [(path: String, hasExtension: Bool, isDocument: Bool, isMeta: Bool, line: UInt)] = [
            ("x.json", true, true, false, #line),
            ("visits/x.json", true, true, false, #line),
            (".meta.json", true, false, true, #line),
            ("conditions/back-acne/.meta.json", true, false, true, #line),
            ("a/x.meta.json", true, true, false, #line),         // a record named `x.meta`
            ("x.meta.json.enc", false, false, false, #line),
            ("x.md", false, false, false, #line),
            ("x.JSON", false, false, false, #line),              // case counts, as in git
            ("notes.txt", false, false, false, #line),
        ]
        for row in rows {
            XCTAssertEqual(BinderNaming.hasDocumentExtension(row.path), row.hasExtension, row.path, line: row.line)
            XCTAssertEqual(BinderNaming.isDocumentPath(row.path), row.isDocument, row.path, line: row.line)
            XCTAssertEqual(BinderNaming.isFolderMetadata(row.path), row.isMeta, row.path, line: row.line)
        }
        XCTAssertEqual(BinderNaming.folderMetadataPath(in: ""), ".meta.json")
        XCTAssertEqual(BinderNaming.folderMetadataPath(in: "conditions/back-acne"), "conditions/back-acne/.meta.json")
    }

    /// `binder log PATH`: the document a path of the mount (or of git) names.
    func testDocumentPathOfAViewPath() {
        let rows: [(given: String, document: String, line: UInt)] = [
            ("visits/x.md", "visits/x.json", #line),
            ("labs/scan.pdf", "labs/scan.json", #line),          // an attachment: its reference
            ("visits/x.json", "visits/x.json", #line),           // a git path as it is
            ("x", "x.json", #line),
            (".env", ".env.json", #line),                        // a dotfile's dot is no extension
            ("a.b/c", "a.b/c.json", #line),                      // the extension of the last name only
            ("a.b/c.tar.gz", "a.b/c.tar.json", #line),
        ]
        for row in rows { XCTAssertEqual(BinderNaming.documentPath(ofViewPath: row.given), row.document, line: row.line) }
    }

    // MARK: Children folders: X.children/

    func testChildrenFolders() {
        let rows: [(shown: String, folder: String, stem: String, line: UInt)] = [
            ("x.md", "x.children", "x", #line),
            ("01-addendum.md", "01-addendum.children", "01-addendum", #line),
            ("01-photo.png", "01-photo.children", "01-photo", #line),   // an inline attachment shown as a record
            ("a.b.md", "a.b.children", "a.b", #line),
        ]
        for row in rows {
            XCTAssertEqual(BinderNaming.childrenFolderName(of: row.shown), row.folder, line: row.line)
            XCTAssertTrue(BinderNaming.isChildrenFolder(row.folder), line: row.line)
            XCTAssertEqual(BinderNaming.childrenOwnerStem(row.folder), row.stem, line: row.line)
            XCTAssertEqual(BinderNaming.childrenFolderName(stem: row.stem), row.folder, line: row.line)
        }
        for name in ["x", "x.md", "x.children.md", "children"] {
            XCTAssertFalse(BinderNaming.isChildrenFolder(name), name)
            XCTAssertNil(BinderNaming.childrenOwnerStem(name), name)
        }
    }

    // MARK: Sidecars: Y.pdf <-> Y.pdf.enc, and their references

    func testSidecarNames() {
        let rows: [(sidecar: String, format: String?, shown: String, line: UInt)] = [
            ("photo.jpg.enc", nil, "photo.jpg", #line),
            ("photo.jpg.enc", "pdf", "photo.jpg", #line),        // its own extension wins
            ("scan.enc", "pdf", "scan.pdf", #line),              // none: the format's
            ("scan.enc", nil, "scan", #line),
            ("recording.enc", "m4a", "recording.m4a", #line),
        ]
        for row in rows {
            XCTAssertTrue(BinderNaming.isSidecarName(row.sidecar), line: row.line)
            XCTAssertEqual(BinderNaming.attachmentName(sidecar: row.sidecar, format: row.format), row.shown, line: row.line)
        }
        XCTAssertEqual(BinderNaming.sidecarName(of: "photo.jpg"), "photo.jpg.enc")
        XCTAssertEqual(BinderNaming.sidecarStem("photo.jpg.enc"), "photo.jpg")
        XCTAssertNil(BinderNaming.sidecarStem("photo.jpg"))
        XCTAssertEqual(BinderNaming.storedName(shownAs: "photo.jpg"), "photo.jpg.enc")
        XCTAssertEqual(BinderNaming.attachmentName(sidecar: "notes.txt", format: nil), "notes.txt")
        let numbered: [(sidecar: String, n: Int, name: String, line: UInt)] = [
            ("photo.jpg.enc", 2, "photo-2.jpg.enc", #line),       // before the first dot: the extension stays
            ("x-scan.pdf.enc", 3, "x-scan-3.pdf.enc", #line),
            ("scan", 2, "scan-2", #line),
        ]
        for row in numbered { XCTAssertEqual(BinderNaming.sidecarSuffixed(row.sidecar, row.n), row.name, line: row.line) }
    }

    /// Only a plain `*.enc` name in the document's own folder is a reference the view follows.
    func testSidecarReferences() {
        let rows: [(value: String, followed: Bool, line: UInt)] = [
            ("photo.jpg.enc", true, #line),
            ("x.enc", true, #line),
            ("../x.enc", false, #line),
            ("sub/x.enc", false, #line),
            ("notes.txt", false, #line),
            (".git.enc", true, #line),
            (String(repeating: "a", count: 252) + ".enc", false, #line),   // over 255 bytes
            ("", false, #line),
        ]
        for row in rows { XCTAssertEqual(BinderNaming.isSidecarReference(row.value), row.followed, row.value, line: row.line) }

        func reference(_ type: String, _ value: String, children: [MedicalDocument] = []) -> MedicalDocument {
            MedicalDocument(value: value, metadata: ["type": .string(type)], children: children)
        }
        XCTAssertEqual(BinderNaming.sidecarReference(of: reference("attachment_ref", "y.pdf.enc")), "y.pdf.enc")
        XCTAssertNil(BinderNaming.sidecarReference(of: reference("attachment_ref", "y.pdf")))
        XCTAssertNil(BinderNaming.sidecarReference(of: reference("visit", "y.pdf.enc")))
        let nested = reference("visit", "# Visit", children: [
            reference("attachment_ref", "a.pdf.enc"), reference("addendum", "b.enc"),
            reference("addendum", "", children: [reference("attachment_ref", "../c.enc"), reference("attachment_ref", "d.jpg.enc")]),
        ])
        XCTAssertEqual(BinderNaming.sidecarReferences(nested), ["a.pdf.enc", "d.jpg.enc"])
    }

    // MARK: Children's names

    func testChildNames() {
        let addendum = MedicalDocument(value: "x", metadata: ["type": "addendum", "created": "2025-01-01T00:00:00.000Z"])
        let doctorNote = MedicalDocument(value: "x", metadata: ["type": "doctor_note"])
        let untyped = MedicalDocument(value: "x", metadata: [:])
        let inline = MedicalDocument(value: "AAAA", metadata: ["type": "attachment", "format": "png", "encoding": "base64"])
        let reference = MedicalDocument(value: "x-scan.enc", metadata: ["type": "attachment_ref", "format": "pdf"])
        var named = addendum
        named.metadata["fileName"] = "my note.md"
        var escaping = addendum
        escaping.metadata["fileName"] = "../escape.md"
        let rows: [(child: MedicalDocument, index: Int, count: Int, sidecar: String?, name: String, line: UInt)] = [
            (addendum, 0, 3, nil, "01-addendum.md", #line),
            (addendum, 99, 100, nil, "100-addendum.md", #line),   // as wide as the count
            (doctorNote, 1, 2, nil, "02-doctor-note.md", #line),   // `_` becomes `-`
            (untyped, 0, 1, nil, "01-note.md", #line),
            (MedicalDocument(value: "x", metadata: ["type": "!!"]), 0, 1, nil, "01-entry.md", #line),
            (inline, 1, 2, nil, "02-attachment.png", #line),
            (reference, 0, 1, "x-scan.enc", "01-x-scan.pdf", #line),
            (named, 0, 1, nil, "my note.md", #line),               // binder's stored name
            (escaping, 0, 1, nil, "01-addendum.md", #line),        // an unsafe stored name is not used
        ]
        for row in rows {
            XCTAssertEqual(BinderNaming.childName(row.child, index: row.index, count: row.count, sidecar: row.sidecar), row.name,
                           line: row.line)
        }
        XCTAssertEqual(BinderNaming.slug("doctor_note"), "doctor-note")
        XCTAssertEqual(BinderNaming.slug("!!"), "entry")
        XCTAssertTrue(BinderNaming.isInlineAttachment(inline))
        XCTAssertFalse(BinderNaming.isInlineAttachment(reference))
    }

    // MARK: Names two sources want

    func testTakenNamesAndExtensions() {
        let splits: [(name: String, stem: String, ext: String, line: UInt)] = [
            ("photo.jpg", "photo", ".jpg", #line),
            ("x", "x", "", #line),
            (".env", ".env", "", #line),
            ("a.b.md", "a.b", ".md", #line),
        ]
        for row in splits {
            let split = BinderNaming.splitExtension(row.name)
            XCTAssertEqual(split.stem, row.stem, line: row.line)
            XCTAssertEqual(split.ext, row.ext, line: row.line)
        }
        XCTAssertEqual(BinderNaming.suffixed("photo.jpg", 2), "photo-2.jpg")
        XCTAssertEqual(BinderNaming.suffixed(".env", 3), ".env-3")
        let taken: Set = ["x.md", "x-2.md", "visits/d.json"]
        XCTAssertEqual(BinderNaming.firstFree("x.md") { taken.contains($0) }, "x-3.md")
        XCTAssertEqual(BinderNaming.firstFree("y.md") { taken.contains($0) }, "y.md")
        XCTAssertEqual(BinderNaming.firstFree("visits/d.json") { taken.contains($0) }, "visits/d-2.json")
    }

    // MARK: Scratch names

    func testScratchNames() {
        let rows: [(String, Bool)] = [
            (".x.md.swp", true), (".x.md.swx", true), ("4913", true), ("x.md~", true), ("#x.md#", true), (".#x.md", true),
            (".goutputstream-AB12CD", true), (".x.md.a1B2c3", true), ("sedAb12Cd", true), ("x.tmp", true),
            ("x.md", false), ("2026-02-09-follow-up.md", false), ("photo.jpg", false), ("sed.md", false), ("sedimentary", false),
            ("4914", false), ("sed0abcde", true), ("sedabcdeZ", true), ("sedatives", false), ("sedentary", false), ("sedabcdef", false),
            ("sed-abcde", false), ("sedé12345", false),
        ]
        for (name, scratch) in rows { XCTAssertEqual(BinderNaming.isScratch(name), scratch, name) }
    }

    // MARK: Limits and refusals

    /// Names the view hides (from git) and will not make.
    func testUnsafeNames() {
        let long = String(repeating: "a", count: 256)
        let rows: [(name: String, atRoot: Bool, unsafe: Bool, line: UInt)] = [
            ("x.md", false, false, #line),
            (String(repeating: "a", count: 255), false, false, #line),
            (String(repeating: "é", count: 128), false, true, #line),   // 256 bytes of UTF-8
            (long, false, true, #line),
            ("", false, true, #line),
            (".", false, true, #line),
            ("..", false, true, #line),
            ("a/b", false, true, #line),
            ("a\u{0}b", false, true, #line),
            (".git", false, true, #line),
            (".GIT", false, true, #line),
            (".binder", true, true, #line),
            (".binder", false, false, #line),                            // binder's folder is at the root only
        ]
        for row in rows {
            XCTAssertEqual(BinderNaming.unsafeNameReason(row.name, atRoot: row.atRoot) != nil, row.unsafe, row.name, line: row.line)
        }
        for bad in ["", ".", "..", "a/b", "a\u{0}b"] { XCTAssertFalse(BinderNaming.isSafeName(bad), bad) }
    }

    /// What a write refuses, by the name it would show and the name it would store.
    func testRefusedNames() {
        let rows: [(name: String, parent: String, error: WriteError?, line: UInt)] = [
            ("x.md", "visits", nil, #line),
            (String(repeating: "a", count: 255), "", nil, #line),
            (String(repeating: "a", count: 256), "", .nameTooLong("p"), #line),
            ("", "", .invalid(path: "p", reason: "not a usable file name"), #line),
            ("..", "", .invalid(path: "p", reason: "not a usable file name"), #line),
            (".Git", "x", .notPermitted(path: "p", reason: "'.git' is git's own name and cannot be stored in a binder"), #line),
            (".binder", "", .notPermitted(path: "p", reason: ".binder is binder's own folder"), #line),
            ("status", ".binder", .notPermitted(path: "p", reason: ".binder is binder's own folder"), #line),
            (".binder", "visits", nil, #line),
        ]
        for row in rows {
            do throws(WriteError) {
                try BinderNaming.check(row.name, in: row.parent, path: "p")
                XCTAssertNil(row.error, row.name, line: row.line)
            } catch {
                XCTAssertEqual(error, row.error, row.name, line: row.line)
            }
        }
        // Stored names: `X.md` may have 253 bytes (`X.json`), an attachment 251 (`X.ext.enc`).
        let stored: [(shown: String, fits: Bool, line: UInt)] = [
            (String(repeating: "a", count: 250) + ".md", true, #line),
            (String(repeating: "a", count: 251) + ".md", false, #line),
            (String(repeating: "a", count: 247) + ".pdf", true, #line),
            (String(repeating: "a", count: 248) + ".pdf", false, #line),
        ]
        for row in stored {
            XCTAssertEqual(BinderNaming.fitsStored(BinderNaming.storedName(shownAs: row.shown)), row.fits, line: row.line)
            do throws(WriteError) {
                try BinderNaming.checkStored(BinderNaming.storedName(shownAs: row.shown), path: "p")
                XCTAssertTrue(row.fits, line: row.line)
            } catch {
                XCTAssertFalse(row.fits, line: row.line)
                XCTAssertEqual(error, .nameTooLong("p"), line: row.line)
            }
        }
        XCTAssertEqual(BinderNaming.maximumBytes, 255)
    }

    func testNamesCutToFit() {
        let rows: [(name: String, maxBytes: Int, fitted: String, line: UInt)] = [
            ("short.pdf", 255, "short.pdf", #line),
            ("abcdefgh.pdf", 8, "abcd.pdf", #line),               // the extension kept
            ("abcdefgh.verylongext", 8, "abcdefgh", #line),       // an extension over half is not
            ("éééé.md", 7, "éé.md", #line),                        // whole characters only
        ]
        for row in rows { XCTAssertEqual(BinderNaming.fitting(row.name, maxBytes: row.maxBytes), row.fitted, line: row.line) }
        let sidecar = BinderNaming.fittedSidecarName(of: String(repeating: "x", count: 300) + ".pdf")
        XCTAssertEqual(sidecar.utf8.count, 255)
        XCTAssertTrue(sidecar.hasSuffix(".pdf.enc"))
    }

    // MARK: One place

    /// Literals of Swift source that are not about a binder's paths, and so may spell a suffix
    /// outside `BinderNaming`. Keep this tiny: each is a file of binder's own, never in a binder.
    static let literalsNotAboutBinderPaths: Set<String> = [
        "/binder-sync.json",   // BinderSync: the sync state in the git directory
        "/accounts.json",      // BinderSystem: the accounts file in binder's state folder
        "/shares.json",        // BinderCommands: the shares made, in binder's state folder
        "fhir.json",           // BinderExport: the extension of an exported FHIR file
    ]

    /// No Swift file of the sources but `BinderNaming.swift` has a string literal spelling
    /// `.json`, `.enc` or `.children`. Comments, multi-line help texts and literals holding a
    /// space (messages, help examples) are prose, not names.
    func testNoOtherSourceSpellsTheSuffixes() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources")
        let files = try XCTUnwrap(FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil))
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }
        XCTAssertGreaterThan(files.count, 100, "the sources were not found at \(sources.path)")
        var offences: [String] = []
        var namingFileSeen = false
        for file in files {
            if file.lastPathComponent == "BinderNaming.swift" {
                namingFileSeen = true
                continue
            }
            let text = try String(contentsOf: file, encoding: .utf8)
            for literal in SwiftLiterals.strings(in: text) where !literal.isMultiline && !literal.text.contains(" ") {
                guard SwiftLiterals.spellsSuffix(literal.text), !Self.literalsNotAboutBinderPaths.contains(literal.text) else { continue }
                offences.append("\(file.path.dropFirst(sources.path.count + 1)):\(literal.line): \"\(literal.text)\"")
            }
        }
        XCTAssertTrue(namingFileSeen)
        XCTAssertEqual(offences, [], "spell these through BinderNaming")
    }

    /// The scanner itself: literals found, comments and interpolations told apart.
    func testLiteralScanner() {
        let source = #"""
        // "a.json" in a comment
        /* "b.enc" /* nested */ "c.children" */
        let x = "d.json" + "\(y ? "e.enc" : "f")"
        let raw = #"g "quoted" .enc"#
        let help = """
            h.children
            """
        let fine = "x.encoding" + "m.json5"
        """#
        let literals = SwiftLiterals.strings(in: source)
        let spelled = literals.filter { SwiftLiterals.spellsSuffix($0.text) }.map(\.text)
        XCTAssertTrue(spelled.contains("d.json"))
        XCTAssertTrue(spelled.contains("e.enc"))
        XCTAssertTrue(spelled.contains(#"g "quoted" .enc"#))
        XCTAssertFalse(spelled.contains { $0.contains("a.json") || $0.contains("b.enc") || $0.contains("c.children") })
        XCTAssertFalse(spelled.contains { $0.contains("encoding") || $0.contains("json5") })
        XCTAssertEqual(literals.first { $0.text.contains("h.children") }?.isMultiline, true)
        XCTAssertEqual(literals.first { $0.text == "d.json" }?.line, 3)
    }
}

/// A small lexer of Swift source: its string literals, outside comments, with interpolated
/// code (and the literals inside it) taken apart.
enum SwiftLiterals {
    struct Literal {
        var text: String
        var line: Int
        var isMultiline: Bool
    }

    /// Whether `text` holds `.json`, `.enc` or `.children` as a whole suffix (not `.encoding`).
    static func spellsSuffix(_ text: String) -> Bool {
        for suffix in [".json", ".enc", ".children"] {
            var rest = Substring(text)
            while let range = rest.range(of: suffix) {
                let next = rest[range.upperBound...].first
                if next.map({ !($0.isLetter || $0.isNumber || $0 == "_") }) ?? true { return true }
                rest = rest[range.upperBound...]
            }
        }
        return false
    }

    private enum Mode {
        case code(parentheses: Int)
        case string(hashes: Int, multiline: Bool, line: Int, text: [UInt8])
    }

    static func strings(in source: String) -> [Literal] {
        let bytes = Array(source.utf8)
        func at(_ i: Int) -> UInt8 { i < bytes.count ? bytes[i] : 0 }
        let quote = UInt8(ascii: "\""), hash = UInt8(ascii: "#"), slash = UInt8(ascii: "/"), star = UInt8(ascii: "*")
        let backslash = UInt8(ascii: "\\"), newline = UInt8(ascii: "\n")
        var literals: [Literal] = []
        var stack: [Mode] = [.code(parentheses: 0)]
        var i = 0, line = 1
        while i < bytes.count {
            let c = bytes[i]
            switch stack[stack.count - 1] {
            case .code(let parentheses):
                if c == slash && at(i + 1) == slash {
                    while i < bytes.count && bytes[i] != newline { i += 1 }
                    continue
                }
                if c == slash && at(i + 1) == star {
                    var depth = 0
                    repeat {
                        if at(i) == slash && at(i + 1) == star { depth += 1; i += 2 }
                        else if at(i) == star && at(i + 1) == slash { depth -= 1; i += 2 }
                        else { if at(i) == newline { line += 1 }; i += 1 }
                    } while depth > 0 && i < bytes.count
                    continue
                }
                if c == hash || c == quote {
                    var j = i
                    while at(j) == hash { j += 1 }
                    if at(j) == quote {
                        let multiline = at(j + 1) == quote && at(j + 2) == quote
                        stack.append(.string(hashes: j - i, multiline: multiline, line: line, text: []))
                        i = j + (multiline ? 3 : 1)
                        continue
                    }
                    i = j == i ? i + 1 : j
                    continue
                }
                if c == newline { line += 1 }
                if c == UInt8(ascii: "(") { stack[stack.count - 1] = .code(parentheses: parentheses + 1) }
                if c == UInt8(ascii: ")") {
                    if parentheses == 0 && stack.count > 1 { stack.removeLast() } else { stack[stack.count - 1] = .code(parentheses: max(0, parentheses - 1)) }
                }
                i += 1
            case .string(let hashes, let multiline, let start, var text):
                if c == backslash, (0..<hashes).allSatisfy({ at(i + 1 + $0) == hash }) {
                    let escaped = i + 1 + hashes
                    if at(escaped) == UInt8(ascii: "(") {
                        stack.append(.code(parentheses: 0))
                        i = escaped + 1
                        continue
                    }
                    text += [c, at(escaped)]
                    stack[stack.count - 1] = .string(hashes: hashes, multiline: multiline, line: start, text: text)
                    i = escaped + 1
                    continue
                }
                let closing = multiline ? (c == quote && at(i + 1) == quote && at(i + 2) == quote) : c == quote
                let quotes = multiline ? 3 : 1
                if closing, (0..<hashes).allSatisfy({ at(i + quotes + $0) == hash }) {
                    stack.removeLast()
                    literals.append(Literal(text: String(decoding: text, as: UTF8.self), line: start, isMultiline: multiline))
                    i += quotes + hashes
                    continue
                }
                if c == newline { line += 1 }
                text.append(c)
                stack[stack.count - 1] = .string(hashes: hashes, multiline: multiline, line: start, text: text)
                i += 1
            }
        }
        return literals
    }
}
