import BinderCrypto
import BinderFormat
import BinderGit
import Foundation
import Logging
import Synchronization

/// What the view shows: what is at a path, how big, what bytes. Stored files come from the
/// listings and the plaintext cache (decrypted on a miss, read ahead for a sequential reader);
/// over them lie what lives in memory only (scratch files, new files not stored yet, pending
/// folders), which `ViewWriter` changes; `.binder` is `ControlViewReader`'s. It changes nothing
/// that is stored. Each part it holds has its own lock (named at the part); the reader itself
/// adds none but `sizeCorrections`'.
final class ViewReader: Sendable {
    let repository: GitRepository
    let key: NIP44.ConversationKey
    let logger: Logger
    /// The snapshot shown and the listings worked out of it (its own lock).
    let listings: ListingCache
    /// Decrypted contents, bounded (its own lock).
    let plaintext: PlaintextCache
    /// Open files and new files not stored yet (its own lock); the writer registers writers.
    let openFiles = OpenFileTable()
    /// What lives in memory only (its own lock); the writer puts and removes.
    let scratch = ScratchFiles()
    /// The answers under `.binder`.
    let controls: ControlViewReader
    let readAhead: ReadAhead
    /// Contents read by path, without a handle (`read(path:offset:into:)`; its own lock).
    let recentReads = RecentReads()
    /// View paths whose content was found to differ in size from their listing, until the
    /// FUSE bridge has told the kernel (`takeSizeCorrection`). Guarded by its own mutex.
    let sizeCorrections = Mutex<Set<String>>([])
    /// Whether `readdir` of the root lists `.binder`.
    let viewsVisible: Bool

    init(repository: GitRepository, key: NIP44.ConversationKey, logger: Logger, listings: ListingCache,
         plaintext: PlaintextCache, controls: ControlViewReader, readAhead: ReadAhead, viewsVisible: Bool) {
        self.repository = repository
        self.key = key
        self.logger = logger
        self.listings = listings
        self.plaintext = plaintext
        self.controls = controls
        self.readAhead = readAhead
        self.viewsVisible = viewsVisible
    }

    // MARK: - Queries

    func attributes(_ path: String) throws(ViewError) -> NodeAttributes {
        let path = ViewPath.normalize(path)
        if path.isEmpty { return folderAttributes(readOnly: false) }
        if ViewPath.split(path).name.utf8.count > BinderNaming.maximumBytes { throw .nameTooLong(path) }
        if BinderView.isControlPath(path) { return try controls.attributes(path) }
        if let overlay = overlayAttributes(path) { return overlay }
        if scratch.isHidden(path) { throw .notFound(path) }
        if scratch.pendingFolder(path) != nil { return folderAttributes(readOnly: false) }
        let attributes = try listings.node(path).attributes
        // A file being written shows the size it has now.
        if let editing = openFiles.dirtySize(at: path) {
            return NodeAttributes(kind: .file, size: editing, modified: attributes.modified, readOnly: false)
        }
        return attributes
    }

    /// The folder's entries, sorted bytewise by name (`.binder/` folders: in their own order,
    /// the timeline and history newest first).
    func list(_ path: String) throws(ViewError) -> [(name: String, attributes: NodeAttributes)] {
        let path = ViewPath.normalize(path)
        if BinderView.isControlPath(path) { return try controls.entries(path) }
        var entries: [(name: String, attributes: NodeAttributes)] = []
        // A `.children` folder made with mkdir holds only what is being written into it.
        if scratch.pendingFolder(path) == nil || (try? listings.listing(path)) != nil {
            let listing = try listings.listing(path)
            let hidden = scratch.hidden
            let writing = openFiles.dirtySizes()
            // Room for all at once: grown by doubling, the old and the new array of a folder of
            // 100,000 records were 9.5 MB together at the peak of each `ls`.
            entries.reserveCapacity(listing.nodes.count + 1)
            // Nearly always both are empty: then no path is made per name.
            for (name, node) in listing.sortedEntries where hidden.isEmpty || !hidden.contains(join(path, name)) {
                if !writing.isEmpty, let size = writing[join(path, name)] {
                    // A file being written shows the size it has now.
                    entries.append((name, NodeAttributes(kind: .file, size: size, modified: node.modified, readOnly: false)))
                } else {
                    entries.append((name, node.attributes))
                }
            }
        }
        let listed = entries.count
        if path.isEmpty && viewsVisible { entries.append((BinderView.controlDirectory, folderAttributes(readOnly: true))) }
        let overlay = overlayEntries(in: path)
        let pendingNames = scratch.pendingFolders.filter { ViewPath.split($0).parent == path }.map { ViewPath.split($0).name }
        // Nearly always neither: then the listing's names are not gathered into a set (a quarter
        // of the daemon's time for an `ls` of a folder of 100,000 records).
        if !overlay.isEmpty || !pendingNames.isEmpty {
            var shown = Set(entries.map(\.name))
            for (name, attributes) in overlay where !shown.contains(name) {
                entries.append((name, attributes))
                shown.insert(name)
            }
            for name in pendingNames where shown.insert(name).inserted {
                entries.append((name, folderAttributes(readOnly: false)))
            }
        }
        // The listing's names come sorted; only scratch files and pending folders need placing.
        guard entries.count > listed else { return entries }
        return entries.sorted { ViewPath.precedesBytewise($0.name, $1.name) }
    }

