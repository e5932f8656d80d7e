import BinderCrypto
import BinderFormat
import BinderGit
import Foundation
import Logging
import Synchronization

/// The decrypted view of a binder at one commit of `main`: what the mount shows, and the one
/// place the FUSE bridge calls. A façade over named parts, each with its own lock:
///
/// - `ListingCache`: the snapshot shown and the folder listings worked out of it;
/// - `PlaintextCache`: decrypted contents, bounded;
/// - `OpenFileTable`: open files and new files not stored yet;
/// - `ScratchFiles`: what lives in memory only (editors' scratch files, pending folders);
/// - `WritePlanner` (pure rules) and `Committer` (one commit per change).
///
/// Synchronous and kernel-free: tests call it directly. See docs/DESIGN.md.
public final class BinderView: Sendable {
    public struct Options: Sendable {
        /// Upper bound of cached plaintext, in bytes. Open files hold their content on top.
        public var cacheCapacity: Int
        public var branch: String
        /// Name and e-mail of the commits this view makes (each takes the time of its save).
        public var author: Signature
        public var limits: WriteLimits
        /// Whether `readdir` of the root lists `.binder` (`mount --views visible`); any path
        /// through it works either way.
        public var viewsVisible: Bool
        /// What may change (`onlyNewRecords`: a doctor's share, `binder open-share`).
        public var mode: WriteMode = .everything
        /// Whether listings are kept across mounts in the encrypted listing index
        /// (`ListingIndex`, in the git directory) and decrypted ahead of sequential reads.
        public var listingIndex: Bool
        /// Files of a folder decrypted ahead of a sequential reader (0: none); see `ReadAhead`.
        public var readAhead: Int

        public init(cacheCapacity: Int = 256 << 20, branch: String = "main",
                    author: Signature = Signature(name: BinderCreator.defaultAuthor.name, email: BinderCreator.defaultAuthor.email),
                    limits: WriteLimits = WriteLimits(), viewsVisible: Bool = false, listingIndex: Bool = true,
                    readAhead: Int = ReadAhead.defaultWindow) {
            self.listingIndex = listingIndex
            self.readAhead = readAhead
            self.cacheCapacity = cacheCapacity
            self.branch = branch
            self.author = author
            self.limits = limits
            self.viewsVisible = viewsVisible
        }
    }

    /// The hidden, read-only folder of binder's status and views (not listed by `readdir`
    /// unless `viewsVisible`).
    public static let controlDirectory = ".binder"
    static let statusPath = controlDirectory + "/status"

    /// True for `.binder/status` (any leading slashes), whose content changes by itself.
    public static func isStatusFile(_ path: String) -> Bool { ViewPath.normalize(path) == statusPath }

    /// True for `.binder` and what is in it (any leading and trailing slashes). Compares bytes
    /// without building the normalised path: the FUSE bridge asks it on every getattr, and its
    /// paths all start with a slash.
    public static func isControlPath(_ path: String) -> Bool {
        let slash = UInt8(ascii: "/")
        let utf8 = path.utf8
        let rest = utf8[(utf8.firstIndex { $0 != slash } ?? utf8.endIndex)...]
        guard rest.starts(with: controlDirectory.utf8) else { return false }
        let after = rest.dropFirst(controlDirectory.utf8.count)
        return after.first == nil || after.first == slash
    }

    let repository: GitRepository
    let key: NIP44.ConversationKey
    let logger: Logger
    let limits: WriteLimits
    let plaintext: PlaintextCache
    let listings: ListingCache
    let openFiles = OpenFileTable()
    let scratch = ScratchFiles()
    let committer: Committer
    let refusals = RefusalLog()
    let controlViews = ControlViewCache()
    let viewsVisible: Bool
    /// `Options.mode` with what the view held when it was made.
    let policy: WritePolicy
    /// View paths whose content was found to differ in size from their listing, until the
    /// FUSE bridge has told the kernel (`takeSizeCorrection`).
    let sizeCorrections = Mutex<Set<String>>([])
    let readAhead: ReadAhead
    /// Contents read by path, without a handle (`read(path:offset:into:)`).
    let recentReads = RecentReads()
    /// `.binder/status` as its size was last given, until it is read (`statusBytes`): the
    /// text changes by itself, and a kernel that keeps pages reads as many bytes as `stat` said.
    let statusMemo = Mutex<(bytes: SecureBytes, at: ContinuousClock.Instant)?>(nil)

