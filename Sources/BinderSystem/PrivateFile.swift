import Foundation
import Glibc

/// Files only the user may read (keys, tokens, the server's signing secret): created 0600
/// before any byte is written, fsynced, then renamed over the old one, so a reader sees the old
/// file or the new one, never a part.
public enum PrivateFile {
    public struct WriteError: Error, CustomStringConvertible {
        public let path: String
        public let reason: String
        public var description: String { "cannot write \(path): \(reason)" }
    }

    public static func write(_ path: String, bytes: UnsafeRawBufferPointer) throws(WriteError) {
        let temporary = path + ".tmp-\(getpid())"
        // Made afresh: a file (or link) left under that name by an earlier process of this pid
        // would keep its own permissions, or lead elsewhere.
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw WriteError(path: path, reason: String(cString: strerror(errno))) }
        let written = bytes.isEmpty ? 0 : Glibc.write(fd, bytes.baseAddress, bytes.count)
        let synced = fsync(fd)
        close(fd)
        guard written == bytes.count, synced == 0, rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw WriteError(path: path, reason: reason)
        }
    }

    public static func write(_ path: String, bytes: [UInt8]) throws(WriteError) {
        var failure: WriteError?
        bytes.withUnsafeBytes { b in
            do throws(WriteError) { try write(path, bytes: b) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    public static func write(_ path: String, contents: String) throws(WriteError) {
        try write(path, bytes: Array(contents.utf8))
    }
}
