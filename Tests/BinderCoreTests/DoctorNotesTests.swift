import BinderCrypto
import BinderFormat
import BinderGit
import Foundation
import XCTest

@testable import BinderCore

/// The doctor's notes coming home (DoctorNotes), without a server or a kernel: a binder, its
/// staging copy under a throwaway key, and the doctor's commits made on the staging
/// repository as the scan page or `binder open-share` makes them. The flow over the network
/// and through a mount: ShareTests.
final class DoctorNotesTests: XCTestCase {
    var directory: URL!
    var binder: GitRepository!
    var staging: GitRepository!
    var mine: NIP44.ConversationKey!
    var theirs: NIP44.ConversationKey!
    let author = Signature(name: "t", email: "t@t")
    let doctor = Signature(name: "Doctor", email: "scan@limbo.health")
    var snapshot: ObjectID!
    let photo: [UInt8] = (0..<4000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }

    override func setUpWithError() throws {
        mine = try NIP44.ConversationKey(selfOf: try SecretKey.generate())
        theirs = try NIP44.ConversationKey(selfOf: try SecretKey.generate())
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("binder-notes-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        _ = try BinderCreator.create(at: directory.path + "/binder", key: mine, patientName: "Test", dateOfBirth: nil, author: author)
        binder = try GitRepository.open(path: directory.path + "/binder")
        var inhaler = MedicalDocument(type: "condition", value: "Inhaler", now: "2026-04-01T00:00:00.000Z")
        inhaler.children = [MedicalDocument(type: "addendum", value: "Patient's own addendum", now: "2026-04-02T00:00:00.000Z")]
        try commit(binder, mine, ["conditions/asthma/2026-04-01-inhaler.json": inhaler,
                                  "visits/2026-05-01-knee.json": MedicalDocument(type: "visit", value: "Knee", now: "2026-05-01T00:00:00.000Z"),
                                  "labs/2026-03-01-lipids.json": MedicalDocument(type: "lab", value: "LDL 100", now: "2026-03-01T00:00:00.000Z")])
        staging = try GitRepository.create(path: directory.path + "/staging.git", bare: true)
        snapshot = try StagingCopy.make(from: binder, key: mine, selection: [], staging: staging, throwaway: theirs).snapshot
    }

    override func tearDown() { try? FileManager.default.removeItem(at: directory) }

    @discardableResult
    func commit(_ repository: GitRepository, _ key: NIP44.ConversationKey, _ documents: [String: MedicalDocument],
                raw: [String: [UInt8]] = [:], delete: [String] = [], by who: Signature? = nil) throws -> ObjectID {
        var changes: [TreeChange] = delete.map { .delete(path: $0) }
        for (path, document) in documents {
            changes.append(.write(path: path, blob: try repository.objects.writeBlob(Array(try NIP44.encrypt(document.serializedBytes(), key: key).utf8))))
        }
        for (path, bytes) in raw { changes.append(.write(path: path, blob: try repository.objects.writeBlob(bytes))) }
        return try repository.commits.commitChanges(onto: try repository.refs.branchTip(), changes: changes, message: "x", author: who ?? author)
    }

    func stored(_ path: String, in repository: GitRepository? = nil, key: NIP44.ConversationKey? = nil) throws -> MedicalDocument? {
        let repository = repository ?? binder!
        guard let tip = try repository.refs.branchTip(),
              let entry = try repository.trees.listTree(commit: tip).first(where: { $0.path == path }) else { return nil }
        let plaintext = try NIP44.decrypt(payload: try repository.objects.readBlob(entry.id), key: key ?? mine)
        return try MedicalDocument(plaintext: plaintext.copyBytes())
    }

    func files() throws -> Set<String> {
        Set(try binder.trees.listTree(commit: try XCTUnwrap(try binder.refs.branchTip())).filter { $0.kind == .blob }.map(\.path))
    }

    func collect(since: ObjectID? = nil) throws -> [String] {
        try DoctorNotes.collect(from: staging, since: try XCTUnwrap(since ?? snapshot), tip: try XCTUnwrap(try staging.refs.branchTip()),
                                throwaway: theirs, into: binder, key: mine, author: author, now: Date(timeIntervalSince1970: 1_790_000_000))
    }

    func note(_ text: String, created: String = "2026-11-20T10:00:00.000Z") -> MedicalDocument {
        MedicalDocument(type: "doctor_note", value: text, now: created)
    }

    func testAFreeNoteLandsWhereTheDoctorPutItUnderThePatientsKey() throws {
        try commit(staging, theirs, ["visits/2026-11-20-doctor-note.json": note("Free note")], by: doctor)
        XCTAssertEqual(try collect(), ["visits/2026-11-20-doctor-note.json"])
        XCTAssertEqual(try stored("visits/2026-11-20-doctor-note.json")?.value, "Free note")
        XCTAssertEqual(try binder.commits.commit(try XCTUnwrap(try binder.refs.branchTip())).message, DoctorNotes.message + "\n")
    }

    func testANoteOnARecordBecomesItsChildKeepingWhatThePatientChangedSince() throws {
        // The patient edits the record after sharing it; the doctor adds a note and a photo to it.
        var edited = try XCTUnwrap(try stored("conditions/asthma/2026-04-01-inhaler.json"))
        edited.value = "Inhaler, edited by the patient"
        edited.metadata["tags"] = .array([.string("mine")])
        try commit(binder, mine, ["conditions/asthma/2026-04-01-inhaler.json": edited])
        var theirsVersion = try XCTUnwrap(try stored("conditions/asthma/2026-04-01-inhaler.json", in: staging, key: theirs))
        var photoRef = MedicalDocument(type: "attachment_ref", value: "2026-04-01-inhaler.png.enc", now: "2026-11-20T10:00:00.000Z")
        photoRef.metadata["format"] = .string("png")
        theirsVersion.children += [note("Use twice a day"), photoRef]
        try commit(staging, theirs, ["conditions/asthma/2026-04-01-inhaler.json": theirsVersion],
                   raw: ["conditions/asthma/2026-04-01-inhaler.png.enc": try Sidecar.encrypt(photo, key: theirs)], by: doctor)

        XCTAssertEqual(try collect(), ["conditions/asthma/2026-04-01-inhaler.json"])
        let record = try XCTUnwrap(try stored("conditions/asthma/2026-04-01-inhaler.json"))
        XCTAssertEqual(record.value, "Inhaler, edited by the patient")
        XCTAssertEqual(record.metadata["tags"], .array([.string("mine")]))
        XCTAssertEqual(record.children.map(\.value), ["Patient's own addendum", "Use twice a day", "2026-04-01-inhaler.png.enc"])
        let tip = try XCTUnwrap(try binder.refs.branchTip())
        let sidecar = try XCTUnwrap(try binder.trees.listTree(commit: tip).first { $0.path == "conditions/asthma/2026-04-01-inhaler.png.enc" })
        XCTAssertEqual(try Sidecar.decrypt(try binder.objects.readBlob(sidecar.id), key: mine).copyBytes(), photo, "re-wrapped to the patient's key")
    }

    func testANoteOnARecordThePatientDeletedLandsInVisits() throws {
        try commit(binder, mine, [:], delete: ["visits/2026-05-01-knee.json"])
        var knee = try XCTUnwrap(try stored("visits/2026-05-01-knee.json", in: staging, key: theirs))
        knee.children.append(note("Knee looks fine", created: "2026-11-19T08:00:00.000Z"))
        try commit(staging, theirs, ["visits/2026-05-01-knee.json": knee], by: doctor)
        XCTAssertEqual(try collect(), ["visits/2026-11-19-doctor-note.json"])
        XCTAssertEqual(try stored("visits/2026-11-19-doctor-note.json")?.value, "Knee looks fine")
        XCTAssertNil(try stored("visits/2026-05-01-knee.json"), "the deleted record stays deleted")
    }

    func testTwoNotesTheSameDayBothStay() throws {
        try commit(staging, theirs, ["visits/2026-11-20-doctor-note.json": note("First")], by: doctor)
        XCTAssertEqual(try collect(), ["visits/2026-11-20-doctor-note.json"])
        let first = try XCTUnwrap(try staging.refs.branchTip())
        // The scan page writes the second note over the first, at the same path.
        try commit(staging, theirs, ["visits/2026-11-20-doctor-note.json": note("Second")], by: doctor)
        XCTAssertEqual(try collect(since: first), ["visits/2026-11-20-doctor-note-2.json"])
        XCTAssertEqual(try stored("visits/2026-11-20-doctor-note.json")?.value, "First")
        XCTAssertEqual(try stored("visits/2026-11-20-doctor-note-2.json")?.value, "Second")
        XCTAssertEqual(try collect(since: try XCTUnwrap(try staging.refs.branchTip())), [], "nothing collected twice")
    }

    func testTwoNotesTheSameDayBothStayEvenUncollectedInBetween() throws {
        // The scan page gives each note its own `created` (the moment it was written).
        try commit(staging, theirs, ["visits/2026-11-20-doctor-note.json": note("First")], by: doctor)
        try commit(staging, theirs, ["visits/2026-11-20-doctor-note.json": note("Second", created: "2026-11-20T11:30:00.000Z")],
                   by: doctor)
        XCTAssertEqual(try collect(), ["visits/2026-11-20-doctor-note-2.json", "visits/2026-11-20-doctor-note.json"])
        XCTAssertEqual(try stored("visits/2026-11-20-doctor-note.json")?.value, "First")
        XCTAssertEqual(try stored("visits/2026-11-20-doctor-note-2.json")?.value, "Second")
    }

    func testANoteEditedAgainBeforeTheCollectionComesHomeOnceAsItsLastVersion() throws {
        // `binder open-share` keeps the doctor's own note editable: each save is a commit, the
        // note's `created` stays.
        try commit(staging, theirs, ["visits/2026-11-20-dr-lee.json": note("Draft")], by: doctor)
        try commit(staging, theirs, ["visits/2026-11-20-dr-lee.json": note("Draft, then edited")], by: doctor)
        XCTAssertEqual(try collect(), ["visits/2026-11-20-dr-lee.json"])
        XCTAssertEqual(try stored("visits/2026-11-20-dr-lee.json")?.value, "Draft, then edited")
        XCTAssertFalse(try files().contains("visits/2026-11-20-dr-lee-2.json"))
    }

    func testARewrittenRecordLandsAsACopyBesideIt() throws {
        var lipids = try XCTUnwrap(try stored("labs/2026-03-01-lipids.json", in: staging, key: theirs))
        lipids.value = "LDL 100 (doctor: recheck in 3 months)"
        try commit(staging, theirs, ["labs/2026-03-01-lipids.json": lipids], by: doctor)
        XCTAssertEqual(try collect(), ["labs/2026-03-01-lipids-2.json"])
        XCTAssertEqual(try stored("labs/2026-03-01-lipids.json")?.value, "LDL 100", "the patient's record is untouched")
        XCTAssertEqual(try stored("labs/2026-03-01-lipids-2.json")?.value, "LDL 100 (doctor: recheck in 3 months)")
        // A record the doctor rewrote after the patient deleted it is still a copy, never the record itself.
        try commit(binder, mine, [:], delete: ["visits/2026-05-01-knee.json"])
        var knee = try XCTUnwrap(try stored("visits/2026-05-01-knee.json", in: staging, key: theirs))
        knee.value = "Knee (rewritten)"
        let before = try XCTUnwrap(try staging.refs.branchTip())
        try commit(staging, theirs, ["visits/2026-05-01-knee.json": knee], by: doctor)
        XCTAssertEqual(try collect(since: before), ["visits/2026-05-01-knee-2.json"])
        XCTAssertNil(try stored("visits/2026-05-01-knee.json"))
    }

    func testHostilePathsAndFilesChangeNothing() throws {
        let before = try files()
        let tip = try binder.refs.branchTip()
        // Hidden names (the mount's .binder, git's .git, dot-files) are never written.
        var sneaky = note("Sneaky")
        sneaky.children = [MedicalDocument(type: "attachment_ref", value: "../2026-04-01-inhaler.png.enc", now: "2026-11-20T10:00:00.000Z")]
        try commit(staging, theirs, [".binder/evil.json": note("x"), "visits/.hidden.json": note("x"),
                                     "visits/.meta.json": note("x")], by: doctor)
        XCTAssertEqual(try collect(), [])
        XCTAssertEqual(try files(), before)
        XCTAssertEqual(try binder.refs.branchTip(), tip)
        // A reference that climbs out of its folder is kept as text; no file is written for it.
        let quiet = try XCTUnwrap(try staging.refs.branchTip())
        try commit(staging, theirs, ["visits/2026-11-20-doctor-note.json": sneaky], by: doctor)
        XCTAssertEqual(try collect(since: quiet), ["visits/2026-11-20-doctor-note.json"])
        XCTAssertEqual(try files(), before.union(["visits/2026-11-20-doctor-note.json"]))
        // A file not under the share's key is refused by name, and nothing is committed.
        let landed = try binder.refs.branchTip()
        let second = try XCTUnwrap(try staging.refs.branchTip())
        try commit(staging, mine, ["visits/2026-11-21-doctor-note.json": note("Not theirs")], by: doctor)
        XCTAssertThrowsError(try collect(since: second)) { error in
            guard case StagingCopy.Failure.unreadable(let path, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(path, "visits/2026-11-21-doctor-note.json")
        }
        XCTAssertEqual(try binder.refs.branchTip(), landed)
    }
}