    /// Opens a file for reading: its plaintext is decrypted now (or taken from the cache) and
    /// held until `release`, so reads of any size at any offset are served from memory. A file
    /// that a writer holds open is read as that writer has it now, unsaved bytes included. A
    /// large attachment is decrypted at its first read instead (`DeferredContent`).
    func open(_ path: String) throws(ViewError) -> UInt64 {
        let path = ViewPath.normalize(path)
        var coldRead = false
        let handle = try openFiles.register(path, writable: false) { () throws(ViewError) -> OpenContent in
            let source = try contentSource(path)
            // A large attachment the cache does not keep: its open can wait for a read to decrypt it.
            if case .stored(let node) = source, !PlaintextCache.keeps(node.source, count: node.size) {
                let empty = try ViewError.needingSecretMemory(path) { () throws(SecureMemoryError) in try EditBuffer() }
                return OpenContent(path: path, buffer: empty, deferred: DeferredContent(node: node, path: path))
            }
            return OpenContent(path: path, buffer: EditBuffer(content: try content(from: source, path: path, coldRead: &coldRead)))
        }.handle
        // A warm reader (its file cached already, and not by read-ahead) needs no read-ahead:
        // the work of scheduling it on every open made warm reads 1.5x slower (BENCHMARKS).
        if coldRead { scheduleReadAhead(after: path) }
        return handle
    }

    /// Where the content of a (normalised) path comes from, in the order a read looks.
    private enum ContentSource {
        /// A file of `.binder/`.
        case control
        /// A scratch file (an editor's temporary), held in memory only.
        case scratch(SecureBytes)
        /// A file being written and not stored yet: read as its writer has it now.
        case provisional(OpenContent)
        /// A stored file, nothing in memory lying over it.
        case stored(Node)
    }

    /// `path`'s source, looked up once per open or read (an open asked all of it twice: about
    /// half of what a warm open spent in binder's own code, by perf); throws as a read does for
    /// a hidden path, a folder or nothing there.
    private func contentSource(_ path: String) throws(ViewError) -> ContentSource {
        if BinderView.isControlPath(path) { return .control }
        if let file = scratch.file(path) { return .scratch(file.content) }
        if let provisional = openFiles.provisional(path) { return .provisional(provisional) }
        if scratch.isHidden(path) { throw .notFound(path) }
        let node = try listings.node(path)
        guard !node.isDirectory else { throw .isDirectory(path) }
        return .stored(node)
    }

    /// Has the files after `path` in its folder decrypted ahead of a sequential reader.
    func scheduleReadAhead(after path: String) {
        guard readAhead.window > 0, !BinderView.isControlPath(path), let listing = try? listings.listing(ViewPath.split(path).parent) else {
            return
        }
        readAhead.opened(path, listing: listing, commit: listings.snapshot.commit, cache: plaintext) { [weak self] job in
            self?.decryptAhead(job)
        }
    }

