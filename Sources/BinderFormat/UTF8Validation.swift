/// Strict UTF-8 checking (RFC 3629: no overlong forms, no encoded surrogates, nothing
/// above U+10FFFF) that reports where the problem is. `String(decoding:)` would silently
/// replace bad bytes, turning a corrupt file into a changed one on the next save.
enum UTF8Validation {
    /// The length of the valid UTF-8 sequence starting at `index`, or nil if the bytes
    /// there are not one.
    static func sequenceLength(in bytes: [UInt8], at index: Int) -> Int? {
        let lead = bytes[index]
        if lead < 0x80 { return 1 }
        let length: Int
        var lower: UInt8 = 0x80
        var upper: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; lower = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; upper = 0x9F
        case 0xF0: length = 4; lower = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; upper = 0x8F
        default: return nil
        }
        guard index + length <= bytes.count, (lower...upper).contains(bytes[index + 1]) else { return nil }
        for offset in 2..<max(2, length) where bytes[index + offset] & 0xC0 != 0x80 {
            return nil
        }
        return length
    }

    /// The offset of the first byte that is not part of valid UTF-8, or nil if all are.
    static func firstInvalidOffset(in bytes: [UInt8]) -> Int? {
        var index = 0
        while index < bytes.count {
            if bytes[index] < 0x80 {
                index += 1
            } else if let length = sequenceLength(in: bytes, at: index) {
                index += length
            } else {
                return index
            }
        }
        return nil
    }
}
