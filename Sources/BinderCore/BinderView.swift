import BinderCrypto
import BinderFormat
import BinderGit
import Logging
import Synchronization

/// The decrypted view of a binder at one commit of `main`: what the mount shows.
///
/// Synchronous and kernel-free: the FUSE bridge calls it from libfuse's threads, tests call it
/// directly. Folder listings are built lazily, one git folder at a time, on first use; file
/// contents are decrypted on first open and kept in a bounded plaintext cache. See
/// docs/DESIGN.md.
public final class BinderView: Sendable {
    public struct Options: Sendable {
        /// Upper bound of cached plaintext, in bytes. Open files hold their content on top.
        public var cacheCapacity: Int
        public var branch: String
        public var author: Signature

        public init(cacheCapacity: Int = 256 << 20, branch: String = "main",
                    author: Signature = Signature(name: BinderCreator.defaultAuthor.name, email: BinderCreator.defaultAuthor.email)) {
            self.cacheCapacity = cacheCapacity
            self.branch = branch
            self.author = author
        }
    }

    /// The hidden, read-only folder of binder's own status files (not listed by `readdir`).
    public static let controlDirectory = ".binder"

    /// True for `.binder/status` (any leading slashes), whose content changes by itself.
    public static func isStatusFile(_ path: String) -> Bool { normalize(path) == controlDirectory + "/status" }

    /// True for `.binder` and what is in it.
    public static func isControlPath(_ path: String) -> Bool {
        let normalized = normalize(path)
        return normalized == controlDirectory || normalized.hasPrefix(controlDirectory + "/")
    }

    let repository: GitRepository
    let key: NIP44.ConversationKey
    let logger: Logger
    let branch: String
    /// Git objects read since the mount began (documents, sidecars, raw files).
    private let objectReads = Atomic<Int>(0)

    struct State: ~Copyable {
        var snapshot: Snapshot
        var listings: [String: Listing] = [:]
        /// What each document contributed to its folder's listing, by git folder and file name:
        /// kept when a listing is dropped, so that rebuilding it decrypts only what changed.
        var documentParts: [String: [String: DocumentPart]] = [:]
        var cache: PlaintextCache
        var openFiles: [UInt64: OpenFile] = [:]
        var nextHandle: UInt64 = 1
        /// Editors' temporary, swap, backup and lock files: in memory only, never committed.
        var scratch: [String: ScratchFile] = [:]
        /// Records renamed to a scratch name (an editor's backup): hidden, still stored.
        var hidden: Set<String> = []
        /// Files created but not yet stored (before their first flush), by path.
        var provisional: [String: OpenFile] = [:]
        /// `X.children` folders made with mkdir, not yet holding a child (nothing in git).
        var pendingFolders: [String: Parent] = [:]
    }

    /// Serialises writes: one plan-and-commit at a time. Taken before `state`, never inside it.
    let writeLock = Mutex(())
    /// The author of the commits this view makes.
    let author: Signature

    /// Guards the snapshot, listings, the plaintext cache and the open-file table.
    let state: Mutex<State>

    /// What the mount's sync engine hangs on the view (see `setSyncHooks`).
    struct Hooks: Sendable {
        var onCommit: (@Sendable (ObjectID) -> Void)?
        var status: (@Sendable () -> String)?
        /// Told the view paths a commit from elsewhere changed (the FUSE bridge drops what the
        /// kernel cached of them).
        var onStale: (@Sendable ([String]) -> Void)?
    }
    /// Guards the hooks; read (copied out) before calling them, never held across a call.
    let hooks = Mutex(Hooks())

    public init(repository: GitRepository, key: NIP44.ConversationKey, logger: Logger, options: Options = Options()) throws {
        self.repository = repository
        self.key = key
        self.logger = logger
        branch = options.branch
        author = options.author
        let snapshot = try Snapshot.load(repository, commit: try repository.branchTip(options.branch))
        state = Mutex(State(snapshot: snapshot, cache: PlaintextCache(capacity: options.cacheCapacity)))
    }

    /// The commit shown.
    public var commit: ObjectID? { state.withLock { $0.snapshot.commit } }

    var snapshot: Snapshot { state.withLock { $0.snapshot } }

    // MARK: - Queries

    public func attributes(_ path: String) throws(ViewError) -> NodeAttributes {
        let path = Self.normalize(path)
        if path.isEmpty { return NodeAttributes(kind: .directory, size: 0, modified: snapshot.commitTime, readOnly: false) }
        if let control = controlAttributes(path) { return control }
        if let overlay = overlayAttributes(path) { return overlay }
        if state.withLock({ $0.hidden.contains(path) }) { throw .notFound(path) }
        if state.withLock({ $0.pendingFolders[path] != nil }) {
            return NodeAttributes(kind: .directory, size: 0, modified: snapshot.commitTime, readOnly: false)
        }
        let attributes = try node(path).attributes
        // A file being written shows the size it has now.
        if let editing = dirtySizes()[path] {
            return NodeAttributes(kind: .file, size: editing, modified: attributes.modified, readOnly: false)
        }
        return attributes
    }

