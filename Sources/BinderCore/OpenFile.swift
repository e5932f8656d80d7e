import BinderCrypto
import Synchronization

/// A file open through the mount: its bytes (an `EditBuffer`) and whether they changed since
/// they were last stored. Guarded by its own lock: libfuse may call on one handle from
/// several threads.
final class OpenFile: Sendable {
    struct Edit {
        var path: String
        var buffer: EditBuffer
        var dirty = false
        /// Whether write or truncate was called on this handle. A shell's `> file` opens
        /// (O_TRUNC), duplicates and closes the descriptor before writing: that first flush must
        /// not store an empty record, so a flush stores only what was written.
        var written = false
        /// The file was unlinked while open: its bytes stay readable, nothing is stored.
        var detached = false
        /// A time set on the file while it was open (`cp -p` and `tar` set it before closing):
        /// stored as the record's `updated` with the bytes.
        var modified: Timestamp?
        /// A write or truncate past the file's limit was refused: the handle stores nothing
        /// and every later flush reports the refusal again.
        var refusal: WriteError?
        /// Why the last store of these bytes failed (front matter that does not parse…),
        /// cleared by any write or truncate: the flushes that follow (the close after an
        /// fsync, the release after the close) answer it again without a second attempt, and
        /// the log says it once.
        var failedStore: WriteError?
        let writable: Bool
        /// Opened with O_APPEND: every write goes to the end of the bytes held here, whatever
        /// offset the kernel gives (it computes one from the size it cached, which a commit
        /// that re-rendered the file can have made stale).
        var appends = false
        /// For a handle opened with O_APPEND on a stored file: the stored version it read (the
        /// node's source) and how many bytes it held then, or after this handle's last store;
        /// nil once it is truncated. O_APPEND writes at the end of the file as it is when they
        /// land: if another handle stores the file meanwhile (two processes appending to one
        /// record), this handle's appended bytes go after what that one stored, instead of its
        /// store replacing that one's.
        var appendBase: (source: Node.Source, count: Int)?
    }

    let edit: Mutex<Edit>

    init(path: String, buffer: EditBuffer, writable: Bool, dirty: Bool = false, appends: Bool = false) {
        edit = Mutex(Edit(path: path, buffer: buffer, dirty: dirty, writable: writable, appends: appends))
    }
}

/// The files open through the mount, by handle, and the new files not stored yet (by path, so
/// that they are listed while being written). One lock, one reason: handing out and finding
/// handles.
final class OpenFileTable: Sendable {
    private struct Table: ~Copyable {
        var files: [UInt64: OpenFile] = [:]
        var nextHandle: UInt64 = 1
        /// Files created but not yet stored (before their first flush), by path.
        var provisional: [String: OpenFile] = [:]
    }

    /// Guards the handles, the next handle number and the provisional files.
    private let table = Mutex(Table())

    init() {}

    func register(_ file: OpenFile, provisionalAt path: String? = nil) -> UInt64 {
        table.withLock { table in
            let handle = table.nextHandle
            table.nextHandle += 1
            table.files[handle] = file
            if let path { table.provisional[path] = file }
            return handle
        }
    }

    func file(_ handle: UInt64) -> OpenFile? { table.withLock { $0.files[handle] } }

    /// Forgets a handle (and its provisional entry, if the file was never stored). True when
    /// that made a listed file vanish.
    @discardableResult
    func remove(_ handle: UInt64) -> Bool {
        table.withLock { table in
            guard let file = table.files.removeValue(forKey: handle) else { return false }
            let path = file.edit.withLock { $0.path }
            guard table.provisional[path] === file else { return false }
            table.provisional.removeValue(forKey: path)
            return true
        }
    }

    func provisional(_ path: String) -> OpenFile? { table.withLock { $0.provisional[path] } }

    /// The file at `path` is stored (or gone): it is no longer provisional.
    @discardableResult
    func dropProvisional(_ path: String, onlyIf file: OpenFile? = nil) -> Bool {
        table.withLock { table in
            guard let current = table.provisional[path], file == nil || current === file else { return false }
            table.provisional.removeValue(forKey: path)
            return true
        }
    }

    /// `file`, still open and not stored, is now the new file at `path` (it was renamed there).
    func makeProvisional(_ file: OpenFile, at path: String) {
        table.withLock { $0.provisional[path] = file }
    }

    var provisionalPaths: [String] { table.withLock { Array($0.provisional.keys) } }

    /// Applies `body` to every open file currently at `path` (unlink detaches them, rename
    /// moves them, utimens dates them), outside the table's lock.
    func forEach(at path: String, _ body: (inout OpenFile.Edit) -> Void) {
        for file in table.withLock({ Array($0.files.values) }) {
            file.edit.withLock { edit in if edit.path == path && !edit.detached { body(&edit) } }
        }
    }

    /// The size of the file at `path` if a writer changed it and it is not stored yet.
    func dirtySize(at path: String) -> Int? {
        var size: Int?
        forEach(at: path) { edit in if edit.dirty { size = edit.buffer.count } }
        return size
    }

    /// The sizes of files that writers have changed and not yet stored, by path.
    func dirtySizes() -> [String: Int] {
        var sizes: [String: Int] = [:]
        for file in table.withLock({ Array($0.files.values) }) {
            file.edit.withLock { edit in if edit.dirty && !edit.detached { sizes[edit.path] = edit.buffer.count } }
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
