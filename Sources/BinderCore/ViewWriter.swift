import BinderCrypto
import BinderFormat
import BinderGit
import Foundation
import Logging
import Synchronization

/// Changes through the view, as the kernel asks for them: files opened, written, flushed and
/// closed; names made, moved and removed. Each change that reaches git is one commit, planned
/// by `WritePlanner` and made by `Committer`; scratch files never reach git. See
/// docs/DESIGN.md, "Writes".
///
/// All refusal policy is here: a read-only view and `.binder/` (EROFS, `refuseChanges`), what a
/// share held (`policy`), names and limits (with the planner's rules), and the refusals noted
/// for `.binder/status` (`refusals`). It holds no lock of its own: the committer's write lock
/// serialises commits, and each part it changes (the reader's open files and scratch files)
/// has its own.
final class ViewWriter: Sendable {
    let reader: ViewReader
    let committer: Committer
    let logger: Logger
    let limits: WriteLimits
    /// `Options.mode` with what the view held when it was made.
    let policy: WritePolicy
    /// The last refused save, for `.binder/status` (its own lock).
    let refusals: RefusalLog
    /// A read-only view (`Options.readOnly`, a `--read-only` mount): every change is EROFS.
    let readOnly: Bool
    /// The reader's listings, open files and scratch files (each with its own lock), which the
    /// writer's changes go into.
    let listings: ListingCache
    let openFiles: OpenFileTable
    let scratch: ScratchFiles

    init(reader: ViewReader, committer: Committer, logger: Logger, limits: WriteLimits, policy: WritePolicy,
         refusals: RefusalLog, readOnly: Bool) {
        self.reader = reader
        self.committer = committer
        self.logger = logger
        self.limits = limits
        self.policy = policy
        self.refusals = refusals
        self.readOnly = readOnly
        listings = reader.listings
        openFiles = reader.openFiles
        scratch = reader.scratch
    }

    /// EROFS for a change at any of `paths` on a read-only view, or in `.binder/` (its views
    /// are read-only; links in it lead to the records). Asked first, before anything is looked
    /// up, by every change, and by the FUSE bridge for the changes that are not the view's
    /// (chmod, chown, a rename that would exchange two names).
    func refuseChanges(at path: String, _ other: String? = nil) throws(WriteError) {
        if readOnly { throw .readOnlyFileSystem(path) }
        if BinderView.isControlPath(path) { throw .readOnlyFileSystem(path) }
        if let other, BinderView.isControlPath(other) { throw .readOnlyFileSystem(other) }
    }

    // MARK: - Whole-file changes (one commit each)

    /// Creates or replaces the file at `path` with `content` (what the user saved). `modified`
    /// is a time the writer set on it, which becomes the record's `updated`.
    func store(_ path: String, content: [UInt8], modified: Timestamp? = nil) throws(WriteError) {
        try refuseChanges(at: path)
        try store(path, content: content, modified: modified, notingRefusal: true)
    }

    /// `notingRefusal`: false when a refusal may not be final (another writer of the file may
    /// still complete it), so it is neither logged nor shown in `.binder/status`.
    func store(_ path: String, content: [UInt8], modified: Timestamp?, notingRefusal: Bool) throws(WriteError) {
        let path = ViewPath.normalize(path)
        // Records about to be made empty to hold this child (its `.children` folder came first).
        let placeholders = ViewPath.ancestors(of: path).compactMap { folder -> String? in
            guard case .childrenOfMissing(_, let stem)? = scratch.pendingFolder(folder) else { return nil }
            let owner = join(ViewPath.split(folder).parent, BinderNaming.recordName(stem: stem))
            return (try? listings.node(owner)) == nil ? owner : nil
        }
        try commit(notingRefusal: notingRefusal) { (planner) throws(WriteError) in try planner.store(path, content: content, modified: modified) }
        scratch.stored(path)
        // They stay out of sight until the record itself is written (restores write `X.md`
        // after `X.children/`, and `cp -a` creates it with O_EXCL): that write replaces them.
        for owner in placeholders { scratch.hide(owner) }
    }

