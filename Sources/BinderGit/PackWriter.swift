import Foundation
import Glibc
internal import CBinderZlib
internal import BinderCrypto

/// One object for `PackWriter`: its id (`GitObjects.objectID(of:type:)`), kind and content.
struct PackObject {
    /// Git's pack type numbers.
    enum Kind: UInt8 {
        case commit = 1, tree = 2, blob = 3
    }

    let id: ObjectID
    let kind: Kind
    let content: [UInt8]
}

/// Writes a commit's new objects as one pack (version 2) and its index (version 2), both made
/// here without libgit2's pack builder and indexer: a save's pack is written once, not
/// deflated, searched for deltas, and then inflated and hashed again by the indexer
/// (docs/BENCHMARKS.md, "Issue 13: a save's fixed cost").
///
/// Trees are stored, not compressed (zlib streams of stored deflate blocks): `foldPacks` and
/// `repack` compress them, and find their deltas, off the save path. Blobs are deflated
/// (Huffman coding only: `BlobDeflater`) when that saves a tenth (`deflatedIfSmaller`), since
/// folds copy them as they are. The pack is streamed to its file (`PackStream`), never whole in memory. It
/// holds no deltas, so it is complete in itself and
/// stock git reads it (`git verify-pack`, `index-pack`, `fsck`: `PackWriterTests`).
enum PackWriter {
    /// An object as a pack index lists it: its id, its entry's offset in the pack and the
    /// CRC-32 of the entry's bytes.
    typealias IndexedObject = (id: ObjectID, offset: Int, crc: UInt32)

    /// A version-2 pack's header: "PACK", the version, the number of objects.
    static func header(objects: Int) -> [UInt8] {
        var header: [UInt8] = [0x50, 0x41, 0x43, 0x4B]  // "PACK"
        appendBigEndian(2, to: &header)
        appendBigEndian(UInt32(objects), to: &header)
        return header
    }

    /// Writes the pack and its index into `directory` (`objects/pack`), each to a file of its
    /// own: one `spares` made ahead, with no name yet, or else one made now under a temporary
    /// name. Both are fsynced; then the pack is put in place under its final name before the
    /// index (git finds a pack by its index, so no reader meets an index without its pack), and
    /// the folder fsynced once. On return both are durable under their final names. Three
    /// fsyncs, where libgit2's pack builder makes four (it fsyncs the folder after each
    /// rename), and the pack's runs beside the index's (`BackgroundFsync`): the save waits for
    /// two device flushes here, not three. A kill before the end leaves at most temporary
    /// files (`tmp_pack_*`, which `git gc` removes), nothing (a file made ahead has no name),
    /// or a pack nothing refers to yet. Returns the index's path.
    static func write(_ objects: [PackObject], into directory: String, spares: SparePackFiles? = nil) throws(GitError) -> String {
        let packFile = try file(.pack, from: spares, in: directory)
        let pack: (entries: [IndexedObject], checksum: [UInt8])
        do throws(GitError) {
            pack = try writePack(objects: objects.count, to: packFile) { stream throws(GitError) in
                var entries: [IndexedObject] = []
                for object in objects {
                    let offset = stream.written
                    stream.beginEntry()
                    try appendEntry(object, to: &stream)
                    entries.append((object.id, offset, stream.endEntry()))
                }
                return entries
            }
        } catch {
            discard(packFile)
            throw error
        }
        // Folds take packs newest first by their modification time (`GitPacks.newestFirst`).
        // The file system's own stamp is coarse (a tick of 4 ms here, in which two saves fit)
        // and a file made ahead bears the time it was made, which can come before the last
        // save's pack; the clock's nanoseconds, set here, order the saves' packs as they were
        // written (one save at a time, under the repository's lock).
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let times = [now, now]
        guard futimens(packFile.fd, times) == 0 else {
            let error = failure("write the pack")
            discard(packFile)
            throw error
        }
        let packSync = BackgroundFsync(packFile.fd)
        return try install(pack: packFile, index: index(of: pack.entries, packChecksum: pack.checksum), checksum: pack.checksum,
                           in: directory, spares: spares) { packSync.wait() }
    }

