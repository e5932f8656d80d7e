import BinderCrypto
import Synchronization

/// The bytes of a file open through the mount, shared by every handle open on it while any of
/// them may write (POSIX: one file, one content): a write through one descriptor is read through
/// the others at once, and a store holds every handle's writes. Guarded by its own lock: libfuse
/// may call on its handles from several threads.
final class OpenContent: Sendable {
    struct Edit {
        var path: String
        var buffer: EditBuffer
        var dirty = false
        /// Whether write or truncate was called on the content. A shell's `> file` opens
        /// (O_TRUNC), duplicates and closes the descriptor before writing: that first flush must
        /// not store an empty record, so a flush stores only what was written.
        var written = false
        /// The file was unlinked while open: its bytes stay readable, nothing is stored.
        var detached = false
        /// A time set on the file while it was open (`cp -p` and `tar` set it before closing):
        /// stored as the record's `updated` with the bytes.
        var modified: Timestamp?
        /// A write or truncate past the file's limit was refused: the content stores nothing
        /// and every later flush reports the refusal again (a save is never cut short).
        var refusal: WriteError?
        /// Why the last store of these bytes failed (front matter that does not parse…),
        /// cleared by any write or truncate: the flushes that follow (the close after an
        /// fsync, the release after the close) answer it again without a second attempt, and
        /// the log says it once.
        var failedStore: WriteError?
        /// For content read from a stored file by a handle opened with O_APPEND: the stored
        /// version it read (the node's source) and how many bytes it held then, or after the
        /// last store; nil once it is truncated or written at an offset. O_APPEND writes at the
        /// end of the file as it is when they land: if the file is stored from elsewhere
        /// meanwhile (a sync), the appended bytes go after what was stored, instead of this
        /// store replacing it.
        var appendBase: (source: Node.Source, count: Int)?
        /// Counts every write and truncate: a store that ran while another handle wrote leaves
        /// the content dirty (`dirty` is cleared only if nothing changed since the snapshot).
        var generation = 0
        /// Handles open on the content, and how many of them may write. Content is shared with
        /// a new handle only while a writer holds it (`OpenFileTable.register`).
        var handles = 0
        var writers = 0
    }

    let edit: Mutex<Edit>
    /// A large attachment opened for reading and not decrypted yet (`ViewReader.open`): reads
    /// come from it, and `edit`'s buffer stays empty. Never shared with a writer.
    let deferred: DeferredContent?

    init(path: String, buffer: EditBuffer, dirty: Bool = false, deferred: DeferredContent? = nil) {
        edit = Mutex(Edit(path: path, buffer: buffer, dirty: dirty))
        self.deferred = deferred
    }
}

/// One handle the kernel holds: the content it reads and writes, and how it was opened.
final class OpenFile: Sendable {
    let content: OpenContent
    let writable: Bool
    /// Opened with O_APPEND: every write goes to the end of the bytes held, whatever offset
    /// the kernel gives (it computes one from the size it cached, which a commit that
    /// re-rendered the file can have made stale).
    let appends: Bool

    init(content: OpenContent, writable: Bool, appends: Bool = false) {
        self.content = content
        self.writable = writable
        self.appends = appends
    }
}

/// The files open through the mount, by handle, and the new files not stored yet (by path, so
/// that they are listed while being written). One lock, one reason: handing out and finding
/// handles. Lock order: this table's lock, then a content's.
final class OpenFileTable: Sendable {
    private struct Table: ~Copyable {
        var files: [UInt64: OpenFile] = [:]
        var nextHandle: UInt64 = 1
        /// Files created but not yet stored (before their first flush), by path.
        var provisional: [String: OpenContent] = [:]
        /// Handles that may write. Nearly always none while a folder is read (`grep -r`,
        /// `cp -r`): then an open looks at no other handle.
        var writableHandles = 0

        /// The content a writer holds open at `path`, if any.
        func shared(at path: String) -> OpenContent? {
            guard writableHandles > 0 else { return nil }
            for file in files.values where file.content.edit.withLock({ $0.writers > 0 && !$0.detached && $0.path == path }) {
                return file.content
            }
            return nil
        }

        mutating func add(_ file: OpenFile) -> UInt64 {
            let handle = nextHandle
            nextHandle += 1
            files[handle] = file
            if file.writable { writableHandles += 1 }
            file.content.edit.withLock { edit in
                edit.handles += 1
                if file.writable { edit.writers += 1 }
            }
            return handle
        }
    }

    /// Guards the handles, the next handle number and the provisional files.
    private let table = Mutex(Table())

    init() {}