    /// The folder's entries, sorted bytewise by name.
    public func list(_ path: String) throws(ViewError) -> [(name: String, attributes: NodeAttributes)] {
        let path = Self.normalize(path)
        if path == Self.controlDirectory { return [("status", controlAttributes(Self.controlDirectory + "/status")!)] }
        // A `.children` folder made with mkdir holds only what is being written into it.
        if state.withLock({ $0.pendingFolders[path] != nil }), (try? self.listing(path)) == nil {
            return overlayEntries(in: path)
        }
        let listing = try self.listing(path)
        let hidden = state.withLock { $0.hidden }
        let writing = dirtySizes()
        let names = hidden.isEmpty ? listing.sortedNames : listing.sortedNames.filter { !hidden.contains(join(path, $0)) }
        var entries = names.map { name in
            let node = listing.nodes[name]!
            guard !writing.isEmpty, let size = writing[join(path, name)] else { return (name: name, attributes: node.attributes) }
            // A file being written shows the size it has now.
            return (name: name, attributes: NodeAttributes(kind: .file, size: size, modified: node.modified, readOnly: false))
        }
        let listed = entries.count
        let shown = Set(entries.map(\.name))
        entries += overlayEntries(in: path).filter { !shown.contains($0.name) }
        // Pending `.children` folders made with mkdir.
        for (pendingPath, _) in state.withLock({ $0.pendingFolders }) where Self.parent(pendingPath).parent == path {
            let name = Self.parent(pendingPath).name
            if !shown.contains(name) {
                entries.append((name, NodeAttributes(kind: .directory, size: 0, modified: snapshot.commitTime, readOnly: false)))
            }
        }
        // The listing's names come sorted; only scratch files and pending folders need placing.
        guard entries.count > listed else { return entries }
        return entries.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
    }

    /// Opens a file for reading: its plaintext is decrypted now (or taken from the cache) and
    /// held until `release`, so reads of any size at any offset are served from memory.
    public func open(_ path: String) throws(ViewError) -> UInt64 {
        let path = Self.normalize(path)
        return register(OpenFile(path: path, buffer: EditBuffer(content: try currentContent(path)), writable: false))
    }

    /// The bytes a new reader of `path` sees now.
    func currentContent(_ path: String) throws(ViewError) -> SecureBytes {
        if path.hasPrefix(Self.controlDirectory + "/") {
            guard path == Self.controlDirectory + "/status" else { throw .notFound(path) }
            return SecureBytes(utf8: statusText())
        }
        if let scratch = state.withLock({ $0.scratch[path] }) { return scratch.content }
        if let provisional = state.withLock({ $0.provisional[path] }) { return provisional.edit.withLock { $0.buffer.snapshot() } }
        if state.withLock({ $0.hidden.contains(path) }) { throw .notFound(path) }
        let node = try node(path)
        guard !node.isDirectory else { throw .isDirectory(path) }
        return try self.content(of: node, path: path)
    }

    func register(_ file: OpenFile) -> UInt64 {
        state.withLock { state in
            let handle = state.nextHandle
            state.nextHandle += 1
            state.openFiles[handle] = file
            return handle
        }
    }

    /// Copies up to `buffer.count` bytes from `offset`; returns how many (0 at the end).
    public func read(handle: UInt64, offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(ViewError) -> Int {
        guard let file = state.withLock({ $0.openFiles[handle] }) else { throw .badHandle }
        return file.edit.withLock { $0.buffer.read(offset: offset, into: buffer) }
    }

    /// Drops all plaintext (the cache and any open files): at unmount.
    public func close() {
        state.withLock { state in
            state.cache.removeAll()
            state.openFiles.removeAll()
            state.listings.removeAll()
            state.documentParts.removeAll()
            state.scratch.removeAll()
            state.provisional.removeAll()
        }
    }

    public struct Statistics: Sendable {
        public let cachedBytes: Int
        public let cachedEntries: Int
        public let objectReads: Int
        public let listedFolders: Int
    }

    public var statistics: Statistics {
        let reads = objectReads.load(ordering: .relaxed)
        return state.withLock { Statistics(cachedBytes: $0.cache.size, cachedEntries: $0.cache.count,
                                           objectReads: reads, listedFolders: $0.listings.count) }
    }

    // MARK: - Listings

    static func normalize(_ path: String) -> String {
        var p = Substring(path)
        while p.hasPrefix("/") { p = p.dropFirst() }
        while p.hasSuffix("/") { p = p.dropLast() }
        return String(p)
    }

    static func parent(_ path: String) -> (parent: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return ("", path) }
        return (String(path[..<slash]), String(path[path.index(after: slash)...]))
    }

    func node(_ path: String) throws(ViewError) -> Node {
        let (parent, name) = Self.parent(path)
        let listing = try self.listing(parent)
        guard let node = listing.nodes[name] else { throw .notFound(path) }
        return node
    }

