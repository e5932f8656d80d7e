import Foundation
import Glibc

/// The kernel's mount table (/proc/self/mountinfo).
public enum MountTable {
    public struct Entry: Sendable {
        public let mountPoint: String
        public let fsType: String
        public let source: String
    }

    public static func entries() -> [Entry] {
        guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            // id parent major:minor root mount-point options [optional fields] - fstype source super-options
            let fields = line.split(separator: " ", omittingEmptySubsequences: false)
            guard fields.count > 6, let dash = fields.firstIndex(of: "-"), dash + 2 < fields.count else { return nil }
            return Entry(mountPoint: unescape(fields[4]), fsType: String(fields[dash + 1]), source: unescape(fields[dash + 2]))
        }
    }

    /// The entry whose mount point is exactly `path` (absolute, no trailing slash), if mounted.
    public static func entry(at path: String) -> Entry? {
        let normalized = URL(fileURLWithPath: path).standardizedFileURL.path
        return entries().last { $0.mountPoint == normalized }
    }

    /// Mount points of FUSE mounts whose source (`fsname`) is `source`, e.g. `binder:health`.
    public static func mounts(ofSource source: String) -> [String] {
        entries().filter { $0.fsType.hasPrefix("fuse") && $0.source == source }.map(\.mountPoint)
    }

    /// Whether the FUSE mount at `path` has lost its daemon: its connection is gone, and every
    /// request is answered ENOTCONN. Asked with statvfs(3) (a statfs request), which always reaches the file system
    /// (a stat of the mount's root may be answered from the kernel's attribute cache).
    public static func isDisconnected(_ path: String) -> Bool {
        var info = statvfs()
        return statvfs(path, &info) != 0 && errno == ENOTCONN
    }

    /// mountinfo escapes space, tab, newline and backslash as \ooo.
    static func unescape(_ field: Substring) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(field.utf8)[...]
        while let c = utf8.first {
            if c == UInt8(ascii: "\\"), utf8.count >= 4, let v = UInt8(String(decoding: utf8.dropFirst().prefix(3), as: UTF8.self), radix: 8) {
                bytes.append(v)
                utf8 = utf8.dropFirst(4)
            } else {
                bytes.append(c)
                utf8 = utf8.dropFirst()
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
