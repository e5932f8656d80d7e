import BinderCrypto
import BinderFormat
import BinderGit
import Synchronization

/// `.binder/`: the mount's status and its views of the records (timeline, tags, history,
/// deleted), all read-only and computed from git and the listings already in memory. It
/// resolves a path under `.binder` to a `ControlNode`; `ViewReader` turns a file's node into
/// bytes (as any stored file's). See docs/DESIGN.md, "Views".
final class ControlViewReader: Sendable {
    let repository: GitRepository
    let key: NIP44.ConversationKey
    /// The view's listings and plaintext cache (each with its own lock), shared with `ViewReader`.
    let listings: ListingCache
    let plaintext: PlaintextCache
    /// For `.binder/status`: the last refused save (`ViewWriter`'s) and the sync engine's lines
    /// (the committer's hooks).
    let refusals: RefusalLog
    let committer: Committer
    /// The listings of `.binder/` folders, per commit shown (its own lock, held only for its map).
    let cache = ControlViewCache()
    /// `.binder/status` as its size was last given, until it is read (`statusBytes`): the
    /// text changes by itself, and a kernel that keeps pages reads as many bytes as `stat` said.
    /// Guarded by its own mutex.
    let statusMemo = Mutex<(bytes: SecureBytes, at: ContinuousClock.Instant)?>(nil)

    init(repository: GitRepository, key: NIP44.ConversationKey, listings: ListingCache, plaintext: PlaintextCache,
         refusals: RefusalLog, committer: Committer) {
        self.repository = repository
        self.key = key
        self.listings = listings
        self.plaintext = plaintext
        self.refusals = refusals
        self.committer = committer
    }

    /// Drops every listing and the status kept: at unmount.
    func removeAll() {
        statusMemo.withLock { $0 = nil }
        cache.removeAll()
    }

    // MARK: - Answers for the FUSE bridge

    /// The attributes of `path` inside `.binder` (normalized).
    func attributes(_ path: String) throws(ViewError) -> NodeAttributes {
        try attributes(of: try controlNode(path))
    }

    /// `.binder/status` now. The text whose size `stat` gave is kept a moment for the read
    /// that follows (`consuming`), so that both agree: a kernel that keeps pages (a read-only
    /// mount without OPEN) reads exactly the size it was given.
    func statusBytes(consuming: Bool) throws(ViewError) -> SecureBytes {
        let now = ContinuousClock.now
        if let memo = statusMemo.withLock({ memo -> SecureBytes? in
            defer { if consuming { memo = nil } }
            guard let kept = memo, now - kept.at < .seconds(1) else { return nil }
            return kept.bytes
        }) {
            return memo
        }
        let bytes = try ViewError.needingSecretMemory(BinderView.statusPath) { () throws(SecureMemoryError) in try SecureBytes(copyingUTF8: statusText()) }
        if !consuming { statusMemo.withLock { $0 = (bytes, now) } }
        return bytes
    }

    /// Status of the mount as `key: value` lines; paths and reasons, no plaintext.
    func statusText() -> String {
        let stats = BinderView.Statistics(plaintext: plaintext, listings: listings)
        let memory = SecureBytes.memoryInUse
        var text = """
        commit: \(listings.snapshot.commit?.hex ?? "none")
        cached_bytes: \(stats.cachedBytes)
        cached_entries: \(stats.cachedEntries)
        listed_folders: \(stats.listedFolders)
        git_object_reads: \(stats.objectReads)
        listing_decryptions: \(stats.listingDecryptions)
        secret_memory_used: \(memory.handedOut)
        secret_memory_mapped: \(memory.mapped)

        """
        if let refusal = refusals.last {
            text += "last_refused_save: \(Timestamps.string(from: refusal.time)) \(refusal.reason)\n"
        }
        let conflicts = ConflictNames.openConflicts(listings.snapshot.gitFolders.values.joined().map(\.path))
        text += "open_conflicts: \(conflicts.count)\n" + conflicts.map { "conflict: \($0)\n" }.joined()
        return text + (committer.hooks.withLock { $0 }.status?() ?? "sync: off\n")
    }

    /// The entries of a `.binder/` folder, in the order they are listed.
    func entries(_ path: String) throws(ViewError) -> [(name: String, attributes: NodeAttributes)] {
        guard case .folder(let folder, _) = try controlNode(path) else { throw .notDirectory(path) }
        let listing = try controlListing(folder)
        var entries: [(name: String, attributes: NodeAttributes)] = []
        entries.reserveCapacity(listing.entries.count)
        for (name, node) in listing.entries { entries.append((name, try attributes(of: node))) }
        return entries
    }

