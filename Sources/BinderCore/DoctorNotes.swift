import BinderCrypto
import BinderFormat
import BinderGit
import Foundation

/// The doctor's notes of a share, brought home (designed by Limbo, never built there). Every
/// document the staging repository has at `tip` that it did not have (or had otherwise) at the
/// last collection (`since`) is decrypted with the throwaway key, checked to be a document and
/// encrypted to the patient's key. Nothing in the binder is ever overwritten or lost:
///
/// - a new document (the scan page's `visits/DAY-doctor-note.json`) lands at its path, or under
///   a name nothing has yet (`NAME-2.json`, …);
/// - a document the share held that only gained children (a note on a record, as `binder
///   open-share` writes it) has those children appended to the patient's record at that path,
///   whose own value, metadata and children are kept as the patient has them now; if the
///   patient has deleted that record meanwhile, each new child lands in `visits/` as a free
///   note (`visits/DAY-doctor-note.json`, `DAY` from the child's `created`);
/// - a document the share held that the doctor rewrote (value, metadata or existing children
///   changed) is not applied over the patient's: the doctor's version lands beside it as a
///   copy under a new name (`NAME-2.json`, …; never the record's own name, even if deleted).
///
/// Attachments come along: a sidecar the doctor added or changed beside a note is re-encrypted
/// to the patient's key (a DEK sidecar only re-wrapped) under a name free in the note's folder,
/// and the note's `attachment_ref` renamed to match. Paths from the doctor's side that could
/// name something hidden (a dot-name such as `.binder` or `.git`) are ignored.
public enum DoctorNotes {
    /// The commit message: structural, no health data (docs/FORMAT.md, "Commits").
    public static let message = "Incorporate doctor note"

    /// Collects and commits onto the binder's `main` (a compare-and-swap: a commit made
    /// meanwhile, by a mount say, is read again and the collection redone, up to five times).
    /// Returns the binder paths of the documents written, sorted.
    public static func collect(from staging: GitRepository, since: ObjectID, tip: ObjectID, throwaway: NIP44.ConversationKey,
                               into binder: GitRepository, key: NIP44.ConversationKey, author: Signature,
                               now: Date = Date()) throws(StagingCopy.Failure) -> [String] {
        var attempt = 0
        while true {
            attempt += 1
            do {
                let collection = Collection(staging: staging, throwaway: throwaway, binder: binder, key: key, now: now)
                return try collection.run(since: since, tip: tip, author: author)
            } catch .git(let error) where error.isConcurrentUpdate && attempt < 5 {
                continue
            }
        }
    }

    /// One pass over the doctor's changes against one binder tip.
    private struct Collection {
        let staging: GitRepository
        let throwaway: NIP44.ConversationKey
        let binder: GitRepository
        let key: NIP44.ConversationKey
        let now: Date

        func run(since: ObjectID, tip: ObjectID, author: Signature) throws(StagingCopy.Failure) -> [String] {
            do {
                let parent = try binder.refs.branchTip()
                let mine = try parent.map { (commit) throws(GitError) in try DoctorNotes.blobs(binder, commit) } ?? [:]
                var placing = Placing(taken: Set(mine.keys))
                // The patient's records gaining children, written once at the end.
                var records: [String: MedicalDocument] = [:]
                var written = Set<String>()
                // Free notes placed in this pass: staging path -> (binder path, its `created`).
                var notes: [String: (destination: String, created: JSONValue?)] = [:]
                // Commit by commit: the scan page writes a second note of a day over the first,
                // and each of them must come home even if no collection ran in between.
                var previous = try DoctorNotes.blobs(staging, since)
                for step in try steps(since: since, tip: tip) {
                    let current = try DoctorNotes.blobs(staging, step)
                    placing.staging = (before: previous, after: current)
                    defer { previous = current }
                    let changed = current.filter { path, id in
                        previous[path] != id && BinderNaming.isDocumentPath(path) && DoctorNotes.isSafe(path)
                    }
                    for (path, id) in changed.sorted(by: { $0.key < $1.key }) {
                        let theirs = try document(path, id, in: staging, key: throwaway, whose: "the doctor's")
                        guard let oldID = previous[path] else {
                            // A new document: a free note where the doctor put it.
                            let destination = DoctorNotes.unique(path, placing.taken)
                            placing.taken.insert(destination)
                            written.insert(try place(theirs, at: destination, from: path, &placing))
                            notes[path] = (destination, theirs.metadata["created"])
                            continue
                        }
                        if let note = notes[path], try revise(note, with: theirs, from: path, &placing) { continue }
                        let old = try document(path, oldID, in: staging, key: throwaway, whose: "the shared")
                        guard let added = DoctorNotes.addedChildren(old: old, new: theirs) else {
                            // Rewritten: a copy beside the record, never over it.
                            let destination = DoctorNotes.unique(path, placing.taken.union([path]))
                            placing.taken.insert(destination)
                            written.insert(try place(theirs, at: destination, from: path, &placing))
                            continue
                        }
                        guard !added.isEmpty else { continue }
                        written.formUnion(try attach(added, to: path, mine: mine, records: &records, &placing))
                    }
                }
                try seal(records, into: &placing)
                guard !placing.changes.isEmpty else { return [] }
                _ = try binder.commits.commitChanges(onto: parent, changes: placing.changes, message: message, author: author)
                do { try binder.checkout.syncWorkTreeToHead(paths: placing.changes.map(\.path)) } catch {}
                return written.sorted()
            } catch let failure as StagingCopy.Failure { throw failure } catch let error as GitError { throw .git(error) } catch {
                throw .unreadable(path: "the staging repository", reason: "\(error)")
            }
        }

