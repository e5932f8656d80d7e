import Foundation
import Glibc
internal import CBinderZlib

/// Loose objects (`objects/xx/…`, as stock git writes them) checked before libgit2 reads any:
/// each must be a zlib stream that ends, holding a header (`blob 123\0`) and exactly the bytes
/// it declares. libgit2 1.5 inflates a loose object cut short (a crash while it was written,
/// a disk that lost its end) in a loop that never ends: the mount's request, and every one
/// after it, waited on the repository's lock for good.
public enum LooseObjects {
    /// The loose objects of `gitDirectory` that are not whole (their paths, relative to
    /// `objects/`), sorted; each is read and inflated once, its output thrown away.
    public static func damaged(gitDirectory: String) -> [String] {
        let objects = gitDirectory + "/objects"
        let fm = FileManager.default
        var found: [String] = []
        for folder in ((try? fm.contentsOfDirectory(atPath: objects)) ?? []).sorted()
        where folder.utf8.count == 2 && folder.utf8.allSatisfy(isHex) {
            for name in ((try? fm.contentsOfDirectory(atPath: objects + "/" + folder)) ?? []).sorted()
            where name.utf8.count == 38 && name.utf8.allSatisfy(isHex) {
                if !isWhole(objects + "/" + folder + "/" + name) { found.append(folder + "/" + name) }
            }
        }
        return found
    }

    private static func isHex(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
    }

    /// Whether the file is one whole loose object: its stream ends, and it declares its size.
    static func isWhole(_ path: String) -> Bool {
        guard let compressed = try? RegularFile.read(path, limit: Int(Int32.max)) else { return false }
        var stream = z_stream()
        guard binder_inflate_init(&stream) == Z_OK else { return false }
        defer { inflateEnd(&stream) }
        var output = [UInt8](repeating: 0, count: 64 * 1024)
        var header: [UInt8] = []
        var total = 0
        return compressed.withUnsafeBytes { input -> Bool in
            stream.next_in = UnsafeMutablePointer(mutating: input.bindMemory(to: UInt8.self).baseAddress)
            stream.avail_in = UInt32(input.count)
            while true {
                let (status, produced) = output.withUnsafeMutableBufferPointer { out -> (Int32, Int) in
                    stream.next_out = out.baseAddress
                    stream.avail_out = UInt32(out.count)
                    let status = inflate(&stream, Z_NO_FLUSH)
                    return (status, out.count - Int(stream.avail_out))
                }
                if header.count < 64, !header.contains(0) { header += output.prefix(min(produced, 64 - header.count)) }
                total += produced
                switch status {
                case Z_STREAM_END:
                    // "type size\0", then exactly `size` bytes.
                    guard let nul = header.firstIndex(of: 0), let space = header.firstIndex(of: UInt8(ascii: " ")), space < nul,
                          let size = Int(String(decoding: header[(space + 1)..<nul], as: UTF8.self)) else { return false }
                    return total == nul + 1 + size
                case Z_OK:
                    // Input left and room made: go on. Neither (a stream cut short): not whole.
                    if produced == 0 && stream.avail_in == 0 { return false }
                default:
                    return false
                }
            }
        }
    }

    /// Moves the damaged loose objects (`damaged`) out of git's sight, into
    /// `binder/damaged-objects/` (kept, not deleted: what is left of them may matter to
    /// someone): libgit2 then finds them missing, and a file of the view that needs one fails
    /// with EIO instead of hanging. The caller holds the binder's writer lock. Their paths.
    public static func moveDamagedAside(gitDirectory: String) -> [String] {
        let damaged = damaged(gitDirectory: gitDirectory)
        guard !damaged.isEmpty else { return [] }
        let aside = gitDirectory + "/binder/damaged-objects"
        try? FileManager.default.createDirectory(atPath: aside, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return damaged.filter { relative in
            rename(gitDirectory + "/objects/" + relative, aside + "/" + relative.replacingOccurrences(of: "/", with: "")) == 0
        }
    }
}
