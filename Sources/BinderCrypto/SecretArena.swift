internal import CSodium
import Glibc
import Synchronization

/// Secret memory ran out: the arena could not map another guarded region.
public enum SecureMemoryError: Swift.Error, Equatable, CustomStringConvertible {
    case exhausted(bytes: Int)

    public var description: String {
        switch self {
        case .exhausted(let bytes): return "out of secret memory (ENOMEM): cannot map \(bytes) more bytes of guarded, locked memory"
        }
    }
}

/// Where every `SecureBytes` lives: a few large guarded regions with an allocator on top.
///
/// One `sodium_malloc` per secret costs four kernel mappings (guard page, data, guard page,
/// the allocation's header page), and the kernel allows 65,530: a cache of 20,000 documents
/// exhausted it. Here a region is one mapping of `regionBytes` (guard pages on both sides,
/// excluded from core dumps, its pages in use `mlock`ed where the system allows), and secrets
/// are carved out of it:
///
/// - **small** (≤ `largestSlot`): a slot in a slab, a run of `slabPages` pages cut into equal
///   slots of one size class (eight classes per doubling: at most 12.5% rounding waste);
/// - **medium** (≤ `largestRun`): a run of whole pages, first fit in a region;
/// - **large**: a guarded, locked mapping of its own (few: the cache bound divided by a megabyte).
///
/// Every free byte of a region is zero: every slot or run is zeroed when it is given back
/// (before the lock is taken), so an allocation hands out zero memory without touching it.
/// Only pages in use (by a slab or a run) are locked and resident: a region's free pages go
/// back to the kernel (`dropPages(_:_:)`), which gives them again as zero, so a region mapped
/// for a burst costs its address space, not memory. Secrets share a region with each other,
/// not with anything else; an overrun past a region's end hits its guard page.
///
/// All bookkeeping (regions, slabs, free lists) is guarded by the one `state` lock; the objects
/// below are only touched while it is held.
final class SecretArena: Sendable {
    static let shared = SecretArena()

    static let page = 4096
    static let regionBytes = 8 << 20
    static let regionPages = regionBytes / page
    static let slabPages = 16
    static let slabBytes = slabPages * page
    static let largestSlot = slabBytes / 2
    static let largestRun = 1 << 20

    /// One allocation: where it is and how to give it back.
    enum Allocation: @unchecked Sendable {
        case slot(Slab, index: Int)
        case run(Region, firstPage: Int, pages: Int)
        case dedicated(UnsafeMutableRawPointer, bytes: Int)
    }

    /// A guarded mapping of `regionPages` pages (`mapGuarded`). Guarded by `SecretArena.state`.
    final class Region: @unchecked Sendable {
        let base: UnsafeMutableRawPointer
        /// When it was mapped, among all regions (the older ones are filled first).
        let age: Int
        /// Which pages are in use (by a slab or a run).
        var used: [Bool]
        var freePages: Int
        /// No free page lies below this one (a first-fit search starts here).
        var firstFreeHint = 0
        /// Empty slabs kept for their class (see `release`): they do not keep the region alive.
        var idleSlabs: [Slab] = []

        init(base: UnsafeMutableRawPointer, age: Int) {
            self.base = base
            self.age = age
            used = [Bool](repeating: false, count: SecretArena.regionPages)
            freePages = SecretArena.regionPages
        }

        /// The first page of a free run of `pages` pages, marked used; nil when there is none.
        func takeRun(_ pages: Int) -> Int? {
            guard freePages >= pages else { return nil }
            var start = firstFreeHint
            while start + pages <= used.count {
                if used[start] { start += 1; continue }
                var end = start
                while end < start + pages && !used[end] { end += 1 }
                if end == start + pages {
                    for page in start..<end { used[page] = true }
                    freePages -= pages
                    if start == firstFreeHint { firstFreeHint = end }
                    return start
                }
                start = end + 1
            }
            return nil
        }

        func giveRun(_ first: Int, _ pages: Int) {
            for page in first..<(first + pages) { used[page] = false }
            freePages += pages
            firstFreeHint = min(firstFreeHint, first)
        }
    }

    /// A run of `slabPages` pages cut into slots of one size class. Guarded by `SecretArena.state`.
    final class Slab: @unchecked Sendable {
        let region: Region
        let firstPage: Int
        let classIndex: Int
        let slotBytes: Int
        let capacity: Int
        /// Free slot indexes, taken from the end.
        var freeSlots: [Int32]
        /// Where this slab sits in its class's list of slabs with free slots; -1 when full.
        var partialIndex = -1

