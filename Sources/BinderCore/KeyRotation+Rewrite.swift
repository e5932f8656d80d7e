import BinderCrypto
import BinderGit
import Foundation

/// One run of a key rotation's rewrite: the old history's commits, oldest first, each
/// written over trees rebuilt bottom-up from the blob map (`RotationJournal.blobs`), each
/// distinct blob re-encrypted once. Trees are rebuilt from the map (a tree's id follows from
/// its entries, so a resumed run writes the same ones) and remembered for this run.
final class HistoryRewriter {
    let old: GitRepository
    let new: GitRepository
    let journal: RotationJournal
    let oldKey: NIP44.ConversationKey
    let newKey: NIP44.ConversationKey
    let interruptAfterSteps: Int?

    /// Old tree -> new tree, this run.
    private var trees: [ObjectID: ObjectID] = [:]
    /// The new objects of the commit being rewritten, written as one pack before its line is
    /// recorded (four fsyncs a commit instead of two per object: docs/DESIGN.md).
    private let batch: ObjectBatch
    /// `KeyRotation.batchBytes`.
    let batchBytes: Int
    private(set) var commitsWritten = 0
    private(set) var blobsReencrypted = 0
    private(set) var blobsCopied = 0

    init(old: GitRepository, new: GitRepository, journal: RotationJournal, oldKey: NIP44.ConversationKey,
         newKey: NIP44.ConversationKey, interruptAfterSteps: Int?, batchBytes: Int) {
        self.old = old
        self.new = new
        self.journal = journal
        self.oldKey = oldKey
        self.newKey = newKey
        self.interruptAfterSteps = interruptAfterSteps
        self.batchBytes = batchBytes
        batch = new.objects.batch()
    }

    /// Every commit reachable from `tip`, each after all its parents.
    func commitsOldestFirst(tip: ObjectID) throws(KeyRotation.Failure) -> [CommitInfo] {
        try KeyRotation.git { () throws(GitError) in try Self.oldestFirst(old, tip: tip) }
    }