    public init(repository: GitRepository, key: NIP44.ConversationKey, logger: Logger, options: Options = Options()) throws {
        self.repository = repository
        self.key = key
        self.logger = logger
        limits = options.limits
        // No blob larger than the largest attachment (its sidecar's header, tag and base64
        // text form) is read whole (GitObjects.limitBlobs).
        repository.objects.limitBlobs(to: Sidecar.maximumStoredSize(ofAttachment: options.limits.attachmentBytes))
        viewsVisible = options.viewsVisible
        readAhead = ReadAhead(window: options.readAhead)
        plaintext = PlaintextCache(capacity: options.cacheCapacity)
        // The listing index loads meanwhile, on a thread of its own (mount start-up, BENCHMARKS).
        let index = options.listingIndex ? try ListingIndex(gitDirectory: repository.gitDirectory, key: key) : nil
        let indexLoad = index.map { ListingIndexLoad(index: $0, logger: logger) }
        let snapshot = try Snapshot.load(repository, commit: try repository.refs.branchTip(options.branch))
        listings = ListingCache(repository: repository, key: key, logger: logger, plaintext: plaintext, snapshot: snapshot,
                                index: index, indexLoad: indexLoad)
        committer = Committer(repository: repository, key: key, logger: logger, branch: options.branch, author: options.author,
                              listings: listings)
        policy = try WritePolicy(options.mode, listings: listings)
    }

    /// The commit shown.
    public var commit: ObjectID? { listings.snapshot.commit }

    /// Starts the packing that is due (in the background) without waiting for a save: folding
    /// the packs earlier mounts left unfolded, or repacking a binder full of loose objects. For
    /// a mount that may write, once it is up.
    public func packIfDue() { committer.packIfDue() }

    // MARK: - Queries

