import BinderCrypto
import BinderFormat
import BinderGit
import Foundation
import Logging
import Synchronization

/// The decrypted view of a binder at one commit of `main`: what the mount shows, and the one
/// place the FUSE bridge calls. A thin façade (it holds no state and takes no lock) over three
/// owners:
///
/// - `ViewReader`: what is at a path, how big, what bytes (the listings, the plaintext cache,
///   read-ahead, and the overlay of what lives in memory only: open files, scratch files);
/// - `ViewWriter`: every change, and all refusal policy (a read-only view, `.binder/`, what a
///   share held, names and limits), through `WritePlanner` (pure rules) and `Committer` (one
///   commit per change);
/// - `ControlViewReader` (the reader's): `.binder/`, its status and views.
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
        /// Every change is refused (EROFS): a `--read-only` mount.
        public var readOnly: Bool

        public init(cacheCapacity: Int = 256 << 20, branch: String = "main",
                    author: Signature = Signature(name: BinderCreator.defaultAuthor.name, email: BinderCreator.defaultAuthor.email),
                    limits: WriteLimits = WriteLimits(), viewsVisible: Bool = false, listingIndex: Bool = true,
                    readAhead: Int = ReadAhead.defaultWindow, readOnly: Bool = false) {
            self.listingIndex = listingIndex
            self.readOnly = readOnly
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

    /// What is shown (and `.binder`, through its `controls`).
    let reader: ViewReader
    /// Every change and every refusal.
    let writer: ViewWriter

    public init(repository: GitRepository, key: NIP44.ConversationKey, logger: Logger, options: Options = Options()) throws {
        // No blob larger than the largest attachment (its sidecar's header, tag and base64
        // text form) is read whole (GitObjects.limitBlobs).
        repository.objects.limitBlobs(to: Sidecar.maximumStoredSize(ofAttachment: options.limits.attachmentBytes))
        let plaintext = PlaintextCache(capacity: options.cacheCapacity)
        // The listing index loads meanwhile, on a thread of its own (mount start-up, BENCHMARKS).
        let index = options.listingIndex ? try ListingIndex(gitDirectory: repository.gitDirectory, key: key) : nil
        let indexLoad = index.map { ListingIndexLoad(index: $0, logger: logger) }
        let snapshot = try Snapshot.load(repository, commit: try repository.refs.branchTip(options.branch))
        let listings = ListingCache(repository: repository, key: key, logger: logger, plaintext: plaintext, snapshot: snapshot,
                                    index: index, indexLoad: indexLoad)
        let committer = Committer(repository: repository, key: key, logger: logger, branch: options.branch, author: options.author,
                                  listings: listings)
        let refusals = RefusalLog()
        let controls = ControlViewReader(repository: repository, key: key, listings: listings, plaintext: plaintext,
                                         refusals: refusals, committer: committer)
        reader = ViewReader(repository: repository, key: key, logger: logger, listings: listings, plaintext: plaintext,
                            controls: controls, readAhead: ReadAhead(window: options.readAhead), viewsVisible: options.viewsVisible)
        writer = ViewWriter(reader: reader, committer: committer, logger: logger, limits: options.limits,
                            policy: try WritePolicy(options.mode, listings: listings), refusals: refusals, readOnly: options.readOnly)
    }

    /// The commit shown.
    public var commit: ObjectID? { reader.listings.snapshot.commit }

    /// Starts the packing that is due (in the background) without waiting for a save: folding
    /// the packs earlier mounts left unfolded, or repacking a binder full of loose objects. For
    /// a mount that may write, once it is up.
    public func packIfDue() { writer.committer.packIfDue() }

    // MARK: - Reading (`ViewReader`)

    public func attributes(_ path: String) throws(ViewError) -> NodeAttributes { try reader.attributes(path) }

    /// The folder's entries, sorted bytewise by name (`.binder/` folders: in their own order,
    /// the timeline and history newest first).
    public func list(_ path: String) throws(ViewError) -> [(name: String, attributes: NodeAttributes)] { try reader.list(path) }

    /// Opens a file for reading: its plaintext is decrypted now (or taken from the cache) and
    /// held until `release`, so reads of any size at any offset are served from memory. A file
    /// that a writer holds open is read as that writer has it now, unsaved bytes included.
    public func open(_ path: String) throws(ViewError) -> UInt64 { try reader.open(path) }

    /// True once after the size of `path`'s content was found to differ from the size its
    /// listing gave: the kernel may hold the wrong size, and must read to the end and forget it.
    public func takeSizeCorrection(_ path: String) -> Bool { reader.takeSizeCorrection(path) }

    /// Reads `path` without a handle: for a read-only mount whose kernel sends no OPEN (it keeps
    /// every file's pages and asks only for what it lacks).
    public func read(path: String, offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(ViewError) -> Int {
        try reader.read(path: path, offset: offset, into: buffer)
    }

    /// Copies up to `buffer.count` bytes from `offset`; returns how many (0 at the end).
    public func read(handle: UInt64, offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(ViewError) -> Int {
        try reader.read(handle: handle, offset: offset, into: buffer)
    }

    public func readLink(_ path: String) throws(ViewError) -> String { try reader.readLink(path) }

    /// Drops all plaintext (the cache, listings, open and scratch files, `.binder`'s): at unmount.
    public func close() { reader.close() }

    public struct Statistics: Sendable {
        public let cachedBytes: Int
        public let cachedEntries: Int
        public let objectReads: Int
        public let listedFolders: Int
        /// Documents decrypted to list folders (not those the listing index spared).
        public let listingDecryptions: Int

        init(plaintext: PlaintextCache, listings: ListingCache) {
            let usage = plaintext.usage
            cachedBytes = usage.bytes
            cachedEntries = usage.entries
            objectReads = listings.objectReads.load(ordering: .relaxed)
            listedFolders = listings.listedFolders
            listingDecryptions = listings.documentDecryptions.load(ordering: .relaxed)
        }
    }

    public var statistics: Statistics { Statistics(plaintext: reader.plaintext, listings: reader.listings) }

    // MARK: - Changing (`ViewWriter`): each refuses first what the view does not take

    /// EROFS for a change at `path` (and `other`) on a read-only view or in `.binder/`: for
    /// changes the view does not make itself (chmod, chown, a rename exchanging two names).
    public func refuseChanges(at path: String, _ other: String? = nil) throws(WriteError) {
        try writer.refuseChanges(at: path, other)
    }

    /// Creates or replaces the file at `path` with `content` (what the user saved). `modified`
    /// is a time the writer set on it, which becomes the record's `updated`.
    public func store(_ path: String, content: [UInt8], modified: Timestamp? = nil) throws(WriteError) {
        try writer.store(path, content: content, modified: modified)
    }

    /// `unlink`: a scratch file or a new file not stored yet vanishes from memory; a stored file
    /// is deleted (one commit), except `patient-info.md`, which is held out of sight instead.
    public func remove(_ path: String) throws(WriteError) { try writer.remove(path) }

    /// Creates a folder: a real one gets an encrypted `.meta.json` (one commit); `X.children`
    /// only makes room in memory for a first child (nothing is committed).
    public func makeDirectory(_ path: String) throws(WriteError) { try writer.makeDirectory(path) }

    /// Removes an empty folder.
    public func removeDirectory(_ path: String) throws(WriteError) { try writer.removeDirectory(path) }

    /// `rename`, between stored, scratch and new files. With `noReplace`, an existing target
    /// is an error; otherwise it is replaced (a stored one in the same commit).
    public func rename(_ from: String, to: String, noReplace: Bool = false) throws(WriteError) {
        try writer.rename(from, to: to, noReplace: noReplace)
    }

    /// Creates a new, empty file and opens it for writing. A scratch name lives in memory; any
    /// other name is stored at its first flush.
    public func create(_ path: String) throws(WriteError) -> UInt64 { try writer.create(path) }

    /// Opens an existing file for writing (`truncate`: O_TRUNC; `append`: O_APPEND, each write
    /// at the end of the file as stored here).
    public func openForWriting(_ path: String, truncate: Bool, append: Bool = false) throws(WriteError) -> UInt64 {
        try writer.openForWriting(path, truncate: truncate, append: append)
    }

    /// Whether `path` is a new file not stored yet.
    public func isNew(_ path: String) -> Bool { writer.isNew(path) }

    /// Writes at `offset`; a write past the file's limit is refused, and the file then stores
    /// nothing.
    public func write(handle: UInt64, offset: Int, _ bytes: UnsafeRawBufferPointer) throws(WriteError) -> Int {
        try writer.write(handle: handle, offset: offset, bytes)
    }

    /// `ftruncate(2)`.
    public func truncate(handle: UInt64, size: Int) throws(WriteError) { try writer.truncate(handle: handle, size: size) }

    /// `truncate(2)` by path: open, cut, store, close.
    public func truncate(_ path: String, size: Int) throws(WriteError) { try writer.truncate(path, size: size) }

    /// Stores the file's bytes if they changed (see `ViewWriter.flush`); true when a commit
    /// was made.
    @discardableResult
    public func flush(handle: UInt64, closing: Bool = false, isLastDescriptor: () -> Bool = { false }) throws(WriteError) -> Bool {
        try writer.flush(handle: handle, closing: closing, isLastDescriptor: isLastDescriptor)
    }

    /// Closes a handle; unsaved changes are stored first. True when a new file that was never
    /// stored vanished with it (the kernel must forget the name it was told of).
    @discardableResult
    public func release(handle: UInt64) -> Bool { writer.release(handle: handle) }

    /// `symlink`: only editors' lock files (emacs `.#name`), kept in memory.
    public func symlink(_ target: String, at path: String) throws(WriteError) { try writer.symlink(target, at: path) }

    /// `utimensat`: a record's `updated` becomes the time given.
    public func setModified(_ path: String, to time: Timestamp) throws(WriteError) { try writer.setModified(path, to: time) }
}
