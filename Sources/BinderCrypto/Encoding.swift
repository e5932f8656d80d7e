internal import CSodium

/// Lowercase hexadecimal.
public enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var out = [UInt8]()
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func encode(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) {
        precondition(output.count == input.count * 2)
        for (i, b) in input.enumerated() {
            output[2 * i] = digits[Int(b >> 4)]
            output[2 * i + 1] = digits[Int(b & 0x0f)]
        }
    }

    /// Decodes hex (either case); nil on odd length or a non-hex character.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        decode(bytes: Array(text.utf8))
    }

    static func decode(bytes utf8: some Collection<UInt8>) -> [UInt8]? {
        guard utf8.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(utf8.count / 2)
        var high: UInt8? = nil
        for c in utf8 {
            guard let v = nibble(c) else { return nil }
            if let h = high { out.append(h << 4 | v); high = nil } else { high = v }
        }
        return out
    }

    /// Decodes hex (`out.count * 2` characters) into `out`; false on a non-hex character.
    /// For secrets (wrapped DEKs) decoded straight into scratch memory.
    static func decode(_ hex: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) -> Bool {
        guard hex.count == out.count * 2 else { return false }
        for i in 0..<out.count {
            guard let hi = nibble(hex[2 * i]), let lo = nibble(hex[2 * i + 1]) else { return false }
            out[i] = hi << 4 | lo
        }
        return true
    }

    /// The value of one hexadecimal digit (either case); nil for any other byte.
    public static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

/// Standard base64 with `=` padding (libsodium's constant-time codec).
public enum Base64 {
    public static func encodedLength(_ count: Int) -> Int {
        Sodium.ensureReady()
        return sodium_base64_encoded_len(count, sodium_base64_VARIANT_ORIGINAL) - 1
    }

    public static func encode(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        Sodium.ensureReady()
        let length = sodium_base64_encoded_len(bytes.count, sodium_base64_VARIANT_ORIGINAL)
        var out = [UInt8](repeating: 0, count: length)
        out.withUnsafeMutableBytes { o in
            _ = sodium_bin2base64(o.baseAddress!.assumingMemoryBound(to: CChar.self), length,
                                  bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count,
                                  sodium_base64_VARIANT_ORIGINAL)
        }
        out.removeLast()  // the NUL terminator
        return out
    }

    public static func encode(_ bytes: [UInt8]) -> [UInt8] {
        bytes.withUnsafeBytes { encode($0) }
    }

    /// Base64 text of `bytes` (secret), into secret memory, reporting exhausted secret memory.
    static func encodeToSecret(_ bytes: UnsafeRawBufferPointer) throws(SecureMemoryError) -> SecureBytes {
        Sodium.ensureReady()
        let length = sodium_base64_encoded_len(bytes.count, sodium_base64_VARIANT_ORIGINAL)
        // libsodium writes a NUL terminator after the text: the buffer has room for it, and
        // `count` leaves it out (it is zero, as all the arena's unused bytes are).
        let text = try SecureBytes(zeroed: length - 1, spare: 1)
        text.withUnsafeMutableBytes { o in
            _ = sodium_bin2base64(o.baseAddress!.assumingMemoryBound(to: CChar.self), length,
                                  bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count,
                                  sodium_base64_VARIANT_ORIGINAL)
        }
        return text
    }

    /// Strict decode: nil on any character outside the alphabet or wrong padding.
    public static func decode(_ text: UnsafeRawBufferPointer) -> [UInt8]? {
        Sodium.ensureReady()
        var out = [UInt8](repeating: 0, count: text.count / 4 * 3 + 3)
        var written = 0
        let rc = out.withUnsafeMutableBytes { o in
            sodium_base642bin(o.baseAddress!.assumingMemoryBound(to: UInt8.self), o.count,
                              text.baseAddress?.assumingMemoryBound(to: CChar.self), text.count,
                              nil, &written, nil, sodium_base64_VARIANT_ORIGINAL)
        }
        guard rc == 0 else { return nil }
        out.removeSubrange(written...)
        return out
    }

    public static func decode(_ text: [UInt8]) -> [UInt8]? {
        text.withUnsafeBytes { decode($0) }
    }

    public static func decode(_ text: String) -> [UInt8]? {
        decode(Array(text.utf8))
    }

    /// Decode base64 held in secret memory into secret memory, `ignoringWhitespace` such as the
    /// line breaks some writers insert; nil when it is not base64.
    public static func decodeSecret(_ text: SecureBytes, ignoringWhitespace: Bool = true) throws(SecureMemoryError) -> SecureBytes? {
        Sodium.ensureReady()
        // libsodium finds ignored characters with strchr, which also matches the string's NUL
        // terminator: NUL bytes would be skipped as if they were whitespace.
        guard !ignoringWhitespace || !text.withUnsafeBytes({ $0.contains(0) }) else { return nil }
        let capacity = text.count / 4 * 3 + 3
        let scratch = try SecureBytes(zeroed: capacity)
        var written = 0
        let rc = scratch.withUnsafeMutableBytes { o in
            text.withUnsafeBytes { i in
                sodium_base642bin(o.baseAddress!.assumingMemoryBound(to: UInt8.self), o.count,
                                  i.baseAddress?.assumingMemoryBound(to: CChar.self), i.count,
                                  ignoringWhitespace ? " \t\r\n" : nil, &written, nil,
                                  sodium_base64_VARIANT_ORIGINAL)
            }
        }
        guard rc == 0 else { return nil }
        return try scratch.copying(0..<written)
    }
}

extension Array where Element == UInt8 {
    /// `withUnsafeBytes` that keeps a typed error (the standard one only rethrows `any Error`).
    func withBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        let result: Result<R, E> = withUnsafeBytes { bytes in Result { () throws(E) -> R in try body(bytes) } }
        return try result.get()
    }
}