    /// The spare of `kind` if one is ready, else a file made now under a temporary name
    /// (`tmp_pack_*`, `tmp_idx_*`).
    private static func file(_ kind: SparePackFiles.Kind, from spares: SparePackFiles?, in directory: String)
        throws(GitError) -> PackFileInProgress {
        if let spare = spares?.take(kind) { return spare }
        let made = try makeTemporary(in: directory, prefix: kind == .pack ? "tmp_pack_" : "tmp_idx_")
        return PackFileInProgress(fd: made.fd, path: made.path)
    }

    /// Puts a written, durable file in place at `final`: its temporary name renamed, or a file
    /// with no name linked (through `/proc/self/fd`, which needs no privilege where
    /// `AT_EMPTY_PATH` does). The same name means the same bytes (a pack's name is its
    /// checksum, which covers it whole): replacing, or finding, an identical file is harmless.
    private static func place(_ file: PackFileInProgress, at final: String, what: String) throws(GitError) {
        if let path = file.path {
            guard rename(path, final) == 0 else { throw failure("rename \(what) into place") }
        } else {
            guard linkat(AT_FDCWD, "/proc/self/fd/\(file.fd)", AT_FDCWD, final, AT_SYMLINK_FOLLOW) == 0 || errno == EEXIST else {
                throw failure("link \(what) into place")
            }
        }
    }

    /// Closes a file that will not be put in place, and removes its temporary name if it has one.
    private static func discard(_ file: PackFileInProgress) {
        closeIfOpen(file)
        if let path = file.path { unlink(path) }
    }

    private static func closeIfOpen(_ file: PackFileInProgress) {
        if file.fd >= 0 { close(file.fd) }
    }

    /// A pack of `objects` entries written under a temporary name in `directory`, read-only and
    /// fsynced: the header, what `body` appends (returning the entries' offsets and CRCs), then
    /// the checksum. On failure no file is left.
    static func writeTemporaryPack(objects: Int, in directory: String, _ body: (inout PackStream) throws(GitError) -> [IndexedObject])
        throws(GitError) -> (path: String, entries: [IndexedObject], checksum: [UInt8]) {
        let pack = try writeUnsyncedPack(objects: objects, in: directory, body)
        let synced = fsync(pack.fd) == 0 ? 0 : errno
        let closed = close(pack.fd) == 0 ? 0 : errno
        guard synced == 0, closed == 0 else {
            unlink(pack.path)
            throw failure("write '\(pack.path)'", code: synced != 0 ? synced : closed)
        }
        return (pack.path, pack.entries, pack.checksum)
    }

    /// `writeTemporaryPack` up to its fsync: the pack written and made read-only, its file left
    /// open (`fd`) for the caller to fsync and close. On failure no file is left.
    private static func writeUnsyncedPack(objects: Int, in directory: String, _ body: (inout PackStream) throws(GitError) -> [IndexedObject])
        throws(GitError) -> (fd: Int32, path: String, entries: [IndexedObject], checksum: [UInt8]) {
        let (fd, path) = try makeTemporary(in: directory, prefix: "tmp_pack_")
        do throws(GitError) {
            let pack = try writePack(objects: objects, to: PackFileInProgress(fd: fd, path: path), body)
            return (fd, path, pack.entries, pack.checksum)
        } catch {
            close(fd)
            unlink(path)
            throw error
        }
    }

