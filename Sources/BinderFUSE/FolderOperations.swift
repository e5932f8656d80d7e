import BinderCore
internal import CFuse3
import Glibc

/// statfs and extended attributes: answered at once (or by the kernel) so tools never wait on them.
enum FolderOperations {
    static func install(into ops: inout fuse_operations) {
        ops.statfs = { _, stats in
            guard let stats else { return -EINVAL }
            memset(stats, 0, MemoryLayout<statvfs>.size)
            stats.pointee.f_bsize = 4096
            stats.pointee.f_frsize = 4096
            stats.pointee.f_namemax = UInt(BinderNaming.maximumBytes)
            let used = UInt(FileSystemContext.current.view.statistics.cachedBytes / 4096)
            stats.pointee.f_blocks = fsblkcnt_t(used + 1)
            return 0
        }

        // No extended attributes. The list is answered, empty (rsync -X, tar --xattrs and
        // getfattr ask for it and take "none" quietly, where "not supported" is an error to
        // rsync). getxattr is left out: libfuse answers ENOSYS, after which the kernel answers
        // EOPNOTSUPP itself for the rest of the mount. `ls -l` asks two attributes of every
        // file (its SELinux label and ACL): answered here they were two round trips a file,
        // two thirds of a warm `ls -l`'s requests.
        ops.listxattr = { _, _, _ in 0 }
    }
}
