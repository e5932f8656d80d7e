import BinderCore
import BinderCrypto
import BinderFormat
import BinderGit
import Foundation
import Logging
import XCTest

/// The write side of the view, without a kernel: each change is one commit in the apps' format.
final class WriteEngineTests: XCTestCase {
    var directory: URL!
    var repository: GitRepository!
    var key: NIP44.ConversationKey!
    var view: BinderView!
    let logger = Logger(label: "test")

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("binder-core-\(UUID().uuidString)")
        key = try NIP44.ConversationKey(selfOf: try SecretKey.generate())
        _ = try BinderCreator.create(at: directory.path, key: key, patientName: "Test Patient", dateOfBirth: nil,
                                     author: Signature(name: "t", email: "t@t"))
        repository = try GitRepository.open(path: directory.path)
        view = try BinderView(repository: repository, key: key, logger: logger)
    }

    override func tearDown() { try? FileManager.default.removeItem(at: directory) }

    func git(_ arguments: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", "git --git-dir='\(directory.path)' \(arguments)"]
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("git-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: out) }
        process.standardOutput = try FileHandle(forWritingTo: out)
        try process.run()
        process.waitUntilExit()
        return String(decoding: try Data(contentsOf: out), as: UTF8.self)
    }

    func stored(_ gitPath: String) throws -> MedicalDocument {
        let tip = try XCTUnwrap(try repository.refs.branchTip())
        let entry = try XCTUnwrap(try repository.trees.entry(at: gitPath, commit: tip), gitPath)
        let plaintext = try NIP44.decrypt(payload: try repository.objects.readBlob(entry.id), key: key)
        return try MedicalDocument(plaintext: plaintext.copyBytes())
    }

    func read(_ path: String) throws -> [UInt8] {
        let handle = try view.open(path)
        defer { view.release(handle: handle) }
        var out = [UInt8](repeating: 0, count: try view.attributes(path).size)
        _ = try out.withUnsafeMutableBytes { try view.read(handle: handle, offset: 0, into: $0) }
        return out
    }

    func testNewRecordInNewFolderThenUpdate() throws {
        try view.makeDirectory("visits")
        try view.store("visits/2026-02-09-follow-up.md", content: Array("---\nprovider: Dr. Who\nnpi: \"0123\"\n---\n# Follow-up\n\nAll good.\n".utf8))
        let document = try stored("visits/2026-02-09-follow-up.json")
        XCTAssertEqual(document.type, "visit")
        XCTAssertEqual(document.metadata["npi"], "0123")
        XCTAssertEqual(document.value, "# Follow-up\n\nAll good.\n")
        XCTAssertNotNil(document.created)
        XCTAssertEqual(document.validate(), [])
        XCTAssertEqual(try git("log --format=%s main"), "Add visits entry\nAdd folder\nInitialize binder\n")
        XCTAssertNotNil(try repository.trees.entry(at: "visits/.meta.json", commit: try XCTUnwrap(try repository.refs.branchTip())))

        // Saved without front matter: metadata kept, `updated` moves, value replaced.
        Thread.sleep(forTimeInterval: 0.01)
        try view.store("visits/2026-02-09-follow-up.md", content: Array("# Follow-up\n\nEdited.".utf8))
        let edited = try stored("visits/2026-02-09-follow-up.json")
        XCTAssertEqual(edited.value, "# Follow-up\n\nEdited.")
        XCTAssertEqual(edited.metadata["provider"], "Dr. Who")
        XCTAssertEqual(edited.created, document.created)
        XCTAssertNotEqual(edited.updated, document.updated)
        XCTAssertEqual(try git("log -1 --format=%s main"), "Update entry\n")
        // The view shows the new version.
        let shown = try FrontMatter.parse(try read("visits/2026-02-09-follow-up.md"))
        XCTAssertEqual(shown.value, "# Follow-up\n\nEdited.")
        XCTAssertEqual(try git("fsck --strict 2>&1 && echo clean"), "clean\n")
    }

    func testAttachmentsChildrenRenameRemove() throws {
        try view.makeDirectory("labs")
        try view.store("labs/2026-02-10-lipid-panel.md", content: Array("# Lipids\n".utf8))
        let pdf = Array("%PDF-1.4 report".utf8)
        try view.store("labs/report.pdf", content: pdf)
        XCTAssertEqual(try read("labs/report.pdf"), pdf)
        let ref = try stored("labs/report.json")
        XCTAssertEqual(ref.type, "attachment_ref")
        XCTAssertEqual(ref.value, "report.pdf.enc")
        XCTAssertEqual(ref.metadata["format"], "pdf")
        XCTAssertEqual(ref.metadata["originalSizeBytes"]?.intValue, pdf.count)

        // A first child: mkdir X.children commits nothing, a written child does.
        let before = try git("rev-parse main")
        try view.makeDirectory("labs/2026-02-10-lipid-panel.children")
        XCTAssertEqual(try git("rev-parse main"), before)
        try view.store("labs/2026-02-10-lipid-panel.children/doctor note.md", content: Array("Repeat in 6 months.\n".utf8))
        try view.store("labs/2026-02-10-lipid-panel.children/scan.png", content: [0x89, 0x50, 0x4E, 0x47])
        let parent = try stored("labs/2026-02-10-lipid-panel.json")
        XCTAssertEqual(parent.children.count, 2)
        XCTAssertEqual(parent.children[0].metadata["fileName"], "doctor note.md")
        XCTAssertEqual(parent.children[0].type, "addendum")
        XCTAssertEqual(parent.children[1].type, "attachment_ref")
        XCTAssertEqual(Set(try view.list("labs/2026-02-10-lipid-panel.children").map(\.name)), ["doctor note.md", "scan.png"])
        XCTAssertEqual(try read("labs/2026-02-10-lipid-panel.children/scan.png"), [0x89, 0x50, 0x4E, 0x47])

        // Rename: a record keeps its ciphertext; an attachment's reference follows its sidecar.
        let blob = try git("rev-parse main:labs/2026-02-10-lipid-panel.json")
        try view.makeDirectory("archive")
        try view.rename("labs/2026-02-10-lipid-panel.md", to: "archive/lipids.md")
        XCTAssertEqual(try git("rev-parse main:archive/lipids.json"), blob)
        XCTAssertEqual(try git("log -1 --format=%s main"), "Rename entry\n")
        XCTAssertEqual(Set(try view.list("archive").map(\.name)), ["lipids.md", "lipids.children"])
        XCTAssertEqual(try read("archive/lipids.children/scan.png"), [0x89, 0x50, 0x4E, 0x47])
        try view.rename("labs/report.pdf", to: "labs/lipid-report.pdf")
        XCTAssertEqual(try stored("labs/lipid-report.json").value, "lipid-report.pdf.enc")
        XCTAssertEqual(try read("labs/lipid-report.pdf"), pdf)
        XCTAssertThrowsError(try view.rename("labs/lipid-report.pdf", to: "archive/lipids.md", noReplace: true)) {
            XCTAssertEqual($0 as? WriteError, .exists("archive/lipids.md"))
        }
        // A child renamed within its folder keeps its place.
        try view.rename("archive/lipids.children/doctor note.md", to: "archive/lipids.children/01-note.md")
        XCTAssertEqual(try stored("archive/lipids.json").children[0].metadata["fileName"], "01-note.md")

        // Remove: a child and its sidecar, then the record, then the attachment.
        try view.remove("archive/lipids.children/scan.png")
        XCTAssertEqual(try stored("archive/lipids.json").children.count, 1)
        try view.remove("archive/lipids.md")
        try view.remove("labs/lipid-report.pdf")
        XCTAssertEqual(try git("ls-tree -r --name-only main"), "archive/.meta.json\nlabs/.meta.json\npatient-info.json\n")
        try view.removeDirectory("archive")
        XCTAssertThrowsError(try view.removeDirectory("labs/missing")) { XCTAssertEqual($0 as? WriteError, .notFound("labs/missing")) }
        XCTAssertEqual(try git("fsck --strict 2>&1 && echo clean"), "clean\n")
    }

    /// A folder renamed takes every folder below it along, whatever their names begin with:
    /// a subfolder named with a leading combining mark was left out of the move (its `/` and
    /// the mark are one `Character`) and then deleted with the old folder.
    func testAFolderMovesWithSubfoldersWhoseNamesBeginWithACombiningMark() throws {
        try view.makeDirectory("labs")
        try view.makeDirectory("labs/\u{301}old")
        try view.store("labs/\u{301}old/result.md", content: Array("# Result\n\nkept\n".utf8))
        try view.store("labs/top.md", content: Array("# Top\n".utf8))
        try view.rename("labs", to: "archive")
        XCTAssertEqual(try stored("archive/\u{301}old/result.json").value, "# Result\n\nkept\n")
        XCTAssertEqual(try stored("archive/top.json").value, "# Top\n")
        XCTAssertEqual(String(decoding: try read("archive/\u{301}old/result.md"), as: UTF8.self).hasSuffix("# Result\n\nkept\n"), true)
        let tip = try XCTUnwrap(try repository.refs.branchTip())
        XCTAssertNil(try repository.trees.entry(at: "labs", commit: tip))
        XCTAssertThrowsError(try view.rename("archive", to: "archive/\u{301}old/inside"))
    }

    func testBadInputChangesNothing() throws {
        try view.makeDirectory("visits")
        try view.store("visits/a.md", content: Array("# A\n".utf8))
        let tip = try git("rev-parse main")
        XCTAssertThrowsError(try view.store("visits/a.md", content: Array("---\n: : [\n---\nbody".utf8))) {
            guard case .invalid = $0 as? WriteError else { return XCTFail("\($0)") }
        }
        let huge = "---\ntype: visit\n---\n" + String(repeating: "x", count: 70_000)
        XCTAssertThrowsError(try view.store("visits/a.md", content: Array(huge.utf8))) {
            guard case .tooLarge = $0 as? WriteError else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try view.store("visits/b.md", content: [0xFF, 0xFE, 0x00])) {
            guard case .invalid = $0 as? WriteError else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try view.store("nowhere/b.md", content: Array("x".utf8)))
        XCTAssertThrowsError(try view.store(".binder/status", content: Array("x".utf8)))
        XCTAssertEqual(try git("rev-parse main"), tip)
        XCTAssertEqual(try stored("visits/a.json").value, "# A\n")
    }

    func testAConcurrentWriterIsNotLost() throws {
        try view.makeDirectory("visits")
        let other = try BinderView(repository: try GitRepository.open(path: directory.path), key: key, logger: logger)
        try other.store("visits/from-other.md", content: Array("# Other\n".utf8))
        // This view's snapshot is now behind; its write plans again on the new tip.
        try view.store("visits/from-this.md", content: Array("# This\n".utf8))
        XCTAssertEqual(try git("ls-tree --name-only main visits/"), "visits/.meta.json\nvisits/from-other.json\nvisits/from-this.json\n")
    }

    func testAWriteRebuildsOnlyTheFoldersItTouched() throws {
        try view.makeDirectory("visits")
        try view.makeDirectory("labs")
        try view.store("labs/a.md", content: Array("# A\n".utf8))
        _ = try view.list("labs")
        _ = try view.list("visits")
        try view.store("visits/b.md", content: Array("# B\n".utf8))
        // (The commit itself reads the record it wrote: visits' listing is patched in place.)
        let reads = view.statistics.objectReads
        _ = try view.list("labs")
        XCTAssertEqual(view.statistics.objectReads, reads, "labs was listed again")
        XCTAssertEqual(try view.list("visits").map(\.name), ["b.md"])
    }

    /// An editor's saves of one record: the second is planned and listed from the plaintext the
    /// first encrypted (`WrittenDocuments`), read from git neither time, and keeps exactly what
    /// the record held (its `created`, its metadata when the file has no front matter).
    func testSavingARecordAgainReadsNoObjectAndKeepsWhatItHeld() throws {
        try view.makeDirectory("visits")
        try view.store("visits/a.md", content: Array("---\ncreated: \"2020-05-06T07:08:09.123Z\"\nprovider: Dr. Who\n---\n# A\n".utf8))
        _ = try view.list("visits")
        let first = try stored("visits/a.json")
        let reads = view.statistics.objectReads
        try view.store("visits/a.md", content: Array("# A, again\n".utf8))
        XCTAssertEqual(view.statistics.objectReads, reads, "the save read its record from git again")
        let second = try stored("visits/a.json")
        XCTAssertEqual(second.value, "# A, again\n")
        XCTAssertEqual(second.metadata["created"], first.metadata["created"])
        XCTAssertNotNil(first.metadata["created"])
        var kept = second.metadata, before = first.metadata
        kept["updated"] = nil
        before["updated"] = nil
        XCTAssertEqual(kept, before)
        // What the view shows is what a view opened afresh shows.
        let shown = try read("visits/a.md")
        view = try BinderView(repository: repository, key: key, logger: logger)
        XCTAssertEqual(try read("visits/a.md"), shown)
        XCTAssertGreaterThan(view.statistics.objectReads, 0)
    }

    func testMovingAChildWithinOneRecordIsRefusedNotCorrupted() throws {
        let writer = BinderWriter(repository: repository, key: key, author: Signature(name: "t", email: "t@t"))
        let nested = MedicalDocument(value: "# Visit\n", metadata: ["type": "visit", "created": "2026-01-01T00:00:00.000Z"], children: [
            MedicalDocument(value: "Addendum\n", metadata: ["type": "addendum", "created": "2026-01-02T00:00:00.000Z"], children: [
                MedicalDocument(value: "Reply\n", metadata: ["type": "follow_up_note", "created": "2026-01-03T00:00:00.000Z"]),
            ]),
        ])
        try writer.putFolder("visits", displayName: "Visits")
        try writer.putDocument(nested, at: "visits/v.json")
        try writer.commit(message: "Add visits entry")
        let view = try BinderView(repository: repository, key: key, logger: logger)
        XCTAssertEqual(try view.list("visits/v.children/01-addendum.children").map(\.name), ["01-follow-up-note.md"])
        let tip = try git("rev-parse main")
        XCTAssertThrowsError(try view.rename("visits/v.children/01-addendum.children/01-follow-up-note.md", to: "visits/v.children/reply.md")) {
            guard case .invalid = $0 as? WriteError else { return XCTFail("\($0)") }
        }
        XCTAssertEqual(try git("rev-parse main"), tip)
        XCTAssertEqual(try stored("visits/v.json"), nested)
    }

    /// O_APPEND: a write goes to the end of the file as the view holds it, whatever offset the
    /// kernel gives (it computes one from a size it may have cached before a commit re-rendered
    /// the file, as `binder new --edit`'s `>>` right after the record was created).
    func testAnAppendingWriteGoesToTheEndWhateverOffsetTheKernelGives() throws {
        try view.makeDirectory("visits")
        try view.store("visits/note.md", content: Array("# Note\n\nFirst.\n".utf8))
        let handle = try view.openForWriting("visits/note.md", truncate: false, append: true)
        let line = Array("Second.\n".utf8)
        // A stale offset: the length of what was written, shorter than the rendered file.
        _ = try line.withUnsafeBytes { try view.write(handle: handle, offset: 15, $0) }
        _ = try view.flush(handle: handle, closing: true)
        _ = view.release(handle: handle)
        XCTAssertEqual(try stored("visits/note.json").value, "# Note\n\nFirst.\nSecond.\n")
    }

    func testNothingButCiphertextIsStored() throws {
        try view.makeDirectory("visits")
        try view.store("visits/secret.md", content: Array("---\nprovider: Dr. Canary-7731\n---\nCANARY-PLAINTEXT-7731\n".utf8))
        try view.store("visits/scan.txt", content: Array("CANARY-ATTACHMENT-7731".utf8))
        let objects = try git("cat-file --batch-all-objects --batch")
        XCTAssertFalse(objects.contains("CANARY") || objects.contains("Canary"), "plaintext reached git")
        XCTAssertFalse(try git("log --format=%B main").contains("anary"))
    }
}