    /// Writes a pack of `objects` entries to `file`: the header, what `body` appends (returning
    /// the entries' offsets and CRCs), then the checksum; and makes it read-only. The file is
    /// left open, not fsynced, and the caller's to discard on failure.
    private static func writePack(objects: Int, to file: PackFileInProgress, _ body: (inout PackStream) throws(GitError) -> [IndexedObject])
        throws(GitError) -> (entries: [IndexedObject], checksum: [UInt8]) {
        var stream = PackStream(fd: file.fd)
        try stream.append(header(objects: objects))
        let entries = try body(&stream)
        let checksum = try stream.finish()
        // Packs and indexes are read-only, as git makes them.
        guard fchmod(file.fd, 0o444) == 0 else { throw failure("write '\(file.path ?? "the pack")'") }
        return (entries, checksum)
    }

    /// Writes the index of the pack written, fsynced and closed at `packTemporary`, then puts
    /// both in place (see `install(pack:…)`). Returns the index's path. On failure neither
    /// temporary file is left.
    static func install(packTemporary: String, index: [UInt8], checksum: [UInt8], in directory: String,
                        packSynced: () -> Int32 = { 0 }) throws(GitError) -> String {
        try install(pack: PackFileInProgress(fd: -1, path: packTemporary), index: index, checksum: checksum, in: directory,
                    packSynced: packSynced)
    }

    /// Writes the index of the pack written to `pack` into a file of its own (a spare, or one
    /// made now), fsynced; then waits for the pack to be durable (`packSynced`, called once
    /// the index is written and fsynced, or failed: its errno, 0 when durable), puts the pack
    /// in place under its final name before the index (see `write`), and fsyncs the folder.
    /// Returns the index's path. On failure neither file is left.
    private static func install(pack: PackFileInProgress, index: [UInt8], checksum: [UInt8], in directory: String,
                                spares: SparePackFiles? = nil, packSynced: () -> Int32) throws(GitError) -> String {
        let indexFile: PackFileInProgress
        do throws(GitError) {
            indexFile = try file(.index, from: spares, in: directory)
        } catch {
            _ = packSynced()
            discard(pack)
            throw error
        }
        let indexWritten = index.withUnsafeBytes { buffer in
            // Packs and indexes are read-only, as git makes them.
            writeAll(buffer, to: indexFile.fd) && fchmod(indexFile.fd, 0o444) == 0 && fsync(indexFile.fd) == 0
        } ? 0 : errno
        let packCode = packSynced()
        // A pack is named by its SHA-1 checksum, in hex as an object id is written.
        // (`String(format:)` per byte went through Foundation's formatter on every save.)
        guard indexWritten == 0, packCode == 0, let checksumID = ObjectID(bytes: checksum) else {
            discard(pack)
            discard(indexFile)
            if packCode != 0 { throw failure("write the pack", code: packCode) }
            if indexWritten != 0 { throw failure("write the pack index", code: indexWritten) }
            throw GitError.failed(operation: "install pack", code: .invalid, message: "pack checksum of \(checksum.count) bytes")
        }
        let name = directory + "/pack-" + checksumID.hex
        do throws(GitError) {
            try place(pack, at: name + ".pack", what: "the pack")
        } catch {
            discard(pack)
            discard(indexFile)
            throw error
        }
        closeIfOpen(pack)
        do throws(GitError) {
            try place(indexFile, at: name + ".idx", what: "the pack index")
        } catch {
            discard(indexFile)
            throw error
        }
        closeIfOpen(indexFile)
        try syncDirectory(directory)
        return name + ".idx"
    }

    // MARK: - Pack

    /// An object's entry: its type-and-size header, then a zlib stream of stored blocks (a
    /// blob's deflated, when that gains: `deflatedIfSmaller`).
    private static func appendEntry(_ object: PackObject, to stream: inout PackStream) throws(GitError) {
        try stream.appendEntryHeader(type: object.kind.rawValue, size: object.content.count)
        if object.kind == .blob {
            try stream.appendStream(object.content, of: .ciphertext)
        } else {
            try stream.appendStored(object.content)
        }
    }

    /// What a zlib stream holds, which decides how it is deflated.
    enum StreamContent {
        /// A blob: NIP-44's base64 or an attachment's ciphertext (`BlobDeflater`: Huffman
        /// coding only, a stream kept between saves).
        case ciphertext
        /// A tree or a delta of one: names and ids (zlib's fastest level).
        case tree
    }

