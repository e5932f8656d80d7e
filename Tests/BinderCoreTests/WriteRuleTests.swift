import BinderCore
import BinderCrypto
import BinderFormat
import BinderGit
import Foundation
import Logging
import SystemPackage
import XCTest

/// The write rules of the mount as a table (docs/PRODUCT.md, "Writing through the mount";
/// docs/DESIGN.md, "Names"). Each row starts from a fresh binder, takes some steps, then one
/// more, and says what must follow: a refusal with its errno (and nothing changed), or the
/// files the view shows, what they hold, and how many documents and children git has.
/// A new rule is a new row.
final class WriteRuleTests: XCTestCase {
    enum Step: CustomStringConvertible {
        case mkdir(String)
        case write(String, String)
        case writeBytes(String, [UInt8])
        case rename(String, String)
        case remove(String)
        case rmdir(String)
        case touch(String, seconds: Int64)

        var description: String {
            switch self {
            case .mkdir(let p): return "mkdir \(p)"
            case .write(let p, _), .writeBytes(let p, _): return "write \(p)"
            case .rename(let a, let b): return "mv \(a) \(b)"
            case .remove(let p): return "rm \(p)"
            case .rmdir(let p): return "rmdir \(p)"
            case .touch(let p, let s): return "touch -d @\(s) \(p)"
            }
        }
    }

    enum Outcome {
        /// Refused with this errno; the tree of `main` is unchanged.
        case refused(Errno)
        /// Done: the view shows exactly `files` (all files below the root but patient-info.md),
        /// each path in `contains` holds the given text (exactly, when it ends in a newline),
        /// none in `lacks` holds its text, and git holds `documents` documents with `children`
        /// children in all.
        case shows(files: [String], contains: [String: String] = [:], lacks: [String: String] = [:], documents: Int? = nil, children: Int? = nil)
        /// Done, and no commit was made.
        case unchanged
    }

    struct Row {
        let rule: String
        let given: [Step]
        let when: Step
        let then: Outcome
        init(_ rule: String, given: [Step] = [], when: Step, then: Outcome) {
            self.rule = rule
            self.given = given
            self.when = when
            self.then = then
        }
    }

    static let note = "---\ntype: visit\ncreated: \"2025-01-02T03:04:05.000Z\"\nupdated: \"2025-01-02T03:04:05.000Z\"\n---\n# Visit\n"
    static let addendum = "---\ntype: addendum\ncreated: \"2025-01-03T00:00:00.000Z\"\n---\nAddendum.\n"
    /// Metadata nested 300 deep: about 91 KB as YAML (two spaces of indentation a level), under
    /// 2 KB as the JSON stored.
    static let deepFrontMatter: String = {
        var yaml = "---\ntype: visit\ndeep:\n"
        for level in 1..<300 { yaml += String(repeating: "  ", count: level) + "a:\n" }
        return yaml + String(repeating: "  ", count: 300) + "a: x\n---\n# Deep\n"
    }()
    static let doctorNote = "---\ntype: doctor_note\ncreated: \"2025-01-04T00:00:00.000Z\"\n---\nNote.\n"
    static let followUp = "---\ntype: follow_up_note\ncreated: \"2025-01-05T00:00:00.000Z\"\n---\nFollow up.\n"
    static let correction = "---\ntype: correction\ncreated: \"2025-01-06T00:00:00.000Z\"\n---\nFix.\n"
    static let longName = String(repeating: "n", count: 250) + ".md"  // 253 bytes: n….json is 255

