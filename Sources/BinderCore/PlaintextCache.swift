import BinderCrypto
import BinderGit
import Synchronization

/// A bounded least-recently-used cache of plaintext, keyed by where it came from: why it
/// exists is that decrypting is the cost of a read, and memory for it must have a bound.
///
/// Entries are `SecureBytes`: memory is zeroed when an entry is evicted and the last reader lets
/// go of it (open files keep their own reference), and at unmount when the cache is cleared.
/// Every operation takes constant time whatever the number of entries: a full cache of 100,000
/// records evicts on each new one (a scan for the oldest entry there was a quarter of the
/// daemon's time in a `tar` of the binder).
final class PlaintextCache: Sendable {
    /// One entry, linked into the use order by slot numbers (-1: none).
    private struct Slot {
        var key: Node.Source
        var bytes: SecureBytes
        var newer: Int
        var older: Int
    }

    private struct Entries: ~Copyable {
        /// The entries' secret memory (`SecureBytes.footprint`, their sizes rounded as the
        /// arena rounds them): what the bound bounds.
        var size = 0
        /// Each key's slot.
        var slotOf: [Node.Source: Int] = [:]
        /// The entries; a removed entry's slot is nil and listed in `free` for reuse.
        var slots: [Slot?] = []
        var free: [Int] = []
        /// Ends of the use order: the most and the least recently used slot.
        var newest = -1
        var oldest = -1

        /// Takes slot `i` out of the use order.
        mutating func unlink(_ i: Int) {
            guard let slot = slots[i] else { return }
            if slot.newer >= 0 { slots[slot.newer]?.older = slot.older } else { newest = slot.older }
            if slot.older >= 0 { slots[slot.older]?.newer = slot.newer } else { oldest = slot.newer }
            slots[i]?.newer = -1
            slots[i]?.older = -1
        }

        /// Puts slot `i` at the most recently used end.
        mutating func linkNewest(_ i: Int) {
            slots[i]?.older = newest
            slots[i]?.newer = -1
            if newest >= 0 { slots[newest]?.newer = i }
            newest = i
            if oldest < 0 { oldest = i }
        }

        /// Entries of a document's children (keyed by an index path too), which `forget` can
        /// find only by a walk of the keys; nearly always none.
        var childEntries = 0

        /// Removes slot `i`: its key, its bytes and its place in the use order.
        mutating func remove(_ i: Int) {
            unlink(i)
            guard let slot = slots[i] else { return }
            if slot.key.isChild { childEntries -= 1 }
            slotOf.removeValue(forKey: slot.key)
            size -= slot.bytes.footprint
            slots[i] = nil
            free.append(i)
        }

        /// Evicts the least recently used entries until `footprint` more fits (or none is left).
        mutating func evict(toFit footprint: Int, within capacity: Int) {
            while size + footprint > capacity, oldest >= 0 { remove(oldest) }
        }

        mutating func insert(_ key: Node.Source, _ bytes: SecureBytes) {
            let slot = Slot(key: key, bytes: bytes, newer: -1, older: -1)
            let i: Int
            if let reused = free.popLast() {
                slots[reused] = slot
                i = reused
            } else {
                slots.append(slot)
                i = slots.count - 1
            }
            slotOf[key] = i
            if key.isChild { childEntries += 1 }
            size += bytes.footprint
            linkNewest(i)
        }
    }

    /// Attachments (sidecars) and raw files larger than this are never kept. An open of one
    /// decrypts nothing (`DeferredContent`): the kernel keeps its pages (`keep_cache`), so a
    /// warm open sends no READ, and a kept copy only doubled what the page cache holds. Kept,
    /// the bench corpus's 40 attachments were 65 of the cache's 107 MiB for 102 MiB of
    /// plaintext, the daemon's peak over a run 186 MiB against a goal of 166
    /// (docs/BENCHMARKS.md). Documents stay: a listing renders them anyway, for their sizes.
    static let largestFileKept = 64 << 10

    /// Whether the cache keeps the `count` bytes that `source` shows.
    static func keeps(_ source: Node.Source, count: Int) -> Bool {
        switch source {
        case .sidecar, .raw: count <= largestFileKept
        case .directory, .document, .child, .inlineAttachment: true
        }
    }

    let capacity: Int
    /// Guards the entries, their use order and their total size.
    private let state = Mutex(Entries())

    init(capacity: Int) { self.capacity = capacity }

    func get(_ key: Node.Source) -> SecureBytes? {
        state.withLock { state in
            guard let i = state.slotOf[key], let bytes = state.slots[i]?.bytes else { return nil }
            state.unlink(i)
            state.linkNewest(i)
            return bytes
        }
    }

    /// Evicts the least recently used entries until `bytes` more would fit: called before a
    /// file of that size is decrypted, so that its secret memory is taken after the memory of
    /// what it will push out is given back, not before (a full cache read on, 3 MB at a time,
    /// held the cache's size and the new file's at once).
    func makeRoom(for bytes: Int, of source: Node.Source) {
        let footprint = SecureBytes.footprint(ofCount: bytes)
        guard footprint <= capacity, Self.keeps(source, count: bytes) else { return }
        state.withLock { $0.evict(toFit: footprint, within: capacity) }
    }

    /// Stores `bytes` unless it alone takes more than the whole cache or is a large attachment
    /// (`keeps`); evicts the least recently used entries to make room.
    func put(_ key: Node.Source, _ bytes: SecureBytes) {
        let footprint = bytes.footprint
        guard footprint <= capacity, Self.keeps(key, count: bytes.count) else { return }
        state.withLock { state in
            if let old = state.slotOf[key] { state.remove(old) }
            state.evict(toFit: footprint, within: capacity)
            state.insert(key, bytes)
        }
    }

    /// Drops what was made from `blobs`: versions that a commit replaced or deleted, which no
    /// path shows any more. Kept, they stayed until the bound pushed them out: with the default
    /// bound, never in a run of thousands of saves (the daemon's memory grew by each save's
    /// plaintext; docs/BENCHMARKS.md). A reader holding one keeps its own reference.
    func forget(_ blobs: Set<ObjectID>) {
        guard !blobs.isEmpty else { return }
        state.withLock { state in
            for blob in blobs {
                for key in [Node.Source.document(blob: blob), .sidecar(blob: blob), .raw(blob: blob)] {
                    if let i = state.slotOf[key] { state.remove(i) }
                }
            }
            guard state.childEntries > 0 else { return }
            for (key, i) in state.slotOf where key.isChild && key.blob.map(blobs.contains) == true { state.remove(i) }
        }
    }

    func removeAll() {
        state.withLock { state in
            state = Entries()
        }
    }

    /// Secret memory (see `Entries.size`) and entries held.
    var usage: (bytes: Int, entries: Int) { state.withLock { ($0.size, $0.slotOf.count) } }
}

extension Node.Source {
    /// A child of a document (text or inline attachment): keyed by its index path as well.
    fileprivate var isChild: Bool {
        switch self {
        case .child, .inlineAttachment: true
        default: false
        }
    }

    /// The git blob the bytes come from; nil for a folder.
    fileprivate var blob: ObjectID? {
        switch self {
        case .directory: nil
        case .document(let blob), .child(let blob, _), .inlineAttachment(let blob, _), .sidecar(let blob), .raw(let blob): blob
        }
    }
}
