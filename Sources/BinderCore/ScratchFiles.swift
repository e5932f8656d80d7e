import BinderCrypto
import Synchronization

/// What exists only in memory, never committed: editors' temporary, swap, backup and lock
/// files; records hidden behind an editor's backup rename or a held unlink; and `.children`
/// folders made before anything was written into them.
final class ScratchFiles: Sendable {
    private struct Contents: ~Copyable {
        var files: [String: ScratchFile] = [:]
        /// Records renamed to a scratch name (an editor's backup): hidden, still stored.
        var hidden: Set<String> = []
        /// Records whose unlink is held (`patient-info.md`, which every binder keeps): hidden,
        /// still stored, until a file is stored in their place or the time given passes.
        var held: [String: ContinuousClock.Instant] = [:]

        /// Forgets the holds whose time has passed: the record shows again.
        mutating func expireHolds() {
            guard !held.isEmpty else { return }
            let now = ContinuousClock.now
            held = held.filter { $0.value > now }
        }
        /// `X.children` folders made with mkdir, not yet holding a child (nothing in git).
        var pendingFolders: [String: Parent] = [:]
    }

    /// Guards the scratch files, the hidden records and the pending folders.
    private let contents = Mutex(Contents())

    init() {}

    func file(_ path: String) -> ScratchFile? { contents.withLock { $0.files[path] } }

    func put(_ path: String, _ file: ScratchFile) { contents.withLock { $0.files[path] = file } }

    /// The scratch files' paths (links excluded), sorted.
    var filePaths: [String] { contents.withLock { $0.files.filter { $0.value.linkTarget == nil }.keys.sorted() } }

    @discardableResult
    func remove(_ path: String) -> ScratchFile? { contents.withLock { $0.files.removeValue(forKey: path) } }

    /// Renames a scratch file; the target is no longer a hidden record.
    func move(_ from: String, to: String) {
        contents.withLock { contents in
            contents.files[to] = contents.files.removeValue(forKey: from)
            contents.hidden.remove(to)
        }
    }

    /// Changes a scratch file in place; false when there is none at `path`.
    func update(_ path: String, _ body: (inout ScratchFile) -> Void) -> Bool {
        contents.withLock { contents in
            guard var file = contents.files[path] else { return false }
            body(&file)
            contents.files[path] = file
            return true
        }
    }

    var paths: [String] { contents.withLock { Array($0.files.keys) } }

    func isHidden(_ path: String) -> Bool {
        contents.withLock { contents in
            contents.expireHolds()
            return contents.hidden.contains(path) || contents.held[path] != nil
        }
    }

    func hide(_ path: String) { contents.withLock { _ = $0.hidden.insert(path) } }

    /// Hides a stored record for `duration`, or until a file is stored at `path` (`stored`).
    func hold(_ path: String, for duration: Duration) { contents.withLock { $0.held[path] = .now + duration } }

    var hidden: Set<String> {
        contents.withLock { contents in
            contents.expireHolds()
            return contents.held.isEmpty ? contents.hidden : contents.hidden.union(contents.held.keys)
        }
    }

    func pendingFolder(_ path: String) -> Parent? { contents.withLock { $0.pendingFolders[path] } }
    func addPendingFolder(_ path: String, _ parent: Parent) { contents.withLock { $0.pendingFolders[path] = parent } }
    @discardableResult
    func removePendingFolder(_ path: String) -> Bool { contents.withLock { $0.pendingFolders.removeValue(forKey: path) != nil } }
    var pendingFolders: [String] { contents.withLock { Array($0.pendingFolders.keys) } }

    /// A file was stored under `path`: the pending folders it was written into (at any depth)
    /// now exist in git.
    func stored(_ path: String) {
        contents.withLock { contents in
            for folder in ViewPath.ancestors(of: path) { contents.pendingFolders.removeValue(forKey: folder) }
            contents.hidden.remove(path)
            contents.held.removeValue(forKey: path)
        }
    }

    func removeAll() {
        contents.withLock { contents in
            contents.files.removeAll()
            contents.hidden.removeAll()
            contents.held.removeAll()
            contents.pendingFolders.removeAll()
        }
    }
}

/// An editor's temporary, swap, backup or lock file: kept in memory, never committed.
struct ScratchFile: Sendable {
    var content: SecureBytes
    var modified: Timestamp
    /// Emacs makes its lock (`.#name`) as a symbolic link.
    var linkTarget: String?
    /// Times set explicitly (rsync sets them on its temporary file before renaming it): they
    /// become the record's `updated` when the file is renamed onto a record.
    var timesSet = false
}