        /// The same note edited again (a doctor's `open-share` keeps its own notes editable; its
        /// `created` stays): its last version replaces the one this pass placed, and true. The
        /// scan page's second note of a day has a `created` of its own: false, it is a new note.
        func revise(_ note: (destination: String, created: JSONValue?), with theirs: MedicalDocument, from path: String,
                    _ placing: inout Placing) throws(StagingCopy.Failure) -> Bool {
            guard note.created != nil, theirs.metadata["created"] == note.created else { return false }
            placing.changes.removeAll { change in
                if case .write(let written, _) = change { return written == note.destination }
                return false
            }
            _ = try place(theirs, at: note.destination, from: path, &placing)
            return true
        }

        /// The doctor's new children of the shared record `path`: appended to the patient's
        /// record as it is now (kept in `records` until the end of the pass), or, when it is gone,
        /// unreadable or would grow past a document's limit, each a free note in `visits/`.
        /// Returns the paths written.
        func attach(_ added: [MedicalDocument], to path: String, mine: [String: ObjectID],
                    records: inout [String: MedicalDocument], _ placing: inout Placing) throws -> [String] {
            let existing = records[path] ?? mine[path].flatMap { id in try? document(path, id, in: binder, key: key, whose: "your") }
            if var record = existing {
                var grown = record
                grown.children += added
                // Room for the renamed attachments; past a document's limit the notes stand alone.
                if grown.serializedBytes().count + 64 * added.count <= WriteLimits.documentMaximum {
                    let folder = DoctorNotes.folder(of: path)
                    for child in added { record.children.append(try adopt(child, from: folder, to: folder, &placing)) }
                    records[path] = record
                    return [path]
                }
            }
            var written: [String] = []
            for child in added {
                let destination = DoctorNotes.unique(
                    BinderNaming.documentName(stem: "visits/" + DoctorNotes.day(of: child, now: now) + "-doctor-note"), placing.taken)
                placing.taken.insert(destination)
                written.append(try place(child, at: destination, from: path, &placing))
            }
            return written
        }

        /// The patient's records that gained children, encrypted to the patient's key.
        func seal(_ records: [String: MedicalDocument], into placing: inout Placing) throws {
            for (path, record) in records {
                let sealed: String
                do { sealed = try NIP44.encrypt(record.serializedBytes(), key: key) } catch {
                    throw StagingCopy.Failure.unreadable(path: path, reason: "\(error)")
                }
                placing.changes.append(.write(path: path, blob: try binder.objects.writeBlob(Array(sealed.utf8))))
            }
        }

        /// The commits from `since` (excluded) to `tip`, oldest first, along first parents; just
        /// `tip` when `since` is not among its first 10,000 ancestors (a rewritten history).
        func steps(since: ObjectID, tip: ObjectID) throws(GitError) -> [ObjectID] {
            var chain: [ObjectID] = []
            var cursor: ObjectID? = tip
            while let commit = cursor, commit != since {
                guard chain.count < 10_000 else { return [tip] }
                chain.append(commit)
                cursor = try staging.commits.commit(commit).parents.first
            }
            return cursor == nil ? [tip] : chain.reversed()
        }

        /// What is being written: the tree changes so far and the binder paths they take.
        struct Placing {
            var taken: Set<String>
            /// The staging files before and after the commit being read.
            var staging: (before: [String: ObjectID], after: [String: ObjectID]) = ([:], [:])
            var changes: [TreeChange] = []
            /// A staging sidecar (blob id, binder folder) → its name there, copied already this pass.
            var copied: [String: String] = [:]
        }

        /// Writes `document` (from the staging path `source`) at `destination`, its new
        /// attachments with it; returns `destination`.
        func place(_ document: MedicalDocument, at destination: String, from source: String,
                   _ placing: inout Placing) throws(StagingCopy.Failure) -> String {
            let adopted = try adopt(document, from: DoctorNotes.folder(of: source), to: DoctorNotes.folder(of: destination), &placing)
            do {
                let sealed = try NIP44.encrypt(adopted.serializedBytes(), key: key)
                placing.changes.append(.write(path: destination, blob: try binder.objects.writeBlob(Array(sealed.utf8))))
            } catch let error as GitError { throw .git(error) } catch {
                throw .unreadable(path: source, reason: "\(error)")
            }
            return destination
        }

