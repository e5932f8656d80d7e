internal import CSodium
import Synchronization

/// A buffer for secrets: secret keys, conversation keys, DEKs, passphrases and plaintext.
///
/// The memory comes from `SecretArena` (a few large guarded, `mlock`ed regions excluded from
/// core dumps) and is zeroed and given back when the last reference goes. Contents are written
/// only while the value is being built (before it is shared), which is why it can be `Sendable`.
///
/// Every initialiser (`zeroed:`, `copying:`, `copyingUTF8:`) reports exhausted secret memory as
/// `SecureMemoryError`: a mount answers ENOMEM, a command says so and exits 1, the server
/// refuses to start. None stops the process.
public final class SecureBytes: @unchecked Sendable {
    private let base: UnsafeMutableRawPointer
    public let count: Int
    private let allocation: SecretArena.Allocation

    /// A zero-filled secret buffer of `count` bytes.
    public init(zeroed count: Int) throws(SecureMemoryError) {
        precondition(count >= 0)
        (base, allocation) = try SecretArena.shared.allocate(count)
        self.count = count
    }

    /// `count` bytes with `spare` more zero bytes after them, which a C writer may use (a NUL
    /// terminator) and which are zeroed with the rest.
    init(zeroed count: Int, spare: Int) throws(SecureMemoryError) {
        precondition(count >= 0 && spare >= 0)
        (base, allocation) = try SecretArena.shared.allocate(count + spare)
        self.count = count
    }

    /// Copies `bytes` into secret memory. The caller remains responsible for zeroing its source.
    public convenience init(copying bytes: some Collection<UInt8>) throws(SecureMemoryError) {
        try self.init(zeroed: bytes.count)
        let destination = UnsafeMutableRawBufferPointer(start: base, count: count)
        // Contiguous bytes (an array, a buffer) are copied at once: the generic copy runs
        // unspecialised here, byte by byte through the iterator (3.4 M instructions for a
        // document's 7 KB of JSON, a third of an editor's save).
        let copied = bytes.withContiguousStorageIfAvailable { source -> Bool in
            guard source.count == count else { return false }
            if count > 0 { destination.copyMemory(from: UnsafeRawBufferPointer(source)) }
            return true
        }
        if copied != true { _ = destination.initializeMemory(as: UInt8.self, from: bytes) }
    }

    /// Copies the UTF-8 bytes of `string` into secret memory.
    public convenience init(copyingUTF8 string: String) throws(SecureMemoryError) {
        var string = string
        let count = string.utf8.count
        try self.init(zeroed: count)
        string.withUTF8 { source in
            if count > 0 { base.copyMemory(from: source.baseAddress!, byteCount: count) }
        }
    }

    /// The secret memory this buffer takes: its size rounded up to its slot, its pages, or its
    /// own mapping's pages.
    public var footprint: Int { SecretArena.footprint(of: allocation) }

    /// The secret memory a buffer of `count` bytes would take (see `footprint`).
    public static func footprint(ofCount count: Int) -> Int { SecretArena.footprint(ofCount: count) }

    deinit {
        SecretArena.shared.release(base, allocation)
    }

    /// Tests only: from now on, allocations that would take the bytes in use past `bytes`
    /// fail with `SecureMemoryError` (nil lifts the limit). Package-internal, so no program
    /// input can reach it; it lets a test run out of secret memory without exhausting the
    /// machine's.
    package static func limitForTesting(_ bytes: Int?) {
        SecretArena.shared.setTestLimit(bytes)
    }

    /// Bytes of secret memory handed out now, rounded to slot, page or mapping size (tests).
    package static var bytesInUseForTesting: Int { SecretArena.shared.usage.bytesInUse }

    /// Secret memory now: bytes handed out (rounded to slot, page or mapping size) and bytes
    /// mapped for it (whole regions and dedicated mappings).
    public static var memoryInUse: (handedOut: Int, mapped: Int) {
        let usage = SecretArena.shared.usage
        return (usage.bytesInUse, usage.mappedBytes)
    }

    /// How many regions the secret-memory arena holds now (for the benchmark).
    public static var arenaRegions: Int { SecretArena.shared.usage.regions }

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
    public func copying(_ range: Range<Int>) throws(SecureMemoryError) -> SecureBytes {
        precondition(range.lowerBound >= 0 && range.upperBound <= count)
        let out = try SecureBytes(zeroed: range.count)
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
    public func hexSecret() throws(SecureMemoryError) -> SecureBytes {
        let out = try SecureBytes(zeroed: count * 2)
        out.withUnsafeMutableBytes { o in
            withUnsafeBytes { i in Hex.encode(i, into: o) }
        }
        return out
    }
}

