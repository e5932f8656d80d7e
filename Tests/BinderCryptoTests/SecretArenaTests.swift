@testable import BinderCrypto
import Foundation
import XCTest

/// The secret-memory arena (`SecretArena`): zero on free, guarded regions, no overlap, few
/// kernel mappings for many secrets, and one lock that keeps concurrent use consistent.
final class SecretArenaTests: XCTestCase {
    let arena = SecretArena.shared

    /// Every byte of a freed slot or run is zero, while its region is still mapped (a neighbour
    /// of the same size keeps the region alive), and a new allocation in the same place is zero.
    func testFreedMemoryIsZeroed() throws {
        for size in [1, 100, 4_000, 40_000, 300_000] {
            let (pointer, allocation) = try arena.allocate(size)
            let (neighbour, neighbourAllocation) = try arena.allocate(size)
            memset(pointer, 0xAB, size)
            memset(neighbour, 0xCD, size)
            let span: Int
            switch allocation {
            case .slot(let slab, _): span = slab.slotBytes
            case .run(_, _, let pages): span = pages * SecretArena.page
            case .dedicated: XCTFail("\(size) bytes should come from a region"); continue
            }
            XCTAssertGreaterThanOrEqual(span, size)
            arena.release(pointer, allocation)
            XCTAssertTrue(isMapped(pointer, span), "the neighbour should keep the region")
            if isMapped(pointer, span) {
                let freed = UnsafeRawBufferPointer(start: pointer, count: span)
                XCTAssertTrue(freed.allSatisfy { $0 == 0 }, "\(size) bytes: freed memory not zeroed")
            }
            XCTAssertTrue(UnsafeRawBufferPointer(start: neighbour, count: size).allSatisfy { $0 == 0xCD })
            let again = try SecureBytes(zeroed: size)
            XCTAssertTrue(again.withUnsafeBytes { $0.allSatisfy { $0 == 0 } })
            arena.release(neighbour, neighbourAllocation)
        }
        // Through SecureBytes: the plaintext is gone once the last reference is.
        var address: UnsafeRawPointer?
        let keeper: SecureBytes
        do {
            let secret = try SecureBytes(copying: [UInt8](repeating: 0x5A, count: 64))
            keeper = try SecureBytes(copying: [UInt8](repeating: 0x5B, count: 64))
            address = secret.withUnsafeBytes { $0.baseAddress }
            XCTAssertEqual(secret[63], 0x5A)
        }
        XCTAssertTrue(isMapped(address!, 64))
        if isMapped(address!, 64) {
            XCTAssertTrue(UnsafeRawBufferPointer(start: address, count: 64).allSatisfy { $0 == 0 })
        }
        XCTAssertEqual(keeper[0], 0x5B)
    }

    private func isMapped(_ pointer: UnsafeRawPointer, _ count: Int) -> Bool {
        let start = UInt(bitPattern: pointer)
        return arena.usage.regionRanges.contains { $0.contains(start) && start + UInt(count) <= $0.upperBound }
    }

    /// Allocations of every kind lie inside a region (or their own guarded mapping), never
    /// overlap, and every region and dedicated allocation has a PROT_NONE page right before and
    /// right after it in /proc/self/maps.
    func testAllocationsStayInGuardedRegionsWithoutOverlap() throws {
        var generator = SplitMix(seed: 13)
        var secrets: [SecureBytes] = []
        for i in 0..<3_000 {
            let size = i % 100 == 0 ? Int(generator.next() % 3_000_000) + 1_100_000   // dedicated
                : i % 10 == 0 ? Int(generator.next() % 900_000) + 33_000              // page runs
                : Int(generator.next() % 9_000)                                      // slots
            secrets.append(try SecureBytes(zeroed: size))
        }
        let usage = arena.usage
        XCTAssertGreaterThan(usage.dedicated, 0)
        let ranges = secrets.map { s in
            s.withUnsafeBytes { b in UInt(bitPattern: b.baseAddress!)..<(UInt(bitPattern: b.baseAddress!) + UInt(max(b.count, 1))) }
        }
        let sorted = ranges.sorted { $0.lowerBound < $1.lowerBound }
        for (a, b) in zip(sorted, sorted.dropFirst()) {
            XCTAssertLessThanOrEqual(a.upperBound, b.lowerBound, "allocations overlap")
        }
        let maps = try Mappings.read()
        for (range, secret) in zip(ranges, secrets) where secret.count <= SecretArena.largestRun {
            XCTAssertEqual(usage.regionRanges.filter { $0.contains(range.lowerBound) && range.upperBound <= $0.upperBound }.count,
                           1, "an allocation outside the regions")
        }
        for region in usage.regionRanges {
            XCTAssertEqual(maps.permissions(at: region.lowerBound - 1), "---p", "no guard page before a region")
            XCTAssertEqual(maps.permissions(at: region.upperBound), "---p", "no guard page after a region")
            XCTAssertEqual(maps.permissions(at: region.lowerBound), "rw-p")
        }
        for (range, secret) in zip(ranges, secrets) where secret.count > SecretArena.largestRun {
            // Dedicated: the data (16-byte aligned) ends less than 16 bytes before its guard page.
            let page = UInt(SecretArena.page)
            let guardPage = (range.upperBound + page - 1) / page * page
            XCTAssertLessThan(guardPage - range.upperBound, 16)
            XCTAssertEqual(maps.permissions(at: guardPage), "---p")
            XCTAssertEqual(maps.permissions(at: range.lowerBound / page * page - 1), "---p")
        }
    }

