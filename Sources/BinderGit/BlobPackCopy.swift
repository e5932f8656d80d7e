import Foundation
import Glibc
internal import BinderCrypto

/// A fold's blobs, copied into a pack of their own byte for byte from the packs being folded,
/// where libgit2's pack builder would inflate each one, search it for a delta against ten
/// others, and deflate it again. A binder's blobs are ciphertext: no delta is ever found
/// (searching for one was half a fold's time, the attachments' megabytes the most), and
/// compressing them again gains nothing. Trees and commits, which do delta well, still go
/// through the pack builder (`GitRepository.fold`).
///
/// Only whole (undeltified) blob entries are copied; a blob stored as a delta goes to the pack
/// builder. Each entry's bytes are checked against the CRC-32 its source index holds as they
/// are copied: a damaged source fails the fold before anything is removed.
struct BlobPackCopy {
    /// A blob entry of a source pack: where its bytes are, and what its index says of them.
    struct Source {
        let id: ObjectID
        let pack: String
        let offset: UInt64
        let length: Int
        let crc: UInt32
    }

    /// Git's pack type number of a whole blob.
    static let blobType: UInt8 = 3

    private(set) var sources: [Source] = []
    private var ids: Set<ObjectID> = []

    var isEmpty: Bool { sources.isEmpty }

    /// Takes `entry` of the pack at `pack` (its `length` bytes) when it is a whole blob not
    /// taken yet; false (for the pack builder) otherwise. `typeByte` is the entry's first byte.
    mutating func take(_ entry: PackOrder.IndexEntry, length: Int, typeByte: UInt8, pack: String) -> Bool {
        guard (typeByte >> 4) & 0x07 == Self.blobType, length > 0 else { return false }
        guard ids.insert(entry.id).inserted else { return true }
        sources.append(Source(id: entry.id, pack: pack, offset: entry.offset, length: length, crc: entry.crc))
        return true
    }

