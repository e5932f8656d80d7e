internal import CSodium
import Synchronization

/// A buffer for secrets: secret keys, conversation keys, DEKs, passphrases and plaintext.
///
/// The memory comes from `sodium_malloc` (guard pages, `mlock`ed where the system allows) and is
/// zeroed and freed by `sodium_free` when the last reference goes. Contents are written only while
/// the value is being built (before it is shared), which is why it can be `Sendable`.
public final class SecureBytes: @unchecked Sendable {
    private let base: UnsafeMutableRawPointer
    public let count: Int
    /// The `sodium_malloc` block `base` lies in, when it came from (and goes back to) the pool.
    private let pooled: SecureBlockPool.Block?

    /// A zero-filled secret buffer of `count` bytes.
    public init(count: Int) {
        Sodium.ensureReady()
        precondition(count >= 0)
        if let block = SecureBlockPool.shared.take(count) {
            // The data ends where the block ends, right before its guard page; the block is zero.
            pooled = block
            base = block.pointer + (block.capacity - max(count, 1))
            self.count = count
            return
        }
        // sodium_malloc(0) may return a unique pointer or NULL; always ask for at least one byte.
        guard let pointer = sodium_malloc(max(count, 1)) else {
            fatalError("sodium_malloc failed for \(count) bytes")
        }
        memsetZero(pointer, max(count, 1))
        self.base = pointer
        self.count = count
        pooled = nil
    }

    /// Copies `bytes` into secret memory. The caller remains responsible for zeroing its source.
    public convenience init(_ bytes: some Collection<UInt8>) {
        self.init(count: bytes.count)
        let destination = UnsafeMutableRawBufferPointer(start: base, count: count)
        _ = destination.initializeMemory(as: UInt8.self, from: bytes)
    }

    /// Copies the UTF-8 bytes of `string` into secret memory.
    public convenience init(utf8 string: String) {
        var string = string
        let count = string.utf8.count
        self.init(count: count)
        string.withUTF8 { source in
            if count > 0 { base.copyMemory(from: source.baseAddress!, byteCount: count) }
        }
    }

    deinit {
        if let pooled {
            memsetZero(base, max(count, 1))
            SecureBlockPool.shared.give(pooled)
        } else {
            sodium_free(base)
        }
    }

    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// Mutation is for building the value; once shared, treat it as immutable.
    public func withUnsafeMutableBytes<R, E: Error>(_ body: (UnsafeMutableRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeMutableRawBufferPointer(start: base, count: count))
    }

    public subscript(index: Int) -> UInt8 {
        precondition(index >= 0 && index < count)
        return base.load(fromByteOffset: index, as: UInt8.self)
    }

    /// A new secret holding bytes `range` of this one.
    public func slice(_ range: Range<Int>) -> SecureBytes {
        precondition(range.lowerBound >= 0 && range.upperBound <= count)
        let out = SecureBytes(count: range.count)
        if range.count > 0 {
            out.base.copyMemory(from: base + range.lowerBound, byteCount: range.count)
        }
        return out
    }

    /// Copies the bytes out into an ordinary array. Only for data that is about to leave the
    /// process's secret memory anyway (an answer to a FUSE read, a file written by the user).
    public func copyBytes() -> [UInt8] {
        [UInt8](UnsafeRawBufferPointer(start: base, count: count))
    }

    /// Constant-time equality.
    public func constantTimeEquals(_ other: SecureBytes) -> Bool {
        withUnsafeBytes { a in other.withUnsafeBytes { b in constantTimeEqual(a, b) } }
    }

    /// Lowercase hex of the contents, as a secret.
    public func hexSecret() -> SecureBytes {
        let out = SecureBytes(count: count * 2)
        out.withUnsafeMutableBytes { o in
            withUnsafeBytes { i in Hex.encode(i, into: o) }
        }
        return out
    }
}

@inline(__always)
private func memsetZero(_ pointer: UnsafeMutableRawPointer, _ count: Int) {
    sodium_memzero(pointer, count)
}

/// Keeps freed secret blocks (zeroed, still guarded and locked) for reuse. `sodium_malloc` and
/// `sodium_free` cost about 23 µs a pair (mmap, mprotect, mlock, munmap): more than decrypting a
/// 4 KB document. Sizes up to 64 KiB are served from page-multiple blocks; at most 8 MiB is
/// kept. A reused block holds its data at its end, so an overrun still hits the guard page.
final class SecureBlockPool: Sendable {
    struct Block: @unchecked Sendable {
        let pointer: UnsafeMutableRawPointer
        let capacity: Int
    }

    static let shared = SecureBlockPool()
    static let page = 4096
    static let largest = 64 << 10
    static let keptBytes = 8 << 20

    /// Free blocks by capacity, and the bytes they hold.
    private let free = Mutex<(blocks: [Int: [Block]], bytes: Int)>(([:], 0))

    /// A zeroed block for `count` bytes, or nil if `count` is too large to pool.
    func take(_ count: Int) -> Block? {
        let capacity = (max(count, 1) + Self.page - 1) / Self.page * Self.page
        guard capacity <= Self.largest else { return nil }
        if let block = free.withLock({ state -> Block? in
            guard let block = state.blocks[capacity]?.popLast() else { return nil }
            state.bytes -= capacity
            return block
        }) { return block }
        guard let pointer = sodium_malloc(capacity) else { fatalError("sodium_malloc failed for \(capacity) bytes") }
        memsetZero(pointer, capacity)
        return Block(pointer: pointer, capacity: capacity)
    }

    /// Takes back a zeroed block, or frees it when the pool is full.
    func give(_ block: Block) {
        let kept = free.withLock { state -> Bool in
            guard state.bytes + block.capacity <= Self.keptBytes else { return false }
            state.blocks[block.capacity, default: []].append(block)
            state.bytes += block.capacity
            return true
        }
        if !kept { sodium_free(block.pointer) }
    }
}