    /// Only pages in use are resident: a run given back leaves memory at once (mincore), and
    /// reads as zero when touched again. A region mapped for a burst is filled last and given
    /// back once the burst's secrets are gone, though the older region was freed in part in
    /// between: new secrets go to the oldest region's slabs.
    func testFreePagesLeaveMemoryAndABurstRegionIsUnmapped() throws {
        let arena = SecretArena()
        // A run: resident while in use, not once given back.
        let (run, runAllocation) = try arena.allocate(300_000)
        let runBytes = SecretArena.footprint(of: runAllocation)
        memset(run, 0xAB, 300_000)
        XCTAssertEqual(residentPages(run, runBytes), runBytes / SecretArena.page)
        arena.release(run, runAllocation)
        XCTAssertEqual(residentPages(run, runBytes), 0, "a freed run's pages stay resident")
        XCTAssertTrue(UnsafeRawBufferPointer(start: run, count: runBytes).allSatisfy { $0 == 0 })

        // Fill the first region with 4 KB secrets and spill into a second.
        var first: [(UnsafeMutableRawPointer, SecretArena.Allocation)] = []
        var burst: [(UnsafeMutableRawPointer, SecretArena.Allocation)] = []
        while arena.usage.regions < 2 || burst.count < 100 {
            let allocation = try arena.allocate(4_000)
            memset(allocation.0, 0x5A, 4_000)
            if arena.usage.regions < 2 { first.append(allocation) } else { burst.append(allocation) }
        }
        let ranges = arena.usage.regionRanges
        XCTAssertEqual(ranges.count, 2)
        func region(_ pointer: UnsafeMutableRawPointer) -> Int? {
            ranges.firstIndex { $0.contains(UInt(bitPattern: pointer)) }
        }
        // Every other secret of the first region goes, then one of the burst's first (the
        // slab it leaves is the last to have a free slot); as many new ones all land in the
        // first region.
        var kept: [(UnsafeMutableRawPointer, SecretArena.Allocation)] = []
        for (index, allocation) in first.enumerated() {
            if index % 2 == 0 { arena.release(allocation.0, allocation.1) } else { kept.append(allocation) }
        }
        let leaving = burst.removeFirst()
        arena.release(leaving.0, leaving.1)
        for _ in 0..<(first.count / 2) {
            let allocation = try arena.allocate(4_000)
            XCTAssertEqual(region(allocation.0), region(first[0].0), "a new secret went to the newer region")
            kept.append(allocation)
        }
        // The burst's secrets go: so does its region.
        for allocation in burst { arena.release(allocation.0, allocation.1) }
        XCTAssertEqual(arena.usage.regions, 1)
        for allocation in kept { arena.release(allocation.0, allocation.1) }
        XCTAssertEqual(arena.usage.bytesInUse, 0)
    }

    /// How many of the pages from `start` (page-aligned) for `count` bytes are resident.
    private func residentPages(_ start: UnsafeMutableRawPointer, _ count: Int) -> Int {
        let pages = (count + SecretArena.page - 1) / SecretArena.page
        var vector = [UInt8](repeating: 0, count: pages)
        guard mincore(start, count, &vector) == 0 else {
            XCTFail("mincore: \(errno)")
            return -1
        }
        return vector.filter { $0 & 1 != 0 }.count
    }

    /// 100,000 cached secrets (documents of 200 B – 2 KB) take a few regions, not 100,000
    /// mappings: /proc/self/maps grows by under 300 lines. Freeing them gives the regions back.
    func testHundredThousandSecretsUseFewMappings() throws {
        let before = arena.usage
        // Counted from here: the test process maps whatever libraries earlier tests loaded
        // (poppler-glib alone brings dozens), which is not the arena's doing.
        let mappedBefore = try Mappings.read().count
        var generator = SplitMix(seed: 7)
        var secrets: [SecureBytes] = []
        secrets.reserveCapacity(100_000)
        for _ in 0..<100_000 {
            let secret = try SecureBytes(zeroed: 200 + Int(generator.next() % 1_800))
            secret.withUnsafeMutableBytes { $0[0] = 1 } as Void
            secrets.append(secret)
        }
        let lines = try Mappings.read().count
        XCTAssertGreaterThan(mappedBefore, 10, "/proc/self/maps was not read")
        // 33 new mappings when measured (374 before, in a process that ran this test alone).
        XCTAssertLessThan(lines - mappedBefore, 300, "\(lines - mappedBefore) new mappings for 100,000 secrets (\(mappedBefore) before)")
        let held = arena.usage
        let payload = secrets.reduce(0) { $0 + $1.count }
        // Rounding to size classes costs at most 12.5% (plus slab tails).
        XCTAssertLessThan(held.bytesInUse - before.bytesInUse, payload + payload / 7)
        XCTAssertLessThanOrEqual(held.regions * SecretArena.regionBytes, payload * 2 + 2 * SecretArena.regionBytes)
        secrets.removeAll()
        let after = arena.usage
        XCTAssertEqual(after.bytesInUse, before.bytesInUse)
        XCTAssertLessThanOrEqual(after.regions, before.regions + 1)
    }

