import BinderCrypto
import BinderFormat
import Foundation

/// Files as the kernel sees them: open, write, flush, close, and the scratch files editors make.
/// A file's bytes are stored (one commit) when it is flushed or synced with changes; scratch
/// files never are. See docs/DESIGN.md, "Writes".
extension BinderView {
    // MARK: - Overlay: scratch and provisional files

    func overlayAttributes(_ path: String) -> NodeAttributes? {
        state.withLock { state -> NodeAttributes? in
            if let scratch = state.scratch[path] {
                return NodeAttributes(kind: scratch.linkTarget == nil ? .file : .symlink,
                                      size: scratch.linkTarget?.utf8.count ?? scratch.content.count,
                                      modified: scratch.modified, readOnly: false)
            }
            if let file = state.provisional[path] {
                return NodeAttributes(kind: .file, size: file.edit.withLock { $0.buffer.count }, modified: Self.now(), readOnly: false)
            }
            return nil
        }
    }

    func overlayEntries(in directory: String) -> [(name: String, attributes: NodeAttributes)] {
        let paths = state.withLock { Array($0.scratch.keys) + Array($0.provisional.keys) }
        return paths.filter { Self.parent($0).parent == directory }.compactMap { path in
            overlayAttributes(path).map { (Self.parent(path).name, $0) }
        }
    }

    /// The sizes of files that writers have changed and not yet stored, by path.
    func dirtySizes() -> [String: Int] {
        var sizes: [String: Int] = [:]
        for file in state.withLock({ Array($0.openFiles.values) }) {
            file.edit.withLock { edit in if edit.dirty && !edit.detached { sizes[edit.path] = edit.buffer.count } }
        }
        return sizes
    }

    static func now() -> Timestamp {
        let t = Date().timeIntervalSince1970
        return Timestamp(seconds: Int64(t), nanoseconds: Int32((t - t.rounded(.down)) * 1e9))
    }

    func isScratch(_ path: String) -> Bool { ScratchNames.isScratch(Self.parent(path).name) }

    // MARK: - Opening

    /// Creates a new, empty file and opens it for writing. A scratch name lives in memory; any
    /// other name is stored at its first flush.
    public func create(_ path: String) throws(WriteError) -> UInt64 {
        let path = Self.normalize(path)
        let (parentPath, name) = Self.parent(path)
        guard NameMapping.isSafeName(name) else { throw .invalid(path: path, reason: "not a usable file name") }
        if path.hasPrefix(Self.controlDirectory) { throw .readOnly(path) }
        _ = try resolveParent(parentPath)
        if isScratch(path) {
            state.withLock { $0.scratch[path] = ScratchFile(content: SecureBytes(count: 0), modified: Self.now()) }
            return register(OpenFile(path: path, buffer: EditBuffer(), writable: true))
        }
        if let current = try? node(path), !state.withLock({ $0.hidden.contains(path) }) {
            if current.isDirectory { throw .isDirectory(path) }
            if current.isRaw { throw .readOnly(path) }
            return try openForWriting(path, truncate: true)
        }
        let file = OpenFile(path: path, buffer: EditBuffer(), writable: true, dirty: true)
        state.withLock { $0.provisional[path] = file }
        return register(file)
    }

    /// Opens an existing file for writing (`truncate`: O_TRUNC).
    public func openForWriting(_ path: String, truncate: Bool) throws(WriteError) -> UInt64 {
        let path = Self.normalize(path)
        if path.hasPrefix(Self.controlDirectory) { throw .readOnly(path) }
        if !isScratch(path), let current = try? node(path) {
            if current.isRaw { throw .readOnly(path) }
            if current.isDirectory { throw .isDirectory(path) }
        }
        var buffer: EditBuffer
        if truncate {
            buffer = EditBuffer()
        } else {
            do { buffer = EditBuffer(content: try currentContent(path)) } catch {
                if case .notFound = error { throw .notFound(path) }
                throw .corrupt(path: path, reason: "\(error)")
            }
        }
        if truncate { buffer.truncate(0) }
        return register(OpenFile(path: path, buffer: buffer, writable: true, dirty: truncate))
    }

    // MARK: - Changing bytes

