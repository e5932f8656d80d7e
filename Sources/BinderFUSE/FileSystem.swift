import BinderCore
internal import CFuse3
import Glibc
import Logging

/// What every FUSE callback reaches through `fuse_get_context()->private_data`: the view and
/// the logger. Retained once by `FUSEMount` (`Unmanaged.passRetained`), borrowed per call.
final class FileSystemContext: Sendable {
    let view: BinderView
    let logger: Logger
    let readOnly: Bool
    let uid: uid_t
    let gid: gid_t

    init(view: BinderView, logger: Logger, readOnly: Bool) {
        self.view = view
        self.logger = logger
        self.readOnly = readOnly
        uid = getuid()
        gid = getgid()
    }

    /// The context of the current FUSE request.
    static var current: FileSystemContext {
        Unmanaged<FileSystemContext>.fromOpaque(fuse_get_context()!.pointee.private_data!).takeUnretainedValue()
    }

    /// Maps a view error to a negative errno; corrupt data is logged (once, by the view) as EIO.
    func errno(_ error: any Error) -> Int32 {
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
