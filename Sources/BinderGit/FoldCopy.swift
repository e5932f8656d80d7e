import Foundation
import Glibc
internal import BinderCrypto

/// What a fold writes itself, into a pack of its own, instead of through libgit2's pack
/// builder: everything but the whole commits. The builder inflates each object, searches it for
/// a delta against ten others, and deflates it again, every time a fold rolls its pack up; it
/// reuses no delta found before. In a folder of 100,000 records each version of the folder's
/// tree is 7 MB, and those searches took most of the CPU a fold used (docs/BENCHMARKS.md).
///
/// - Whole blobs are copied byte for byte. A binder's blobs are ciphertext: no delta is ever
///   found for them, and compressing them again gains nothing.
/// - Deltas are copied as they are, naming their base by id (a REF_DELTA; an OFS_DELTA's header
///   is rewritten), with their bases: a delta found once is kept.
/// - Whole trees are written as deltas against a newer version of the same folder
///   (`TreeDelta`: the entries the two share are copied, in one pass over each tree), or whole
///   when there is none. A tree whole in an older pack (the base of that pack's deltas) becomes
///   a delta in turn, so each folder keeps one whole tree per fold pack, not one per fold.
/// - Whole commits are copied byte for byte too, as are the commit deltas of packs folded
///   before with their bases. (A delta's base is always in the delta's pack, and an object is
///   taken from the newest pack holding it: every base is in the copy.) They went to the pack
///   builder once, which deltified them into a pack of their own: a fold then wrote two packs
///   of about as many objects each (a commit against a blob and two trees a save), which the
///   next fold's geometric rule, finding two packs within a factor of two, always rolled up
///   again, so that every fold rewrote every object saved since the binder was written
///   (docs/BENCHMARKS.md, "Links kept by the kernel, and one pack a fold"). Now a fold writes
///   one pack, and a second only for loose objects (merges, `binder new`), which the builder
///   packs.
///
/// Each copied entry's bytes are checked against the CRC-32 its source index holds as they are
/// copied, and each tree delta is applied and compared with the tree before it is written: a
/// damaged source fails the fold before anything is removed.
struct FoldCopy {
    /// An entry of a source pack: where its bytes are, and what its index says of them.
    struct Source {
        let id: ObjectID
        let pack: String
        let offset: UInt64
        let length: Int
        let crc: UInt32
    }

    /// How an entry of a source pack goes into the new pack.
    enum Entry {
        /// Its bytes as they are (a whole commit or tag).
        case copied(Source)
        /// A delta, naming its base by id: its first `header` bytes are the type and size, its
        /// delta data (a zlib stream) starts at `body`.
        case delta(Source, base: ObjectID, header: Int, body: Int)
        /// A whole tree: a delta against a newer version of its folder, or whole (`TreeBases`).
        case tree(Source)
    }

    /// Git's pack entry types.
    enum EntryType {
        static let commit: UInt8 = 1, tree: UInt8 = 2, blob: UInt8 = 3, tag: UInt8 = 4
        static let offsetDelta: UInt8 = 6, referenceDelta: UInt8 = 7
    }

    /// Commits and tags (whole, or deltas of them), written first, newest first (the source
    /// packs are taken newest first, and each lists its commits so): a history walk reads them
    /// together (`PackOrder`).
    private(set) var commits: [Entry] = []
    /// Trees and the other deltas, written next.
    private(set) var entries: [Entry] = []
    /// Whole blobs, written last.
    private(set) var blobs: [Source] = []
    /// Every object taken (written once, from the newest pack that holds it).
    private var taken: Set<ObjectID> = []

    var isEmpty: Bool { commits.isEmpty && entries.isEmpty && blobs.isEmpty }
    var count: Int { commits.count + entries.count + blobs.count }