    public func attributes(_ path: String) throws(ViewError) -> NodeAttributes {
        let path = ViewPath.normalize(path)
        if path.isEmpty { return folderAttributes(readOnly: false) }
        if ViewPath.split(path).name.utf8.count > NameRules.maximumBytes { throw .nameTooLong(path) }
        if Self.isControlPath(path) { return try controlAttributes(path) }
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
    public func list(_ path: String) throws(ViewError) -> [(name: String, attributes: NodeAttributes)] {
        let path = ViewPath.normalize(path)
        if Self.isControlPath(path) { return try controlEntries(path) }
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
        if path.isEmpty && viewsVisible { entries.append((Self.controlDirectory, folderAttributes(readOnly: true))) }
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
    /// that a writer holds open is read as that writer has it now, unsaved bytes included.
    public func open(_ path: String) throws(ViewError) -> UInt64 {
        let path = ViewPath.normalize(path)
        var coldRead = false
        let handle = try openFiles.register(path, writable: false) { () throws(ViewError) -> OpenContent in
            OpenContent(path: path, buffer: EditBuffer(content: try currentContent(path, coldRead: &coldRead)))
        }.handle
        // A warm reader (its file cached already, and not by read-ahead) needs no read-ahead:
        // the work of scheduling it on every open made warm reads 1.5x slower (BENCHMARKS).
        if coldRead { scheduleReadAhead(after: path) }
        return handle
    }

    /// Has the files after `path` in its folder decrypted ahead of a sequential reader.
    func scheduleReadAhead(after path: String) {
        guard readAhead.window > 0, !Self.isControlPath(path), let listing = try? listings.listing(ViewPath.split(path).parent) else {
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
        plaintext.makeRoom(for: job.node.size)
        let reader = ContentReader(repository: repository, key: key, listings: listings)
        guard let bytes = try? reader.produce(job.node, path: job.path), bytes.count == job.node.size,
              listings.snapshot.commit == job.commit else { return }
        plaintext.put(job.node.source, bytes)
    }

    /// True once after the size of `path`'s content was found to differ from the size its
    /// listing gave: the kernel may hold the wrong size, and must read to the end and forget it.
    /// Asked on every open; the set is almost always empty, and then no path is normalised or hashed.
    public func takeSizeCorrection(_ path: String) -> Bool {
        sizeCorrections.withLock { corrections in
            !corrections.isEmpty && corrections.remove(ViewPath.normalize(path)) != nil
        }
    }

    /// Reads `path` without a handle: for a read-only mount whose kernel sends no OPEN (it keeps
    /// every file's pages and asks only for what it lacks). The content comes from the cache,
    /// the recent reads, or is decrypted (then read-ahead starts, as at a cold open).
    public func read(path: String, offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(ViewError) -> Int {
        let path = ViewPath.normalize(path)
        let content: SecureBytes
        if Self.isControlPath(path) {
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
    public func read(handle: UInt64, offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(ViewError) -> Int {
        guard let file = openFiles.file(handle) else { throw .badHandle }
        return file.content.edit.withLock { $0.buffer.read(offset: offset, into: buffer) }
    }

    /// Drops all plaintext (the cache, listings, open and scratch files): at unmount. Scratch
    /// files still there are named in the log: a file taken for one (a name like an editor's
    /// temporary file) was never stored, and this is where its writer can learn so.
    public func close() {
        let dropped = scratch.filePaths
        if !dropped.isEmpty {
            let shown = dropped.prefix(20).joined(separator: ", ") + (dropped.count > 20 ? ", …" : "")
            logger.notice("\(dropped.count) scratch files (editors' temporary, swap and backup files, kept in memory only) are dropped at unmount: \(shown)")
        }
        readAhead.stop()
        plaintext.removeAll()
        recentReads.removeAll()
        statusMemo.withLock { $0 = nil }
        openFiles.removeAll()
        listings.removeAll()
        scratch.removeAll()
        controlViews.removeAll()
    }

    public struct Statistics: Sendable {
        public let cachedBytes: Int
        public let cachedEntries: Int
        public let objectReads: Int
        public let listedFolders: Int
        /// Documents decrypted to list folders (not those the listing index spared).
        public let listingDecryptions: Int
    }

    public var statistics: Statistics {
        let usage = plaintext.usage
        return Statistics(cachedBytes: usage.bytes, cachedEntries: usage.entries,
                          objectReads: listings.objectReads.load(ordering: .relaxed), listedFolders: listings.listedFolders,
                          listingDecryptions: listings.documentDecryptions.load(ordering: .relaxed))
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
        if Self.isControlPath(path) { return try controlContent(path) }
        if let file = scratch.file(path) { return file.content }
        if let provisional = openFiles.provisional(path) {
            return try ViewError.needingSecretMemory(path) { () throws(SecureMemoryError) in try provisional.edit.withLock { edit throws(SecureMemoryError) in try edit.buffer.snapshot() } }
        }
        if scratch.isHidden(path) { throw .notFound(path) }
        let node = try listings.node(path)
        guard !node.isDirectory else { throw .isDirectory(path) }
        if let cached = plaintext.get(node.source) {
            coldRead = readAhead.takePrefetched(node.source)
            return cached
        }
        coldRead = true
        return try content(of: node, path: path)
    }

    func content(of node: Node, path: String) throws(ViewError) -> SecureBytes {
        if let cached = plaintext.get(node.source) { return cached }
        // A read-ahead worker may be decrypting this very file: its result, not a second run.
        readAhead.waitIfInFlight(node.source)
        if let cached = plaintext.get(node.source) { return cached }
        plaintext.makeRoom(for: node.size)
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

    // MARK: - Status

    /// Status of the mount as `key: value` lines; paths and reasons, no plaintext.
    func statusText() -> String {
        let stats = statistics
        let memory = SecureBytes.memoryInUse
        var text = """
        commit: \(commit?.hex ?? "none")
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
}

/// The last save the mount refused, for `.binder/status` (the log has them all). Its own lock:
/// refusals are noted from any FUSE thread.
final class RefusalLog: Sendable {
    struct Refusal: Sendable {
        let time: Date
        /// The path and the plain reason ("visits/x.md: 70,112 bytes; the limit is 65,535").
        let reason: String
    }

    private let latest = Mutex<Refusal?>(nil)

    init() {}

    func note(_ error: WriteError) { latest.withLock { $0 = Refusal(time: Date(), reason: error.description) } }
    var last: Refusal? { latest.withLock { $0 } }
}