    /// The listing of folder `path`, built on first use. A git folder is built from its tree
    /// entries; a `.children` folder is built along with the git folder that holds its document.
    func listing(_ path: String) throws(ViewError) -> Listing {
        let (built, snapshot, parts) = state.withLock { ($0.listings[path], $0.snapshot, $0.documentParts[path]) }
        if let built { return built }
        if let entries = snapshot.gitFolders[path] {
            var builder = ListingBuilder(repository: repository, key: key, logger: logger, commitTime: snapshot.commitTime)
            builder.previousParts = parts ?? [:]
            builder.build(viewPath: path, gitDirectory: path, entries: entries)
            objectReads.add(builder.objectReads, ordering: .relaxed)
            return state.withLock { state in
                for (source, bytes) in builder.rendered { state.cache.put(source, bytes) }
                // A commit may have replaced the snapshot meanwhile: then this listing is only
                // good for this answer, not for keeping.
                guard state.snapshot.commit == snapshot.commit else { return builder.listings[path]! }
                state.documentParts[path] = builder.parts
                // Another thread may have built it meanwhile; the first one stays.
                for (viewPath, listing) in builder.listings where state.listings[viewPath] == nil {
                    state.listings[viewPath] = listing
                }
                return state.listings[path]!
            }
        }
        // Not a git folder: perhaps a `.children` folder, made when its parent is listed.
        guard !path.isEmpty else { throw .notFound(path) }
        let (parent, _) = Self.parent(path)
        _ = try listing(parent)
        if let built = state.withLock({ $0.listings[path] }) { return built }
        let node = try node(path)
        throw node.isDirectory ? .notFound(path) : .notDirectory(path)
    }

    // MARK: - Contents

    func content(of node: Node, path: String) throws(ViewError) -> SecureBytes {
        if let cached = state.withLock({ $0.cache.get(node.source) }) { return cached }
        let bytes = try produce(node, path: path)
        if bytes.count != node.size {
            logger.error("content size differs from listed size", metadata: ["path": "\(node.gitPath)"])
        }
        state.withLock { $0.cache.put(node.source, bytes) }
        return bytes
    }

    private func readObject(_ id: ObjectID) throws(ViewError) -> [UInt8] {
        objectReads.add(1, ordering: .relaxed)
        do { return try repository.readBlob(id) } catch { throw .storage(error.description) }
    }

    /// Decrypts (and renders) a node's content. Runs outside the state lock.
    private func produce(_ node: Node, path: String) throws(ViewError) -> SecureBytes {
        do {
            switch node.source {
            case .directory:
                throw ViewError.isDirectory(path)
            case .raw(let blob):
                return SecureBytes(try readObject(blob))
            case .sidecar(let blob):
                return try Sidecar.decrypt(try readObject(blob), key: key)
            case .document(let blob):
                let document = try decodeDocument(blob, gitPath: node.gitPath)
                return SecureBytes(utf8: FrontMatter.render(metadata: document.metadata, value: document.value))
            case .child(let blob, let indexPath):
                let child = try descend(try decodeDocument(blob, gitPath: node.gitPath), indexPath, path: path)
                return SecureBytes(utf8: FrontMatter.render(metadata: child.metadata, value: child.value))
            case .inlineAttachment(let blob, let indexPath):
                let child = try descend(try decodeDocument(blob, gitPath: node.gitPath), indexPath, path: path)
                guard let bytes = Sidecar.decodeInline(child.value) else {
                    throw ViewError.corrupt(path: node.gitPath, reason: "inline attachment is not base64")
                }
                return bytes
            }
        } catch let error as ViewError {
            logError(error)
            throw error
        } catch {
            let failure = ViewError.corrupt(path: node.gitPath, reason: "\(error)")
            logError(failure)
            throw failure
        }
    }

    private func logError(_ error: ViewError) {
        logger.error("read failed: \(error)")
    }

    func decodeDocument(_ blob: ObjectID, gitPath: String) throws -> MedicalDocument {
        try BinderReader.readDocument(try readObject(blob), key: key, gitPath: gitPath)
    }

    private func descend(_ document: MedicalDocument, _ indexPath: [Int], path: String) throws(ViewError) -> MedicalDocument {
        var current = document
        for index in indexPath {
            guard index < current.children.count else { throw .corrupt(path: path, reason: "child \(indexPath) no longer exists") }
            current = current.children[index]
        }
        return current
    }

    // MARK: - Status

    private func controlAttributes(_ path: String) -> NodeAttributes? {
        if path == Self.controlDirectory {
            return NodeAttributes(kind: .directory, size: 0, modified: snapshot.commitTime, readOnly: true)
        }
        if path == Self.controlDirectory + "/status" {
            return NodeAttributes(kind: .file, size: statusText().utf8.count, modified: snapshot.commitTime, readOnly: true)
        }
        return nil
    }

    /// Status of the mount, no plaintext in it.
    private func statusText() -> String {
        let stats = statistics
        return """
        commit: \(commit?.hex ?? "none")
        cached_bytes: \(stats.cachedBytes)
        cached_entries: \(stats.cachedEntries)
        listed_folders: \(stats.listedFolders)
        git_object_reads: \(stats.objectReads)

        """ + (hooks.withLock { $0 }.status?() ?? "sync: off\n")
    }
}
