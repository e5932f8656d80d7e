import BinderCrypto
import BinderFormat
import BinderGit
import Foundation

/// One merge of two trees against their base, file by file (see `BinderMerger`): `result`
/// starts as the local tree and takes what the remote side changed; `conflicts` says what did
/// not merge and where the other version went.
struct TreeMerge {
    typealias FileVersion = BinderMerger.FileVersion

    let repository: GitRepository
    let key: NIP44.ConversationKey
    let baseFiles: [String: FileVersion]
    let localFiles: [String: FileVersion]
    let remoteFiles: [String: FileVersion]
    let local: ObjectID, remote: ObjectID
    let localTime: Int64, remoteTime: Int64
    let now: Int64
    private(set) var result: [String: FileVersion]
    private(set) var conflicts: [MergeConflict] = []
    /// Sidecars both sides changed differently.
    private var conflictingSidecars: Set<String> = []
    /// Of those, the ones an attachment's record settled (kept with it, or copied with its copy).
    private var settledSidecars: Set<String> = []

    init(repository: GitRepository, key: NIP44.ConversationKey, base: ObjectID, local: ObjectID, remote: ObjectID, now: Int64) throws {
        self.repository = repository
        self.key = key
        baseFiles = try BinderMerger.files(repository, base)
        localFiles = try BinderMerger.files(repository, local)
        remoteFiles = try BinderMerger.files(repository, remote)
        self.local = local
        self.remote = remote
        localTime = try repository.commits.commit(local).committer.seconds
        remoteTime = try repository.commits.commit(remote).committer.seconds
        self.now = now
        result = localFiles
    }

    mutating func run() throws {
        var bothChanged: [String] = []
        for path in Set(localFiles.keys).union(remoteFiles.keys).sorted() {
            let b = baseFiles[path], l = localFiles[path], r = remoteFiles[path]
            if l == r || r == b { continue }            // same on both sides, or only local changed
            if l == b { result[path] = r; continue }    // only the remote changed
            bothChanged.append(path)
        }
        conflictingSidecars = Set(bothChanged.filter { BinderNaming.isSidecarName($0) })
        // Records first: an attachment's record decides for its sidecars (the version kept in
        // place keeps its own sidecar; the copy gets a copy of the other's), so that a record
        // and the sidecar it names always come from one side.
        for path in bothChanged where BinderNaming.isDocumentPath(path) {
            try resolve(path, base: baseFiles[path], local: localFiles[path], remote: remoteFiles[path])
        }
        for path in bothChanged where !BinderNaming.isDocumentPath(path) && !settledSidecars.contains(path) {
            try resolve(path, base: baseFiles[path], local: localFiles[path], remote: remoteFiles[path])
        }
    }

    /// Both sides changed `path`, differently.
    private mutating func resolve(_ path: String, base: FileVersion?, local: FileVersion?, remote: FileVersion?) throws {
        guard let local, let remote else {
            // Edited on one side, deleted on the other: the edit is kept.
            let kept: MergeConflict.Side = local == nil ? .remote : .local
            result[path] = local ?? remote
            return note(path, kept: kept, local == nil ? "deleted here, edited on the other device: the edit is kept"
                                                       : "edited here, deleted on the other device: the edit is kept")
        }
        if BinderNaming.isDocumentPath(path), let merged = try mergedDocument(path, base: base, local: local, remote: remote) {
            result[path] = merged
            return
        }
        if BinderNaming.isSidecarName(path), let owner = attachmentRecord(ofSidecar: path) {
            // A sidecar both changed whose record did not change on both sides: the record
            // still decides, and its copy names the other sidecar.
            return try resolveRecord(owner, local: localFiles[owner] ?? result[owner] ?? local,
                                     remote: remoteFiles[owner] ?? result[owner] ?? remote, keepingRecord: false)
        }
        try resolveRecord(path, local: local, remote: remote, keepingRecord: true)
    }

    /// Keeps one side's version of `path` in place and the other as a conflict copy; for a
    /// record, the sidecars each version names go with it. `keepingRecord` false: the record
    /// itself merged (or one side alone changed it): it stays as merged, only its sidecars and
    /// copy follow the side that wins.
    private mutating func resolveRecord(_ path: String, local: FileVersion, remote: FileVersion, keepingRecord: Bool) throws {
        let (kept, reason) = keptSide(path, local: local, remote: remote)
        if keepingRecord { result[path] = kept == .local ? local : remote }
        let keptFiles = kept == .local ? localFiles : remoteFiles
        if BinderNaming.isDocumentPath(path) {
            for sidecar in sidecarPaths(path, kept == .local ? local : remote) where conflictingSidecars.contains(sidecar) {
                guard let version = keptFiles[sidecar] else { continue }
                result[sidecar] = version
                settledSidecars.insert(sidecar)
            }
        }
        let copy = try conflictCopy(path, of: kept == .local ? remote : local, from: kept == .local ? remoteFiles : localFiles)
        note(path, kept: kept, reason, copy: copy)
    }