    /// The target of a link in `.binder/` (relative, into the tree).
    func linkTarget(_ path: String) throws(ViewError) -> String {
        guard case .link(let target, _) = try controlNode(path) else { throw .notFound(path) }
        return target
    }

    private func attributes(of node: ControlNode) throws(ViewError) -> NodeAttributes {
        switch node {
        case .folder(_, let time): return NodeAttributes(kind: .directory, size: 0, modified: time, readOnly: true)
        case .file(let node): return NodeAttributes(kind: .file, size: node.size, modified: node.modified, readOnly: true)
        case .link(let target, let time): return NodeAttributes(kind: .symlink, size: target.utf8.count, modified: time, readOnly: true)
        case .status:
            return NodeAttributes(kind: .file, size: try statusBytes(consuming: false).count, modified: listings.snapshot.commitTime,
                                  readOnly: true)
        }
    }

    /// The entry at `path` (`.binder` or below), found through its folder's listing.
    func controlNode(_ path: String) throws(ViewError) -> ControlNode {
        if path == BinderView.controlDirectory { return .folder(.root, modified: listings.snapshot.commitTime) }
        let (parent, name) = ViewPath.split(path)
        guard case .folder(let folder, _) = try controlNode(parent) else { throw .notDirectory(parent) }
        // A name a history folder holds now is found without its listing, which walks all of
        // history for the records deleted below it (the listing puts current names first, so
        // it would give the same node).
        if case .history(let viewFolder) = folder, let node = currentHistoryNode(viewFolder, name) { return node }
        // `.binder` itself is never cached (its status changes by itself): its few names are
        // answered without building its listing, as every lookup below it passes through here.
        if folder == .root { if let node = rootNode(name) { return node } else { throw .notFound(path) } }
        guard let node = try controlListing(folder).node(named: name) else { throw .notFound(path) }
        return node
    }

    /// The history folder's entry for `name` of the view's folder `viewFolder` as it is now: a
    /// folder's history, or a record's versions; nil for anything else or nothing.
    private func currentHistoryNode(_ viewFolder: String, _ name: String) -> ControlNode? {
        (try? listings.listing(viewFolder))?.nodes[name].flatMap { historyNode(viewFolder, name, $0) }
    }

    private func historyNode(_ viewFolder: String, _ name: String, _ node: Node) -> ControlNode? {
        if node.isDirectory && node.owner == nil {
            return .folder(.history(folder: join(viewFolder, name)), modified: node.modified)
        }
        if let gitPath = Self.recordGitPath(node) { return .folder(.versions(gitPath: gitPath), modified: node.modified) }
        return nil
    }

    // MARK: - Listings

    private func controlListing(_ folder: ControlFolder) throws(ViewError) -> ControlListing {
        if folder == .root { return rootListing() }  // status changes by itself: never cached
        let snapshot = listings.snapshot
        return try cache.listing(folder, commit: snapshot.commit) { () throws(ViewError) -> ControlListing in
            switch folder {
            case .root: return rootListing()
            case .timeline: return linkListing(try timelineRecords(), depth: 2)
            case .tags: return tagsListing(try timelineRecords(), time: snapshot.commitTime)
            case .tag(let tag): return linkListing(try timelineRecords().filter { $0.facts.tags.contains(tag) }, depth: 3)
            case .history(let viewFolder): return try historyListing(viewFolder, snapshot: snapshot)
            case .versions(let gitPath): return try versionsListing(gitPath, snapshot: snapshot)
            case .deleted(let viewFolder): return try deletedListing(viewFolder, snapshot: snapshot)
            }
        }
    }

    /// The entry `name` of `.binder` (what `rootListing` holds under that name).
    private func rootNode(_ name: String) -> ControlNode? {
        if name == "status" { return .status }
        guard let folder = ControlFolder.names.first(where: { $0.0 == name })?.1 else { return nil }
        return .folder(folder, modified: listings.snapshot.commitTime)
    }

    private func rootListing() -> ControlListing {
        var listing = ControlListing()
        listing.append("status", .status)
        let time = listings.snapshot.commitTime
        for (name, folder) in ControlFolder.names { listing.append(name, .folder(folder, modified: time)) }
        return listing
    }

    /// Links named by `TimelineNames`, newest first; `depth` folders below the mount root.
    private func linkListing(_ records: [TimelineRecord], depth: Int) -> ControlListing {
        let up = String(repeating: "../", count: depth)
        var listing = ControlListing(capacity: records.count)
        for (name, record) in TimelineNames.assign(records) {
            listing.append(name, .link(target: up + record.viewPath, modified: record.time))
        }
        return listing
    }