    static let rows: [Row] = [
        Row("a .md file in a folder is a document", given: [.mkdir("visits")], when: .write("visits/a.md", note),
            then: .shows(files: ["visits/a.md"], contains: ["visits/a.md": "# Visit"], documents: 2)),
        Row("any other file is an attachment (attachment_ref + sidecar)", given: [.mkdir("labs")], when: .writeBytes("labs/r.pdf", [1, 2, 3]),
            then: .shows(files: ["labs/r.pdf"], documents: 2)),
        Row("a .md file in X.children is a child of X", given: [.mkdir("visits"), .write("visits/a.md", note), .mkdir("visits/a.children")],
            when: .write("visits/a.children/01-addendum.md", addendum),
            then: .shows(files: ["visits/a.children/01-addendum.md", "visits/a.md"], contains: ["visits/a.children/01-addendum.md": "Addendum."],
                         documents: 2, children: 1)),
        Row("a restored child keeps its name and gains no fileName or updated",
            given: [.mkdir("visits"), .write("visits/a.md", note), .mkdir("visits/a.children")],
            when: .write("visits/a.children/01-addendum.md", addendum),
            then: .shows(files: ["visits/a.children/01-addendum.md", "visits/a.md"],
                         contains: ["visits/a.children/01-addendum.md": addendum])),
        Row("X.children written before X.md (rsync, tar, cp -a) holds X's children",
            given: [.mkdir("visits"), .mkdir("visits/a.children"), .write("visits/a.children/01-addendum.md", addendum)],
            when: .write("visits/a.md", note),
            then: .shows(files: ["visits/a.children/01-addendum.md", "visits/a.md"], contains: ["visits/a.md": note], documents: 2, children: 1)),
        Row("nested X.children/Y.children before Y.md and X.md",
            given: [.mkdir("visits"), .mkdir("visits/a.children"), .mkdir("visits/a.children/01-addendum.children"),
                    .write("visits/a.children/01-addendum.children/01-correction.md", "---\ntype: correction\ncreated: \"2025-01-04T00:00:00.000Z\"\n---\nFix.\n"),
                    .write("visits/a.children/01-addendum.md", addendum)],
            when: .write("visits/a.md", note),
            then: .shows(files: ["visits/a.children/01-addendum.children/01-correction.md", "visits/a.children/01-addendum.md", "visits/a.md"],
                         contains: ["visits/a.children/01-addendum.md": addendum, "visits/a.md": note], documents: 2, children: 2)),
        Row("an attachment in X.children before X.md", given: [.mkdir("labs"), .mkdir("labs/p.children")],
            when: .writeBytes("labs/p.children/01-scan.png", [0x89, 0x50, 0x4E, 0x47]),
            then: .shows(files: ["labs/p.children/01-scan.png", "labs/p.md"], documents: 2, children: 1)),
        // cp -a copies a folder in inode order: children come in any order.
        Row("children written out of order (cp -a) take the places their numbers give, with no fileName",
            given: [.mkdir("visits"), .write("visits/a.md", note), .mkdir("visits/a.children"),
                    .write("visits/a.children/03-follow-up-note.md", followUp), .write("visits/a.children/02-doctor-note.md", doctorNote)],
            when: .write("visits/a.children/01-addendum.md", addendum),
            then: .shows(files: ["visits/a.children/01-addendum.md", "visits/a.children/02-doctor-note.md",
                                 "visits/a.children/03-follow-up-note.md", "visits/a.md"],
                         contains: ["visits/a.children/01-addendum.md": addendum, "visits/a.children/02-doctor-note.md": doctorNote,
                                    "visits/a.children/03-follow-up-note.md": followUp], documents: 2, children: 3)),
        Row("a child's .children folder made before its own file, with a sibling written between, out of order",
            given: [.mkdir("visits"), .mkdir("visits/a.children"), .write("visits/a.children/02-doctor-note.md", doctorNote),
                    .mkdir("visits/a.children/01-addendum.children"),
                    .write("visits/a.children/01-addendum.children/01-correction.md", correction),
                    .write("visits/a.children/03-follow-up-note.md", followUp), .write("visits/a.md", note)],
            when: .write("visits/a.children/01-addendum.md", addendum),
            then: .shows(files: ["visits/a.children/01-addendum.children/01-correction.md", "visits/a.children/01-addendum.md",
                                 "visits/a.children/02-doctor-note.md", "visits/a.children/03-follow-up-note.md", "visits/a.md"],
                         contains: ["visits/a.children/01-addendum.md": addendum, "visits/a.children/02-doctor-note.md": doctorNote,
                                    "visits/a.children/03-follow-up-note.md": followUp, "visits/a.md": note,
                                    "visits/a.children/01-addendum.children/01-correction.md": correction],
                         documents: 2, children: 4)),
        Row("an empty .children folder follows its child when a sibling is written before that child",
            given: [.mkdir("visits"), .write("visits/a.md", note), .mkdir("visits/a.children"),
                    .write("visits/a.children/03-follow-up-note.md", followUp), .mkdir("visits/a.children/03-follow-up-note.children"),
                    .write("visits/a.children/02-doctor-note.md", doctorNote)],
            when: .write("visits/a.children/03-follow-up-note.children/01-correction.md", correction),
            then: .shows(files: ["visits/a.children/02-doctor-note.md", "visits/a.children/03-follow-up-note.children/01-correction.md",
                                 "visits/a.children/03-follow-up-note.md", "visits/a.md"],
                         contains: ["visits/a.children/03-follow-up-note.children/01-correction.md": correction],
                         documents: 2, children: 3)),
        Row("an attachment child written after a higher-numbered sibling goes before it",
            given: [.mkdir("labs"), .mkdir("labs/p.children"), .write("labs/p.children/02-doctor-note.md", doctorNote)],
            when: .writeBytes("labs/p.children/01-scan.png", [0x89, 0x50, 0x4E, 0x47]),
            then: .shows(files: ["labs/p.children/01-scan.png", "labs/p.children/02-doctor-note.md", "labs/p.md"],
                         contains: ["labs/p.children/02-doctor-note.md": doctorNote], documents: 2, children: 2)),
        Row("a new child numbered like a sibling leaves the siblings' names as they are",
            given: [.mkdir("visits"), .write("visits/a.md", note), .mkdir("visits/a.children"),
                    .write("visits/a.children/01-addendum.md", addendum), .write("visits/a.children/02-doctor-note.md", doctorNote)],
            when: .write("visits/a.children/01-extra.md", "More.\n"),
            then: .shows(files: ["visits/a.children/01-addendum.md", "visits/a.children/01-extra.md",
                                 "visits/a.children/02-doctor-note.md", "visits/a.md"],
                         contains: ["visits/a.children/01-addendum.md": addendum, "visits/a.children/01-extra.md": "More."],
                         documents: 2, children: 3)),
        Row("rename over an existing record replaces it", given: [.mkdir("visits"), .write("visits/a.md", note), .write("visits/b.md", "# B\n")],
            when: .rename("visits/a.md", "visits/b.md"),
            then: .shows(files: ["visits/b.md"], contains: ["visits/b.md": "# Visit"], documents: 2)),
        Row("rename across folders", given: [.mkdir("visits"), .mkdir("labs"), .write("visits/a.md", note)],
            when: .rename("visits/a.md", "labs/a.md"), then: .shows(files: ["labs/a.md"], contains: ["labs/a.md": "# Visit"])),
        Row("a record renamed to another extension keeps its bytes as an attachment",
            given: [.mkdir("visits"), .write("visits/a.md", note)], when: .rename("visits/a.md", "visits/a.txt"),
            then: .shows(files: ["visits/a.txt"], contains: ["visits/a.txt": note], documents: 2)),
        Row("an attachment renamed to .md becomes a record", given: [.mkdir("visits"), .write("visits/a.txt", "# Plain\n")],
            when: .rename("visits/a.txt", "visits/a.md"), then: .shows(files: ["visits/a.md"], contains: ["visits/a.md": "# Plain"], documents: 2)),
        Row("an attachment moved beside a record of its stem: its reference takes another name than the record's a.json",
            given: [.mkdir("visits"), .mkdir("labs"), .write("visits/a.md", note), .writeBytes("labs/a.txt", [1])],
            when: .rename("labs/a.txt", "visits/a.txt"), then: .shows(files: ["visits/a.md", "visits/a.txt"], contains: ["visits/a.md": note])),
        Row("a record moved beside an attachment of its stem: the attachment's reference x.json moves aside",
            given: [.mkdir("visits"), .mkdir("labs"), .writeBytes("labs/x.pdf", [1]), .write("visits/x.md", note)],
            when: .rename("visits/x.md", "labs/x.md"), then: .shows(files: ["labs/x.md", "labs/x.pdf"], contains: ["labs/x.md": note])),
        Row("an attachment renamed to another extension keeps its own git name", given: [.mkdir("labs"), .writeBytes("labs/a.txt", [1, 2])],
            when: .rename("labs/a.txt", "labs/a.pdf"), then: .shows(files: ["labs/a.pdf"], contains: [:])),
        Row("a record with children keeps a .md name",
            given: [.mkdir("visits"), .write("visits/a.md", note), .mkdir("visits/a.children"), .write("visits/a.children/01-addendum.md", addendum)],
            when: .rename("visits/a.md", "visits/a.txt"), then: .refused(.notPermitted)),
        Row("a .md whose git name an attachment's reference holds: the reference moves aside", given: [.mkdir("labs"), .writeBytes("labs/x.pdf", [1])],
            when: .write("labs/x.md", "# X\n"), then: .shows(files: ["labs/x.md", "labs/x.pdf"], documents: 3)),
        Row("an attachment whose reference's name a record holds takes another", given: [.mkdir("labs"), .write("labs/x.md", "# X\n")],
            when: .writeBytes("labs/x.pdf", [1]), then: .shows(files: ["labs/x.md", "labs/x.pdf"], documents: 3)),
        Row("a record renamed where an attachment's reference holds its git name: the reference moves aside",
            given: [.mkdir("labs"), .writeBytes("labs/x.pdf", [1]), .write("labs/y.md", "# Y\n")],
            when: .rename("labs/y.md", "labs/x.md"), then: .shows(files: ["labs/x.md", "labs/x.pdf"], contains: ["labs/x.md": "# Y"], documents: 3)),
        Row("an attachment renamed where a record holds its reference's name: the reference takes another",
            given: [.mkdir("labs"), .write("labs/x.md", "# X\n"), .writeBytes("labs/y.pdf", [1])],
            when: .rename("labs/y.pdf", "labs/x.pdf"), then: .shows(files: ["labs/x.md", "labs/x.pdf"], contains: ["labs/x.md": "# X"], documents: 3)),
        Row("a record renamed to an attachment's name, then a new record of its old name: both kept",
            given: [.mkdir("labs"), .write("labs/x.md", "# X\n"), .rename("labs/x.md", "labs/x.txt")],
            when: .write("labs/x.md", "# Y\n"), then: .shows(files: ["labs/x.md", "labs/x.txt"], contains: ["labs/x.md": "# Y", "labs/x.txt": "# X"], documents: 3)),
        Row("a record's name may have 253 bytes (its git name 255)", given: [.mkdir("visits")], when: .write("visits/" + longName, "# L\n"),
            then: .shows(files: ["visits/" + longName])),
        Row("a record's name of 254 bytes is too long for git", given: [.mkdir("visits")], when: .write("visits/x" + longName, "# L\n"),
            then: .refused(.fileNameTooLong)),
        Row("an attachment's name may have 251 bytes (its sidecar 255)", given: [.mkdir("labs")],
            when: .writeBytes("labs/" + String(repeating: "a", count: 247) + ".pdf", [1]), then: .shows(files: ["labs/" + String(repeating: "a", count: 247) + ".pdf"])),
        Row("an attachment's name of 252 bytes is too long for git", given: [.mkdir("labs")],
            when: .writeBytes("labs/" + String(repeating: "a", count: 248) + ".pdf", [1]), then: .refused(.fileNameTooLong)),
        Row("a child attachment with a long name gets a sidecar that fits", given: [.mkdir("visits"), .write("visits/a.md", note), .mkdir("visits/a.children")],
            when: .writeBytes("visits/a.children/" + String(repeating: "s", count: 251) + ".png", [1]),
            then: .shows(files: ["visits/a.children/" + String(repeating: "s", count: 251) + ".png", "visits/a.md"], children: 1)),
        Row("a 256-byte name is too long anywhere", given: [.mkdir("visits")], when: .write("visits/" + String(repeating: "x", count: 253) + ".md", "# L\n"),
            then: .refused(.fileNameTooLong)),
        Row("patient-info's unlink stores nothing (it is held for its replacement)", when: .remove("patient-info.md"), then: .unchanged),
        Row("patient-info unlinked then written again is replaced, as tar -x does",
            given: [.remove("patient-info.md")], when: .write("patient-info.md", "# Restored\n"),
            then: .shows(files: [], contains: ["patient-info.md": "# Restored"], documents: 1)),
        Row("patient-info cannot be moved away", given: [.mkdir("visits")], when: .rename("patient-info.md", "visits/p.md"),
            then: .refused(.notPermitted)),
        Row("a folder named .git is refused", when: .mkdir(".git"), then: .refused(.notPermitted)),
        Row("a folder named .GIT deeper down is refused", given: [.mkdir("visits")], when: .mkdir("visits/.GIT"), then: .refused(.notPermitted)),
        Row("no folders inside a record's children", given: [.mkdir("visits"), .write("visits/a.md", note), .mkdir("visits/a.children")],
            when: .mkdir("visits/a.children/sub"), then: .refused(.notPermitted)),
        Row("rmdir of a folder with records", given: [.mkdir("visits"), .write("visits/a.md", note)], when: .rmdir("visits"),
            then: .refused(.directoryNotEmpty)),
        Row("front matter that does not parse", given: [.mkdir("visits")], when: .write("visits/a.md", "---\na: b: c\n---\nx"),
            then: .refused(.invalidArgument)),
        Row("a record over 65,535 bytes", given: [.mkdir("visits")], when: .write("visits/a.md", String(repeating: "x", count: 70_000)),
            then: .refused(.fileTooLarge)),
        Row("a record under 65,535 bytes whose JSON is over (newlines are two bytes there)", given: [.mkdir("visits")],
            when: .write("visits/a.md", String(repeating: "\n", count: 40_000) + "x"), then: .refused(.fileTooLarge)),
        Row("a record over 65,535 bytes as shown whose JSON is under is saved (the limit is on what is stored)", given: [.mkdir("visits")],
            when: .write("visits/a.md", deepFrontMatter), then: .shows(files: ["visits/a.md"], contains: ["visits/a.md": "# Deep"], documents: 2)),
        Row("an updated: the writer changed is kept", given: [.mkdir("visits"), .write("visits/a.md", note)],
            when: .write("visits/a.md", note.replacingOccurrences(of: "updated: \"2025-01-02T03:04:05.000Z\"", with: "updated: \"2020-05-06T07:08:09.000Z\"")),
            then: .shows(files: ["visits/a.md"], contains: ["visits/a.md": "updated: \"2020-05-06T07:08:09.000Z\""])),
        Row("an unchanged updated: becomes now", given: [.mkdir("visits"), .write("visits/a.md", note)],
            when: .write("visits/a.md", note + "More.\n"),
            then: .shows(files: ["visits/a.md"], contains: ["visits/a.md": "More."], lacks: ["visits/a.md": "updated: \"2025-01-02"])),
        Row("the same bytes saved again make no commit", given: [.mkdir("visits"), .write("visits/a.md", note)],
            when: .write("visits/a.md", note), then: .unchanged),
        Row("a time set on a record is its updated", given: [.mkdir("visits"), .write("visits/a.md", note)],
            when: .touch("visits/a.md", seconds: 1_600_000_000),
            then: .shows(files: ["visits/a.md"], contains: ["visits/a.md": "updated: \"2020-09-13T12:26:40.000Z\""])),
        Row("a time set on the root is accepted and ignored", when: .touch("", seconds: 1_600_000_000), then: .unchanged),
        Row("a record renamed within a children folder keeps its place",
            given: [.mkdir("visits"), .write("visits/a.md", note), .mkdir("visits/a.children"), .write("visits/a.children/01-addendum.md", addendum)],
            when: .rename("visits/a.children/01-addendum.md", "visits/a.children/later.md"),
            then: .shows(files: ["visits/a.children/later.md", "visits/a.md"], documents: 2, children: 1)),
    ]