    /// Threads allocating, filling, checking and freeing at once never see each other's bytes,
    /// and the books balance at the end. An arena of the test's own: the shared one also serves
    /// whatever an earlier test left running (a view's work finishing on a queue), whose
    /// secrets may be freed meanwhile.
    func testConcurrentUse() throws {
        let arena = SecretArena()
        let failures = Counter()
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            var generator = SplitMix(seed: UInt64(thread) + 100)
            var live: [(pointer: UnsafeMutableRawPointer, allocation: SecretArena.Allocation, count: Int, mark: UInt8)] = []
            func holds(_ entry: (pointer: UnsafeMutableRawPointer, allocation: SecretArena.Allocation, count: Int, mark: UInt8)) -> Bool {
                UnsafeRawBufferPointer(start: entry.pointer, count: entry.count).allSatisfy { $0 == entry.mark }
            }
            for step in 0..<5_000 {
                let size = step % 50 == 0 ? Int(generator.next() % 200_000) : Int(generator.next() % 6_000)
                guard let (pointer, allocation) = try? arena.allocate(size) else { failures.add(); continue }
                let mark = UInt8(truncatingIfNeeded: thread &* 31 &+ step)
                if !UnsafeRawBufferPointer(start: pointer, count: size).allSatisfy({ $0 == 0 }) { failures.add() }
                memset(pointer, Int32(mark), size)
                live.append((pointer, allocation, size, mark))
                if live.count > 40 || generator.next() % 3 == 0 {
                    let old = live.remove(at: Int(generator.next() % UInt64(live.count)))
                    if !holds(old) { failures.add() }
                    arena.release(old.pointer, old.allocation)
                }
            }
            for entry in live {
                if !holds(entry) { failures.add() }
                arena.release(entry.pointer, entry.allocation)
            }
        }
        XCTAssertEqual(failures.value, 0)
        XCTAssertEqual(arena.usage.bytesInUse, 0)
        XCTAssertEqual(arena.usage.regions, 1, "an empty arena keeps one region")
    }

    /// Size classes: each size gets the smallest class that holds it, wasting at most 12.5%
    /// above 128 bytes.
    func testSizeClasses() {
        var previous = -1
        for size in 1...SecretArena.largestSlot {
            let index = SecretArena.classIndex(size)
            let slot = SecretArena.slotBytes(ofClass: index)
            XCTAssertGreaterThanOrEqual(slot, size)
            if index > 0 { XCTAssertLessThan(SecretArena.slotBytes(ofClass: index - 1), size) }
            if size > 128 { XCTAssertLessThanOrEqual(slot - size, size / 8) }
            XCTAssertEqual(slot % 16, 0)
            XCTAssertGreaterThanOrEqual(index, previous)
            previous = index
        }
        XCTAssertEqual(SecretArena.classCount, SecretArena.classIndex(SecretArena.largestSlot) + 1)
    }

    /// Running out of secret memory is an error to handle, not a trap.
    func testExhaustionThrows() {
        XCTAssertThrowsError(try SecureBytes(zeroed: 1 << 50)) { error in
            XCTAssertEqual(error as? SecureMemoryError, .exhausted(bytes: 1 << 50))
        }
    }
}

/// /proc/self/maps: address ranges and their permissions.
struct Mappings {
    var entries: [(range: Range<UInt>, permissions: String)]
    var count: Int { entries.count }

    static func read() throws -> Mappings {
        let text = try readProcFile("/proc/self/maps")
        return Mappings(entries: text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            let bounds = fields[0].split(separator: "-")
            guard fields.count >= 2, bounds.count == 2, let low = UInt(bounds[0], radix: 16),
                  let high = UInt(bounds[1], radix: 16) else { return nil }
            return (low..<high, String(fields[1]))
        })
    }

    func permissions(at address: UInt) -> String? {
        entries.first { $0.range.contains(address) }?.permissions
    }
}

/// A /proc file read to its end (they report a size of 0, which Foundation's readers trust).
func readProcFile(_ path: String) throws -> String {
    guard let file = fopen(path, "r") else { throw CocoaError(.fileReadNoSuchFile) }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let count = fread(&buffer, 1, buffer.count, file)
        if count <= 0 { break }
        bytes += buffer[0..<count]
    }
    return String(decoding: bytes, as: UTF8.self)
}

struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.lock(); count += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
}