        init(region: Region, firstPage: Int, classIndex: Int) {
            self.region = region
            self.firstPage = firstPage
            self.classIndex = classIndex
            slotBytes = SecretArena.slotBytes(ofClass: classIndex)
            capacity = SecretArena.slabBytes / slotBytes
            freeSlots = (0..<Int32(capacity)).reversed()
        }

        var base: UnsafeMutableRawPointer { region.base + firstPage * SecretArena.page }
        var usedSlots: Int { capacity - freeSlots.count }
    }

    struct State: ~Copyable {
        /// Oldest first.
        var regions: [Region] = []
        /// Regions mapped so far (the next one's age).
        var regionsMapped = 0
        /// Per size class, the slabs that have a free slot.
        var partial = [[Slab]](repeating: [], count: SecretArena.classCount)
        /// Bytes handed out (rounded to slot, page or dedicated size), for tests and the bench.
        var bytesInUse = 0
        var dedicatedCount = 0
        /// Pages of the dedicated mappings' data, in bytes.
        var dedicatedBytes = 0
        /// Tests only (`SecureBytes.limitForTesting`): allocations that would take `bytesInUse`
        /// past this fail as if the kernel refused another region. Nothing else sets it.
        var testLimit = Int.max

        /// Throws when `bytes` more would pass the test limit.
        func checkTestLimit(_ bytes: Int) throws(SecureMemoryError) {
            if bytes > testLimit - bytesInUse { throw .exhausted(bytes: bytes) }
        }
    }

    private let state = Mutex(State())

    /// Zeroed memory for `count` bytes (at least one), 16-byte aligned.
    func allocate(_ count: Int) throws(SecureMemoryError) -> (UnsafeMutableRawPointer, Allocation) {
        Sodium.ensureReady()
        let count = max(count, 1)
        if count <= Self.largestSlot {
            return try takeSlot(classIndex: Self.classIndex(count))
        }
        if count <= Self.largestRun {
            let pages = (count + Self.page - 1) / Self.page
            return try state.withLock { (state) throws(SecureMemoryError) -> (UnsafeMutableRawPointer, Allocation) in
                try state.checkTestLimit(pages * Self.page)
                let (region, first) = try Self.takeRun(pages, &state)
                state.bytesInUse += pages * Self.page
                return (region.base + first * Self.page, .run(region, firstPage: first, pages: pages))
            }
        }
        let bytes = Self.footprint(ofCount: count)
        try state.withLock { (state) throws(SecureMemoryError) in try state.checkTestLimit(bytes) }
        guard let pointer = Self.mapGuarded(count, locked: true) else { throw .exhausted(bytes: count) }
        state.withLock {
            $0.bytesInUse += bytes
            $0.dedicatedCount += 1
            $0.dedicatedBytes += bytes
        }
        return (pointer, .dedicated(pointer, bytes: count))
    }