    /// Deletes a stored file (a record, an attachment, a child, or a raw file): one commit.
    /// What `remove` does for a name git holds, without its care for scratch files, new files
    /// and `patient-info.md`.
    private func deleteStored(_ path: String) throws(WriteError) {
        let path = ViewPath.normalize(path)
        try commit { (planner) throws(WriteError) in try planner.remove(path) }
    }

    /// Creates a folder: a real one gets an encrypted `.meta.json` (one commit); `X.children`
    /// only makes room in memory for a first child (nothing is committed).
    func makeDirectory(_ path: String) throws(WriteError) {
        try refuseChanges(at: path)
        let path = ViewPath.normalize(path)
        var pending: Parent?
        try commit { (planner) throws(WriteError) in
            switch try planner.makeDirectory(path) {
            case .commit(let plan): return plan
            case .inMemory(let parent):
                pending = parent
                return .none()
            }
        }
        if let pending { scratch.addPendingFolder(path, pending) }
    }

    /// Removes an empty folder.
    func removeDirectory(_ path: String) throws(WriteError) {
        try refuseChanges(at: path)
        let path = ViewPath.normalize(path)
        if scratch.removePendingFolder(path) { return }
        try commit { (planner) throws(WriteError) in try planner.removeDirectory(path) }
    }

    /// Renames or moves a stored file or folder (one commit). With `noReplace`, an existing
    /// target is an error; otherwise it is replaced in the same commit. What `rename` does for
    /// names git holds on both sides.
    private func renameStored(_ from: String, to: String, noReplace: Bool) throws(WriteError) {
        let from = ViewPath.normalize(from), to = ViewPath.normalize(to)
        guard from != to else { return }
        if noReplace, (try? listings.node(to)) != nil { throw .exists(to) }
        try commit { (planner) throws(WriteError) in try planner.rename(from, to: to) }
        scratch.stored(to)
    }

    /// Plans against the snapshot shown (again if `main` moved) and commits; a refusal that a
    /// person needs to hear of is noted for `.binder/status`.
    func commit(notingRefusal: Bool = true, _ plan: (WritePlanner) throws(WriteError) -> WritePlan) throws(WriteError) {
        do {
            try committer.commit { () throws(WriteError) in
                policy.named(try plan(WritePlanner(binder: LiveBinder(reader: reader, snapshot: listings.snapshot), limits: limits,
                                                   policy: policy)))
            }
        } catch {
            if error.needsReason && notingRefusal {
                logger.error("refused: \(error)")
                refusals.note(error)
            }
            throw error
        }
    }

    // MARK: - Opening

    /// Creates a new, empty file and opens it for writing. A scratch name lives in memory; any
    /// other name is stored at its first flush.
    func create(_ path: String) throws(WriteError) -> UInt64 {
        try refuseChanges(at: path)
        let path = ViewPath.normalize(path)
        let (parentPath, name) = ViewPath.split(path)
        try BinderNaming.check(name, in: parentPath, path: path)
        let parent = try WritePlanner(binder: LiveBinder(reader: reader, snapshot: listings.snapshot), limits: limits).parent(of: parentPath)
        if !BinderNaming.isScratch(name) && (try? listings.node(path)) == nil {
            try policy.checkNew(path)
            // Refused here, not at the first flush: a shell's `echo x > name` ignores what
            // close() says, and would lose the bytes without a word.
            if case .folder = parent { try BinderNaming.checkStored(BinderNaming.storedName(shownAs: name), path: path) }
        }
        let empty = try WriteError.needingSecretMemory(path) { () throws(SecureMemoryError) in try EditBuffer() }
        if BinderNaming.isScratch(name) {
            scratch.put(path, ScratchFile(content: try WriteError.needingSecretMemory(path) { () throws(SecureMemoryError) in try SecureBytes(zeroed: 0) },
                                          modified: ViewReader.now()))
            return openFiles.register(OpenContent(path: path, buffer: empty), writable: true)
        }
        if let current = try? listings.node(path), !scratch.isHidden(path) {
            if current.isDirectory { throw .isDirectory(path) }
            if current.isRaw { throw .readOnly(path) }
            return try openForWriting(path, truncate: true)
        }
        return openFiles.register(OpenContent(path: path, buffer: empty, dirty: true), writable: true, provisionalAt: path)
    }

