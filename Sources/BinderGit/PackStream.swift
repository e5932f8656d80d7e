import Glibc
internal import BinderCrypto

/// A pack file written front to back through one small buffer, hashed as it goes: the pack's
/// SHA-1 (its trailer, and its name) and each entry's CRC-32 (which its index keeps). The pack
/// is never whole in memory. A save's pack holds its folder's whole tree (7 MB in a folder of
/// 100,000 records), and building it in a buffer of its own cost a fresh mapping, its page
/// faults and a copy on every save (docs/BENCHMARKS.md).
struct PackStream {
    let fd: Int32
    /// Bytes appended so far: the offset in the file of the next one.
    private(set) var written = 0
    /// The bytes not written yet: the first `buffered` of `buffer`. Not zeroed first: only
    /// bytes appended are ever read, and zeroing 256 KiB took 0.26 M instructions of every
    /// save (2.5% of one at 10,000 records; each save makes a stream).
    private var buffer = [UInt8](unsafeUninitializedCapacity: bufferSize) { _, count in count = bufferSize }
    private var buffered = 0
    private var sha = SHA1Stream()
    /// The CRC-32 of the entry being appended; nil between entries.
    private var entryCRC: UInt32?
    /// Under glibc's mapping threshold (`Allocator.mmapThreshold`): the buffer comes from the
    /// heap, whose pages stay, not from a mapping of its own faulted in page by page.
    static let bufferSize = 256 << 10

    init(fd: Int32) {
        self.fd = fd
    }

    /// Starts an entry: what is appended until `endEntry` is its bytes.
    mutating func beginEntry() { entryCRC = 0 }

    /// Ends the entry; returns the CRC-32 of its bytes.
    mutating func endEntry() -> UInt32 {
        defer { entryCRC = nil }
        return entryCRC ?? 0
    }

    mutating func append(_ bytes: UnsafeRawBufferPointer) throws(GitError) {
        if let crc = entryCRC { entryCRC = Checksum.crc32(bytes, continuing: crc) }
        var position = 0
        while position < bytes.count {
            if buffered == Self.bufferSize { try flush() }
            let count = min(Self.bufferSize - buffered, bytes.count - position)
            buffer.withUnsafeMutableBytes { _ = memcpy($0.baseAddress! + buffered, bytes.baseAddress! + position, count) }
            buffered += count
            position += count
        }
        written += bytes.count
    }

    mutating func append(_ bytes: [UInt8]) throws(GitError) {
        let failure: GitError? = bytes.withUnsafeBytes { bytes in
            do throws(GitError) { try append(bytes) } catch { return error }
            return nil
        }
        if let failure { throw failure }
    }

    /// An entry's first bytes: its type (3 bits) and the size of its content, base-128 after
    /// the first 4 bits.
    mutating func appendEntryHeader(type: UInt8, size: Int) throws(GitError) {
        var header: [UInt8] = []
        var size = size
        var byte = (type << 4) | UInt8(size & 0x0F)
        size >>= 4
        while size > 0 {
            header.append(byte | 0x80)
            byte = UInt8(size & 0x7F)
            size >>= 7
        }
        header.append(byte)
        try append(header)
    }

    /// `content` as a zlib stream of stored (not compressed) deflate blocks.
    mutating func appendStored(_ content: UnsafeRawBufferPointer) throws(GitError) {
        // zlib header: deflate, 32 KiB window, no dictionary, fastest level (0x78 0x01: the
        // header's check bits make 0x7801 a multiple of 31).
        try append([0x78, 0x01])
        var position = 0
        repeat {
            let count = min(65_535, content.count - position)
            let last = position + count == content.count
            // BFINAL, BTYPE 00 (stored); the length and its complement, little-endian.
            try append([last ? 1 : 0, UInt8(count & 0xFF), UInt8(count >> 8), UInt8(~count & 0xFF), UInt8((~count >> 8) & 0xFF)])
            try append(UnsafeRawBufferPointer(rebasing: content[position..<(position + count)]))
            position += count
        } while position < content.count
        let adler = Checksum.adler32(content)
        try append([UInt8(truncatingIfNeeded: adler >> 24), UInt8(truncatingIfNeeded: adler >> 16),
                    UInt8(truncatingIfNeeded: adler >> 8), UInt8(truncatingIfNeeded: adler)])
    }

    /// `content` as a zlib stream: deflated when that gains a tenth
    /// (`PackWriter.deflatedIfSmaller`), else stored.
    mutating func appendStream(_ content: [UInt8], of kind: PackWriter.StreamContent) throws(GitError) {
        if let deflated = PackWriter.deflatedIfSmaller(content, as: kind) {
            try append(deflated)
        } else {
            try appendStored(content)
        }
    }

    mutating func appendStored(_ content: [UInt8]) throws(GitError) {
        let failure: GitError? = content.withUnsafeBytes { content in
            do throws(GitError) { try appendStored(content) } catch { return error }
            return nil
        }
        if let failure { throw failure }
    }

    /// Copies `length` bytes of `input` from `offset` as they are (a whole entry of another
    /// pack); returns their CRC-32, for the caller to check against that pack's index.
    mutating func copy(from input: Int32, at offset: UInt64, length: Int) throws(GitError) -> UInt32 {
        var crc: UInt32 = 0
        var done = 0
        while done < length {
            if buffered == Self.bufferSize { try flush() }
            let start = buffered
            let want = min(Self.bufferSize - start, length - done)
            let got = buffer.withUnsafeMutableBytes { pread(input, $0.baseAddress! + start, want, off_t(offset) + off_t(done)) }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { throw PackWriter.failure("read a pack") }
            crc = buffer.withUnsafeBytes { Checksum.crc32(UnsafeRawBufferPointer(rebasing: $0[start..<start + got]), continuing: crc) }
            buffered += got
            done += got
        }
        written += length
        return crc
    }

    /// Flushes, appends the SHA-1 of everything written (the pack's trailer) and returns it.
    mutating func finish() throws(GitError) -> [UInt8] {
        try flush()
        let checksum = sha.finish()
        guard checksum.withUnsafeBytes({ PackWriter.writeAll($0, to: fd) }) else { throw PackWriter.failure("write a pack") }
        written += checksum.count
        return checksum
    }

    private mutating func flush() throws(GitError) {
        guard buffered > 0 else { return }
        var sha = self.sha
        let count = buffered
        let ok = buffer.withUnsafeBytes { all in
            let bytes = UnsafeRawBufferPointer(rebasing: all[0..<count])
            sha.update(bytes)
            return PackWriter.writeAll(bytes, to: fd)
        }
        self.sha = sha
        guard ok else { throw PackWriter.failure("write a pack") }
        buffered = 0
    }
}