    /// A guarded mapping: a guard page, the data's pages (left out of core dumps; locked where
    /// the system allows, if `locked`), a guard page; the data (16-byte aligned) ends less than
    /// 16 bytes before the trailing guard. A large secret has one of its own, locked; a region
    /// is one (`count` is `regionBytes`, whole pages), not locked: its pages are locked as they
    /// are taken (`lockPages(_:_:)`). Not `sodium_malloc`: that fills the pages with garbage,
    /// which would then be zeroed again, two passes over megabytes that a fresh anonymous
    /// mapping gives as zero already.
    private static func mapGuarded(_ count: Int, locked: Bool) -> UnsafeMutableRawPointer? {
        guard count <= Int.max - 3 * page else { return nil }
        let dataBytes = (count + page - 1) / page * page
        let total = dataBytes + 2 * page
        let base = mmap(nil, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let base, base != MAP_FAILED else { return nil }
        let data = base + page
        guard mprotect(base, page, PROT_NONE) == 0, mprotect(data + dataBytes, page, PROT_NONE) == 0 else {
            munmap(base, total)
            return nil
        }
        _ = madvise(data, dataBytes, MADV_DONTDUMP)
        if locked { _ = mlock(data, dataBytes) }  // best effort, as libsodium: RLIMIT_MEMLOCK may refuse
        return data + (dataBytes - count) / 16 * 16
    }

    /// Zeroes and unmaps what `mapGuarded(count)` returned.
    private static func unmapGuarded(_ pointer: UnsafeMutableRawPointer, _ count: Int) {
        let dataBytes = (count + page - 1) / page * page
        let data = UnsafeMutableRawPointer(bitPattern: UInt(bitPattern: pointer) / UInt(page) * UInt(page))!
        sodium_memzero(data, dataBytes)
        _ = munlock(data, dataBytes)
        munmap(data - page, dataBytes + 2 * page)
    }

    /// Zeroes and gives back an allocation from `allocate`.
    func release(_ pointer: UnsafeMutableRawPointer, _ allocation: Allocation) {
        switch allocation {
        case .slot(let slab, let index):
            // The slot is still ours until the lock hands it back: zero it outside the lock.
            sodium_memzero(pointer, slab.slotBytes)
            state.withLock { state in
                let wasFull = slab.freeSlots.isEmpty
                slab.freeSlots.append(Int32(index))
                state.bytesInUse -= slab.slotBytes
                if wasFull { Self.list(slab, &state) }
                // An empty slab goes back to its region, unless it is its class's last one
                // (so that one secret made and dropped over and over does not cut a slab each
                // time); a region holding nothing but such idle slabs is unmapped all the same.
                if slab.freeSlots.count == slab.capacity {
                    if state.partial[slab.classIndex].count > 1 {
                        Self.unlist(slab, &state)
                        Self.dropPages(slab.base, Self.slabBytes)
                        slab.region.giveRun(slab.firstPage, Self.slabPages)
                    } else {
                        slab.region.idleSlabs.append(slab)
                    }
                    Self.releaseIfEmpty(slab.region, &state)
                }
            }
        case .run(let region, let firstPage, let pages):
            sodium_memzero(pointer, pages * Self.page)
            // Still ours until the lock hands the pages back.
            Self.dropPages(pointer, pages * Self.page)
            state.withLock { state in
                region.giveRun(firstPage, pages)
                state.bytesInUse -= pages * Self.page
                Self.releaseIfEmpty(region, &state)
            }
        case .dedicated(let base, let bytes):
            Self.unmapGuarded(base, bytes)
            let footprint = Self.footprint(of: allocation)
            state.withLock {
                $0.bytesInUse -= footprint
                $0.dedicatedCount -= 1
                $0.dedicatedBytes -= footprint
            }
        }
    }

    private func takeSlot(classIndex: Int) throws(SecureMemoryError) -> (UnsafeMutableRawPointer, Allocation) {
        try state.withLock { (state) throws(SecureMemoryError) -> (UnsafeMutableRawPointer, Allocation) in
            try state.checkTestLimit(Self.slotBytes(ofClass: classIndex))
            let slab: Slab
            // The slab of the oldest region: a region mapped for a burst (read-ahead on a full
            // cache) then empties as its secrets are dropped, and is unmapped. Taking the
            // newest slab kept such a region alive for a few slots: 8 MiB mapped for 200 KB.
            if let partial = state.partial[classIndex].min(by: { $0.region.age < $1.region.age }) {
                slab = partial
            } else {
                let (region, first) = try Self.takeRun(Self.slabPages, &state)
                slab = Slab(region: region, firstPage: first, classIndex: classIndex)
                Self.list(slab, &state)
            }
            if slab.freeSlots.count == slab.capacity {
                slab.region.idleSlabs.removeAll { $0 === slab }
            }
            let index = Int(slab.freeSlots.removeLast())
            if slab.freeSlots.isEmpty { Self.unlist(slab, &state) }
            state.bytesInUse += slab.slotBytes
            return (slab.base + index * slab.slotBytes, .slot(slab, index: index))
        }
    }

    /// A free run of `pages` pages in some region, mapping a new region when none has one.
    private static func takeRun(_ pages: Int, _ state: inout State) throws(SecureMemoryError) -> (Region, Int) {
        for region in state.regions {
            if let first = region.takeRun(pages) {
                lockPages(region.base + first * page, pages * page)
                return (region, first)
            }
        }
        // Fresh anonymous pages: zero, and not resident until taken. (sodium_malloc filled its
        // regions with garbage, then zeroing them made all 8 MiB resident, and sodium_free
        // zeroed them all again when they were empty.)
        guard let base = mapGuarded(regionBytes, locked: false) else { throw .exhausted(bytes: regionBytes) }
        let region = Region(base: base, age: state.regionsMapped)
        state.regionsMapped += 1
        state.regions.append(region)
        guard let first = region.takeRun(pages) else { throw .exhausted(bytes: pages * page) }
        lockPages(region.base + first * page, pages * page)
        return (region, first)
    }

    /// Locks pages just taken from a region (best effort, as libsodium: RLIMIT_MEMLOCK may
    /// refuse), which also makes them resident. They read as zero: see `dropPages(_:_:)`.
    private static func lockPages(_ start: UnsafeMutableRawPointer, _ bytes: Int) {
        _ = mlock(start, bytes)
    }

    /// Gives zeroed pages of a region back to the kernel: unlocked, then dropped, so that they
    /// stop counting in the daemon's memory and read as zero when next touched (anonymous
    /// private memory). A region's free pages used to stay locked and resident until the whole
    /// region was free: after a cache full of documents was read over by one of attachments,
    /// the regions held the documents' pages and the attachments' new mappings besides.
    private static func dropPages(_ start: UnsafeMutableRawPointer, _ bytes: Int) {
        _ = munlock(start, bytes)
        _ = madvise(start, bytes, MADV_DONTNEED)
    }

    /// Unmaps a region nothing uses any more (idle slabs aside), keeping the last one (for the
    /// next secret).
    private static func releaseIfEmpty(_ region: Region, _ state: inout State) {
        guard regionPages - region.freePages == region.idleSlabs.count * slabPages, state.regions.count > 1,
              let index = state.regions.firstIndex(where: { $0 === region }) else { return }
        for slab in region.idleSlabs { unlist(slab, &state) }
        region.idleSlabs.removeAll()
        state.regions.remove(at: index)
        // Nothing to zero: its free pages are, and its idle slabs' slots were when freed.
        munmap(region.base - page, regionBytes + 2 * page)
    }

    private static func list(_ slab: Slab, _ state: inout State) {
        guard slab.partialIndex < 0 else { return }
        slab.partialIndex = state.partial[slab.classIndex].count
        state.partial[slab.classIndex].append(slab)
    }

    private static func unlist(_ slab: Slab, _ state: inout State) {
        let index = slab.partialIndex
        guard index >= 0 else { return }
        let moved = state.partial[slab.classIndex].removeLast()
        if moved !== slab {
            state.partial[slab.classIndex][index] = moved
            moved.partialIndex = index
        }
        slab.partialIndex = -1
    }

    /// The bytes `allocation` takes (see `SecureBytes.footprint`).
    static func footprint(of allocation: Allocation) -> Int {
        switch allocation {
        case .slot(let slab, _): return slab.slotBytes
        case .run(_, _, let pages): return pages * page
        case .dedicated(_, let bytes): return footprint(ofCount: bytes)
        }
    }

    /// The bytes an allocation of `count` would take.
    static func footprint(ofCount count: Int) -> Int {
        let count = max(count, 1)
        if count <= largestSlot { return slotBytes(ofClass: classIndex(count)) }
        return (count + page - 1) / page * page
    }

    // MARK: Size classes: 16-byte steps up to 128, then eight classes per doubling.

    static let classCount = classIndex(largestSlot) + 1

    static func classIndex(_ count: Int) -> Int {
        if count <= 128 { return (count + 15) / 16 - 1 }
        let power = Int.bitWidth - 1 - (count - 1).leadingZeroBitCount  // 2^power < count ≤ 2^(power+1)
        let step = 1 << (power - 3)
        return 8 + (power - 7) * 8 + (count - 1 - (1 << power)) / step
    }

    static func slotBytes(ofClass index: Int) -> Int {
        if index < 8 { return (index + 1) * 16 }
        let power = 7 + (index - 8) / 8
        return (1 << power) + ((index - 8) % 8 + 1) * (1 << (power - 3))
    }

    // MARK: For tests and the bench

    struct Usage: Equatable {
        var regions: Int
        var dedicated: Int
        var bytesInUse: Int
        /// Bytes mapped: the regions' and the dedicated mappings' data.
        var mappedBytes: Int
        /// Each region's data as an address range.
        var regionRanges: [Range<UInt>]
    }

    /// See `SecureBytes.limitForTesting`.
    func setTestLimit(_ bytes: Int?) {
        state.withLock { $0.testLimit = bytes ?? Int.max }
    }

    var usage: Usage {
        state.withLock { state in
            Usage(regions: state.regions.count, dedicated: state.dedicatedCount, bytesInUse: state.bytesInUse,
                  mappedBytes: state.regions.count * Self.regionBytes + state.dedicatedBytes,
                  regionRanges: state.regions.map {
                      let start = UInt(bitPattern: $0.base)
                      return start..<(start + UInt(Self.regionBytes))
                  })
        }
    }
}