    /// Opens an existing file for writing (`truncate`: O_TRUNC; `append`: O_APPEND, each write
    /// at the end of the file as stored here).
    func openForWriting(_ path: String, truncate: Bool, append: Bool = false) throws(WriteError) -> UInt64 {
        try refuseChanges(at: path)
        let path = ViewPath.normalize(path)
        if !BinderNaming.isScratch(ViewPath.split(path).name), let current = try? listings.node(path) {
            try policy.checkChange(path)
            if current.isRaw { throw .readOnly(path) }
            if current.isDirectory { throw .isDirectory(path) }
        }
        // Every writer of a file shares one content (`OpenContent`): another writer's unsaved
        // bytes are this one's too, and O_TRUNC empties them for all.
        var vanished = false
        let opened = try openFiles.register(path, writable: true, appends: append) { () throws(WriteError) -> OpenContent in
            if truncate {
                return OpenContent(path: path, buffer: try WriteError.needingSecretMemory(path) { () throws(SecureMemoryError) in try EditBuffer() },
                                   dirty: true)
            }
            let content: SecureBytes
            do throws(ViewError) { content = try reader.currentContent(path) } catch {
                if case .notFound = error {
                    vanished = true
                    return OpenContent(path: path, buffer: EditBuffer(content: try WriteError.needingSecretMemory(path) { () throws(SecureMemoryError) in try SecureBytes(zeroed: 0) }))
                }
                throw .reading(path, error)
            }
            let fresh = OpenContent(path: path, buffer: EditBuffer(content: content))
            if append, let source = (try? listings.node(path))?.source {
                fresh.edit.withLock { $0.appendBase = (source, content.count) }
            }
            return fresh
        }
        if vanished && !opened.joined {
            openFiles.remove(opened.handle)
            return try createInPlaceOfVanished(path)
        }
        if truncate && opened.joined {
            opened.content.edit.withLock { edit in
                edit.buffer.truncate(0)
                edit.dirty = true
                edit.failedStore = nil
                edit.appendBase = nil
                edit.generation += 1
            }
        }
        return opened.handle
    }

    /// An open for writing of a name the view no longer has: the kernel still believed in it
    /// (a new file whose save was refused vanishes at close, and the kernel forgets the name a
    /// moment later). Writing it starts a new file, as creating it would.
    private func createInPlaceOfVanished(_ path: String) throws(WriteError) -> UInt64 {
        do { _ = try reader.attributes(ViewPath.split(path).parent) } catch { throw .notFound(path) }
        return try create(path)
    }

    /// Whether `path` is a new file not stored yet.
    func isNew(_ path: String) -> Bool { openFiles.provisional(ViewPath.normalize(path)) != nil }

    // MARK: - Changing bytes

    /// Writes at `offset`. A write that would take the file past its limit (the attachment
    /// limit; for a record, 65,535 bytes of stored JSON) is refused here, and the file then
    /// stores nothing: a save is never cut short.
    func write(handle: UInt64, offset: Int, _ bytes: UnsafeRawBufferPointer) throws(WriteError) -> Int {
        guard let file = openFiles.file(handle) else { throw .notFound("handle \(handle)") }
        guard file.writable else { throw .readOnly(file.content.edit.withLock { $0.path }) }
        let recordPastLimit = try file.content.edit.withLock { (edit) throws(WriteError) -> (path: String, bytes: SecureBytes)? in
            let offset = file.appends ? edit.buffer.count : offset
            try checkSize(&edit, offset: offset, count: bytes.count)
            try WriteError.needingSecretMemory(edit.path) { () throws(SecureMemoryError) in try edit.buffer.write(offset: offset, bytes) }
            edit.dirty = true
            edit.written = true
            edit.failedStore = nil
            edit.generation += 1
            if !file.appends { edit.appendBase = nil }
            // JSON escapes a newline or a quote in two bytes: past half the limit, what the
            // record stores may pass it.
            guard edit.buffer.count > limits.documentBytes / 2, WriteLimits.isRecord(edit.path) else { return nil }
            return (edit.path, try WriteError.needingSecretMemory(edit.path) { () throws(SecureMemoryError) in try edit.buffer.snapshot() })
        }
        if let recordPastLimit { try checkStoredSize(of: file.content, path: recordPastLimit.path, rendered: recordPastLimit.bytes) }
        return bytes.count
    }