    public func write(handle: UInt64, offset: Int, _ bytes: UnsafeRawBufferPointer) throws(WriteError) -> Int {
        guard let file = state.withLock({ $0.openFiles[handle] }) else { throw .notFound("handle \(handle)") }
        return try file.edit.withLock { (edit) throws(WriteError) -> Int in
            guard edit.writable else { throw .readOnly(edit.path) }
            edit.buffer.write(offset: offset, bytes)
            edit.dirty = true
            edit.written = true
            return bytes.count
        }
    }

    public func truncate(handle: UInt64, size: Int) throws(WriteError) {
        guard let file = state.withLock({ $0.openFiles[handle] }) else { throw .notFound("handle \(handle)") }
        try file.edit.withLock { (edit) throws(WriteError) in
            guard edit.writable else { throw .readOnly(edit.path) }
            edit.buffer.truncate(size)
            edit.dirty = true
            edit.written = true
        }
    }

    /// `truncate(2)` by path: open, cut, store, close.
    public func truncate(_ path: String, size: Int) throws(WriteError) {
        let handle = try openForWriting(path, truncate: size == 0)
        defer { _ = state.withLock { $0.openFiles.removeValue(forKey: handle) } }
        try truncate(handle: handle, size: size)
        try flush(handle: handle, closing: true)
    }

    // MARK: - Storing

    /// Stores the file's bytes if they changed: a scratch file in memory, anything else as one
    /// commit. Returns once the commit is durable; throws (and stores nothing) when the bytes
    /// cannot be stored.
    @discardableResult
    public func flush(handle: UInt64, closing: Bool = false) throws(WriteError) -> Bool {
        guard let file = state.withLock({ $0.openFiles[handle] }) else { return false }
        let pending: (path: String, bytes: [UInt8]?, scratch: SecureBytes?)? = file.edit.withLock { edit in
            guard edit.dirty, !edit.detached, edit.written || closing else { return nil }
            if isScratch(edit.path) { return (edit.path, nil, edit.buffer.snapshot()) }
            return (edit.path, edit.buffer.bytes(), nil)
        }
        guard let pending else { return false }
        if let content = pending.scratch {
            state.withLock { state in
                let timesSet = state.scratch[pending.path]?.timesSet ?? false
                let modified = timesSet ? state.scratch[pending.path]!.modified : Self.now()
                state.scratch[pending.path] = ScratchFile(content: content, modified: modified, timesSet: timesSet)
            }
            file.edit.withLock { $0.dirty = false }
            return false
        }
        var bytes = pending.bytes ?? []
        defer { secureZero(&bytes) }
        try store(pending.path, content: bytes)
        file.edit.withLock { $0.dirty = false }
        state.withLock { state in
            if state.provisional[pending.path] === file { state.provisional.removeValue(forKey: pending.path) }
            state.hidden.remove(pending.path)
        }
        return true
    }

    /// Closes a handle; unsaved changes are stored first (an error here is logged: the
    /// caller's `close` already had its answer from `flush`).
    public func release(handle: UInt64) {
        do { try flush(handle: handle, closing: true) } catch { logger.error("not stored at close: \(error)") }
        state.withLock { state in
            guard let file = state.openFiles.removeValue(forKey: handle) else { return }
            let path = file.edit.withLock { $0.path }
            if state.provisional[path] === file { state.provisional.removeValue(forKey: path) }
        }
    }

    // MARK: - Names

    /// `unlink`: scratch files vanish from memory; records are deleted (one commit).
    public func unlink(_ path: String) throws(WriteError) {
        let path = Self.normalize(path)
        let wasOverlay = state.withLock { state -> Bool in
            if state.scratch.removeValue(forKey: path) != nil { return true }
            if state.provisional.removeValue(forKey: path) != nil { return true }
            return false
        }
        if !wasOverlay {
            if state.withLock({ $0.hidden.contains(path) }) { throw .notFound(path) }
            try remove(path)
        }
        forEachOpenFile(at: path) { $0.detached = true }
    }

    /// Applies `body` to every open file currently at `path` (unlink detaches them, rename
    /// moves them, so that a later close stores nothing or stores under the new name).
    func forEachOpenFile(at path: String, _ body: (inout OpenFile.Edit) -> Void) {
        for file in state.withLock({ Array($0.openFiles.values) }) {
            file.edit.withLock { edit in if edit.path == path && !edit.detached { body(&edit) } }
        }
    }

