import BinderCore
internal import CFuse3
import Dispatch
import Glibc
import Logging
import Synchronization
import SystemPackage

/// What every FUSE callback reaches through `fuse_get_context()->private_data`: the view and
/// the logger. Retained once by `FUSEMount` (`Unmanaged.passRetained`), borrowed per call.
final class FileSystemContext: Sendable {
    let view: BinderView
    let logger: Logger
    let readOnly: Bool
    let uid: uid_t
    let gid: gid_t
    /// When the last request came (for `--idle`).
    let activity: RequestActivity
    /// What each open folder handle lists (`readdir` by offset).
    let openFolders = OpenFolders()

    /// The libfuse handle (as a bit pattern), set once after `fuse_new`; used to tell the
    /// kernel to drop what it cached of a file whose stored form differs from what was written.
    private let fuseHandle = Mutex<UInt>(0)
    /// Invalidations run here, after the callback that caused them has returned: asking the
    /// kernel to invalidate an inode from inside an operation on it can deadlock.
    private let invalidations = DispatchQueue(label: "binder.invalidate")
    /// The names under `.binder` are dropped on a queue of their own: after a listing of
    /// 100,000 links they take the better part of a second, and a saved file's invalidation
    /// (its stored size) must not wait behind them.
    private let viewInvalidations = DispatchQueue(label: "binder.invalidate-views")
    /// Paths stored (or changed by sync) since they were last opened: the next open must not
    /// keep the kernel's pages, which may hold what was written rather than what is stored.
    private let changedPaths = Mutex<Set<String>>([])
    /// The names under `.binder` the kernel may hold, dropped at each change of the commit shown.
    let controlNames = ControlNames()

    init(view: BinderView, logger: Logger, readOnly: Bool, activity: RequestActivity) {
        self.view = view
        self.activity = activity
        self.logger = logger
        self.readOnly = readOnly
        uid = getuid()
        gid = getgid()
    }

    /// The mount point, set once with the handle: where `forget` finds a folder's node id.
    private let mountpoint = Mutex<String>("")