    /// Every commit of `repository` reachable from `tip`, each after all its parents.
    static func oldestFirst(_ repository: GitRepository, tip: ObjectID) throws(GitError) -> [CommitInfo] {
        let all = try repository.history.commits(from: tip)
        let byID = Dictionary(all.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var ordered: [CommitInfo] = []
        ordered.reserveCapacity(all.count)
        var placed = Set<ObjectID>()
        // Depth first, a commit placed once all its parents are: no recursion (a history may be long).
        var stack: [(ObjectID, Bool)] = [(tip, false)]
        while let item = stack.popLast() {
            let (id, parentsDone) = item
            guard !placed.contains(id), let info = byID[id] else { continue }
            if parentsDone {
                placed.insert(id)
                ordered.append(info)
            } else {
                stack.append((id, true))
                for parent in info.parents.reversed() where !placed.contains(parent) { stack.append((parent, false)) }
            }
        }
        return ordered
    }

    /// Writes the new commit of `commit` unless an earlier run did.
    func rewrite(_ commit: CommitInfo) throws(KeyRotation.Failure) {
        guard journal.commits[commit.id] == nil else { return }
        let tree = try rewriteTree(commit.tree, path: "", commit: commit.id)
        var parents: [ObjectID] = []
        for parent in commit.parents {
            guard let mapped = journal.commits[parent] else {
                throw .unsafeEntry(path: "/", commit: commit.id, reason: "parent \(parent) is not in the history")
            }
            parents.append(mapped)
        }
        let id = try KeyRotation.git { () throws(GitError) in
            let id = try batch.commit(tree: tree, parents: parents, author: commit.author, committer: commit.committer,
                                      message: commit.message)
            try batch.write()
            return id
        }
        try journal.record(commit: commit.id, id)
        commitsWritten += 1
        try step()
    }

    private func rewriteTree(_ id: ObjectID, path: String, commit: ObjectID) throws(KeyRotation.Failure) -> ObjectID {
        if let done = trees[id] { return done }
        let entries: [FolderEntry]
        do { entries = try old.trees.folderEntries(tree: id, path: path) } catch {
            if case .invalidPath(let where_, let reason) = error { throw .unsafeEntry(path: where_, commit: commit, reason: reason) }
            throw .git(error)
        }
        var names = Set<String>()
        var rewritten: [FolderEntry] = []
        rewritten.reserveCapacity(entries.count)
        for entry in entries {
            let entryPath = path.isEmpty ? entry.name : path + "/" + entry.name
            if let reason = Self.unsafeReason(entry) { throw .unsafeEntry(path: entryPath, commit: commit, reason: reason) }
            guard names.insert(entry.name).inserted else {
                throw .unsafeEntry(path: entryPath, commit: commit, reason: "the name is in its folder twice")
            }
            let newID: ObjectID
            switch entry.kind {
            case .tree: newID = try rewriteTree(entry.id, path: entryPath, commit: commit)
            default: newID = try rewriteBlob(entry.id, kind: Self.kind(of: entry), path: entryPath, commit: commit)
            }
            rewritten.append(FolderEntry(name: entry.name, mode: entry.mode, id: newID))
        }
        let newID = try KeyRotation.git { () throws(GitError) in try batch.tree(rewritten) }
        trees[id] = newID
        return newID
    }

    /// Why an entry cannot be carried over (nil: it can): a submodule, a name git refuses,
    /// a link or an executable where the format has its encrypted files.
    static func unsafeReason(_ entry: FolderEntry) -> String? {
        if entry.name == "." || entry.name == ".." || entry.name.lowercased() == ".git" { return "a name git refuses in a tree" }
        switch entry.kind {
        case .submodule, .unreadable: return "a submodule, which a binder does not hold"
        case .link where kind(of: entry) != .plain: return "a symbolic link named as an encrypted file"
        default: return nil
        }
    }

    /// How a file is carried over, by its name (docs/FORMAT.md): `*.json` (documents and
    /// `.meta.json`) are NIP-44 payloads, `*.enc` sidecars; anything else is not encrypted.
    static func kind(of entry: FolderEntry) -> RotatedBlob.Kind {
        if BinderNaming.hasDocumentExtension(entry.name) { return .document }
        if BinderNaming.isSidecarName(entry.name) { return .sidecar }
        return .plain
    }

    private func rewriteBlob(_ id: ObjectID, kind: RotatedBlob.Kind, path: String,
                             commit: ObjectID) throws(KeyRotation.Failure) -> ObjectID {
        if let done = journal.blobs[id] {
            guard done.kind == kind else {
                throw .unsafeEntry(path: path, commit: commit, reason: "the same content is stored elsewhere as another kind of file")
            }
            return done.id
        }
        let bytes = try KeyRotation.git { () throws(GitError) in try old.objects.readBlob(id) }
        let rotated: [UInt8]
        switch kind {
        case .plain:
            if opensWithOldKey(bytes) {
                throw .unsafeEntry(path: path, commit: commit, reason: "the old key opens it, but it is not named as a document or sidecar")
            }
            rotated = bytes
        case .document, .sidecar:
            rotated = try reencrypt(bytes, kind: kind, path: path, commit: commit)
        }
        let newID = try KeyRotation.git { () throws(GitError) in
            let newID = try batch.blob(rotated)
            if batch.byteCount > batchBytes { try batch.write() }
            return newID
        }
        try journal.record(blob: id, RotatedBlob(kind: kind, id: newID))
        if kind == .plain {
            blobsCopied += 1
        } else {
            blobsReencrypted += 1
            try step()
        }
        return newID
    }

    /// A document or sidecar under the new key; the plaintext only in secret memory.
    private func reencrypt(_ bytes: [UInt8], kind: RotatedBlob.Kind, path: String,
                           commit: ObjectID) throws(KeyRotation.Failure) -> [UInt8] {
        do {
            if kind == .document {
                let plaintext = try NIP44.decrypt(payload: bytes, key: oldKey)
                return Array(try NIP44.encrypt(plaintext, key: newKey).utf8)
            }
            let content = try Sidecar.decrypt(bytes, key: oldKey)
            return try content.withUnsafeBytes { (c) throws(Sidecar.Error) in try Sidecar.encrypt(c, key: newKey) }
        } catch {
            throw .unreadable(path: path, commit: commit, reason: "\(error)")
        }
    }

    /// Whether `key` opens `bytes` as a document or as a sidecar.
    static func opens(_ bytes: [UInt8], key: NIP44.ConversationKey) -> Bool {
        (try? NIP44.decrypt(payload: bytes, key: key)) != nil || (!bytes.isEmpty && (try? Sidecar.decrypt(bytes, key: key)) != nil)
    }

    private func opensWithOldKey(_ bytes: [UInt8]) -> Bool { Self.opens(bytes, key: oldKey) }

    /// Counts a step, and stops the run as a kill would when the tests asked for it.
    private func step() throws(KeyRotation.Failure) {
        guard let limit = interruptAfterSteps else { return }
        if commitsWritten + blobsReencrypted >= limit { throw .interrupted(afterSteps: limit) }
    }
}