    /// The git paths of the sidecars the record at `path` names (none when it cannot be read).
    private func sidecarPaths(_ path: String, _ version: FileVersion) -> [String] {
        guard let document = document(version, path) else { return [] }
        let folder = ViewPath.split(path).parent
        return BinderNaming.sidecarReferences(document).map { join(folder, $0) }
    }

    /// The record beside a sidecar that names it (`Y.json` for `Y.pdf.enc`, the apps' and
    /// binder's naming), in the merged tree; nil for a sidecar nothing names that way.
    private func attachmentRecord(ofSidecar path: String) -> String? {
        let (folder, name) = ViewPath.split(path)
        let bare = BinderNaming.sidecarStem(name) ?? name
        for stem in Set([bare, BinderNaming.splitExtension(bare).stem]) {
            let record = join(folder, BinderNaming.documentName(stem: stem))
            guard BinderNaming.isDocumentPath(record), let version = result[record] else { continue }
            if sidecarPaths(record, version).contains(path) { return record }
        }
        return nil
    }

    /// The three-way merge of a record, stored; nil when the edits overlap, a version cannot
    /// be read, or the record names a sidecar both sides changed (an attachment both replaced:
    /// one version stays, the other becomes a copy).
    private func mergedDocument(_ path: String, base: FileVersion?, local: FileVersion, remote: FileVersion) throws -> FileVersion? {
        guard let l = document(local, path), let r = document(remote, path) else { return nil }
        let b = base.flatMap { document($0, path) }
        guard let merged = DocumentMerge.merge(base: b, local: l, remote: r) else { return nil }
        let folder = ViewPath.split(path).parent
        if BinderNaming.sidecarReferences(merged).contains(where: { conflictingSidecars.contains(join(folder, $0)) }) { return nil }
        return FileVersion(blob: try store(merged, path), mode: local.mode)
    }

    /// Which version stays in place: the later `metadata.updated`, else the later commit.
    private func keptSide(_ path: String, local: FileVersion, remote: FileVersion) -> (MergeConflict.Side, String) {
        let lu = updated(local, path), ru = updated(remote, path)
        if let lu, let ru, lu != ru { return (lu > ru ? .local : .remote, "both edited: the later metadata.updated wins") }
        let side: MergeConflict.Side = remoteTime > localTime ? .remote : .local
        return (side, lu == nil || ru == nil ? "both edited: the later commit wins (no date inside)"
                                             : "both edited at the same time: the later commit wins")
    }

    /// Stores the other version beside the original: a record as `X (conflict …).json` with
    /// `metadata.conflict_of`, and a copy of each sidecar it names (`sideFiles`: its side's
    /// tree) under the copy's name (`X (conflict …).pdf.enc`, a child's `X (conflict …)-…`), so
    /// that the copy is an attachment of its own and deleting it leaves the original's
    /// sidecars alone; a sidecar no record names as `Y (conflict …).ext.enc`; other files stay
    /// in history only (nil).
    private mutating func conflictCopy(_ path: String, of version: FileVersion, from sideFiles: [String: FileVersion]) throws -> String? {
        if BinderNaming.isDocumentPath(path), var document = document(version, path) {
            document.metadata["conflict_of"] = .string(path)
            let copy = freeName(ConflictNames.copy(of: path, at: now))
            let folder = ViewPath.split(path).parent
            let stem = BinderNaming.documentStem(ViewPath.split(path).name) ?? ""
            let copyStem = BinderNaming.documentStem(ViewPath.split(copy).name) ?? ""
            var renamed: [String: String] = [:]
            Self.renameSidecars(in: &document) { value in
                guard let sidecar = sideFiles[join(folder, value)] else { return nil }
                settledSidecars.insert(join(folder, value))
                if let done = renamed[value] { return done }
                // `X.pdf.enc` (a standalone attachment's) and `X-…` (a child's, as binder names
                // them) take the copy's stem; any other name is prefixed with it.
                let ownName = value.hasPrefix(stem + ".") || value.hasPrefix(stem + "-")
                let wanted = ownName ? copyStem + String(value.dropFirst(stem.count)) : copyStem + "-" + value
                var name = wanted, n = 2
                while result[join(folder, name)] != nil {
                    name = BinderNaming.sidecarName(of: BinderNaming.suffixed(BinderNaming.sidecarStem(wanted) ?? wanted, n))
                    n += 1
                }
                result[join(folder, name)] = sidecar
                renamed[value] = name
                return name
            }
            result[copy] = FileVersion(blob: try store(document, copy), mode: version.mode)
            return copy
        }
        guard BinderNaming.isSidecarName(path) else { return nil }
        let copy = freeName(ConflictNames.copy(of: path, at: now))
        result[copy] = version
        return copy
    }