    /// `rename`: between scratch and real names too. A scratch file renamed onto a record is the
    /// editor's atomic save (one commit); a record renamed to a scratch name (a backup) is hidden
    /// but stays stored until something replaces it.
    public func renameFile(_ from: String, to: String, noReplace: Bool) throws(WriteError) {
        let from = Self.normalize(from), to = Self.normalize(to)
        guard from != to else { return }
        if noReplace, (try? attributes(to)) != nil { throw .exists(to) }
        let scratchSource = state.withLock { $0.scratch[from] }
        switch (scratchSource != nil, isScratch(to)) {
        case (true, true):
            state.withLock { state in
                state.scratch[to] = state.scratch.removeValue(forKey: from)
                state.hidden.remove(to)
            }
        case (true, false):
            guard scratchSource?.linkTarget == nil else { throw .invalid(path: to, reason: "links are not stored") }
            let scratch = scratchSource!
            var bytes = scratch.content.copyBytes()
            defer { secureZero(&bytes) }
            try store(to, content: bytes,
                      updated: scratch.timesSet ? Timestamps.string(seconds: scratch.modified.seconds, nanoseconds: scratch.modified.nanoseconds) : nil)
            state.withLock { state in
                state.scratch.removeValue(forKey: from)
                state.hidden.remove(to)
            }
        case (false, true):
            let content: SecureBytes
            do { content = try currentContent(from) } catch {
                if case .notFound = error { throw .notFound(from) }
                if case .isDirectory = error { throw .isDirectory(from) }
                throw .corrupt(path: from, reason: "\(error)")
            }
            if Self.parent(to).name.hasPrefix(".fuse_hidden") {
                // libfuse's way of unlinking a file that is still open: the record is deleted
                // now; its readers keep the bytes under the hidden name until they close.
                try remove(from)
                state.withLock { $0.scratch[to] = ScratchFile(content: content, modified: Self.now()) }
            } else {
                state.withLock { state in
                    state.scratch[to] = ScratchFile(content: content, modified: Self.now())
                    state.hidden.insert(from)
                }
            }
        case (false, false):
            if state.withLock({ $0.hidden.contains(from) }) { throw .notFound(from) }
            try rename(from, to: to, noReplace: noReplace)
            state.withLock { _ = $0.hidden.remove(to) }
        }
        forEachOpenFile(at: to) { $0.detached = true }  // a replaced target's writers
        forEachOpenFile(at: from) { $0.path = to }
    }

    /// `symlink`: only editors' lock files (emacs `.#name`), kept in memory.
    public func symlink(_ target: String, at path: String) throws(WriteError) {
        let path = Self.normalize(path)
        guard isScratch(path) else { throw .invalid(path: path, reason: "symbolic links are not stored in a binder") }
        if (try? attributes(path)) != nil { throw .exists(path) }
        state.withLock { $0.scratch[path] = ScratchFile(content: SecureBytes(count: 0), modified: Self.now(), linkTarget: target) }
    }

    public func readLink(_ path: String) throws(ViewError) -> String {
        let path = Self.normalize(path)
        guard let target = state.withLock({ $0.scratch[path]?.linkTarget }) else { throw .notFound(path) }
        return target
    }

    /// `utimensat`: a record's `updated` becomes the time given (one commit), so that tools like
    /// rsync see the times they set; scratch files keep it in memory; folders ignore it.
    public func setModified(_ path: String, to time: Timestamp) throws(WriteError) {
        let path = Self.normalize(path)
        let scratchChanged = state.withLock { state -> Bool in
            guard state.scratch[path] != nil else { return false }
            state.scratch[path]!.modified = time
            state.scratch[path]!.timesSet = true
            return true
        }
        if scratchChanged { return }
        if state.withLock({ $0.provisional[path] != nil }) { return }
        guard let current = try? node(path) else { throw .notFound(path) }
        if current.modified == time { return }
        let iso = Timestamps.string(seconds: time.seconds, nanoseconds: time.nanoseconds)
        // The time lives in a document's metadata: the record's own, or an attachment's reference.
        let documentPath: String
        switch (current.source, current.owner) {
        case (.document, _): documentPath = current.gitPath
        case (.sidecar, .document(let reference)?): documentPath = reference
        default: return  // folders, raw files and children keep the times they have
        }
        try perform { () throws(WriteError) in
            var document = try self.loadDocument(documentPath)
            document.metadata["updated"] = .string(iso)
            return Plan(changes: [try self.write(document, at: documentPath, path: path)], message: "Update entry")
        }
    }
}
