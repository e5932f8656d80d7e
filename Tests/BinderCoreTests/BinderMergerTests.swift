import BinderCore
import BinderCrypto
import BinderFormat
import BinderGit
import Foundation
import XCTest

/// The file-level merge of two devices' histories, without a network: divergent commits are
/// made on one repository by moving `main` back and forth.
final class BinderMergerTests: XCTestCase {
    var directory: URL!
    var repository: GitRepository!
    var key: NIP44.ConversationKey!
    let author = Signature(name: "t", email: "t@t")
    var base: ObjectID!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("binder-merge-\(UUID().uuidString)")
        key = try NIP44.ConversationKey(selfOf: try SecretKey.generate())
        _ = try BinderCreator.create(at: directory.path, key: key, patientName: "Test", dateOfBirth: nil, author: author)
        repository = try GitRepository.open(path: directory.path)
        try write(["visits/a.json": ("A", "2026-01-01T00:00:00.000Z"), "visits/b.json": ("B", "2026-01-01T00:00:00.000Z"),
                   "visits/c.json": ("C", "2026-01-01T00:00:00.000Z")])
        base = try repository.refs.branchTip()
    }

    override func tearDown() { try? FileManager.default.removeItem(at: directory) }

    @discardableResult
    func write(_ documents: [String: (String, String)], delete: [String] = []) throws -> ObjectID {
        let writer = BinderWriter(repository: repository, key: key, author: author)
        for (path, (value, updated)) in documents {
            var document = MedicalDocument(type: "visit", value: value, now: "2026-01-01T00:00:00.000Z")
            document.updated = updated
            try writer.putDocument(document, at: path)
        }
        var id = try writer.commit(message: "Update entry")
        if !delete.isEmpty {
            id = try repository.commits.commitChanges(onto: id, changes: delete.map { .delete(path: $0) }, message: "Delete entry", author: author)
        }
        return id
    }

    /// Makes a commit on top of `from` without leaving `main` there.
    func branch(from: ObjectID, _ documents: [String: (String, String)], delete: [String] = []) throws -> ObjectID {
        let saved = try repository.refs.branchTip()
        try repository.refs.setReference("refs/heads/main", to: from, expected: nil, force: true, message: "test")
        let id = try write(documents, delete: delete)
        if let saved { try repository.refs.setReference("refs/heads/main", to: saved, expected: nil, force: true, message: "test") }
        return id
    }

    func value(_ path: String, at commit: ObjectID) throws -> String? {
        guard let entry = try repository.trees.entry(at: path, commit: commit) else { return nil }
        return try BinderReader.readDocument(try repository.objects.readBlob(entry.id), key: key, gitPath: path).value
    }

    func merge(local: ObjectID, remote: ObjectID) throws -> MergeOutcome {
        try repository.refs.setReference("refs/heads/main", to: local, expected: nil, force: true, message: "test")
        return try BinderMerger.merge(repository: repository, key: key, local: local, remote: remote, author: author, now: 1)
    }

    func testFastForwardAndUpToDate() throws {
        let remote = try branch(from: base, ["visits/a.json": ("A2", "2026-02-01T00:00:00.000Z")])
        let outcome = try merge(local: base, remote: remote)
        XCTAssertEqual(outcome, .fastForward(to: remote, changedPaths: ["visits/a.json"]))
        XCTAssertEqual(try repository.refs.branchTip(), remote)
        XCTAssertEqual(try merge(local: remote, remote: base), .upToDate)
        XCTAssertEqual(try repository.refs.branchTip(), remote)
    }

    func testNonOverlappingChangesMergeWithBothParents() throws {
        let local = try branch(from: base, ["visits/a.json": ("A local", "2026-02-01T00:00:00.000Z")])
        let remote = try branch(from: base, ["visits/b.json": ("B remote", "2026-02-02T00:00:00.000Z"),
                                             "labs/new.json": ("new", "2026-02-02T00:00:00.000Z")], delete: ["visits/c.json"])
        let outcome = try merge(local: local, remote: remote)
        guard case .merged(let commit, let changed, let conflicts) = outcome else { return XCTFail("\(outcome)") }
        XCTAssertEqual(conflicts, [])
        XCTAssertEqual(Set(changed), ["visits/b.json", "labs/new.json", "visits/c.json"])
        XCTAssertEqual(try repository.commits.commit(commit).parents, [local, remote])
        XCTAssertEqual(try repository.commits.commit(commit).message, BinderMerger.message + "\n")
        XCTAssertEqual(try value("visits/a.json", at: commit), "A local")
        XCTAssertEqual(try value("visits/b.json", at: commit), "B remote")
        XCTAssertEqual(try value("labs/new.json", at: commit), "new")
        XCTAssertNil(try value("visits/c.json", at: commit))
        XCTAssertEqual(try repository.refs.branchTip(), commit)
    }

    func testBothEditedTheLaterUpdatedWinsWhicheverSideItIsOn() throws {
        let local = try branch(from: base, ["visits/a.json": ("A local, later", "2026-03-01T00:00:00.000Z"),
                                            "visits/b.json": ("B local, earlier", "2026-02-01T00:00:00.000Z")])
        let remote = try branch(from: base, ["visits/a.json": ("A remote, earlier", "2026-02-01T00:00:00.000Z"),
                                             "visits/b.json": ("B remote, later", "2026-03-01T00:00:00.000Z")])
        let outcome = try merge(local: local, remote: remote)
        guard case .merged(let commit, _, let conflicts) = outcome else { return XCTFail("\(outcome)") }
        XCTAssertEqual(try value("visits/a.json", at: commit), "A local, later")
        XCTAssertEqual(try value("visits/b.json", at: commit), "B remote, later")
        XCTAssertEqual(conflicts.map(\.path), ["visits/a.json", "visits/b.json"])
        XCTAssertEqual(conflicts.map(\.winner), [.local, .remote])
        // The losing versions stay reachable: the commit named in each conflict holds them.
        XCTAssertEqual(try value("visits/a.json", at: try XCTUnwrap(ObjectID(hex: conflicts[0].lostCommit))), "A remote, earlier")
        XCTAssertEqual(try value("visits/b.json", at: try XCTUnwrap(ObjectID(hex: conflicts[1].lostCommit))), "B local, earlier")
    }

    func testAnEditBeatsADeletionOnEitherSide() throws {
        let local = try branch(from: base, ["visits/a.json": ("A edited here", "2026-02-01T00:00:00.000Z")], delete: ["visits/b.json"])
        let remote = try branch(from: base, ["visits/b.json": ("B edited there", "2026-02-01T00:00:00.000Z")], delete: ["visits/a.json"])
        guard case .merged(let commit, _, let conflicts) = try merge(local: local, remote: remote) else { return XCTFail() }
        XCTAssertEqual(try value("visits/a.json", at: commit), "A edited here")
        XCTAssertEqual(try value("visits/b.json", at: commit), "B edited there")
        XCTAssertEqual(conflicts.map(\.winner), [.local, .remote])
        XCTAssertTrue(conflicts.allSatisfy { $0.reason.contains("the edit is kept") })
    }

    func testUnreadableVersionsFallBackToTheLaterCommit() throws {
        let local = try branch(from: base, ["visits/a.json": ("local", "2026-02-01T00:00:00.000Z")])
        sleep(1)  // commit times have one-second resolution
        // The remote stores bytes no key reads (an attachment-like blob): the later commit wins.
        try repository.refs.setReference("refs/heads/main", to: base, expected: nil, force: true, message: "test")
        let blob = try repository.objects.writeBlob(Array("not a payload".utf8))
        let remote = try repository.commits.commitChanges(onto: base, changes: [.write(path: "visits/a.json", blob: blob)],
                                                  message: "Update entry", author: Signature(name: "t", email: "t@t"))
        guard case .merged(let commit, _, let conflicts) = try merge(local: local, remote: remote) else { return XCTFail() }
        XCTAssertEqual(try repository.trees.entry(at: "visits/a.json", commit: commit)?.id, blob)
        XCTAssertEqual(conflicts.first?.winner, .remote)
        XCTAssertTrue(conflicts.first?.reason.contains("later commit") == true)
    }

    func testUnrelatedHistoriesAreRefused() throws {
        let otherDirectory = directory.appendingPathComponent("other").path
        let foreign = try BinderCreator.create(at: otherDirectory, key: key, patientName: "Other", dateOfBirth: nil, author: author)
        let other = try GitRepository.open(path: otherDirectory)
        // Bring the foreign commit's objects in, as a fetch would.
        for entry in try other.trees.listTree(commit: foreign) where entry.kind == .blob {
            _ = try repository.objects.writeBlob(try other.objects.readBlob(entry.id))
        }
        let copied = try repository.commits.commitChanges(onto: nil, changes: try other.trees.listTree(commit: foreign).filter { $0.kind == .blob }
            .map { .write(path: $0.path, blob: $0.id) }, message: "Initialize binder", author: author, branch: "foreign")
        XCTAssertThrowsError(try merge(local: try XCTUnwrap(try repository.refs.branchTip()), remote: copied)) { error in
            XCTAssertTrue("\(error)".contains("unrelated histories"), "\(error)")
        }
    }
    // MARK: - The record merge rules, as a table

    /// One record as a side stores it: body and metadata (strings; `updated` orders overlaps).
    /// With `attachment`, the record is an attachment (`attachment_ref` naming `r.pdf.enc`, whose
    /// bytes these are); with `childAttachment`, a note with one attachment child (its sidecar
    /// `r-lab.pdf.enc`, these bytes).
    struct Version {
        let value: String
        var metadata: [(String, String)] = []
        var attachment: String? = nil
        var childAttachment: String? = nil

        func document() -> MedicalDocument {
            var document = MedicalDocument(type: attachment == nil ? "visit" : "attachment_ref",
                                           value: attachment == nil ? value : "r.pdf.enc", now: "2026-01-01T00:00:00.000Z")
            for (key, text) in metadata { document.metadata[key] = .string(text) }
            if childAttachment != nil {
                document.children = [MedicalDocument(type: "attachment_ref", value: "r-lab.pdf.enc", now: "2026-01-01T00:00:00.000Z")]
            }
            return document
        }

        /// The sidecars this version stores beside `visits/r.json`.
        var sidecars: [String: String] {
            var sidecars: [String: String] = [:]
            if let attachment { sidecars["visits/r.pdf.enc"] = attachment }
            if let childAttachment { sidecars["visits/r-lab.pdf.enc"] = childAttachment }
            return sidecars
        }
    }

    enum Expect {
        /// One record with this body and these metadata values; no conflict copy.
        case merged(String, [(String, String)])
        /// The version with this body stays in place; the other (this body) is the conflict copy.
        case conflict(kept: String, copy: String)
        /// An attachment: the version with these bytes stays in place, the other (these bytes)
        /// is the conflict copy, a record of its own with its own sidecar.
        case attachmentConflict(kept: String, copy: String)
    }

    struct MergeRow {
        let rule: String
        let base: Version, local: Version, remote: Version
        let expect: Expect
    }

    static let earlier = "2026-02-01T00:00:00.000Z", later = "2026-03-01T00:00:00.000Z"
    static let body = "# Visit\n\nline one\nline two\nline three\nline four\nline five\n"

    static let mergeRows: [MergeRow] = [
        MergeRow(rule: "metadata keys changed on one side each are both kept",
                 base: Version(value: body), local: Version(value: body, metadata: [("provider", "Dr. A"), ("updated", earlier)]),
                 remote: Version(value: body, metadata: [("npi", "123"), ("updated", later)]),
                 expect: .merged(body, [("provider", "Dr. A"), ("npi", "123"), ("updated", later)])),
        MergeRow(rule: "body edits in different places merge line by line",
                 base: Version(value: body),
                 local: Version(value: body.replacingOccurrences(of: "line one", with: "line ONE"), metadata: [("updated", later)]),
                 remote: Version(value: body.replacingOccurrences(of: "line five", with: "line FIVE"), metadata: [("updated", earlier)]),
                 expect: .merged(body.replacingOccurrences(of: "line one", with: "line ONE").replacingOccurrences(of: "line five", with: "line FIVE"),
                                 [("updated", later)])),
        MergeRow(rule: "a body edited on one side and metadata on the other",
                 base: Version(value: body), local: Version(value: body + "added\n"),
                 remote: Version(value: body, metadata: [("tags", "x")]),
                 expect: .merged(body + "added\n", [("tags", "x")])),
        MergeRow(rule: "the same line edited on both sides: the later updated stays, the other is the copy",
                 base: Version(value: body),
                 local: Version(value: body.replacingOccurrences(of: "line two", with: "line 2 here"), metadata: [("updated", earlier)]),
                 remote: Version(value: body.replacingOccurrences(of: "line two", with: "line 2 there"), metadata: [("updated", later)]),
                 expect: .conflict(kept: body.replacingOccurrences(of: "line two", with: "line 2 there"),
                                   copy: body.replacingOccurrences(of: "line two", with: "line 2 here"))),
        MergeRow(rule: "one metadata key changed differently on both sides is an overlap",
                 base: Version(value: body, metadata: [("provider", "Dr. A")]),
                 local: Version(value: body, metadata: [("provider", "Dr. B"), ("updated", later)]),
                 remote: Version(value: body + "more\n", metadata: [("provider", "Dr. C"), ("updated", earlier)]),
                 expect: .conflict(kept: body, copy: body + "more\n")),
        MergeRow(rule: "an attachment both replaced: the later stays with its own sidecar, the other is a copy with a copy of its sidecar",
                 base: Version(value: "", metadata: [("originalSizeBytes", "4")], attachment: "base"),
                 local: Version(value: "", metadata: [("originalSizeBytes", "10"), ("updated", later)], attachment: "local scan"),
                 remote: Version(value: "", metadata: [("originalSizeBytes", "11"), ("updated", earlier)], attachment: "remote scan"),
                 expect: .attachmentConflict(kept: "local scan", copy: "remote scan")),
        MergeRow(rule: "an attachment both replaced whose records alone would merge: the record goes with its sidecar",
                 base: Version(value: "", attachment: "base"),
                 local: Version(value: "", metadata: [("updated", earlier)], attachment: "local scan"),
                 remote: Version(value: "", metadata: [("updated", later)], attachment: "remote scan"),
                 expect: .attachmentConflict(kept: "remote scan", copy: "local scan")),
        MergeRow(rule: "a note with an attachment child, same line edited on both sides: the copy has its own copy of the child's sidecar",
                 base: Version(value: body, childAttachment: "lab"),
                 local: Version(value: body.replacingOccurrences(of: "line two", with: "line 2 here"), metadata: [("updated", earlier)],
                                childAttachment: "lab"),
                 remote: Version(value: body.replacingOccurrences(of: "line two", with: "line 2 there"), metadata: [("updated", later)],
                                 childAttachment: "lab, replaced"),
                 expect: .conflict(kept: body.replacingOccurrences(of: "line two", with: "line 2 there"),
                                   copy: body.replacingOccurrences(of: "line two", with: "line 2 here"))),
        MergeRow(rule: "both made the same edit: one record, nothing to copy",
                 base: Version(value: body), local: Version(value: body + "same\n", metadata: [("updated", earlier)]),
                 remote: Version(value: body + "same\n", metadata: [("updated", later)]),
                 expect: .merged(body + "same\n", [("updated", later)])),
    ]

    func testRecordMergeRules() throws {
        for row in Self.mergeRows {
            try resetMain()
            let path = "visits/r.json"
            let start = try put([path: row.base.document()], sidecars: row.base.sidecars, onto: base)
            // A sidecar is written again only where its bytes changed (each write is a new blob).
            let local = try put([path: row.local.document()], sidecars: row.local.sidecars.filter { row.base.sidecars[$0.key] != $0.value },
                                onto: start)
            let remote = try put([path: row.remote.document()], sidecars: row.remote.sidecars.filter { row.base.sidecars[$0.key] != $0.value },
                                 onto: start)
            guard case .merged(let commit, _, let conflicts) = try merge(local: local, remote: remote) else {
                XCTFail(row.rule); continue
            }
            let merged = try stored(path, at: commit)
            switch row.expect {
            case .merged(let value, let metadata):
                XCTAssertEqual(conflicts, [], row.rule)
                XCTAssertEqual(merged?.value, value, row.rule)
                for (key, text) in metadata { XCTAssertEqual(merged?.metadata[key]?.stringValue, text, "\(row.rule): \(key)") }
            case .conflict(let kept, let copyValue):
                XCTAssertEqual(merged?.value, kept, row.rule)
                let copyPath = try XCTUnwrap(conflicts.first?.copy, row.rule)
                XCTAssertEqual(copyPath, "visits/r (conflict 1970-01-01 0000).json", row.rule)
                let copy = try stored(copyPath, at: commit)
                XCTAssertEqual(copy?.value, copyValue, row.rule)
                XCTAssertEqual(copy?.metadata["conflict_of"]?.stringValue, path, row.rule)
                try checkSidecars(original: try XCTUnwrap(merged), copy: try XCTUnwrap(copy), at: commit, row.rule)
            case .attachmentConflict(let keptBytes, let copyBytes):
                XCTAssertEqual(conflicts.count, 1, "one conflict for the record and its sidecar: \(row.rule)")
                XCTAssertEqual(conflicts.first?.path, path, row.rule)
                let copyPath = try XCTUnwrap(conflicts.first?.copy, row.rule)
                XCTAssertEqual(copyPath, "visits/r (conflict 1970-01-01 0000).json", row.rule)
                let copy = try XCTUnwrap(try stored(copyPath, at: commit), row.rule)
                XCTAssertEqual(merged?.value, "r.pdf.enc", row.rule)
                XCTAssertEqual(copy.value, "r (conflict 1970-01-01 0000).pdf.enc", "the copy's sidecar is named after it: \(row.rule)")
                XCTAssertEqual(copy.type, "attachment_ref", row.rule)
                XCTAssertEqual(copy.metadata["conflict_of"]?.stringValue, path, row.rule)
                XCTAssertEqual(try bytes("visits/r.pdf.enc", at: commit), keptBytes, row.rule)
                XCTAssertEqual(try bytes("visits/r (conflict 1970-01-01 0000).pdf.enc", at: commit), copyBytes, row.rule)
                let files = try repository.trees.listTree(commit: commit).map(\.path).filter { $0.hasPrefix("visits/r") }
                XCTAssertEqual(files.sorted(), ["visits/r (conflict 1970-01-01 0000).json", "visits/r (conflict 1970-01-01 0000).pdf.enc",
                                                "visits/r.json", "visits/r.pdf.enc"], row.rule)
                XCTAssertEqual(ConflictNames.openConflicts(try repository.trees.listTree(commit: commit).map(\.path)),
                               ["visits/r (conflict 1970-01-01 0000).pdf"], row.rule)
            }
        }
    }

    /// A conflict copy names no sidecar its original names (deleting the copy deletes only its
    /// own), each sidecar it names is there, and holds the copy's side's bytes.
    private func checkSidecars(original: MedicalDocument, copy: MedicalDocument, at commit: ObjectID, _ rule: String) throws {
        func sidecars(_ document: MedicalDocument) -> [String] {
            (document.type == "attachment_ref" ? [document.value] : []) + document.children.flatMap(sidecars)
        }
        XCTAssertTrue(Set(sidecars(original)).isDisjoint(with: sidecars(copy)), "\(rule): \(sidecars(original)) \(sidecars(copy))")
        for name in sidecars(copy) { XCTAssertNotNil(try repository.trees.entry(at: "visits/" + name, commit: commit), "\(rule): \(name)") }
        if let child = copy.children.first {
            XCTAssertEqual(child.value, "r (conflict 1970-01-01 0000)-lab.pdf.enc", rule)
            XCTAssertEqual(try bytes("visits/" + child.value, at: commit), "lab", "the copy's side's child bytes: \(rule)")
            XCTAssertEqual(try bytes("visits/r-lab.pdf.enc", at: commit), "lab, replaced", rule)
            XCTAssertEqual(child.metadata["fileName"]?.stringValue, "01-r-lab.pdf", "the child keeps the name it was shown under: \(rule)")
        }
    }

    private func bytes(_ path: String, at commit: ObjectID) throws -> String? {
        guard let entry = try repository.trees.entry(at: path, commit: commit) else { return nil }
        return String(decoding: try Sidecar.decrypt(try repository.objects.readBlob(entry.id), key: key).copyBytes(), as: UTF8.self)
    }

    func testASidecarBothChangedKeepsTheLaterCommitsAndTheOtherAsACopy() throws {
        func sidecar(_ text: String, onto parent: ObjectID, at seconds: Int64 = 1_000) throws -> (ObjectID, ObjectID) {
            try repository.refs.setReference("refs/heads/main", to: parent, expected: nil, force: true, message: "test")
            let writer = BinderWriter(repository: repository, key: key, author: Signature(name: "t", email: "t@t", seconds: seconds))
            try writer.putSidecar(Array(text.utf8), at: "visits/scan.pdf.enc")
            let commit = try writer.commit(message: "Update entry")
            return (commit, try XCTUnwrap(try repository.trees.entry(at: "visits/scan.pdf.enc", commit: commit)).id)
        }
        let (start, _) = try sidecar("base", onto: base)
        let (local, localBlob) = try sidecar("local", onto: start, at: 2_000)
        let (remote, remoteBlob) = try sidecar("remote", onto: start, at: 3_000)  // the later commit
        guard case .merged(let commit, _, let conflicts) = try merge(local: local, remote: remote) else { return XCTFail() }
        XCTAssertEqual(try repository.trees.entry(at: "visits/scan.pdf.enc", commit: commit)?.id, remoteBlob)
        XCTAssertEqual(conflicts.first?.copy, "visits/scan (conflict 1970-01-01 0000).pdf.enc")
        XCTAssertEqual(try repository.trees.entry(at: "visits/scan (conflict 1970-01-01 0000).pdf.enc", commit: commit)?.id, localBlob)
        XCTAssertEqual(ConflictNames.openConflicts(try repository.trees.listTree(commit: commit).map(\.path)),
                       ["visits/scan (conflict 1970-01-01 0000).pdf"])
    }

    /// A fresh start for each row: `main` back at the base commit.
    private func resetMain() throws {
        try repository.refs.setReference("refs/heads/main", to: base, expected: nil, force: true, message: "test")
    }

    private func put(_ documents: [String: MedicalDocument], sidecars: [String: String] = [:], onto parent: ObjectID) throws -> ObjectID {
        try repository.refs.setReference("refs/heads/main", to: parent, expected: nil, force: true, message: "test")
        let writer = BinderWriter(repository: repository, key: key, author: author)
        for (path, document) in documents { try writer.putDocument(document, at: path) }
        for (path, text) in sidecars { try writer.putSidecar(Array(text.utf8), at: path) }
        return try writer.commit(message: "Update entry")
    }

    private func stored(_ path: String, at commit: ObjectID) throws -> MedicalDocument? {
        guard let entry = try repository.trees.entry(at: path, commit: commit) else { return nil }
        return try BinderReader.readDocument(try repository.objects.readBlob(entry.id), key: key, gitPath: path)
    }
}
