import BinderCore
internal import CFuse3
import Dispatch
import Glibc
import Logging
import Synchronization

/// What every FUSE callback reaches through `fuse_get_context()->private_data`: the view and
/// the logger. Retained once by `FUSEMount` (`Unmanaged.passRetained`), borrowed per call.
final class FileSystemContext: Sendable {
    let view: BinderView
    let logger: Logger
    let readOnly: Bool
    let uid: uid_t
    let gid: gid_t

    /// The libfuse handle (as a bit pattern), set once after `fuse_new`; used to tell the
    /// kernel to drop what it cached of a file whose stored form differs from what was written.
    private let fuseHandle = Mutex<UInt>(0)
    /// Invalidations run here, after the callback that caused them has returned: asking the
    /// kernel to invalidate an inode from inside an operation on it can deadlock.
    private let invalidations = DispatchQueue(label: "binder.invalidate")
    /// Paths stored (or changed by sync) since they were last opened: the next open must not
    /// keep the kernel's pages, which may hold what was written rather than what is stored.
    private let changedPaths = Mutex<Set<String>>([])

    init(view: BinderView, logger: Logger, readOnly: Bool) {
        self.view = view
        self.logger = logger
        self.readOnly = readOnly
        uid = getuid()
        gid = getgid()
    }

    func attach(_ fuse: OpaquePointer) { fuseHandle.withLock { $0 = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(fuse))) } }

    /// True once after each change of `path`: that open drops the kernel's pages and reads
    /// afresh; later opens may keep what it read (until the next change).
    func takeChanged(_ path: String) -> Bool { changedPaths.withLock { $0.remove(path) != nil } }

    /// After a store: the kernel's pages and attributes of `path` are stale (the stored form
    /// has a new `updated`, normalised front matter).
    func changed(_ path: String) {
        changedPaths.withLock { _ = $0.insert(path) }
        let handle = fuseHandle.withLock { $0 }
        guard handle != 0 else { return }
        invalidations.async {
            guard let fuse = OpaquePointer(bitPattern: handle) else { return }
            _ = fuse_invalidate_path(fuse, path)
        }
    }

    /// The context of the current FUSE request.
    static var current: FileSystemContext {
        Unmanaged<FileSystemContext>.fromOpaque(fuse_get_context()!.pointee.private_data!).takeUnretainedValue()
    }

    /// Maps a view error to a negative errno; corrupt data is logged (once, by the view) as EIO.
    func errno(_ error: any Error) -> Int32 {
        if let error = error as? WriteError { return writeErrno(error) }
        guard let error = error as? ViewError else {
            logger.error("unexpected error: \(error)")
            return -EIO
        }
        switch error {
        case .notFound: return -ENOENT
        case .notDirectory: return -ENOTDIR
        case .isDirectory: return -EISDIR
        case .corrupt, .storage: return -EIO
        case .badHandle: return -EBADF
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

extension FileSystemContext {
    /// Maps a refused change to an errno; the reason goes to the log (paths and reasons only).
    func writeErrno(_ error: WriteError) -> Int32 {
        switch error {
        case .notFound: return -ENOENT
        case .exists: return -EEXIST
        case .notEmpty: return -ENOTEMPTY
        case .isDirectory: return -EISDIR
        case .notDirectory: return -ENOTDIR
        case .readOnly: return -EACCES
        case .invalid:
            logger.error("refused: \(error)")
            return -EINVAL
        case .tooLarge:
            logger.error("refused: \(error)")
            return -EFBIG
        case .corrupt, .storage:
            logger.error("not stored: \(error)")
            return error.description.contains("No space") ? -ENOSPC : -EIO
        }
    }

    /// At flush/fsync/close, content that cannot be stored is an I/O error for the caller.
    func storeErrno(_ error: any Error) -> Int32 {
        guard let error = error as? WriteError else { return self.errno(error) }
        switch error {
        case .invalid:
            logger.error("not stored: \(error)")
            return -EIO
        default:
            return writeErrno(error)
        }
    }
}