    /// A record whose file passed half of 65,535 bytes: refused at this write if what it says already
    /// stores past the limit (planned, not committed, outside the file's lock: planning lists
    /// folders, which reads every open file's size). Front matter still being written (it does
    /// not parse yet) is held to `renderedDocumentBytes` only, and to the limit at its store.
    private func checkStoredSize(of content: OpenContent, path: String, rendered: SecureBytes) throws(WriteError) {
        var bytes = rendered.copyBytes()
        defer { secureZero(&bytes) }
        do {
            _ = try WritePlanner(binder: LiveBinder(reader: reader, snapshot: listings.snapshot), limits: limits, policy: policy)
                .store(path, content: bytes)
        } catch {
            guard case .tooLarge = error else { return }
            let first = content.edit.withLock { edit in
                defer { edit.refusal = error }
                return edit.refusal == nil
            }
            if first {
                logger.error("refused: \(error)")
                refusals.note(error)
            }
            throw error
        }
    }

    func truncate(handle: UInt64, size: Int) throws(WriteError) {
        guard let file = openFiles.file(handle) else { throw .notFound("handle \(handle)") }
        guard file.writable else {
            // Only a reader's handle can be here on a read-only view or in `.binder/`: its
            // refusal is theirs (EROFS) before the handle's own (EACCES).
            let path = file.content.edit.withLock { $0.path }
            try refuseChanges(at: path)
            throw .readOnly(path)
        }
        try file.content.edit.withLock { (edit) throws(WriteError) in
            try checkSize(&edit, offset: size, count: 0)
            edit.buffer.truncate(size)
            edit.dirty = true
            edit.written = true
            edit.failedStore = nil
            edit.appendBase = nil
            edit.generation += 1
        }
    }

    /// `truncate(2)` by path: open, cut, store, close.
    func truncate(_ path: String, size: Int) throws(WriteError) {
        try refuseChanges(at: path)
        let handle = try openForWriting(path, truncate: size == 0)
        defer { openFiles.remove(handle) }
        try truncate(handle: handle, size: size)
        try flush(handle: handle, closing: true)
    }

    /// Refuses (and marks refused) a change that would end past the file's limit.
    private func checkSize(_ edit: inout OpenContent.Edit, offset: Int, count: Int) throws(WriteError) {
        let limit = limits.maximum(for: edit.path)
        let (end, overflow) = offset.addingReportingOverflow(count)
        guard offset >= 0 else { throw .invalid(path: edit.path, reason: "negative offset") }
        if overflow || end > limit {
            let refusal = WriteError.tooLarge(path: edit.path, bytes: overflow ? Int.max : end, limit: limit)
            if edit.refusal == nil {
                logger.error("refused: \(refusal)")
                refusals.note(refusal)
            }
            edit.refusal = refusal
            throw refusal
        }
    }

    // MARK: - Storing