    /// `content` as a zlib stream, when that saves a tenth or more: a document's NIP-44
    /// payload is base64 (about a quarter smaller deflated), an attachment's ciphertext is not
    /// compressible and stays stored. Blobs are compressed here, once, because folds copy them
    /// as they are (`FoldCopy`). A large blob is judged by its first 16 KB first, so that an
    /// attachment's megabytes are not deflated only to be stored after all.
    static func deflatedIfSmaller(_ content: [UInt8], as kind: StreamContent) -> [UInt8]? {
        guard content.count >= 64 else { return nil }
        let sample = 16 << 10
        if content.count > 4 * sample, deflatedIfSmaller(content[..<sample], as: kind) == nil { return nil }
        return deflatedIfSmaller(content[...], as: kind)
    }

    private static func deflatedIfSmaller(_ content: ArraySlice<UInt8>, as kind: StreamContent) -> [UInt8]? {
        let limit = content.count - content.count / 10
        switch kind {
        case .ciphertext:
            return content.withUnsafeBytes { bytes in
                BlobDeflater.withDeflater { $0.deflated(bytes, limit: limit) } ?? nil
            }
        case .tree:
            var length = CBinderZlib.compressBound(UInt(content.count))
            var out = [UInt8](repeating: 0, count: Int(length))
            let rc = out.withUnsafeMutableBufferPointer { out in
                content.withUnsafeBufferPointer { CBinderZlib.compress2(out.baseAddress!, &length, $0.baseAddress!, UInt(content.count), Z_BEST_SPEED) }
            }
            guard rc == Z_OK, Int(length) <= limit else { return nil }
            out.removeLast(out.count - Int(length))
            return out
        }
    }

    // MARK: - Index

    /// What a version-2 pack index starts with: "\377tOc", then the version. (A version-1
    /// index has no header: `objectCount(ofIndex:)`.)
    static let indexHeader: [UInt8] = [0xFF, 0x74, 0x4F, 0x63, 0, 0, 0, 2]

    /// A version-2 pack index: fan-out table, sorted ids, CRC-32s, offsets (with the 64-bit
    /// table for offsets of 2 GiB and more), the pack's checksum, and its own.
    static func index(of entries: [IndexedObject], packChecksum: [UInt8]) -> [UInt8] {
        let sorted = entries.sorted { $0.id < $1.id }
        var index = indexHeader
        let ids = sorted.map(\.id.bytes)
        var fanout = [UInt32](repeating: 0, count: 256)
        for id in ids { fanout[Int(id[0])] += 1 }
        var running: UInt32 = 0
        for byte in 0..<256 {
            running += fanout[byte]
            appendBigEndian(running, to: &index)
        }
        for id in ids { index += id }
        for entry in sorted { appendBigEndian(entry.crc, to: &index) }
        var large: [UInt64] = []
        for entry in sorted {
            if entry.offset < 0x8000_0000 {
                appendBigEndian(UInt32(entry.offset), to: &index)
            } else {
                appendBigEndian(0x8000_0000 | UInt32(large.count), to: &index)
                large.append(UInt64(entry.offset))
            }
        }
        for offset in large {
            appendBigEndian(UInt32(offset >> 32), to: &index)
            appendBigEndian(UInt32(truncatingIfNeeded: offset), to: &index)
        }
        index += packChecksum
        index += index.withUnsafeBytes { BinderCrypto.sha1($0) }
        return index
    }

