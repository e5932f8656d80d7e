import BinderCore
internal import CFuse3
import Glibc

/// statfs and extended attributes: answered at once so tools never wait on them.
enum FolderOperations {
    static func install(into ops: inout fuse_operations) {
        ops.statfs = { _, stats in
            guard let stats else { return -EINVAL }
            memset(stats, 0, MemoryLayout<statvfs>.size)
            stats.pointee.f_bsize = 4096
            stats.pointee.f_frsize = 4096
            stats.pointee.f_namemax = 255
            let used = UInt(FileSystemContext.current.view.statistics.cachedBytes / 4096)
            stats.pointee.f_blocks = fsblkcnt_t(used + 1)
            return 0
        }

        // No extended attributes: answer at once instead of ENOSYS, which some tools retry.
        ops.getxattr = { _, _, _, _ in -ENODATA }
        ops.listxattr = { _, _, _ in 0 }
    }
}
