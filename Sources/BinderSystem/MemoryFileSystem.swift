internal import CLinux
import Glibc

/// Whether a folder is on a file system held in memory only (tmpfs, ramfs), where a secret may
/// be written as a file (`binder share --qr-png`: the QR code holds a private key).
public enum MemoryFileSystem {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// TMPFS_MAGIC and RAMFS_MAGIC (linux/magic.h).
    static let types: Set<Int> = [0x0102_1994, 0x8584_58f6]

    public static func holds(_ folder: String) throws(Failure) -> Bool {
        let type = binder_fs_type(folder)
        guard type != -1 else { throw Failure(description: "\(folder): \(String(cString: strerror(errno)))") }
        return types.contains(Int(type))
    }
}
