internal import CSodium

/// A buffer for secrets: secret keys, conversation keys, DEKs, passphrases and plaintext.
///
/// The memory comes from `sodium_malloc` (guard pages, `mlock`ed where the system allows) and is
/// zeroed and freed by `sodium_free` when the last reference goes. Contents are written only while
/// the value is being built (before it is shared), which is why it can be `Sendable`.
public final class SecureBytes: @unchecked Sendable {
    private let base: UnsafeMutableRawPointer
    public let count: Int

    /// A zero-filled secret buffer of `count` bytes.
    public init(count: Int) {
        Sodium.ensureReady()
        precondition(count >= 0)
        // sodium_malloc(0) may return a unique pointer or NULL; always ask for at least one byte.
        guard let pointer = sodium_malloc(max(count, 1)) else {
            fatalError("sodium_malloc failed for \(count) bytes")
        }
        memsetZero(pointer, max(count, 1))
        self.base = pointer
        self.count = count
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
        sodium_free(base)
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
