@testable import BinderCore
import BinderCrypto
import BinderFormat
import BinderGit
import Foundation
import XCTest

/// The key rotation's engine (issue 44): a history re-encrypted from one key to another,
/// checked against the old one read with the old key, and continued after a kill.
final class KeyRotationTests: XCTestCase {
    let oldKey = try! NIP44.ConversationKey(selfOf: try SecretKey.generate())
    let newKey = try! NIP44.ConversationKey(selfOf: try SecretKey.generate())
    let photo: [UInt8] = (0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 8) }
    var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("binder-rotation-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    private func note(_ value: String, type: String = "note") -> [UInt8] {
        Array(#"{"value":"\#(value)","metadata":{"type":"\#(type)","created":"2026-01-01T00:00:00Z"},"children":[]}"#.utf8)
    }

    private func sealed(_ text: [UInt8]) throws -> [UInt8] { Array(try NIP44.encrypt(text, key: oldKey).utf8) }

    private func author(_ seconds: Int64) -> Signature { Signature(name: "Pat Example", email: "pat@example.org", seconds: seconds) }

    /// A binder of eight commits under `oldKey`: a record edited over three versions, a folder
    /// with `.meta.json`, a DEK sidecar and its reference, a legacy sidecar, a deleted record,
    /// the same ciphertext at two paths, a file outside the format, a side branch merged.
    private func makeBinder(extra: [(String, [UInt8])] = []) throws -> LocalBinder {
        let path = directory.appendingPathComponent("old").path
        _ = try BinderCreator.create(at: path, key: oldKey, patientName: "Test Patient", dateOfBirth: nil, author: author(1_700_000_000))
        let binder = try LocalBinder.open(path: path)
        let repository = binder.repository
        var tip = try XCTUnwrap(try repository.refs.branchTip())
        func commit(_ changes: [(String, [UInt8]?)], _ message: String, at seconds: Int64, branch: String = "main",
                    onto parent: ObjectID? = nil, merged: [ObjectID] = []) throws -> ObjectID {
            var treeChanges: [TreeChange] = []
            for (path, bytes) in changes {
                if let bytes { treeChanges.append(.write(path: path, blob: try repository.objects.writeBlob(bytes))) } else {
                    treeChanges.append(.delete(path: path))
                }
            }
            return try repository.commits.commitChanges(onto: parent ?? tip, changes: treeChanges, message: message,
                                                        author: author(seconds), branch: branch, mergedParents: merged)
        }
        let checkupV2 = try sealed(note("second visit notes"))
        tip = try commit([("visits/.meta.json", try sealed(Array(#"{"displayName":"Visits","icon":"stethoscope"}"#.utf8))),
                          ("visits/2026-01-02-checkup.json", try sealed(note("first visit notes", type: "visit")))],
                         "Add checkup", at: 1_700_000_100)
        tip = try commit([("visits/2026-01-02-checkup.json", checkupV2),
                          ("visits/scan.png.enc", try Sidecar.encrypt(photo, key: oldKey)),
                          ("visits/scan.json", try sealed(note("scan.png.enc", type: "attachment_ref"))),
                          ("conditions/acne.json", try sealed(note("back acne", type: "condition")))],
                         "Edit the checkup, attach a scan\n\nWith a body line.\n", at: 1_700_000_200)
        tip = try commit([("conditions/acne.json", nil),
                          ("conditions/old.pdf.enc", Sidecar.encryptLegacy(Array(photo.prefix(3000)), key: oldKey)),
                          ("visits/copy-of-checkup.json", checkupV2),
                          ("README.txt", Array("not encrypted, not under the key\n".utf8))] + extra.map { entry -> (String, [UInt8]?) in (entry.0, entry.1) },
                         "Delete acne", at: 1_700_000_300)
        try repository.refs.setReference("refs/heads/side", to: tip, expected: nil, message: "test")
        let side = try commit([("labs/2026-02-01-blood.json", try sealed(note("blood panel", type: "lab")))],
                              "Add lab on another device", at: 1_700_000_400, branch: "side", onto: tip)
        tip = try commit([("visits/2026-01-02-checkup.json", try sealed(note("third visit notes")))],
                         "Edit the checkup again", at: 1_700_000_500)
        tip = try commit([("labs/2026-02-01-blood.json", try sealed(note("blood panel", type: "lab")))],
                         "Merge", at: 1_700_000_600, merged: [side])
        tip = try commit([("visits/2026-01-02-checkup.json", try sealed(note("fourth")))], "Last edit", at: 1_700_000_700)
        return binder
    }

    /// Every file under `path` with its bytes: the old repository must not change by one byte.
    private func snapshot(_ path: String) throws -> [String: Data] {
        var files: [String: Data] = [:]
        let enumerator = try XCTUnwrap(FileManager.default.enumerator(atPath: path))
        for case let relative as String in enumerator {
            let full = path + "/" + relative
            var isFolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: full, isDirectory: &isFolder), !isFolder.boolValue {
                files[relative] = try Data(contentsOf: URL(fileURLWithPath: full))
            }
        }
        return files
    }

    /// The distinct document and sidecar blobs of the whole history.
    private func encryptedBlobs(_ repository: GitRepository, tip: ObjectID) throws -> Set<ObjectID> {
        var blobs = Set<ObjectID>()
        for commit in try repository.history.commits(from: tip) {
            for entry in try repository.trees.listTree(commit: commit.id) where entry.kind == .blob && isEncrypted(entry.path) {
                blobs.insert(entry.id)
            }
        }
        return blobs
    }

    private func isEncrypted(_ path: String) -> Bool {
        BinderNaming.hasDocumentExtension(path) || BinderNaming.isSidecarName(path)
    }

    private func plaintext(_ bytes: [UInt8], path: String, key: NIP44.ConversationKey) throws -> [UInt8] {
        BinderNaming.isSidecarName(path) ? try Sidecar.decrypt(bytes, key: key).copyBytes()
            : try NIP44.decrypt(payload: bytes, key: key).copyBytes()
    }

    /// The rotated history is the old one: the same commits (by message: unique here) with the
    /// same parents, authors, committers and times, every version of every file the same
    /// plaintext under the new key, the old key opening none; the repository is sound to git.
    private func assertRotated(_ old: GitRepository, _ newPath: String, file: StaticString = #filePath,
                               line: UInt = #line) throws {
        let new = try GitRepository.open(path: newPath)
        let oldTip = try XCTUnwrap(try old.refs.branchTip())
        let newTip = try XCTUnwrap(try new.refs.branchTip(), "main is set", file: file, line: line)
        let oldCommits = try old.history.commits(from: oldTip), newCommits = try new.history.commits(from: newTip)
        XCTAssertEqual(newCommits.count, oldCommits.count, file: file, line: line)
        let newByMessage = Dictionary(uniqueKeysWithValues: newCommits.map { ($0.message, $0) })
        let oldMessages = Dictionary(uniqueKeysWithValues: oldCommits.map { ($0.id, $0.message) })
        let newMessages = Dictionary(uniqueKeysWithValues: newCommits.map { ($0.id, $0.message) })
        for commit in oldCommits {
            let copy = try XCTUnwrap(newByMessage[commit.message], "\(commit.summary) copied", file: file, line: line)
            XCTAssertEqual(copy.author, commit.author, file: file, line: line)
            XCTAssertEqual(copy.committer, commit.committer, file: file, line: line)
            XCTAssertEqual(copy.parents.map { newMessages[$0] }, commit.parents.map { oldMessages[$0] }, file: file, line: line)
            let before = try old.trees.listTree(commit: commit.id), after = try new.trees.listTree(commit: copy.id)
            XCTAssertEqual(after.map(\.path), before.map(\.path), file: file, line: line)
            XCTAssertEqual(after.map(\.mode), before.map(\.mode), file: file, line: line)
            for (was, now) in zip(before, after) where was.kind == .blob {
                let oldBytes = try old.objects.readBlob(was.id), newBytes = try new.objects.readBlob(now.id)
                guard isEncrypted(was.path) else {
                    XCTAssertEqual(newBytes, oldBytes, was.path, file: file, line: line)
                    continue
                }
                XCTAssertNotEqual(now.id, was.id, file: file, line: line)
                XCTAssertEqual(try plaintext(newBytes, path: now.path, key: newKey), try plaintext(oldBytes, path: was.path, key: oldKey),
                               was.path, file: file, line: line)
                XCTAssertThrowsError(try plaintext(newBytes, path: now.path, key: oldKey), "the old key opens \(now.path)",
                                     file: file, line: line)
                if BinderNaming.isSidecarName(now.path) { XCTAssertEqual(Sidecar.format(of: newBytes), .dek, file: file, line: line) }
            }
        }
        let fsck = Process()
        fsck.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        fsck.arguments = ["git", "--git-dir=\(newPath)", "fsck", "--strict", "--no-progress", "--no-dangling"]
        try fsck.run()
        fsck.waitUntilExit()
        XCTAssertEqual(fsck.terminationStatus, 0, "git fsck --strict", file: file, line: line)
    }

    func testAHistoryIsRotatedWhole() throws {
        let binder = try makeBinder()
        let before = try snapshot(binder.path)
        let destination = directory.appendingPathComponent("new").path
        let report = try KeyRotation(source: binder, oldKey: oldKey, newKey: newKey, destination: destination).run()
        let oldTip = try XCTUnwrap(try binder.repository.refs.branchTip())
        XCTAssertEqual(report.commits, 8)
        XCTAssertEqual(report.commitsWritten, 8)
        XCTAssertEqual(report.blobsReencrypted, try encryptedBlobs(binder.repository, tip: oldTip).count,
                       "each distinct blob once (the copied checkup and the unchanged ones are not done again)")
        XCTAssertEqual(report.blobsCopied, 1)
        XCTAssertFalse(report.resumed)
        try assertRotated(binder.repository, destination)
        XCTAssertEqual(try snapshot(binder.path), before, "the old repository is untouched")

        let again = try KeyRotation(source: binder, oldKey: oldKey, newKey: newKey, destination: destination).run()
        XCTAssertEqual(again.tip, report.tip)
        XCTAssertEqual(again.commitsWritten + again.blobsReencrypted, 0, "a verified rotation is not done twice")

        // A commit's blobs past the batch's bytes go out as packs of their own before it ends.
        let small = directory.appendingPathComponent("small-batches").path
        var batched = KeyRotation(source: binder, oldKey: oldKey, newKey: newKey, destination: small)
        batched.batchBytes = 1
        XCTAssertEqual(try batched.run().commits, 8)
        try assertRotated(binder.repository, small)
    }

    /// Two devices rotated the same binder (each into other objects); the phone then made a
    /// commit of its own, and a commit the laptop made too in the same second under the same
    /// message and paths, but with other content. The join pairs every rotated commit, carries
    /// the phone's two on top of the laptop's copy, each file the phone did not change taking
    /// the laptop's blob; an unrelated binder does not join.
    func testARotatedCopyJoinsTheCopyAnotherDeviceMoved() throws {
        let binder = try makeBinder()
        let laptopPath = directory.appendingPathComponent("laptop").path, phonePath = directory.appendingPathComponent("phone").path
        let moved = try KeyRotation(source: binder, oldKey: oldKey, newKey: newKey, destination: laptopPath).run().tip
        let rotated = try KeyRotation(source: binder, oldKey: oldKey, newKey: newKey, destination: phonePath).run().tip
        let laptop = try GitRepository.open(path: laptopPath), phone = try GitRepository.open(path: phonePath)
        func commit(_ repository: GitRepository, _ path: String, _ text: String, _ message: String, at seconds: Int64) throws -> ObjectID {
            let blob = try repository.objects.writeBlob(Array(try NIP44.encrypt(note(text), key: newKey).utf8))
            let tip = try XCTUnwrap(try repository.refs.branchTip())
            return try repository.commits.commitChanges(onto: tip, changes: [.write(path: path, blob: blob)], message: message,
                                                        author: author(seconds), branch: "main", mergedParents: [])
        }
        let laptopTip = try commit(laptop, "visits/knee.json", "the laptop's knee", "Add knee", at: 1_700_000_800)
        _ = try commit(phone, "visits/knee.json", "the phone's knee", "Add knee", at: 1_700_000_800)
        let phoneTip = try commit(phone, "labs/iron.json", "iron", "Add iron", at: 1_700_000_900)
        let fetched = Process()
        fetched.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        fetched.arguments = ["git", "--git-dir=\(phonePath)", "fetch", "-q", laptopPath, "main:refs/remotes/origin/main"]
        try fetched.run()
        fetched.waitUntilExit()
        XCTAssertEqual(fetched.terminationStatus, 0)

        XCTAssertTrue(RotatedHistoryJoin.mayJoin(phone, laptop))
        let outcome = try RotatedHistoryJoin.join(repository: phone, key: newKey, local: phoneTip, moved: laptopTip)
        XCTAssertEqual(outcome.paired, 8)
        XCTAssertEqual(outcome.carried, 2, "the phone's knee is not the laptop's, though made alike")
        XCTAssertEqual(try phone.refs.branchTip(), outcome.tip)
        let carried = try phone.history.commits(from: outcome.tip, limit: 2)
        XCTAssertEqual(carried.map(\.summary), ["Add iron", "Add knee"])
        XCTAssertEqual(carried[1].parents, [moved], "carried onto the laptop's copy of the last common commit")
        XCTAssertEqual(try BinderMerger.changedPaths(phone, from: moved, to: outcome.tip), ["labs/iron.json", "visits/knee.json"],
                       "every other file is the laptop's blob")
        XCTAssertEqual(try plaintext(try phone.objects.readBlob(try XCTUnwrap(try phone.trees.entry(at: "visits/knee.json", commit: outcome.tip)).id),
                                     path: "visits/knee.json", key: newKey), note("the phone's knee"))
        XCTAssertNotEqual(moved, rotated)

        let other = directory.appendingPathComponent("other").path
        _ = try BinderCreator.create(at: other, key: newKey, patientName: "Someone Else", dateOfBirth: nil, author: author(1_600_000_000))
        let unrelated = try XCTUnwrap(try GitRepository.open(path: other).refs.branchTip())
        XCTAssertFalse(RotatedHistoryJoin.mayJoin(phone, try GitRepository.open(path: other)))
        let fetchedOther = Process()
        fetchedOther.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        fetchedOther.arguments = ["git", "--git-dir=\(phonePath)", "fetch", "-q", other, "main:refs/remotes/other/main"]
        try fetchedOther.run()
        fetchedOther.waitUntilExit()
        XCTAssertThrowsError(try RotatedHistoryJoin.join(repository: phone, key: newKey, local: outcome.tip, moved: unrelated)) { error in
            XCTAssertEqual(error as? RotatedHistoryJoin.Failure, .unrelated)
        }
        XCTAssertEqual(try phone.refs.branchTip(), outcome.tip, "nothing moved")
    }

    /// A kill after each number of steps (blobs and commits), then a run to the end: the same
    /// result, the old repository untouched, and the second run only does what was left.
    func testARotationKilledAtAnyStepIsContinued() throws {
        let binder = try makeBinder()
        let before = try snapshot(binder.path)
        let oldTip = try XCTUnwrap(try binder.repository.refs.branchTip())
        let total = try encryptedBlobs(binder.repository, tip: oldTip).count + 8
        for steps in [1, 2, 5, 9, total - 1] {
            let destination = directory.appendingPathComponent("new-\(steps)").path
            var rotation = KeyRotation(source: binder, oldKey: oldKey, newKey: newKey, destination: destination)
            rotation.interruptAfterSteps = steps
            XCTAssertThrowsError(try rotation.run()) { error in
                XCTAssertEqual(error as? KeyRotation.Failure, .interrupted(afterSteps: steps))
            }
            XCTAssertNil(try GitRepository.open(path: destination).refs.branchTip(), "main is set only when verified")
            rotation.interruptAfterSteps = nil
            let report = try rotation.run()
            XCTAssertEqual(report.resumed, steps >= 2, "the first commit's line is the first one fsynced")
            XCTAssertEqual(report.commits, 8)
            // A kill loses the blobs' lines since the last commit: at most their work is done again.
            XCTAssertLessThanOrEqual(report.commitsWritten + report.blobsReencrypted, total)
            if steps >= 2 { XCTAssertLessThan(report.commitsWritten + report.blobsReencrypted, total, "after \(steps) steps") }
            try assertRotated(binder.repository, destination)
        }
        XCTAssertEqual(try snapshot(binder.path), before)
    }

    /// A progress file cut short by a kill (a header, or a last line, half written) is
    /// continued from what it holds whole.
    func testAProgressFileCutShortIsContinued() throws {
        let binder = try makeBinder()
        for (steps, tail) in [(0, "binder-rot"), (9, "b d 0123")] {
            let destination = directory.appendingPathComponent("new-\(steps)").path
            var rotation = KeyRotation(source: binder, oldKey: oldKey, newKey: newKey, destination: destination)
            let progress = destination + "/" + RotationJournal.fileName
            if steps == 0 {
                _ = try GitRepository.create(path: destination, bare: true)
                try Data(tail.utf8).write(to: URL(fileURLWithPath: progress))
            } else {
                rotation.interruptAfterSteps = steps
                XCTAssertThrowsError(try rotation.run())
                let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: progress))
                try handle.seekToEnd()
                try handle.write(contentsOf: Data(tail.utf8))
                try handle.close()
                rotation.interruptAfterSteps = nil
            }
            _ = try rotation.run()
            try assertRotated(binder.repository, destination)
        }
    }

    /// An interrupted run continued under another new key fails its verification: main is
    /// never set over blobs the given key does not open.
    func testAContinuationUnderAnotherKeyIsRefused() throws {
        let binder = try makeBinder()
        let destination = directory.appendingPathComponent("new").path
        var rotation = KeyRotation(source: binder, oldKey: oldKey, newKey: newKey, destination: destination)
        rotation.interruptAfterSteps = 6
        XCTAssertThrowsError(try rotation.run())
        let other = try NIP44.ConversationKey(selfOf: try SecretKey.generate())
        XCTAssertThrowsError(try KeyRotation(source: binder, oldKey: oldKey, newKey: other, destination: destination).run()) { error in
            guard case KeyRotation.Failure.verificationFailed = error else { return XCTFail("\(error)") }
        }
        XCTAssertNil(try GitRepository.open(path: destination).refs.branchTip())
    }

    /// Bad entries are refused by path, not dropped: a document the old key does not open, a
    /// file outside the format that the old key opens; and a destination that is someone's binder.
    func testBadEntriesAndAnOccupiedDestinationAreRefused() throws {
        let cases: [(String, [UInt8], String)] = [
            ("visits/garbage.json", Array("not a payload".utf8), "unreadable"),
            ("visits/broken.png.enc", [2, 0, 9, 1, 2, 3], "unreadable"),
            ("notes.txt", try sealed(note("hidden")), "unsafe"),
        ]
        for (path, bytes, expected) in cases {
            try FileManager.default.removeItem(at: directory)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let binder = try makeBinder(extra: [(path, bytes)])
            let destination = directory.appendingPathComponent("new").path
            XCTAssertThrowsError(try KeyRotation(source: binder, oldKey: oldKey, newKey: newKey, destination: destination).run()) { error in
                switch (error as? KeyRotation.Failure, expected) {
                case (.unreadable(let named, _, _)?, "unreadable"), (.unsafeEntry(let named, _, _)?, "unsafe"):
                    XCTAssertEqual(named, path)
                default: XCTFail("\(path): \(error)")
                }
            }
            XCTAssertNil(try GitRepository.open(path: destination).refs.branchTip())
        }
        try FileManager.default.removeItem(at: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let binder = try makeBinder()
        // A crafted commit: a submodule at the root.
        let repository = binder.repository
        let tip = try XCTUnwrap(try repository.refs.branchTip())
        let root = try repository.commits.commit(tip).tree
        let crafted = try repository.trees.writeTree(try repository.trees.folderEntries(tree: root, path: "")
            + [FolderEntry(name: "vendor", mode: 0o160000, id: tip)])
        let craftedCommit = try repository.commits.writeCommit(tree: crafted, parents: [tip], author: author(1_700_001_000),
                                                               committer: author(1_700_001_000), message: "crafted\n")
        try repository.refs.setReference("refs/heads/main", to: craftedCommit, expected: tip, message: "test")
        let elsewhere = directory.appendingPathComponent("new-crafted").path
        XCTAssertThrowsError(try KeyRotation(source: binder, oldKey: oldKey, newKey: newKey, destination: elsewhere).run()) { error in
            guard case KeyRotation.Failure.unsafeEntry(let path, let commit, _)? = error as? KeyRotation.Failure else { return XCTFail("\(error)") }
            XCTAssertEqual(path, "vendor")
            XCTAssertEqual(commit, craftedCommit)
        }
        XCTAssertThrowsError(try KeyRotation(source: binder, oldKey: oldKey, newKey: newKey, destination: binder.path).run()) { error in
            XCTAssertEqual(error as? KeyRotation.Failure, .destinationInUse(binder.path))
        }
    }
}
