import Glibc

/// Whether the process that sent a request still holds a descriptor on a file of the mount,
/// read from `/proc/PID/fd`. FLUSH comes at every `close(2)` and says nothing of the
/// descriptors left: a shell's `> file` opens the file (O_TRUNC), duplicates the descriptor
/// onto its output and closes the first before anything is written. That close must not store
/// an emptied record (a commit of nothing, then one of the bytes), but the close of the last
/// descriptor must store even when nothing was written (`: > file`, `touch new.md`): PRODUCT.md
/// promises the change is committed when `close()` returns, and the RELEASE that follows the
/// last close is sent after it has returned.
///
/// The kernel takes a descriptor out of the process's table before it sends that
/// descriptor's FLUSH, so any link here to the file is another descriptor. A process that
/// sees the mount under another path (another mount namespace, a chroot) finds no link: its
/// close stores, which at worst adds the commit of nothing that the check avoids.
enum CallerDescriptors {
    /// Whether process `pid` has a descriptor whose path is `path` (absolute, as the process
    /// sees it).
    static func holds(_ path: String, process pid: pid_t) -> Bool {
        guard pid > 0, let folder = opendir("/proc/\(pid)/fd") else { return false }
        defer { closedir(folder) }
        let wanted = Array(path.utf8CString.dropLast())  // without its NUL
        var target = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        while let entry = readdir(folder) {
            let length = withUnsafePointer(to: &entry.pointee.d_name) { name in
                name.withMemoryRebound(to: CChar.self, capacity: 256) { name in
                    target.withUnsafeMutableBufferPointer { buffer in
                        readlinkat(dirfd(folder), name, buffer.baseAddress!, buffer.count)
                    }
                }
            }
            if length == wanted.count, target[..<length].elementsEqual(wanted) { return true }
        }
        return false
    }
}
