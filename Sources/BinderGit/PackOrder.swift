internal import CGit2
import Foundation

/// The order in which `repack` and `fold` write a pack's objects: commits (newest first), then
/// trees, then blobs and the rest, as `git repack` lays a pack out. A history walk
/// (`.binder/history`, `binder log PATH`, `.binder/deleted`) reads commits and their trees
/// only; with those together at the front of the pack, a cold walk reads a few megabytes in
/// order instead of pages scattered over the whole pack between the records' blobs.
///
/// libgit2 writes a pack's objects in the order they were inserted (when no tag points into
/// it, as in a binder; a delta's base goes first). Before this, a fold inserted them in id
/// order (a pack index's order: random) and `git_packbuilder_insert_walk` interleaved each
/// commit with its trees and blobs.
struct PackOrder {
    private var commits: [(id: ObjectID, time: Int64)] = []
    private var trees: [(id: ObjectID, name: String?)] = []
    private var rest: [(id: ObjectID, name: String?)] = []

    var count: Int { commits.count + trees.count + rest.count }

    /// A commit, written before every tree and blob, newest `time` first.
    mutating func addCommit(_ id: ObjectID, time: Int64) { commits.append((id, time)) }
    /// A tree, after the commits, in the order added. `name` (its path) helps the delta search.
    mutating func addTree(_ id: ObjectID, name: String? = nil) { trees.append((id, name)) }
    /// A blob (or anything else), last, in the order added.
    mutating func addOther(_ id: ObjectID, name: String? = nil) { rest.append((id, name)) }

    /// Inserts everything into `builder` in pack order.
    func insert(into builder: PackBuilderHandle) throws(GitError) {
        // Stable: commits of the same second keep the order they came in (a walk's, or a
        // pack's). `enumerated` because Swift's sort is not documented as stable.
        let newestFirst = commits.enumerated().sorted {
            $0.element.time != $1.element.time ? $0.element.time > $1.element.time : $0.offset < $1.offset
        }.map(\.element.id)
        for id in newestFirst { try Self.insert(id, name: nil, into: builder) }
        for (id, name) in trees { try Self.insert(id, name: name, into: builder) }
        for (id, name) in rest { try Self.insert(id, name: name, into: builder) }
    }

    private static func insert(_ id: ObjectID, name: String?, into builder: PackBuilderHandle) throws(GitError) {
        var oid = id.oid
        try check(git_packbuilder_insert(builder.pointer, &oid, name), "add \(id) to the pack")
    }

    /// The ids a pack index (version 2) lists, in the order of their objects in the pack (by
    /// offset), so that a fold keeps the order an earlier one wrote. Nil when the file is not a
    /// well-formed version 2 index.
    static func idsInPackOrder(ofIndex index: String) -> [ObjectID]? {
        entriesInPackOrder(ofIndex: index)?.map(\.id)
    }

    /// What a pack index (version 2) says of each object: its id, its entry's offset in the
    /// pack and the CRC-32 of the entry's bytes, in pack order (by offset). Nil when the file
    /// is not a well-formed version 2 index.
    static func entriesInPackOrder(ofIndex index: String) -> [IndexEntry]? {
        // An index names at most 2^32 objects of 28 bytes each, with its header and trailer.
        guard let data = try? RegularFile.read(index, limit: 1 << 40) else { return nil }
        return data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) -> [IndexEntry]? in
            let header = 8, fanout = 256 * 4
            guard bytes.count >= header + fanout,
                  bytes.prefix(8).elementsEqual(PackWriter.indexHeader) else { return nil }
            func word(_ at: Int) -> UInt32 { bytes[at..<at + 4].reduce(0) { $0 << 8 | UInt32($1) } }
            let count = Int(word(header + fanout - 4))
            let names = header + fanout, crcs = names + count * 20, offsets = crcs + count * 4
            let large = offsets + count * 4
            guard bytes.count >= large + 40 else { return nil }  // and the two trailing checksums
            var entries: [IndexEntry] = []
            entries.reserveCapacity(count)
            for i in 0..<count {
                let small = word(offsets + i * 4)
                var offset = UInt64(small)
                if small & 0x8000_0000 != 0 {
                    let at = large + Int(small & 0x7FFF_FFFF) * 8
                    guard at + 8 <= bytes.count - 40 else { return nil }
                    offset = bytes[at..<at + 8].reduce(0) { $0 << 8 | UInt64($1) }
                }
                let start = names + i * 20
                guard let id = ObjectID(bytes: UnsafeRawBufferPointer(rebasing: bytes[start..<start + 20])) else { return nil }
                entries.append(IndexEntry(id: id, offset: offset, crc: word(crcs + i * 4)))
            }
            entries.sort { $0.offset < $1.offset }
            return entries
        }
    }

    /// One object as a pack index lists it.
    struct IndexEntry {
        let id: ObjectID
        let offset: UInt64
        let crc: UInt32
    }
}