    /// A read-ahead job (on a worker): into the cache unless it is there already, the commit
    /// changed, or it cannot be read as listed (the reader's own open then reports why).
    func decryptAhead(_ job: ReadAhead.Job) {
        guard plaintext.get(job.node.source) == nil, listings.snapshot.commit == job.commit else { return }
        plaintext.makeRoom(for: job.node.size, of: job.node.source)
        let reader = ContentReader(repository: repository, key: key, listings: listings)
        guard let bytes = try? reader.produce(job.node, path: job.path), bytes.count == job.node.size,
              listings.snapshot.commit == job.commit else { return }
        plaintext.put(job.node.source, bytes)
    }

    /// True once after the size of `path`'s content was found to differ from the size its
    /// listing gave: the kernel may hold the wrong size, and must read to the end and forget it.
    /// Asked on every open; the set is almost always empty, and then no path is normalised or hashed.
    func takeSizeCorrection(_ path: String) -> Bool {
        sizeCorrections.withLock { corrections in
            !corrections.isEmpty && corrections.remove(ViewPath.normalize(path)) != nil
        }
    }

    /// Reads `path` without a handle: for a read-only mount whose kernel sends no OPEN (it keeps
    /// every file's pages and asks only for what it lacks). The content comes from the cache,
    /// the recent reads, or is decrypted (then read-ahead starts, as at a cold open).
    func read(path: String, offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(ViewError) -> Int {
        let path = ViewPath.normalize(path)
        let content: SecureBytes
        if BinderView.isControlPath(path) {
            content = try controlContent(path)
        } else if let node = try? listings.node(path), !node.isDirectory, scratch.file(path) == nil,
                  let recent = plaintext.get(node.source) ?? recentReads.get(node.source) {
            content = recent
        } else {
            var coldRead = false
            content = try currentContent(path, coldRead: &coldRead)
            if let node = try? listings.node(path) { recentReads.put(node.source, content) }
            if coldRead && offset == 0 { scheduleReadAhead(after: path) }
        }
        guard offset >= 0, offset < content.count, let destination = buffer.baseAddress else { return 0 }
        let count = min(buffer.count, content.count - offset)
        content.withUnsafeBytes { destination.copyMemory(from: $0.baseAddress! + offset, byteCount: count) }
        return count
    }

    /// Copies up to `buffer.count` bytes from `offset`; returns how many (0 at the end).
    func read(handle: UInt64, offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(ViewError) -> Int {
        guard let file = openFiles.file(handle) else { throw .badHandle }
        if let deferred = file.content.deferred {
            return try deferred.read(offset: offset, into: buffer) { () throws(ViewError) in
                try content(of: deferred.node, path: deferred.path)
            }
        }
        return file.content.edit.withLock { $0.buffer.read(offset: offset, into: buffer) }
    }

    func readLink(_ path: String) throws(ViewError) -> String {
        let path = ViewPath.normalize(path)
        if BinderView.isControlPath(path) { return try controls.linkTarget(path) }
        guard let target = scratch.file(path)?.linkTarget else { throw .notFound(path) }
        return target
    }

    /// Drops all plaintext (the cache, listings, open and scratch files): at unmount. Scratch
    /// files still there are named in the log: a file taken for one (a name like an editor's
    /// temporary file) was never stored, and this is where its writer can learn so.
    func close() {
        let dropped = scratch.filePaths
        if !dropped.isEmpty {
            let shown = dropped.prefix(20).joined(separator: ", ") + (dropped.count > 20 ? ", …" : "")
            logger.notice("\(dropped.count) scratch files (editors' temporary, swap and backup files, kept in memory only) are dropped at unmount: \(shown)")
        }
        readAhead.stop()
        plaintext.removeAll()
        recentReads.removeAll()
        openFiles.removeAll()
        listings.removeAll()
        scratch.removeAll()
        controls.removeAll()
    }

    // MARK: - Contents

    /// The bytes a new reader of `path` sees now.
    func currentContent(_ path: String) throws(ViewError) -> SecureBytes {
        var coldRead = false
        return try currentContent(path, coldRead: &coldRead)
    }

    /// The content; `coldRead` says whether it is a stored file a sequential reader reads
    /// cold: not in the cache before, or put there by read-ahead (which then goes on).
    func currentContent(_ path: String, coldRead: inout Bool) throws(ViewError) -> SecureBytes {
        try content(from: try contentSource(path), path: path, coldRead: &coldRead)
    }

    /// The bytes `source` holds; `coldRead` as `currentContent`'s.
    private func content(from source: ContentSource, path: String, coldRead: inout Bool) throws(ViewError) -> SecureBytes {
        let node: Node
        switch source {
        case .control: return try controlContent(path)
        case .scratch(let content): return content
        case .provisional(let provisional):
            return try ViewError.needingSecretMemory(path) { () throws(SecureMemoryError) in try provisional.edit.withLock { edit throws(SecureMemoryError) in try edit.buffer.snapshot() } }
        case .stored(let stored): node = stored
        }
        if let cached = plaintext.get(node.source) {
            coldRead = readAhead.takePrefetched(node.source)
            return cached
        }
        coldRead = true
        return try content(of: node, path: path)
    }

    /// The bytes of a file in `.binder/`: status, or a node read as any stored file's.
    func controlContent(_ path: String) throws(ViewError) -> SecureBytes {
        switch try controls.controlNode(path) {
        case .status: return try controls.statusBytes(consuming: true)
        case .file(let node): return try content(of: node, path: path)
        case .folder: throw .isDirectory(path)
        case .link: throw .notFound(path)  // the kernel follows links; reading one is readlink
        }
    }

    func content(of node: Node, path: String) throws(ViewError) -> SecureBytes {
        if let cached = plaintext.get(node.source) { return cached }
        // A read-ahead worker may be decrypting this very file: its result, not a second run.
        readAhead.waitIfInFlight(node.source)
        if let cached = plaintext.get(node.source) { return cached }
        plaintext.makeRoom(for: node.size, of: node.source)
        let bytes: SecureBytes
        do { bytes = try ContentReader(repository: repository, key: key, listings: listings).produce(node, path: path) } catch {
            logger.error("read failed: \(error)")
            throw error
        }
        if bytes.count != node.size {
            // Only a listing index of an older rendering could cause it (its size was kept):
            // the part is forgotten, so the next listing and `stat` show the true size, and
            // the kernel is told (`takeSizeCorrection`).
            logger.error("content size differs from listed size; listing corrected", metadata: ["path": "\(node.gitPath)"])
            switch node.owner {
            case .document(let document)?, .child(let document, _)?: listings.forgetPart(gitPath: document)
            case nil: listings.forgetPart(gitPath: node.gitPath)
            }
            sizeCorrections.withLock { _ = $0.insert(path) }
        }
        plaintext.put(node.source, bytes)
        return bytes
    }

    /// A stored document, decrypted and parsed (for writes).
    func document(_ gitPath: String, in snapshot: Snapshot) throws(WriteError) -> MedicalDocument {
        guard let entry = snapshot.entry(at: gitPath) else { throw .notFound(gitPath) }
        do {
            return try ContentReader(repository: repository, key: key, listings: listings).document(entry.id, gitPath: gitPath)
        } catch { throw .corrupt(path: gitPath, reason: "\(error)") }
    }

    // MARK: - Overlay: scratch and provisional files

    func overlayAttributes(_ path: String) -> NodeAttributes? {
        if let file = scratch.file(path) {
            return NodeAttributes(kind: file.linkTarget == nil ? .file : .symlink, size: file.linkTarget?.utf8.count ?? file.content.count,
                                  modified: file.modified, readOnly: false)
        }
        if let file = openFiles.provisional(path) {
            return NodeAttributes(kind: .file, size: file.edit.withLock { $0.buffer.count }, modified: Self.now(), readOnly: false)
        }
        return nil
    }

    func overlayEntries(in directory: String) -> [(name: String, attributes: NodeAttributes)] {
        (scratch.paths + openFiles.provisionalPaths).filter { ViewPath.split($0).parent == directory }.compactMap { path in
            overlayAttributes(path).map { (ViewPath.split(path).name, $0) }
        }
    }

    func folderAttributes(readOnly: Bool) -> NodeAttributes {
        NodeAttributes(kind: .directory, size: 0, modified: listings.snapshot.commitTime, readOnly: readOnly)
    }

    static func now() -> Timestamp {
        let t = Date().timeIntervalSince1970
        return Timestamp(seconds: Int64(t.rounded(.down)), nanoseconds: Int32((t - t.rounded(.down)) * 1e9))
    }
}