    private func tagsListing(_ records: [TimelineRecord], time: Timestamp) -> ControlListing {
        var listing = ControlListing()
        let tags = Set(records.flatMap(\.facts.tags)).filter { BinderNaming.unsafeNameReason($0, atRoot: false) == nil }
        for tag in tags.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
            listing.append(tag, .folder(.tag(tag), modified: time))
        }
        return listing
    }

    // MARK: - Timeline

    /// Every record of every folder (documents and attachments, not children), with its facts.
    /// Lists every git folder (each is decrypted once, then kept).
    func timelineRecords() throws(ViewError) -> [TimelineRecord] {
        var records: [TimelineRecord] = []
        for folder in listings.snapshot.gitFolders.keys {
            guard let listing = try? listings.listing(folder) else { continue }  // a hidden git folder
            let parts = listings.documentParts(folder)
            for (name, node) in listing.nodes {
                guard let gitPath = Self.recordGitPath(node),
                      let facts = parts[ViewPath.split(gitPath).name]?.facts else { continue }
                records.append(TimelineRecord(viewPath: join(folder, name), facts: facts, modified: node.modified))
            }
        }
        return records
    }

    /// The git path of the document a listed node is the record of: a document, or an
    /// attachment's `attachment_ref`; nil for folders, children and raw files.
    static func recordGitPath(_ node: Node) -> String? {
        switch node.source {
        case .document: return node.gitPath
        case .sidecar: if case .document(let path)? = node.owner { return path } else { return nil }
        default: return nil
        }
    }

    // MARK: - History

    /// `history/F`: F's subfolders and records as they are now, and the records deleted from F.
    private func historyListing(_ viewFolder: String, snapshot: Snapshot) throws(ViewError) -> ControlListing {
        var listing = ControlListing()
        let current = try? listings.listing(viewFolder)
        for (name, node) in current?.sortedEntries ?? [] {
            if let entry = historyNode(viewFolder, name, node) { listing.append(name, entry) }
        }
        var found = current != nil || viewFolder.isEmpty
        for record in try deletedRecords(snapshot) {
            guard let name = Self.nameBelow(viewFolder, record.viewPath) else { continue }
            found = true
            if name.isFolder {
                listing.append(name.first, .folder(.history(folder: join(viewFolder, name.first)), modified: snapshot.commitTime))
            } else {
                listing.append(name.first, .folder(.versions(gitPath: record.gitPath), modified: record.node.modified))
            }
        }
        guard found else { throw .notFound(BinderView.controlDirectory + "/history/" + viewFolder) }
        return listing
    }

    /// Each committed version of a record, newest first, named by its commit's time and id.
    private func versionsListing(_ gitPath: String, snapshot: Snapshot) throws(ViewError) -> ControlListing {
        guard let tip = snapshot.commit else { return ControlListing() }
        let versions: [PathVersion]
        do {
            versions = try Self.walker(of: repository).history.versions(of: gitPath, from: tip, extending: cache.lastVersions(of: gitPath))
            cache.keep(versions, of: gitPath, tip: tip)
        } catch {
            throw .storage(path: gitPath, reason: "\(error)", code: Committer.code(of: error))
        }
        var listing = ControlListing()
        for version in versions {
            guard let (node, ext) = versionNode(gitPath, blob: version.blob, sidecar: { name in
                try? self.repository.trees.entry(at: join(ViewPath.split(gitPath).parent, name), commit: version.commit)?.id
            }, time: Timestamp(seconds: version.seconds)) else { continue }
            listing.append(Self.versionName(seconds: version.seconds, commit: version.commit) + ext, .file(node))
        }
        return listing
    }

    /// A second instance of `repository` for one walk over the whole history: such a walk reads
    /// every commit's trees (minutes, in a folder of 100,000 records with thousands of commits),
    /// and on the view's own instance it would hold that instance's lock, and every save and
    /// every read of a record not cached, throughout. Freed with the walk, packs and all: its
    /// packs are its own (`GitRepository.openForWalk`), so the delta bases the walk caches do
    /// not stay in the view's instance.
    static func walker(of repository: GitRepository) throws(GitError) -> GitRepository {
        try GitRepository.openForWalk(path: repository.gitDirectory)
    }

    /// `2026-02-09T101500Z-1a2b3c4`: the commit's UTC time and short id.
    static func versionName(seconds: Int64, commit: ObjectID) -> String {
        let iso = Timestamps.string(seconds: seconds)  // 2026-02-09T10:15:00.000Z
        let day = iso.prefix(10), clock = iso.dropFirst(11).prefix(8).replacingOccurrences(of: ":", with: "")
        return "\(day)T\(clock)Z-\(commit.hex.prefix(7))"
    }

    /// A node for one stored version of the document `gitPath` (rendered, or its attachment's
    /// sidecar as found by `sidecar`), with the extension it is shown with; nil when it cannot
    /// be read.
    private func versionNode(_ gitPath: String, blob: ObjectID, sidecar: (String) -> ObjectID?,
                             time: Timestamp) -> (Node, String)? {
        let reader = ContentReader(repository: repository, key: key, listings: listings)
        guard let document = try? reader.document(blob, gitPath: gitPath) else { return nil }
        if let reference = BinderNaming.sidecarReference(of: document) {
            let name = BinderNaming.attachmentName(sidecar: reference, format: document.metadata["format"]?.stringValue)
            guard let sidecarBlob = sidecar(reference), let stored = try? repository.objects.readBlob(sidecarBlob),
                  let size = Sidecar.plaintextSize(stored, key: key) ?? (try? Sidecar.decrypt(stored, key: key))?.count else { return nil }
            return (Node(source: .sidecar(blob: sidecarBlob), size: size, modified: time, gitPath: gitPath),
                    BinderNaming.splitExtension(name).ext)
        }
        let text = FrontMatter.render(metadata: document.metadata, value: document.value)
        // Not put in the plaintext cache: a listing of a record's versions would fill it with
        // every version (1,000 versions of a 4 KB record: 4 MiB for the mount's life), where
        // the one version read, if any, is rendered again when it is opened.
        return (Node(source: .document(blob: blob), size: text.utf8.count, modified: time, gitPath: gitPath), BinderNaming.markdownExtension)
    }

    // MARK: - Deleted

    /// `deleted/F`: the last version of each record deleted from F, and the folders below F
    /// that deleted records were in.
    private func deletedListing(_ viewFolder: String, snapshot: Snapshot) throws(ViewError) -> ControlListing {
        var listing = ControlListing()
        for record in try deletedRecords(snapshot) {
            guard let name = Self.nameBelow(viewFolder, record.viewPath) else { continue }
            if name.isFolder {
                listing.append(name.first, .folder(.deleted(folder: join(viewFolder, name.first)), modified: snapshot.commitTime))
            } else {
                listing.append(name.first, .file(record.node))
            }
        }
        if listing.isEmpty && !viewFolder.isEmpty { throw .notFound(BinderView.controlDirectory + "/deleted/" + viewFolder) }
        return listing
    }

    /// Records (documents and attachments) some commit removed and the tip does not hold,
    /// newest removal first. A record moved elsewhere (its ciphertext is still stored) is not
    /// deleted.
    func deletedRecords(_ snapshot: Snapshot) throws(ViewError) -> [DeletedRecord] {
        guard let tip = snapshot.commit else { return [] }
        return try cache.deleted(commit: tip) { () throws(ViewError) -> [DeletedRecord] in
            let files: [DeletedFile]
            do {
                let removals = try Self.walker(of: repository).history.removals(from: tip, extending: cache.lastRemovals)
                cache.keep(removals)
                files = removals.deleted
            } catch {
                throw .storage(path: "", reason: "\(error)", code: Committer.code(of: error))
            }
            let stored = Set(snapshot.gitFolders.values.joined().map(\.id))
            let lastBlobs = Dictionary(files.map { ($0.path, $0.lastBlob) }, uniquingKeysWith: { first, _ in first })
            var records: [DeletedRecord] = []
            for file in files where BinderNaming.isDocumentPath(file.path) && !stored.contains(file.lastBlob) {
                let (folder, name) = ViewPath.split(file.path)
                guard let (node, ext) = versionNode(file.path, blob: file.lastBlob, sidecar: { lastBlobs[join(folder, $0)] },
                                                    time: Timestamp(seconds: file.seconds)) else { continue }
                let stem = BinderNaming.documentStem(name) ?? name
                records.append(DeletedRecord(gitPath: file.path, viewPath: join(folder, stem + ext), node: node))
            }
            return records
        }
    }

    /// The first name below `folder` on the way to `path` (nil: `path` is not below it), and
    /// whether more follow (a folder).
    static func nameBelow(_ folder: String, _ path: String) -> (first: String, isFolder: Bool)? {
        let rest: String
        if folder.isEmpty { rest = path } else {
            guard let below = PathBytes.below(path, folder: folder) else { return nil }
            rest = below
        }
        let (first, isLast) = PathBytes.first(rest)
        return (first, !isLast)
    }
}