        /// `document` with every attachment_ref to a sidecar the doctor added or changed (in
        /// the staging folder `from`) copied into the binder folder `to` under the patient's
        /// key, renamed when the name is taken. A sidecar the share held unchanged is the
        /// patient's own: kept by name in the same folder, copied into another.
        func adopt(_ document: MedicalDocument, from: String, to: String, _ placing: inout Placing) throws(StagingCopy.Failure) -> MedicalDocument {
            var document = document
            if document.type == "attachment_ref", BinderNaming.isSidecarReference(document.value) {
                let source = DoctorNotes.join(from, document.value)
                if let id = placing.staging.after[source], placing.staging.before[source] != id || from != to {
                    if let name = placing.copied[id.hex + "\u{0}" + to] {
                        document.value = name
                    } else {
                        let destination = DoctorNotes.uniqueSidecar(DoctorNotes.join(to, document.value), placing.taken)
                        placing.taken.insert(destination)
                        do {
                            let bytes = try StagingCopy.reencrypt(path: source, try staging.objects.readBlob(id), key: throwaway, throwaway: key)
                            placing.changes.append(.write(path: destination, blob: try binder.objects.writeBlob(bytes)))
                        } catch let failure as StagingCopy.Failure { throw failure } catch let error as GitError {
                            throw .git(error)
                        } catch { throw .unreadable(path: source, reason: "\(error)") }
                        let name = PathBytes.split(destination).name
                        placing.copied[id.hex + "\u{0}" + to] = name
                        document.value = name
                    }
                }
            }
            var children: [MedicalDocument] = []
            for child in document.children { children.append(try adopt(child, from: from, to: to, &placing)) }
            document.children = children
            return document
        }

        func document(_ path: String, _ id: ObjectID, in repository: GitRepository, key: NIP44.ConversationKey,
                      whose: String) throws(StagingCopy.Failure) -> MedicalDocument {
            do {
                let plaintext = try NIP44.decrypt(payload: try repository.objects.readBlob(id), key: key)
                return try plaintext.withUnsafeBytes { (bytes) throws(FormatError) in try MedicalDocument(plaintext: Array(bytes)) }
            } catch let error as GitError { throw .git(error) } catch {
                throw .unreadable(path: path, reason: "\(whose) file is not a document under its key (\(error))")
            }
        }
    }

    /// The children `new` has beyond `old`'s, in order, if that is all that changed (value,
    /// metadata and the existing children as they were); nil when the doctor rewrote it.
    static func addedChildren(old: MedicalDocument, new: MedicalDocument) -> [MedicalDocument]? {
        var kept: [MedicalDocument] = [], added: [MedicalDocument] = []
        var remaining = old.children[...]
        for child in new.children {
            if let first = remaining.first, first == child {
                kept.append(child)
                remaining = remaining.dropFirst()
            } else {
                added.append(child)
            }
        }
        var unchanged = new
        unchanged.children = kept
        return unchanged == old ? added : nil
    }

    fileprivate static func blobs(_ repository: GitRepository, _ commit: ObjectID) throws(GitError) -> [String: ObjectID] {
        var out: [String: ObjectID] = [:]
        for entry in try repository.trees.listTree(commit: commit) where entry.kind == .blob && entry.nameIsExact { out[entry.path] = entry.id }
        return out
    }

    static func folder(of path: String) -> String { PathBytes.components(path).filter { !$0.isEmpty }.dropLast().joined(separator: "/") }

    static func join(_ folder: String, _ name: String) -> String { folder.isEmpty ? name : folder + "/" + name }

    /// `YYYY-MM-DD` of the note's `created`, else of `now` (UTC).
    static func day(of document: MedicalDocument, now: Date) -> String {
        if let created = document.created, TimelineNames.startsWithDay(created) {
            return String(decoding: created.utf8.prefix(10), as: UTF8.self)
        }
        return String(Timestamps.string(from: now).prefix(10))
    }

    /// A path from the doctor's side that may name a file in the binder: plain names, none hidden.
    static func isSafe(_ path: String) -> Bool {
        PathBytes.components(path).allSatisfy { !$0.isEmpty && $0.utf8.first != UInt8(ascii: ".") && $0.utf8.count <= BinderNaming.maximumBytes }
    }

    /// `path`, or `STEM-2.json`, `STEM-3.json`… whichever nothing in `taken` is.
    static func unique(_ path: String, _ taken: Set<String>) -> String {
        BinderNaming.firstFree(path) { taken.contains($0) }
    }

    /// A sidecar path, or `STEM-2.EXT.enc`… (`BinderNaming.sidecarSuffixed`).
    static func uniqueSidecar(_ path: String, _ taken: Set<String>) -> String {
        guard taken.contains(path) else { return path }
        let parent = folder(of: path), name = PathBytes.components(path).filter { !$0.isEmpty }.last ?? ""
        var n = 2
        while taken.contains(join(parent, BinderNaming.sidecarSuffixed(name, n))) { n += 1 }
        return join(parent, BinderNaming.sidecarSuffixed(name, n))
    }
}
