import Glibc

/// Reads a file binder keeps in a repository (the listing index, the sync record, a pack's
/// index) only if it is a regular file: opened without blocking and without following a link,
/// then checked. A FIFO put in its place would block `open(2)` until something wrote to it, and
/// with it every request that waits for the file (a mount that never answered `ls` again).
public enum RegularFile {
    public enum Failure: Error, Equatable {
        /// Nothing at the path.
        case missing
        /// Not a regular file (a FIFO, a device, a folder, a link), or `open`/`read` failed.
        case unreadable(String)
        /// Larger than the limit given (its size).
        case tooLarge(Int)
    }

    /// The file's bytes, at most `limit` of them.
    public static func read(_ path: String, limit: Int) throws(Failure) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW)
        guard fd >= 0 else {
            if errno == ENOENT { throw .missing }
            throw .unreadable(errno == ELOOP ? "a symbolic link" : String(cString: strerror(errno)))
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .unreadable(String(cString: strerror(errno))) }
        guard info.st_mode & S_IFMT == S_IFREG else { throw .unreadable("not a regular file") }
        guard Int(info.st_size) <= limit else { throw .tooLarge(Int(info.st_size)) }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            done += n
        }
        // Shortened in place (a file that shrank while read): a copy would double the peak.
        if done < bytes.count { bytes.removeSubrange(done...) }
        return bytes
    }
}