    /// Stores the file's bytes if they changed: a scratch file in memory, anything else as one
    /// commit. Returns once the commit is durable; throws (and stores nothing) when the bytes
    /// cannot be stored.
    ///
    /// A handle that was truncated or created but not written stores only when `closing` (the
    /// last close, an fsync) or when `isLastDescriptor` says this close leaves the caller no
    /// other descriptor of the file: a shell's `> file` closes a first descriptor before it
    /// writes, and that close must not commit the emptied record (`OpenContent.Edit.written`).
    /// `isLastDescriptor` is asked only then, outside the file's lock.
    ///
    /// Every handle of a file shares its content (`OpenContent`), so any handle's flush stores
    /// what all of them wrote. A record that does not parse yet while another handle may still
    /// write it (two writers filling one file) is not refused here: it is stored, or refused,
    /// at that handle's close.
    @discardableResult
    func flush(handle: UInt64, closing: Bool = false, isLastDescriptor: () -> Bool = { false }) throws(WriteError) -> Bool {
        guard let file = openFiles.file(handle) else { return false }
        let content = file.content
        let onlyTruncated = content.edit.withLock { $0.refusal == nil && $0.dirty && !$0.detached && !$0.written }
        let closing = closing || (onlyTruncated && isLastDescriptor())
        let pending = try content.edit.withLock { (edit) throws(WriteError) -> (path: String, bytes: SecureBytes, modified: Timestamp?,
                                                                                 appendBase: (source: Node.Source, count: Int)?,
                                                                                 generation: Int, otherWriters: Bool)? in
            if let refusal = edit.refusal { throw refusal }
            guard edit.dirty, !edit.detached, edit.written || closing else { return nil }
            if let failed = edit.failedStore { throw failed }
            let bytes = try WriteError.needingSecretMemory(edit.path) { () throws(SecureMemoryError) in try edit.buffer.snapshot() }
            return (edit.path, bytes, edit.modified, edit.appendBase, edit.generation, edit.writers > (file.writable ? 1 : 0))
        }
        guard let pending else { return false }
        if BinderNaming.isScratch(ViewPath.split(pending.path).name) {
            _ = scratch.update(pending.path) { scratchFile in
                scratchFile.content = pending.bytes
                if !scratchFile.timesSet { scratchFile.modified = ViewReader.now() }
            }
            content.edit.withLock { edit in if edit.generation == pending.generation { edit.dirty = false } }
            return false
        }
        var bytes = pending.bytes.copyBytes()
        defer { secureZero(&bytes) }
        var rebased = false
        if let base = pending.appendBase, base.count <= bytes.count, let now = try? listings.node(pending.path), now.source != base.source,
           let stored = try? reader.currentContent(pending.path) {
            // Stored from elsewhere since this content read it (`OpenContent.Edit.appendBase`).
            var stored = stored.copyBytes()
            stored += bytes[base.count...]
            secureZero(&bytes)
            bytes = stored
            secureZero(&stored)
            rebased = true
        }
        do {
            try store(pending.path, content: bytes, modified: pending.modified, notingRefusal: !pending.otherWriters)
        } catch {
            if case .invalid = error, pending.otherWriters { return false }
            // The same bytes would fail the same way (a failure of the disk is not kept: a
            // later flush tries again).
            switch error {
            case .invalid, .tooLarge, .notPermitted, .nameTooLong, .exists:
                content.edit.withLock { edit in if edit.generation == pending.generation { edit.failedStore = error } }
            default: break
            }
            throw error
        }
        // Only appended content needs the version it just stored (a lookup per save otherwise).
        let storedSource = pending.appendBase == nil ? nil : (try? listings.node(pending.path))?.source
        let rebasedBuffer = rebased ? try? SecureBytes(copying: bytes) : nil
        content.edit.withLock { edit in
            // A handle that wrote while this store ran left bytes not stored yet.
            guard edit.generation == pending.generation else { return }
            edit.dirty = false
            // What is appended from now on goes after what was just stored.
            if let rebasedBuffer { edit.buffer = EditBuffer(content: rebasedBuffer) }
            if edit.appendBase != nil, let storedSource { edit.appendBase = (storedSource, edit.buffer.count) }
        }
        openFiles.dropProvisional(pending.path, onlyIf: content)
        return true
    }

    /// Closes a handle; unsaved changes are stored first (an error here is logged: the
    /// caller's `close` already had its answer from `flush`). True when a new file that was
    /// never stored vanished with it (the kernel must forget the name it was told of).
    @discardableResult
    func release(handle: UInt64) -> Bool {
        do { try flush(handle: handle, closing: true) } catch {
            logger.debug("not stored at close: \(error)")
        }
        return openFiles.remove(handle)
    }