    func testEveryRule() throws {
        for row in Self.rows {
            try check(row)
        }
    }

    // MARK: - Running a row

    private func check(_ row: Row) throws {
        let binder = try TestBinder()
        defer { binder.remove() }
        for step in row.given {
            do { try binder.apply(step) } catch { return XCTFail("\(row.rule): given \(step) failed: \(error)") }
        }
        let before = try binder.repository.refs.branchTip()
        let outcome: Result<Void, Error> = Result { try binder.apply(row.when) }
        switch (row.then, outcome) {
        case (.refused(let errno), .failure(let error)):
            XCTAssertEqual((error as? WriteError)?.errno, errno, "\(row.rule): \(error)")
            XCTAssertEqual(try binder.repository.refs.branchTip(), before, "\(row.rule): a refusal changed main")
        case (.refused(let errno), .success):
            XCTFail("\(row.rule): \(row.when) succeeded; expected \(errno)")
        case (_, .failure(let error)):
            XCTFail("\(row.rule): \(row.when) failed: \(error)")
        case (.unchanged, .success):
            XCTAssertEqual(try binder.repository.refs.branchTip(), before, "\(row.rule): a commit was made")
        case (.shows(let files, let contains, let lacks, let documents, let children), .success):
            let view = try BinderView(repository: binder.repository, key: binder.key, logger: binder.logger)  // as a fresh mount sees it
            XCTAssertEqual(try TestBinder.files(view), files, row.rule)
            for (path, text) in contains {
                let content = String(decoding: try TestBinder.read(view, path), as: UTF8.self)
                XCTAssertTrue(text.hasSuffix("\n") ? content == text : content.contains(text), "\(row.rule): \(path) holds \(content)")
            }
            for (path, text) in lacks {
                XCTAssertFalse(String(decoding: try TestBinder.read(view, path), as: UTF8.self).contains(text), "\(row.rule): \(path)")
            }
            let counts = try binder.documentCounts()
            if let documents { XCTAssertEqual(counts.documents, documents, "\(row.rule): documents") }
            if let children { XCTAssertEqual(counts.children, children, "\(row.rule): children") }
            XCTAssertTrue(try BinderVerifier(repository: binder.repository, key: binder.key).verify().problems.isEmpty, "\(row.rule): verify")
        }
    }
}