    /// Points each `attachment_ref` of `document` (and of its children, keeping the names they
    /// are shown under) that names a sidecar at the name `rename` gives (nil: left as it is).
    private static func renameSidecars(in document: inout MedicalDocument, _ rename: (String) -> String?) {
        if document.type == "attachment_ref", BinderNaming.isSidecarReference(document.value), let name = rename(document.value) {
            document.value = name
        }
        for index in document.children.indices {
            let shown = WritePlanner.shownName(document.children, index)
            renameSidecars(in: &document.children[index], rename)
            if WritePlanner.shownName(document.children, index) != shown {
                WritePlanner.settleName(of: &document.children, at: index, shownAs: shown)
            }
        }
    }

    /// `path`, or `path` with ` 2`, ` 3`… before its extension, whichever no file holds.
    private func freeName(_ path: String) -> String {
        var candidate = path, n = 2
        while result[candidate] != nil {
            candidate = ConflictNames.numbered(path, n)
            n += 1
        }
        return candidate
    }

    private mutating func note(_ path: String, kept: MergeConflict.Side, _ reason: String, copy: String? = nil) {
        var conflict = MergeConflict(path: path, winner: kept, lostCommit: (kept == .local ? remote : local).hex,
                                     reason: reason, mergedAt: now)
        conflict.copy = copy
        conflicts.append(conflict)
    }

    private func document(_ version: FileVersion, _ path: String) -> MedicalDocument? {
        guard let stored = try? repository.objects.readBlob(version.blob) else { return nil }
        return try? BinderReader.readDocument(stored, key: key, gitPath: path)
    }

    private func store(_ document: MedicalDocument, _ path: String) throws -> ObjectID {
        let payload = try NIP44.encrypt(document.serializedBytes(), key: key)
        return try repository.objects.writeBlob(Array(payload.utf8))
    }

    private func updated(_ version: FileVersion, _ path: String) -> Timestamp? {
        guard BinderNaming.hasDocumentExtension(path), let text = document(version, path)?.updated,
              let parsed = Timestamps.parse(text) else { return nil }
        return Timestamp(seconds: parsed.seconds, nanoseconds: parsed.nanoseconds)
    }
}

/// Names of conflict copies: `X (conflict YYYY-MM-DD HHMM).json` beside `X.json` (UTC, the
/// time of the merge); `Y (conflict …).pdf.enc` beside a sidecar `Y.pdf.enc`.
public enum ConflictNames {
    static let marker = " (conflict "

    public static func copy(of path: String, at seconds: Int64) -> String {
        let iso = Timestamps.string(seconds: seconds)  // 2026-06-01T14:30:00.000Z
        let stamp = "\(iso.prefix(10)) \(iso.dropFirst(11).prefix(2))\(iso.dropFirst(14).prefix(2))"
        let (stem, ext) = split(path)
        return "\(stem)\(marker)\(stamp))\(ext)"
    }

    static func numbered(_ path: String, _ n: Int) -> String {
        let (stem, ext) = split(path)
        return "\(stem) \(n)\(ext)"
    }

    /// Whether a git path is a conflict copy, by its name.
    public static func isCopy(_ gitPath: String) -> Bool {
        let name = ViewPath.split(gitPath).name
        guard name.contains(marker) else { return false }
        return name.range(of: #" \(conflict \d{4}-\d{2}-\d{2} \d{4}\)( \d+)?\."#, options: .regularExpression) != nil
    }

    /// The open conflicts among `gitPaths` (a tree's files): the view paths of the conflict
    /// copies still there (`X (conflict …).md`, an attachment's `Y (conflict …).pdf`: its
    /// record and sidecar count once, by the sidecar's name without `.enc`), sorted.
    /// Deleting a copy resolves its conflict.
    public static func openConflicts(_ gitPaths: some Sequence<String>) -> [String] {
        let copies = gitPaths.filter(isCopy)
        // An attachment's copy: `Y (conflict …).json` and its sidecar `Y (conflict …).pdf.enc`.
        let attachmentRecords = Set(copies.filter { BinderNaming.isSidecarName($0) }
            .map { BinderNaming.documentName(stem: split($0).stem) })
        let records = Set(copies.filter(BinderNaming.isDocumentPath))
        return copies.compactMap { path -> String? in
            if let attachment = BinderNaming.sidecarStem(path) { return attachment }
            guard records.contains(path) else { return nil }
            if attachmentRecords.contains(path) { return nil }  // listed by its sidecar's name
            return BinderNaming.recordName(ofDocument: path)
        }.sorted()
    }

    /// ("visits/x", ".json") for a record; ("labs/y", ".pdf.enc") for a sidecar.
    private static func split(_ path: String) -> (stem: String, ext: String) {
        let (folder, name) = ViewPath.split(path)
        var stem = name, ext = ""
        if let bare = BinderNaming.sidecarStem(name) {
            stem = bare
            ext = BinderNaming.sidecarExtension
        }
        let inner = BinderNaming.splitExtension(stem)
        return (join(folder, inner.stem), inner.ext + ext)
    }
}