    // MARK: - Names

    /// How long an unlinked `patient-info.md` stays out of sight waiting for its replacement.
    static let patientInfoHold = Duration.seconds(60)

    /// `unlink`: scratch files vanish from memory; new files not stored yet are dropped; records
    /// are deleted (one commit).
    ///
    /// `patient-info.md`, which every binder keeps, is not deleted: its unlink stores nothing
    /// and hides it (its children stay) until a new one is stored in its place, the mount ends
    /// or `patientInfoHold` passes. `tar -x` unlinks each file it extracts over: a backup
    /// restored into a binder must not stop there, and the record must never go from git.
    func remove(_ path: String) throws(WriteError) {
        try refuseChanges(at: path)
        let path = ViewPath.normalize(path)
        let wasOverlay = scratch.remove(path) != nil || openFiles.dropProvisional(path)
        if !wasOverlay {
            if scratch.isHidden(path) { throw .notFound(path) }
            if path == WritePlanner.patientInfo {
                guard (try? listings.node(path)) != nil else { throw .notFound(path) }
                try policy.checkChange(path)
                scratch.hold(path, for: Self.patientInfoHold)
            } else {
                try deleteStored(path)
            }
        }
        openFiles.forEach(at: path) { $0.detached = true }
    }

    /// `rename`: between scratch and real names too. A scratch file renamed onto a record is the
    /// editor's atomic save (one commit); a record renamed to a scratch name (a backup) is hidden
    /// but stays stored until something replaces it.
    func rename(_ from: String, to: String, noReplace: Bool = false) throws(WriteError) {
        try refuseChanges(at: from, to)
        let from = ViewPath.normalize(from), to = ViewPath.normalize(to)
        guard from != to else { return }
        let toName = ViewPath.split(to).name
        try BinderNaming.check(toName, in: ViewPath.split(to).parent, path: to)
        if noReplace, (try? reader.attributes(to)) != nil { throw .exists(to) }
        if scratch.file(from) == nil, let file = openFiles.provisional(from) {
            return try renameNew(file, from: from, to: to)
        }
        switch (scratch.file(from), BinderNaming.isScratch(toName)) {
        case (_?, true):
            scratch.move(from, to: to)
        case (let source?, false):
            guard source.linkTarget == nil else { throw .invalid(path: to, reason: "links are not stored") }
            var bytes = source.content.copyBytes()
            defer { secureZero(&bytes) }
            try store(to, content: bytes, modified: source.timesSet ? source.modified : nil)
            scratch.remove(from)
        case (nil, true):
            try policy.checkChange(from)  // a record moved aside as a backup is a change to it
            let content: SecureBytes
            do { content = try reader.currentContent(from) } catch {
                if case .notFound = error { throw .notFound(from) }
                if case .isDirectory = error { throw .isDirectory(from) }
                throw .reading(from, error)
            }
            if toName.hasPrefix(".fuse_hidden") {
                // libfuse's way of unlinking a file that is still open: the record is deleted
                // now; its readers keep the bytes under the hidden name until they close.
                try deleteStored(from)
            } else {
                scratch.hide(from)
            }
            scratch.put(to, ScratchFile(content: content, modified: ViewReader.now()))
        case (nil, false):
            if scratch.isHidden(from) { throw .notFound(from) }
            try renameStored(from, to: to, noReplace: noReplace)
        }
        openFiles.forEach(at: to) { $0.detached = true }  // a replaced target's writers
        openFiles.forEach(at: from) { $0.path = to }
    }