/// A fresh binder in a temporary folder, driven through `BinderView` as the mount would.
final class TestBinder {
    let directory: URL
    let key: NIP44.ConversationKey
    let repository: GitRepository
    let view: BinderView
    let logger = Logger(label: "test")

    init(options: BinderView.Options = BinderView.Options()) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("binder-rules-\(UUID().uuidString)")
        key = try NIP44.ConversationKey(selfOf: try SecretKey.generate())
        _ = try BinderCreator.create(at: directory.path, key: key, patientName: "Test Patient", dateOfBirth: nil,
                                     author: Signature(name: "t", email: "t@t"))
        repository = try GitRepository.open(path: directory.path)
        view = try BinderView(repository: repository, key: key, logger: logger, options: options)
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }

    func apply(_ step: WriteRuleTests.Step) throws {
        switch step {
        case .mkdir(let path): try view.makeDirectory(path)
        case .write(let path, let text): try write(path, Array(text.utf8))
        case .writeBytes(let path, let bytes): try write(path, bytes)
        case .rename(let from, let to): try view.rename(from, to: to)
        case .remove(let path): try view.remove(path)
        case .rmdir(let path): try view.removeDirectory(path)
        case .touch(let path, let seconds): try view.setModified(path, to: Timestamp(seconds: seconds))
        }
    }

    /// As a program writes: create (or open with O_TRUNC), write, close.
    func write(_ path: String, _ bytes: [UInt8]) throws {
        let handle = (try? view.attributes(path)) == nil ? try view.create(path) : try view.openForWriting(path, truncate: true)
        defer { view.release(handle: handle) }
        _ = try bytes.withUnsafeBytes { try view.write(handle: handle, offset: 0, $0) }
        try view.flush(handle: handle, closing: true)
    }

    /// Every file below the root, but patient-info.md, sorted.
    static func files(_ view: BinderView, in folder: String = "") throws -> [String] {
        var out: [String] = []
        for entry in try view.list(folder) {
            let path = folder.isEmpty ? entry.name : folder + "/" + entry.name
            if entry.attributes.kind == .directory { out += try files(view, in: path) } else if path != "patient-info.md" { out.append(path) }
        }
        return out.sorted()
    }

    static func read(_ view: BinderView, _ path: String) throws -> [UInt8] {
        let handle = try view.open(path)
        defer { view.release(handle: handle) }
        var out = [UInt8](repeating: 0, count: try view.attributes(path).size)
        _ = try out.withUnsafeMutableBytes { try view.read(handle: handle, offset: 0, into: $0) }
        return out
    }

    /// Documents (`.json` but `.meta.json`) at `main`, and their children at any depth.
    func documentCounts() throws -> (documents: Int, children: Int) {
        guard let tip = try repository.refs.branchTip() else { return (0, 0) }
        var documents = 0, children = 0
        func count(_ document: MedicalDocument) { for child in document.children { children += 1; count(child) } }
        for entry in try repository.trees.listTree(commit: tip) where entry.kind == .blob && entry.path.hasSuffix(".json") && !entry.path.hasSuffix(".meta.json") {
            documents += 1
            count(try BinderReader.readDocument(try repository.objects.readBlob(entry.id), key: key, gitPath: entry.path))
        }
        return (documents, children)
    }
}