    func attach(_ fuse: OpaquePointer, mountpoint: String) {
        fuseHandle.withLock { $0 = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(fuse))) }
        // As the kernel writes it in /proc (`mountedPath`): absolute, links resolved.
        let resolved = realpath(mountpoint, nil).map { path in
            defer { free(path) }
            return String(cString: path)
        }
        self.mountpoint.withLock { $0 = resolved ?? mountpoint }
    }

    /// The absolute path of `path` (a FUSE path: "/visits/x.md") as processes outside see it.
    func mountedPath(_ path: String) -> String {
        let root = mountpoint.withLock { $0 }
        return root == "/" ? path : root + path
    }

    /// A name the kernel was told of that no longer exists (a new file whose save was refused):
    /// it must forget the name, not the file's attributes: with attributes dropped and the name
    /// kept, the next create of that name would fail its permission check ("No such file").
    /// Runs after the callback.
    func forget(_ path: String) {
        changedPaths.withLock { _ = $0.insert(path) }
        let handle = fuseHandle.withLock { $0 }
        let root = mountpoint.withLock { $0 }
        guard handle != 0, !root.isEmpty else { return }
        // FUSE paths are absolute ("/visits/new.md"): the folder ("/visits", or "" for the root)
        // and the name.
        guard path.utf8.contains(UInt8(ascii: "/")) else { return }
        let (folder, name) = ViewPath.split(path)
        invalidations.async {
            guard let fuse = OpaquePointer(bitPattern: handle), !name.isEmpty else { return }
            Self.forgetEntries([name], inFolder: folder, root: root, fuse)
        }
    }

    /// Tells the kernel to forget `names` in `folder` (a FUSE path). From an invalidation queue.
    private static func forgetEntries(_ names: some Sequence<String>, inFolder folder: String, root: String, _ fuse: OpaquePointer) {
        var info = stat()
        // A stat of our own folder is an ordinary request, served by another worker thread;
        // with use_ino off, a folder's st_ino is its node id.
        guard lstat(root + folder, &info) == 0 else { return }
        for name in names { _ = binder_fuse_forget_entry(fuse, UInt(info.st_ino), name) }
    }

    /// True once after each change of `path`: that open drops the kernel's pages and reads
    /// afresh; later opens may keep what it read (until the next change). Asked on every
    /// read-only open: with nothing changed, the path is not hashed.
    func takeChanged(_ path: String) -> Bool { changedPaths.withLock { !$0.isEmpty && $0.remove(path) != nil } }

    /// After a store: the kernel's pages and attributes of `path` are stale (the stored form
    /// has a new `updated`, normalised front matter).
    func changed(_ path: String) {
        changedPaths.withLock { _ = $0.insert(path) }
        let handle = fuseHandle.withLock { $0 }
        guard handle != 0 else { return }
        invalidations.async {
            guard let fuse = OpaquePointer(bitPattern: handle) else { return }
            _ = fuse_invalidate_path(fuse, path)
            // The views in `.binder/` are worked out of the commit shown: what the kernel
            // holds of them (names looked up, attributes) goes with it.
            _ = fuse_invalidate_path(fuse, "/" + BinderView.controlDirectory)
        }
    }

    /// The commit shown changed (this mount's commit or one from elsewhere), and with it what
    /// `.binder` shows: the kernel drops the attributes of every name there it was given since
    /// the last change (the next `stat` asks again: a name gone is gone), and forgets the names
    /// it was told are missing (one that came is found). Called with the commit's write lock
    /// held; like every invalidation the drops are sent from a queue (`viewInvalidations`),
    /// never from the thread serving a request: a drop may wait for a request in flight, which
    /// needs a worker thread of its own.
    func shownCommitChanged() {
        let known = controlNames.take()
        guard !known.isEmpty else { return }
        let handle = fuseHandle.withLock { $0 }
        let root = mountpoint.withLock { $0 }
        guard handle != 0, !root.isEmpty else { return }
        viewInvalidations.async {
            guard let fuse = OpaquePointer(bitPattern: handle) else { return }
            for path in known.lookedUp { _ = fuse_invalidate_path(fuse, path) }
            for (folder, names) in known.listed {
                for name in names { _ = fuse_invalidate_path(fuse, folder + "/" + name) }
            }
            for (folder, names) in known.missing { Self.forgetEntries(names, inFolder: folder, root: root, fuse) }
        }
    }

    /// A read-only mount answers OPEN and FLUSH with ENOSYS: the kernel then opens files
    /// itself, keeps their pages, and reads them by path (`ReadOperations`).
    var opensWithoutAsking: Bool { readOnly }

    /// Drops the kernel's pages and attributes of a `.binder` file whose content changes by
    /// itself, after the read that filled them returned (a read-only mount keeps pages).
    func dropCachedControlFile(_ path: String) {
        let handle = fuseHandle.withLock { $0 }
        guard handle != 0 else { return }
        invalidations.async {
            guard let fuse = OpaquePointer(bitPattern: handle) else { return }
            _ = fuse_invalidate_path(fuse, path)
        }
    }

    /// The context of the current FUSE request (every operation starts here, so this is
    /// also where the request is counted as activity).
    static var current: FileSystemContext {
        let context = Unmanaged<FileSystemContext>.fromOpaque(fuse_get_context()!.pointee.private_data!).takeUnretainedValue()
        context.activity.touch()
        return context
    }

    /// The one mapping of errors to a negative errno: typed errors carry theirs from where they
    /// arose. The view has already logged what a person needs to know (refusals with their
    /// reason, corrupt data, storage failures); anything untyped is a bug, logged here as EIO.
    func errno(_ error: any Error) -> Int32 {
        switch error {
        case let error as WriteError: return -error.errno.rawValue
        case let error as ViewError: return -error.errno.rawValue
        default:
            logger.error("unexpected error: \(error)")
            return -EIO
        }
    }

    func fill(_ stat: UnsafeMutablePointer<stat>, _ attributes: NodeAttributes) {
        memset(stat, 0, MemoryLayout<Glibc.stat>.size)
        switch attributes.kind {
        case .directory:
            stat.pointee.st_mode = S_IFDIR | (attributes.readOnly ? 0o500 : 0o700)
            stat.pointee.st_nlink = 2
        case .file:
            stat.pointee.st_mode = S_IFREG | (attributes.readOnly || readOnly ? 0o400 : 0o600)
            stat.pointee.st_nlink = 1
        case .symlink:
            stat.pointee.st_mode = S_IFLNK | 0o777
            stat.pointee.st_nlink = 1
        }
        stat.pointee.st_uid = uid
        stat.pointee.st_gid = gid
        stat.pointee.st_size = off_t(attributes.size)
        stat.pointee.st_blksize = 4096
        stat.pointee.st_blocks = blkcnt_t((attributes.size + 511) / 512)
        let time = timespec(tv_sec: Int(attributes.modified.seconds), tv_nsec: Int(attributes.modified.nanoseconds))
        stat.pointee.st_mtim = time
        stat.pointee.st_ctim = time
        stat.pointee.st_atim = time
    }
}