    /// `rename` of a new file that is still open and not stored yet (`mkstemp`, write, rename,
    /// close; or libfuse's `.fuse_hidden` name for one unlinked while open). Nothing is stored
    /// now: the file goes on as a new file under its new name (stored at its first flush, over
    /// the record there if any, which keeps its children as any save does), or, under a
    /// scratch name, as a scratch file in memory.
    private func renameNew(_ file: OpenContent, from: String, to: String) throws(WriteError) {
        let (toParent, toName) = ViewPath.split(to)
        if BinderNaming.isScratch(toName) {
            let content = try WriteError.needingSecretMemory(to) { () throws(SecureMemoryError) in
                try file.edit.withLock { (edit) throws(SecureMemoryError) in try edit.buffer.snapshot() }
            }
            scratch.put(to, ScratchFile(content: content, modified: ViewReader.now()))
        } else {
            let parent = try WritePlanner(binder: LiveBinder(reader: reader, snapshot: listings.snapshot), limits: limits).parent(of: toParent)
            if let current = try? listings.node(to), !scratch.isHidden(to) {
                if current.isDirectory { throw .isDirectory(to) }
                if current.isRaw { throw .readOnly(to) }
                try policy.checkChange(to)
            } else {
                try policy.checkNew(to)
                if case .folder = parent { try BinderNaming.checkStored(BinderNaming.storedName(shownAs: toName), path: to) }
            }
            scratch.remove(to)
            openFiles.forEach(at: to) { $0.detached = true }  // a replaced target's writers
        }
        openFiles.dropProvisional(from, onlyIf: file)
        openFiles.forEach(at: from) { $0.path = to }
        if !BinderNaming.isScratch(toName) { openFiles.makeProvisional(file, at: to) }
    }

    /// `symlink`: only editors' lock files (emacs `.#name`), kept in memory.
    func symlink(_ target: String, at path: String) throws(WriteError) {
        try refuseChanges(at: path)
        let path = ViewPath.normalize(path)
        let (parentPath, name) = ViewPath.split(path)
        try BinderNaming.check(name, in: parentPath, path: path)
        guard BinderNaming.isScratch(name) else { throw .invalid(path: path, reason: "symbolic links are not stored in a binder") }
        if (try? reader.attributes(path)) != nil { throw .exists(path) }
        let empty = try WriteError.needingSecretMemory(path) { () throws(SecureMemoryError) in try SecureBytes(zeroed: 0) }
        scratch.put(path, ScratchFile(content: empty, modified: ViewReader.now(), linkTarget: target))
    }

    /// `utimensat`: a record's `updated` becomes the time given, so that tools like rsync, tar
    /// and `cp -p` see the times they set. A file still open with unsaved bytes takes it with
    /// them (one commit); a closed one gets a commit of its own; scratch files keep it in
    /// memory; folders ignore it.
    func setModified(_ path: String, to time: Timestamp) throws(WriteError) {
        try refuseChanges(at: path)
        let path = ViewPath.normalize(path)
        if scratch.update(path, { $0.modified = time; $0.timesSet = true }) { return }
        var dated = false
        openFiles.forEach(at: path) { edit in
            guard edit.dirty else { return }
            edit.modified = time
            dated = true
        }
        if dated || openFiles.provisional(path) != nil { return }
        try commit { (planner) throws(WriteError) in try planner.setModified(path, to: time) }
    }
}

/// The binder as the planner sees it: the snapshot a plan is made against, the listings built
/// from it, and the pending folders.
struct LiveBinder: StoredBinder {
    let reader: ViewReader
    let snapshot: Snapshot

    var gitFolders: [String: [TreeEntry]] { snapshot.gitFolders }

    func node(_ viewPath: String) -> Node? { try? reader.listings.node(viewPath) }

    func document(_ gitPath: String) throws(WriteError) -> MedicalDocument { try reader.document(gitPath, in: snapshot) }

    func content(_ node: Node, viewPath: String) throws(WriteError) -> [UInt8] {
        do { return try reader.content(of: node, path: viewPath).copyBytes() } catch { throw .reading(viewPath, error) }
    }

    func pendingFolder(_ viewPath: String) -> Parent? { reader.scratch.pendingFolder(viewPath) }

    func names(in viewPath: String) -> [String] { ((try? reader.list(viewPath)) ?? []).map(\.name) }
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