    /// A new handle on the content a writer holds open at `path`, or else on `make()`'s (made
    /// outside the lock: it may decrypt). `joined` is true when the content was shared.
    func register<Failure: Error>(_ path: String, writable: Bool, appends: Bool = false,
                                  make: () throws(Failure) -> OpenContent) throws(Failure) -> (handle: UInt64, content: OpenContent, joined: Bool) {
        let found = table.withLock { table -> (UInt64, OpenContent)? in
            guard let content = table.shared(at: path) else { return nil }
            return (table.add(OpenFile(content: content, writable: writable, appends: appends)), content)
        }
        if let found { return (found.0, found.1, true) }
        let fresh = try make()
        return table.withLock { table in
            // Another writer may have opened it meanwhile: one content still.
            let content = table.shared(at: path) ?? fresh
            return (table.add(OpenFile(content: content, writable: writable, appends: appends)), content, content !== fresh)
        }
    }

    /// A handle on new content nobody else holds (`provisionalAt`: a new file, listed while it
    /// is not stored).
    func register(_ content: OpenContent, writable: Bool, provisionalAt path: String? = nil) -> UInt64 {
        table.withLock { table in
            let handle = table.add(OpenFile(content: content, writable: writable))
            if let path { table.provisional[path] = content }
            return handle
        }
    }

    func file(_ handle: UInt64) -> OpenFile? { table.withLock { $0.files[handle] } }

    /// Forgets a handle (and its content's provisional entry, when it was the last handle of a
    /// file never stored). True when that made a listed file vanish.
    @discardableResult
    func remove(_ handle: UInt64) -> Bool {
        table.withLock { table in
            guard let file = table.files.removeValue(forKey: handle) else { return false }
            if file.writable { table.writableHandles -= 1 }
            let (path, left) = file.content.edit.withLock { edit in
                edit.handles -= 1
                if file.writable { edit.writers -= 1 }
                return (edit.path, edit.handles)
            }
            guard left == 0, table.provisional[path] === file.content else { return false }
            table.provisional.removeValue(forKey: path)
            return true
        }
    }

    func provisional(_ path: String) -> OpenContent? { table.withLock { $0.provisional[path] } }

    /// The file at `path` is stored (or gone): it is no longer provisional.
    @discardableResult
    func dropProvisional(_ path: String, onlyIf content: OpenContent? = nil) -> Bool {
        table.withLock { table in
            guard let current = table.provisional[path], content == nil || current === content else { return false }
            table.provisional.removeValue(forKey: path)
            return true
        }
    }

    /// `content`, still open and not stored, is now the new file at `path` (it was renamed there).
    func makeProvisional(_ content: OpenContent, at path: String) {
        table.withLock { $0.provisional[path] = content }
    }

    var provisionalPaths: [String] { table.withLock { Array($0.provisional.keys) } }

    /// Every content open now, once each (handles share them). `dirtyOnly`: none while no
    /// handle may write, as only a writer leaves content dirty (asked on every getattr and
    /// listing, which then look at no handle).
    private func contents(dirtyOnly: Bool) -> [OpenContent] {
        table.withLock { table in
            if dirtyOnly && table.writableHandles == 0 { return [] }
            var seen = Set<ObjectIdentifier>()
            return table.files.values.map(\.content).filter { seen.insert(ObjectIdentifier($0)).inserted }
        }
    }

    /// Applies `body` to every open content currently at `path` (unlink detaches it, rename
    /// moves it, utimens dates it), outside the table's lock.
    func forEach(at path: String, _ body: (inout OpenContent.Edit) -> Void) {
        for content in contents(dirtyOnly: false) {
            content.edit.withLock { edit in if edit.path == path && !edit.detached { body(&edit) } }
        }
    }

    /// The size of the file at `path` if a writer changed it and it is not stored yet.
    func dirtySize(at path: String) -> Int? {
        var size: Int?
        for content in contents(dirtyOnly: true) {
            content.edit.withLock { edit in if edit.path == path && !edit.detached && edit.dirty { size = edit.buffer.count } }
        }
        return size
    }

    /// The sizes of files that writers have changed and not yet stored, by path.
    func dirtySizes() -> [String: Int] {
        var sizes: [String: Int] = [:]
        for content in contents(dirtyOnly: true) {
            content.edit.withLock { edit in if edit.dirty && !edit.detached { sizes[edit.path] = edit.buffer.count } }
        }
        return sizes
    }

    /// Drops every handle (at unmount: their plaintext is zeroed as it goes).
    func removeAll() {
        table.withLock { table in
            table.files.removeAll()
            table.provisional.removeAll()
        }
    }
}