    /// Sorts each pack index's entries into those `copy` takes and the rest (returned, in pack
    /// order, for the pack builder). Nil when the pack or its index cannot be read as such.
    static func split(index: String, into copy: inout BlobPackCopy) -> [ObjectID]? {
        let pack = String(index.dropLast(4)) + ".pack"
        guard let entries = PackOrder.entriesInPackOrder(ofIndex: index) else { return nil }
        let fd = open(pack, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_size >= 32 else { return nil }
        let end = UInt64(info.st_size) - 20  // the pack's checksum follows the last entry
        // Read whole before anything is taken: a pack that turns out malformed is left to the
        // builder entirely.
        var read: [(entry: PackOrder.IndexEntry, length: Int, typeByte: UInt8)] = []
        read.reserveCapacity(entries.count)
        for (i, entry) in entries.enumerated() {
            let next = i + 1 < entries.count ? entries[i + 1].offset : end
            guard entry.offset >= 12, next > entry.offset, next <= end else { return nil }
            var byte: UInt8 = 0
            guard pread(fd, &byte, 1, off_t(entry.offset)) == 1 else { return nil }
            read.append((entry, Int(next - entry.offset), byte))
        }
        return read.filter { !copy.take($0.entry, length: $0.length, typeByte: $0.typeByte, pack: pack) }.map(\.entry.id)
    }

    /// The blobs taken, written as a pack under a temporary name in `directory` (fsynced), with
    /// its index's bytes: `PackWriter.install` puts both in place. Not in place yet, the pack
    /// is no fold's to pick while the rest of this fold is written.
    struct Prepared {
        let packTemporary: String
        let index: [UInt8]
        let checksum: [UInt8]

        /// Renames the pack into place with its index (see `PackWriter.install`); returns the
        /// index's path.
        func install(in directory: String) throws(GitError) -> String {
            try PackWriter.install(packTemporary: packTemporary, index: index, checksum: checksum, in: directory)
        }

        /// Removes the temporary pack (the fold failed).
        func discard() { unlink(packTemporary) }
    }

    func prepare(in directory: String) throws(GitError) -> Prepared {
        let (fd, path) = try PackWriter.makeTemporary(in: directory, prefix: "tmp_pack_")
        let written: (entries: [PackWriter.IndexedObject], checksum: [UInt8])
        do throws(GitError) {
            written = try writeBody(to: fd)
            guard fchmod(fd, 0o444) == 0, fsync(fd) == 0 else { throw PackWriter.failure("write '\(path)'") }
        } catch {
            close(fd)
            unlink(path)
            throw error
        }
        guard close(fd) == 0 else {
            unlink(path)
            throw PackWriter.failure("write '\(path)'")
        }
        return Prepared(packTemporary: path, index: PackWriter.index(of: written.entries, packChecksum: written.checksum),
                        checksum: written.checksum)
    }

    /// The header, each source entry's bytes (checked against its CRC-32), then the SHA-1 of
    /// all that. Returns the new entries (id, offset, CRC) and the checksum.
    private func writeBody(to fd: Int32) throws(GitError) -> ([PackWriter.IndexedObject], [UInt8]) {
        var writer = PackFileWriter(fd: fd)
        try writer.append(PackWriter.header(objects: sources.count))
        var entries: [PackWriter.IndexedObject] = []
        entries.reserveCapacity(sources.count)
        var openPacks: [String: Int32] = [:]
        defer { for fd in openPacks.values { close(fd) } }
        for source in sources {
            let input: Int32
            if let known = openPacks[source.pack] { input = known } else {
                input = open(source.pack, O_RDONLY | O_CLOEXEC)
                guard input >= 0 else { throw PackWriter.failure("open '\(source.pack)'") }
                openPacks[source.pack] = input
            }
            let offset = writer.written
            let crc = try writer.copy(from: input, at: source.offset, length: source.length)
            guard crc == source.crc else {
                throw GitError.failed(operation: "fold packs", code: .other(-1),
                                      message: "object \(source.id.hex) in '\(source.pack)' does not match its index's CRC-32", posixErrno: EIO)
            }
            entries.append((source.id, offset, crc))
        }
        let checksum = try writer.checksum()
        try writer.append(checksum)
        return (entries, checksum)
    }
}

/// Appends to a new pack file, keeping the count of bytes written.
private struct PackFileWriter {
    let fd: Int32
    private(set) var written = 0
    private var buffer = [UInt8](repeating: 0, count: 1 << 20)

    init(fd: Int32) { self.fd = fd }

    mutating func append(_ bytes: [UInt8]) throws(GitError) {
        let ok = bytes.withUnsafeBytes { PackWriter.writeAll($0, to: fd) }
        guard ok else { throw PackWriter.failure("write a pack") }
        written += bytes.count
    }

    /// Copies `length` bytes of `input` from `offset`; returns their CRC-32.
    mutating func copy(from input: Int32, at offset: UInt64, length: Int) throws(GitError) -> UInt32 {
        var crc: UInt32 = 0
        var done = 0
        while done < length {
            let want = min(buffer.count, length - done)
            let got = buffer.withUnsafeMutableBytes { pread(input, $0.baseAddress!, want, off_t(offset) + off_t(done)) }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { throw PackWriter.failure("read a pack") }
            let ok = buffer.withUnsafeBytes { chunk -> Bool in
                let part = UnsafeRawBufferPointer(rebasing: chunk[0..<got])
                crc = Checksum.crc32(part, continuing: crc)
                return PackWriter.writeAll(part, to: fd)
            }
            guard ok else { throw PackWriter.failure("write a pack") }
            done += got
        }
        written += length
        return crc
    }

    /// The SHA-1 of everything written so far (read back through a mapping of the file).
    func checksum() throws(GitError) -> [UInt8] {
        guard let base = mmap(nil, written, PROT_READ, MAP_SHARED, fd, 0), base != MAP_FAILED else {
            throw PackWriter.failure("read back a pack")
        }
        defer { munmap(base, written) }
        return sha1(UnsafeRawBufferPointer(start: base, count: written))
    }
}