    /// Takes every object of the pack indexed by `index` that the copy does not hold yet.
    /// False when the pack or its index cannot be read as such: nothing is taken from it then
    /// (the pack builder gets it all).
    static func take(index: String, into copy: inout FoldCopy) -> Bool {
        let pack = String(index.dropLast(4)) + ".pack"
        guard let indexed = PackOrder.entriesInPackOrder(ofIndex: index) else { return false }
        let fd = open(pack, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_size >= 32 else { return false }
        let end = UInt64(info.st_size) - 20  // the pack's checksum follows the last entry
        var idAt: [UInt64: ObjectID] = [:]
        idAt.reserveCapacity(indexed.count)
        for entry in indexed { idAt[entry.offset] = entry.id }
        let ids = Set(indexed.map(\.id))
        guard ids.count == indexed.count else { return false }

        // Every entry's header read before anything is taken: a pack that turns out malformed
        // is left to the builder entirely.
        var parsed: [(source: Source, type: UInt8, header: Int, body: Int, base: ObjectID?)] = []
        parsed.reserveCapacity(indexed.count)
        for (i, entry) in indexed.enumerated() {
            let next = i + 1 < indexed.count ? indexed[i + 1].offset : end
            guard entry.offset >= 12, next > entry.offset, next <= end else { return false }
            let length = Int(next - entry.offset)
            var head = [UInt8](repeating: 0, count: min(length, 64))
            guard pread(fd, &head, head.count, off_t(entry.offset)) == head.count,
                  let header = Self.header(head, at: entry.offset, idAt: idAt), header.base.map(ids.contains) ?? true else { return false }
            parsed.append((Source(id: entry.id, pack: pack, offset: entry.offset, length: length, crc: entry.crc),
                           header.type, header.header, header.body, header.base))
        }
        // What each delta is a version of: its base's type, down its chain (packs folded
        // before this change hold commits as deltas of commits, from libgit2's builder).
        var wholeType: [ObjectID: UInt8] = [:]
        for entry in parsed where entry.base == nil { wholeType[entry.source.id] = entry.type }
        let baseOf = Dictionary(parsed.compactMap { entry in entry.base.map { (entry.source.id, $0) } }, uniquingKeysWith: { first, _ in first })
        func resolvedType(_ id: ObjectID) -> UInt8? {
            var id = id
            for _ in 0...baseOf.count {  // a chain is no longer than the deltas (a cycle stops here)
                if let type = wholeType[id] { return type }
                guard let base = baseOf[id] else { return nil }
                id = base
            }
            return nil
        }
        for entry in parsed where !copy.taken.contains(entry.source.id) {
            switch entry.type {
            case EntryType.blob:
                copy.blobs.append(entry.source)
            case EntryType.tree:
                copy.entries.append(.tree(entry.source))
            case EntryType.offsetDelta, EntryType.referenceDelta:
                let delta = Entry.delta(entry.source, base: entry.base!, header: entry.header, body: entry.body)
                switch resolvedType(entry.source.id) {
                case EntryType.commit, EntryType.tag: copy.commits.append(delta)
                default: copy.entries.append(delta)
                }
            default:  // a commit or tag
                copy.commits.append(.copied(entry.source))
            }
            copy.taken.insert(entry.source.id)
        }
        return true
    }

    /// What an entry's first bytes say: its type, where its delta data or content starts
    /// (`body`), how long its type-and-size header is, and a delta's base. Nil when malformed.
    private static func header(_ head: [UInt8], at offset: UInt64, idAt: [UInt64: ObjectID])
        -> (type: UInt8, header: Int, body: Int, base: ObjectID?)? {
        guard let first = head.first else { return nil }
        let type = (first >> 4) & 0x07
        var position = 1
        var byte = first
        while byte & 0x80 != 0 {
            guard position < head.count, position < 10 else { return nil }
            byte = head[position]
            position += 1
        }
        let header = position
        switch type {
        case EntryType.commit, EntryType.tree, EntryType.blob, EntryType.tag:
            return (type, header, header, nil)
        case EntryType.offsetDelta:
            // Git's offset encoding: base-128, most significant first, each continuation adding one.
            guard position < head.count else { return nil }
            byte = head[position]
            position += 1
            var distance = UInt64(byte & 0x7F)
            while byte & 0x80 != 0 {
                guard position < head.count, distance < (1 << 49) else { return nil }
                byte = head[position]
                position += 1
                distance = ((distance + 1) << 7) | UInt64(byte & 0x7F)
            }
            guard distance > 0, distance <= offset, let base = idAt[offset - distance] else { return nil }
            return (type, header, position, base)
        case EntryType.referenceDelta:
            guard position + 20 <= head.count,
                  let base = head[position..<position + 20].withUnsafeBytes({ ObjectID(bytes: $0) }) else { return nil }
            return (type, header, position + 20, base)
        default:
            return nil
        }
    }

    // MARK: - Writing

    /// The pack written under a temporary name in `directory` (fsynced), with its index's
    /// bytes: `PackWriter.install` puts both in place. Not in place yet, the pack is no fold's
    /// to pick while the rest of this fold is written.
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

    /// Writes the pack; `readTree` gives a whole tree's bytes (read through libgit2).
    func prepare(in directory: String, readTree: (ObjectID) throws(GitError) -> [UInt8]) throws(GitError) -> Prepared {
        let pack = try PackWriter.writeTemporaryPack(objects: count, in: directory) { stream throws(GitError) in
            try writeEntries(to: &stream, readTree: readTree)
        }
        return Prepared(packTemporary: pack.path, index: PackWriter.index(of: pack.entries, packChecksum: pack.checksum),
                        checksum: pack.checksum)
    }

    /// The commits, the other entries, then the blobs. Returns each one's id, offset and CRC.
    private func writeEntries(to stream: inout PackStream, readTree: (ObjectID) throws(GitError) -> [UInt8]) throws(GitError)
        -> [PackWriter.IndexedObject] {
        var written: [PackWriter.IndexedObject] = []
        written.reserveCapacity(count)
        var sources = SourcePacks()
        defer { sources.close() }
        var trees = TreeBases()
        for entry in commits + entries {
            let offset = stream.written
            switch entry {
            case .copied(let source):
                written.append((source.id, offset, try Self.copy(source, from: &sources, to: &stream)))
            case .delta(let source, let base, let header, let body):
                let bytes = try sources.read(source)
                guard Self.crc(bytes) == source.crc else { throw Self.damaged(source) }
                // The same entry naming its base by id: type 7, the size as it was, the base, the data.
                stream.beginEntry()
                try stream.append([(bytes[0] & 0x8F) | (EntryType.referenceDelta << 4)] + bytes[1..<header])
                try stream.append(base.bytes)
                try stream.append(Array(bytes[body...]))
                written.append((source.id, offset, stream.endEntry()))
            case .tree(let source):
                let content = try readTree(source.id)
                stream.beginEntry()
                try trees.write(source.id, content: content, to: &stream)
                written.append((source.id, offset, stream.endEntry()))
            }
        }
        for blob in blobs {
            written.append((blob.id, stream.written, try Self.copy(blob, from: &sources, to: &stream)))
        }
        return written
    }

    /// Copies `source`'s bytes, checked against its CRC-32 (which it returns).
    private static func copy(_ source: Source, from sources: inout SourcePacks, to stream: inout PackStream) throws(GitError) -> UInt32 {
        let crc = try stream.copy(from: try sources.descriptor(source.pack), at: source.offset, length: source.length)
        guard crc == source.crc else { throw damaged(source) }
        return crc
    }

    private static func crc(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { Checksum.crc32($0) }
    }

    private static func damaged(_ source: Source) -> GitError {
        .failed(operation: "fold packs", code: .other(-1),
                message: "object \(source.id.hex) in '\(source.pack)' does not match its index's CRC-32", posixErrno: EIO)
    }
}

/// The newest whole trees a fold has written, by folder, as bases for the older versions'
/// deltas. A folder is known by the names (and modes) of its tree's first two entries, which
/// its versions share unless one of those very entries was renamed or removed: one would not
/// do, as a binder's folders may each begin with `.meta.json` (docs/FORMAT.md). A tree of
/// another folder that begins alike gets no small delta and is written whole.
struct TreeBases {
    private var byFirstEntries: [[UInt8]: [(id: ObjectID, bytes: [UInt8])]] = [:]
    private var held = 0
    /// Bases kept per key, and in all (the daemon holds them while a fold runs, beside its
    /// caches): beyond these, trees are written whole.
    static let perKey = 2
    static let maxHeld = 64 << 20

