internal import CGit2

/// A git object id: the 20 raw bytes of a SHA-1.
///
/// Stored as plain integers (not libgit2's `git_oid`) so that the public type
/// carries no C type; conversions to and from `git_oid` are internal.
public struct ObjectID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Number of raw bytes in an id.
    public static let byteCount = 20
    /// Number of hexadecimal characters in an id.
    public static let hexCount = 40

    // The 20 bytes in order: bytes 0-7, 8-15, 16-19 (memory order).
    private var a: UInt64 = 0
    private var b: UInt64 = 0
    private var c: UInt32 = 0

    /// The id from its 20 raw bytes; nil unless exactly 20 bytes.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == Self.byteCount else { return nil }
        withUnsafeMutableRawBytes { raw in
            for (i, byte) in bytes.enumerated() { raw[i] = byte }
        }
    }

    /// The id from its 20 raw bytes in memory; nil unless exactly 20 bytes. One copy: the
    /// generic initialiser above is not specialised across modules, and at a few µs an id
    /// it was most of a mount's start-up (decoding the listing index, docs/BENCHMARKS.md).
    public init?(bytes: UnsafeRawBufferPointer) {
        guard bytes.count == Self.byteCount else { return nil }
        withUnsafeMutableRawBytes { $0.copyMemory(from: bytes) }
    }

    /// The id from 40 hexadecimal characters (either case); nil otherwise. libgit2 parses it.
    public init?(hex: some StringProtocol) {
        var text = String(hex)
        guard text.utf8.count == Self.hexCount else { return nil }
        _ = LibGit2.ready
        var oid = git_oid()
        let rc = text.withUTF8 { utf8 in
            utf8.withMemoryRebound(to: CChar.self) { git_oid_fromstrn(&oid, $0.baseAddress, Self.hexCount) }
        }
        guard rc == 0 else { return nil }
        self.init(&oid)
    }

    /// The 20 raw bytes.
    public var bytes: [UInt8] {
        withUnsafeRawBytes { Array($0) }
    }

    /// 40 lowercase hexadecimal characters (libgit2's formatting).
    public var hex: String {
        var oid = self.oid
        return String(unsafeUninitializedCapacity: Self.hexCount) { out in
            out.withMemoryRebound(to: CChar.self) { chars in
                guard let base = chars.baseAddress, git_oid_fmt(base, &oid) == 0 else { return 0 }
                return Self.hexCount
            }
        }
    }

    public var description: String { hex }

    /// Byte-wise order (the same order as the hex strings).
    public static func < (lhs: ObjectID, rhs: ObjectID) -> Bool {
        lhs.withUnsafeRawBytes { l in
            rhs.withUnsafeRawBytes { r in
                l.lexicographicallyPrecedes(r)
            }
        }
    }

    private func withUnsafeRawBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        var copy = self
        return Swift.withUnsafeBytes(of: &copy) { body(UnsafeRawBufferPointer(rebasing: $0[0..<Self.byteCount])) }
    }

    private mutating func withUnsafeMutableRawBytes<R>(_ body: (UnsafeMutableRawBufferPointer) -> R) -> R {
        Swift.withUnsafeMutableBytes(of: &self) { body(UnsafeMutableRawBufferPointer(rebasing: $0[0..<Self.byteCount])) }
    }
}

// MARK: - libgit2 bridging (internal)

extension ObjectID {
    /// Copies libgit2's oid.
    init(_ oid: UnsafePointer<git_oid>) {
        Swift.withUnsafeMutableBytes(of: &self) { dst in
            dst.copyMemory(from: UnsafeRawBufferPointer(start: oid, count: Self.byteCount))
        }
    }

    /// libgit2's representation of this id.
    var oid: git_oid {
        var oid = git_oid()
        Swift.withUnsafeBytes(of: self) { src in
            Swift.withUnsafeMutableBytes(of: &oid) { dst in
                dst.copyMemory(from: UnsafeRawBufferPointer(rebasing: src[0..<Self.byteCount]))
            }
        }
        return oid
    }
}
