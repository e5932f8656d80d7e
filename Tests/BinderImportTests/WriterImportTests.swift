import BinderCore
import BinderCrypto
import BinderFormat
import BinderGit
@testable import BinderImport
import Foundation
import XCTest

/// An import done by the binder's one writer (`WriterImport`, as a mount does it), without a
/// kernel: the request crosses as bytes, is planned against the tip, and is planned again when
/// the tip moved before its commit (a save, another import), never adding a record twice.
final class WriterImportTests: XCTestCase {
    var directory: URL!
    var repository: GitRepository!
    var key: NIP44.ConversationKey!
    let author = Signature(name: "t", email: "t@t")

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("binder-writer-import-\(UUID().uuidString)")
        key = try NIP44.ConversationKey(selfOf: try SecretKey.generate())
        _ = try BinderCreator.create(at: directory.path, key: key, patientName: "Mei-Ling Chen", dateOfBirth: "1985-02-14", author: author)
        repository = try GitRepository.open(path: directory.path)
    }

    override func tearDown() { try? FileManager.default.removeItem(at: directory) }

    var importer: BinderImporter { BinderImporter(repository: repository, key: key, author: author) }

    func request(dryRun: Bool = false, force: Bool = false) throws -> ImportRequest {
        ImportRequest(sources: [try ImportFixtures.read("ccd.xml")], documentsFolder: "documents", importDate: "2026-12-06", now: 1_780_000_000,
                      force: force, dryRun: dryRun)
    }

    /// Runs `body` at once, as a writer with nothing else going on.
    func alone(_ body: (ObjectID?) throws -> ObjectID?) throws -> ObjectID? { try body(try repository.refs.branchTip()) }

    func commits() throws -> Int {
        var count = 0
        var next = try repository.refs.branchTip()
        while let id = next {
            count += 1
            next = try repository.commits.commit(id).parents.first
        }
        return count
    }

    func paths() throws -> [String] {
        try repository.trees.listTree(commit: try XCTUnwrap(try repository.refs.branchTip())).map(\.path).filter(BinderNaming.isDocumentPath)
    }

    func testARequestCrossesAsBytesAndPlansTheSame() throws {
        let original = try request()
        let decoded = try ImportRequest(decoding: try original.encoded())
        let direct = original.planner.plan(original.sources, existing: [])
        let crossed = decoded.planner.plan(decoded.sources, existing: [])
        XCTAssertEqual(crossed.created.map(\.gitPath), direct.created.map(\.gitPath))
        XCTAssertEqual(crossed.created.map { $0.document.serializedBytes() }, direct.created.map { $0.document.serializedBytes() })
        XCTAssertEqual(crossed.created.flatMap { $0.attachments.map(\.bytes) }, direct.created.flatMap { $0.attachments.map(\.bytes) })
        XCTAssertEqual(crossed.skipped, direct.skipped)
        XCTAssertEqual(decoded.sources.first?.bytes, try ImportFixtures.bytes("ccd.xml"), "the kept document's bytes intact")
    }

    func testOneImportIsOneCommitAndASecondAddsNothing() throws {
        let before = try commits()
        let first = try WriterImport.run(try request(), importer: importer, serialised: alone)
        XCTAssertNotNil(first.commit)
        XCTAssertEqual(first.plan.created.count, 12)
        XCTAssertEqual(try commits(), before + 1)
        // The summary crosses back: names and counts, no content.
        let answered = try ImportOutcome(decoding: try first.encoded())
        XCTAssertEqual(answered.commit, first.commit)
        XCTAssertEqual(answered.plan.created.map(\.gitPath), first.plan.created.map(\.gitPath))
        XCTAssertEqual(answered.plan.attachmentCount, 1)
        XCTAssertEqual(answered.plan.skipped, first.plan.skipped)
        let second = try WriterImport.run(try request(), importer: importer, serialised: alone)
        XCTAssertNil(second.commit)
        XCTAssertTrue(second.plan.isEmpty)
        XCTAssertEqual(try commits(), before + 1)
    }

    func testADryRunStoresNothing() throws {
        let tip = try repository.refs.branchTip()
        let outcome = try WriterImport.run(try request(dryRun: true), importer: importer) { _ in
            XCTFail("a dry run asked to store")
            return nil
        }
        XCTAssertNil(outcome.commit)
        XCTAssertEqual(outcome.plan.created.count, 12)
        XCTAssertEqual(try repository.refs.branchTip(), tip)
    }

    /// The same import landed between this one's plan and its commit: planned again against
    /// the new tip, it adds nothing (no record twice).
    func testATipThatMovedIsPlannedAgainAndNothingIsAddedTwice() throws {
        let request = try request()
        let outcome = try WriterImport.run(request, importer: importer) { store in
            _ = try importer.store(try WriterImport.planned(request, importer: importer, at: try repository.refs.branchTip()))
            return try alone(store)
        }
        XCTAssertNil(outcome.commit)
        XCTAssertTrue(outcome.plan.isEmpty)
        XCTAssertEqual(try paths().filter { $0.hasPrefix("medications/") }.count, 2)
    }

    /// A save landed meanwhile (a record written through the mount): kept, and the import on top.
    func testASaveMadeMeanwhileIsKept() throws {
        let outcome = try WriterImport.run(try request(), importer: importer) { store in
            let writer = BinderWriter(repository: repository, key: key, author: author)
            try writer.putDocument(MedicalDocument(type: "note", value: "# Saved meanwhile\n", now: "2026-12-06T10:00:00.000Z"), at: "notes/saved.json")
            try writer.commit(message: "Add entry")
            return try alone(store)
        }
        XCTAssertNotNil(outcome.commit)
        XCTAssertTrue(try paths().contains("notes/saved.json"))
        XCTAssertEqual(try paths().filter { $0.hasPrefix("conditions/") }.count, 2)
        XCTAssertEqual(try repository.commits.commit(try XCTUnwrap(try repository.refs.branchTip())).summary, "Import records")
    }

    func testADocumentAboutSomeoneElseIsRefusedUnlessForced() throws {
        _ = try BinderWriter(repository: repository, key: key, author: author).with {
            try $0.putDocument(MedicalDocument(type: "patient-info", value: "# Someone Else\n\nDOB: 1950-01-01\n", now: "2026-01-01T00:00:00.000Z"),
                               at: BinderNaming.patientInfoPath)
        }
        XCTAssertThrowsError(try WriterImport.run(try request(), importer: importer, serialised: alone)) { error in
            guard case .differentPatient(let file, _) = error as? WriterImport.Failure else { return XCTFail("\(error)") }
            XCTAssertEqual(file, "ccd.xml")
        }
        XCTAssertNotNil(try WriterImport.run(try request(force: true), importer: importer, serialised: alone).commit)
    }

    /// The fuzz target's seeds (made by make-seeds.py in Python, not by this code) decode as
    /// the request they spell; one naming a folder out of the binder, or bytes past its end, is refused.
    func testTheFuzzSeedsAreReadAsWritten() throws {
        let corpus = ImportFixtures.directory.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fuzz/corpus/import-request")
        let request = try ImportRequest(decoding: Array(try Data(contentsOf: corpus.appendingPathComponent("request"))))
        XCTAssertTrue(request.dryRun)
        XCTAssertEqual(request.sources.map(\.file), ["ccd.xml"])
        let records = try XCTUnwrap(request.sources.first?.records)
        XCTAssertEqual(records.map(\.folder), ["conditions", "medications"])
        XCTAssertEqual(records[0].codes.map(\.code), ["195967001", "J45"])
        XCTAssertEqual(records[0].attachments.first?.bytes, Array("%PDF-1.4\n%%EOF\n".utf8))
        XCTAssertEqual(records[0].frontMatter?["tags"], .array(["lungs"]))
        XCTAssertEqual(records[1].preferredPath, "medications/metoprolol.md")
        XCTAssertEqual(request.sources.first?.patient, PatientFacts(name: "Mei-Ling Chen", birthDate: "1985-02-14"))
        XCTAssertEqual(records[0].updated, "2005-01-02T00:00:00.000Z")
        XCTAssertEqual(request.sources.first?.bytes, Array("<ClinicalDocument/>".utf8))
        // The first find: a binary property list on which Foundation's decoder trapped, when requests were ones.
        for refused in ["request-folder-out", "request-bytes-out", "bplist-that-trapped"] {
            XCTAssertThrowsError(try ImportRequest(decoding: Array(try Data(contentsOf: corpus.appendingPathComponent(refused)))), refused)
        }
        let outcome = try ImportOutcome(decoding: Array(try Data(contentsOf: corpus.appendingPathComponent("outcome"))))
        XCTAssertEqual(outcome.plan.created.map(\.gitPath), ["conditions/a.json"])
        XCTAssertEqual(outcome.plan.unchanged, 3)
    }

    /// Bytes that are not a request, or a request naming paths binder would not make: refused, never trusted.
    func testWhatIsNotARequestIsRefused() throws {
        var outOfFolder = try request()
        outOfFolder.sources[0].records[0].folder = "../outside"
        var hiddenFolder = try request()
        hiddenFolder.documentsFolder = ".git"
        var badName = try request()
        badName.sources[0].records[0].attachments = [ImportedAttachment(fileName: "a/../b.pdf", format: "pdf", bytes: [1])]
        var notADate = try request()
        notADate.sources[0].records[0].created = "/.05-01-01"
        var badExtension = try request()
        badExtension.sources[0].keptExtension = "x/../y"
        let encoded = try request().encoded()
        let rows: [(String, [UInt8])] = [
            ("empty", []),
            ("text", Array("import 12\n".utf8)),
            ("cut short", Array(encoded.prefix(encoded.count / 2))),
            ("a JSON longer than the request", [0, 0, 0, 0, 0, 0, 1, 0] + Array("{}".utf8)),
            ("a JSON length past Int", [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF] + Array("{}".utf8)),
            ("a folder out of the binder", try outOfFolder.encoded()),
            ("a hidden documents folder", try hiddenFolder.encoded()),
            ("an attachment name with a slash", try badName.encoded()),
            // The fuzz target's find: a created that is no date named a file `conditions//.05-01-01-….json`.
            ("a created that is no date", try notADate.encoded()),
            ("a kept extension with slashes", try badExtension.encoded()),
        ]
        for (name, bytes) in rows {
            XCTAssertThrowsError(try ImportRequest(decoding: bytes), name) { error in
                guard case .malformedRequest = error as? WriterImport.Failure else { return XCTFail("\(name): \(error)") }
            }
        }
    }
}

private extension BinderWriter {
    /// Stages with `body` and commits.
    func with(_ body: (BinderWriter) throws -> Void) throws -> ObjectID {
        try body(self)
        return try commit(message: "Update entry")
    }
}