    /// The names and modes of `tree`'s first two entries (one, if it has one), without their
    /// ids; nil for an empty or malformed tree.
    static func key(of tree: UnsafeRawBufferPointer) -> [UInt8]? {
        guard let first = RawTree.entry(in: tree, at: 0) else { return nil }
        var key = Array(tree[0..<first.name.upperBound])
        if first.end < tree.count {
            guard let second = RawTree.entry(in: tree, at: first.end) else { return nil }
            key.append(0)
            key += tree[first.end..<second.name.upperBound]
        }
        return key
    }

    /// Writes `content`'s pack entry: a delta against a base of the same folder when one is
    /// less than half the tree (and rebuilds it exactly), else the tree whole (which becomes a
    /// base).
    mutating func write(_ id: ObjectID, content: [UInt8], to stream: inout PackStream) throws(GitError) {
        let key = content.withUnsafeBytes { Self.key(of: $0) }
        if let key, let candidates = byFirstEntries[key] {
            for base in candidates {
                let found = base.bytes.withUnsafeBytes { base in
                    content.withUnsafeBytes { content -> [UInt8]? in
                        guard let delta = TreeDelta.encode(from: base, to: content), delta.count < content.count / 2,
                              TreeDelta.rebuilds(delta, from: base, exactly: content) else { return nil }
                        return delta
                    }
                }
                guard let delta = found else { continue }
                try stream.appendEntryHeader(type: FoldCopy.EntryType.referenceDelta, size: delta.count)
                try stream.append(base.id.bytes)
                try stream.appendStream(delta, of: .tree)
                return
            }
        }
        if let key, held + content.count <= Self.maxHeld, byFirstEntries[key, default: []].count < Self.perKey {
            byFirstEntries[key, default: []].append((id, content))
            held += content.count
        }
        try stream.appendEntryHeader(type: FoldCopy.EntryType.tree, size: content.count)
        try stream.appendStream(content, of: .tree)
    }
}

/// The source packs a fold copies from, each opened once.
private struct SourcePacks {
    private var open: [String: Int32] = [:]

    mutating func descriptor(_ pack: String) throws(GitError) -> Int32 {
        if let fd = open[pack] { return fd }
        let fd = Glibc.open(pack, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw PackWriter.failure("open '\(pack)'") }
        open[pack] = fd
        return fd
    }

    /// The whole entry of `source`.
    mutating func read(_ source: FoldCopy.Source) throws(GitError) -> [UInt8] {
        let fd = try descriptor(source.pack)
        var bytes = [UInt8](repeating: 0, count: source.length)
        var done = 0
        while done < source.length {
            let got = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, source.length - done, off_t(source.offset) + off_t(done)) }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { throw PackWriter.failure("read a pack") }
            done += got
        }
        return bytes
    }

    func close() { for fd in open.values { Glibc.close(fd) } }
}