    private static func appendBigEndian(_ value: UInt32, to bytes: inout [UInt8]) {
        bytes += [UInt8(truncatingIfNeeded: value >> 24), UInt8(truncatingIfNeeded: value >> 16),
                  UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)]
    }

    // MARK: - Files

    /// A new empty file `<prefix>XXXXXX` in `directory`, open for writing: its descriptor and path.
    static func makeTemporary(in directory: String, prefix: String) throws(GitError) -> (fd: Int32, path: String) {
        var template = Array((directory + "/" + prefix + "XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw failure("create a file in '\(directory)'") }
        return (fd, template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
    }

    /// Writes all of `bytes` to `fd` (again after a short write or EINTR); false on an error.
    static func writeAll(_ bytes: UnsafeRawBufferPointer, to fd: Int32) -> Bool {
        var position = 0
        while position < bytes.count {
            let n = Glibc.write(fd, bytes.baseAddress! + position, bytes.count - position)
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            position += n
        }
        return true
    }

    static func syncDirectory(_ directory: String) throws(GitError) {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw failure("open '\(directory)'") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw failure("fsync '\(directory)'") }
    }

    /// The error of the failed system call, with its errno (a full disk is ENOSPC).
    static func failure(_ operation: String) -> GitError {
        failure(operation, code: errno)
    }

    /// The error of a system call that failed with `code` (an errno).
    static func failure(_ operation: String, code: Int32) -> GitError {
        .failed(operation: "write pack", code: .other(-1), message: operation + ": " + String(cString: strerror(code)),
                posixErrno: code)
    }
}

/// The checksums of a pack BinderGit writes, from zlib.
enum Checksum {
    /// CRC-32 (IEEE 802.3), which a pack index keeps for each object's packed bytes.
    static func crc32(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        crc32(bytes, continuing: 0)
    }

    /// CRC-32 of `bytes` continuing one computed over the bytes before them.
    static func crc32(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32) -> UInt32 {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return crc }
        return UInt32(truncatingIfNeeded: CBinderZlib.crc32_z(UInt(crc), base.assumingMemoryBound(to: UInt8.self), bytes.count))
    }

    /// Adler-32, the checksum that ends a zlib stream, 16 bytes at a time: zlib 1.2's goes a
    /// byte at a time, 5 ms for each save of a 7 MB tree (a folder of 100,000 records).
    ///
    /// Within a block, for 16-byte chunks c_k: s1 grows by the sum of each chunk, and s2 by 16
    /// times s1 before the chunk plus the chunk's bytes weighted 16, 15, ..., 1. So per lane j
    /// the block keeps the sum of its bytes and the sum of those sums before each chunk, and
    /// the weights are applied once at the end. Blocks of 5,552 bytes (zlib's NMAX) keep every
    /// lane well inside 32 bits before the sums are reduced modulo 65,521.
    static func adler32(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return 1 }
        let modulus: UInt64 = 65_521
        let weights = SIMD16<UInt32>(16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1)
        var s1: UInt64 = 1, s2: UInt64 = 0
        var position = 0
        while position < bytes.count {
            let blockEnd = min(bytes.count, position + 5_552)
            let chunks = (blockEnd - position) / 16
            var sums = SIMD16<UInt32>(repeating: 0)
            var sumsBefore = SIMD16<UInt32>(repeating: 0)
            for _ in 0..<chunks {
                sumsBefore &+= sums
                sums &+= SIMD16<UInt32>(truncatingIfNeeded: base.loadUnaligned(fromByteOffset: position, as: SIMD16<UInt8>.self))
                position += 16
            }
            s2 += 16 * UInt64(chunks) * s1 + 16 * UInt64(sumsBefore.wrappedSum()) + UInt64((sums &* weights).wrappedSum())
            s1 += UInt64(sums.wrappedSum())
            while position < blockEnd {
                s1 += UInt64(base.load(fromByteOffset: position, as: UInt8.self))
                s2 += s1
                position += 1
            }
            s1 %= modulus
            s2 %= modulus
        }
        return UInt32(s2 << 16 | s1)
    }

    /// zlib's Adler-32, the oracle `adler32` is tested against.
    static func zlibAdler32(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return 1 }
        return UInt32(truncatingIfNeeded: CBinderZlib.adler32_z(1, base.assumingMemoryBound(to: UInt8.self), bytes.count))
    }
}
