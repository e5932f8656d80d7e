/// Constant-time decoding of standard base64 (`A–Z a–z 0–9 + /`, `=` padding), for the text a
/// sidecar holds: an attachment's bytes, so secret. libsodium's constant-time decoder handles a
/// character per call and searched the ignore list for each, about 80 instructions a
/// character: 88% of decrypting a sidecar. This one maps 16 characters at a time with SIMD
/// arithmetic and packs them with shifts; no branch and no memory access depends
/// on the text (only on its length), and an invalid character is remembered in a mask that is
/// looked at once, at the end.
enum Base64Decoder {
    /// The decoded size of unbroken, padded base64 text of `count` characters ending in
    /// `last2` (its last two characters); nil when `count` is not a multiple of four.
    static func decodedCount(textCount count: Int, lastTwo last2: (UInt8, UInt8)) -> Int? {
        guard count % 4 == 0 else { return nil }
        guard count > 0 else { return 0 }
        let pad = UInt8(ascii: "=")
        return count / 4 * 3 - (last2.1 == pad ? (last2.0 == pad ? 2 : 1) : 0)
    }

    /// Decodes `text` (a multiple of 4 characters, no padding: every group full) into `out`
    /// (exactly `text.count / 4 * 3` bytes). False if any character is outside the alphabet.
    static func decodeFullGroups(_ text: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) -> Bool {
        precondition(text.count % 4 == 0 && out.count == text.count / 4 * 3)
        guard text.count > 0 else { return true }
        let input = text.baseAddress!, output = out.baseAddress!
        // All ones while every character so far is in the alphabet; ORs of all characters (bit 7: not ASCII).
        var good = SIMD16<UInt8>(repeating: 0xFF), seen = SIMD16<UInt8>(repeating: 0)
        var read = 0, written = 0
        // 16 characters give 12 bytes, stored as four 4-byte words: the last word writes one
        // byte past its 12, so the vector loop stops while a group follows to take that byte.
        while text.count - read >= 20 {
            let chars = (input + read).loadUnaligned(as: SIMD16<UInt8>.self)
            let (values, inAlphabet) = sextets(chars)
            good &= inAlphabet
            seen |= chars
            // Pairs of sextets into 12 bits per 16-bit lane, then pairs of those into 24 bits
            // per 32-bit lane (each lane holds a group's four characters, first in the low byte).
            let pairs = unsafeBitCast(values, to: SIMD8<UInt16>.self)
            let twelve = (pairs & SIMD8(repeating: 0x3F)) &<< SIMD8(repeating: 6) | pairs &>> SIMD8(repeating: 8)
            let quads = unsafeBitCast(twelve, to: SIMD4<UInt32>.self)
            let low: SIMD4<UInt32> = (quads & SIMD4(repeating: 0xFFF)) &<< SIMD4(repeating: 12)
            let packed: SIMD4<UInt32> = low | quads &>> SIMD4(repeating: 16)
            for lane in 0..<4 {
                (output + written + 3 * lane).storeBytes(of: (packed[lane] &<< 8).bigEndian, as: UInt32.self)
            }
            read += 16
            written += 12
        }
        var badScalar: UInt32 = 0
        while read < text.count {
            var group: UInt32 = 0
            for i in 0..<4 {
                let (value, invalid) = sextet(input.load(fromByteOffset: read + i, as: UInt8.self))
                group = group << 6 | value
                badScalar |= invalid
            }
            output.storeBytes(of: UInt8(truncatingIfNeeded: group >> 16), toByteOffset: written, as: UInt8.self)
            output.storeBytes(of: UInt8(truncatingIfNeeded: group >> 8), toByteOffset: written + 1, as: UInt8.self)
            output.storeBytes(of: UInt8(truncatingIfNeeded: group), toByteOffset: written + 2, as: UInt8.self)
            read += 4
            written += 3
        }
        return good == SIMD16<UInt8>(repeating: 0xFF) && seen & SIMD16(repeating: 0x80) == SIMD16(repeating: 0) && badScalar == 0
    }

    /// Decodes one final group of 4 characters that may end in `=` or `==` into `out` (3, 2
    /// or 1 bytes, as its padding says). As libsodium's decoder, the bits the padding leaves
    /// over must be zero. False when the group is not valid base64.
    static func decodeLastGroup(_ group: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) -> Bool {
        precondition(group.count == 4)
        let pad = UInt8(ascii: "=")
        let padding = group[3] == pad ? (group[2] == pad ? 2 : 1) : 0
        precondition(out.count == 3 - padding)
        var bits: UInt32 = 0, invalid: UInt32 = 0
        for i in 0..<(4 - padding) {
            let (value, bad) = sextet(group[i])
            bits = bits << 6 | value
            invalid |= bad
        }
        bits <<= 6 * UInt32(padding)
        let leftover = padding == 2 ? bits & 0xFFFF : (padding == 1 ? bits & 0xFF : 0)
        for i in 0..<out.count { out[i] = UInt8(truncatingIfNeeded: bits >> (16 - 8 * UInt32(i))) }
        return invalid == 0 && leftover == 0
    }

    /// Decodes unbroken, padded base64 `text` into `out`, which must be `decodedCount` bytes.
    static func decode(_ text: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) -> Bool {
        guard text.count > 0 else { return out.count == 0 }
        let body = text.count - 4
        let bodyOut = body / 4 * 3
        let fullOK = decodeFullGroups(UnsafeRawBufferPointer(rebasing: text[0..<body]),
                                      into: UnsafeMutableRawBufferPointer(rebasing: out[0..<bodyOut]))
        let lastOK = decodeLastGroup(UnsafeRawBufferPointer(rebasing: text[body...]),
                                     into: UnsafeMutableRawBufferPointer(rebasing: out[bodyOut...]))
        return fullOK && lastOK
    }

    /// The 6-bit values of 16 characters (as 7-bit ASCII), and 0xFF where a character is in the
    /// alphabet. Only wrapping arithmetic, shifts and masks: Swift lowers SIMD comparisons
    /// against constants lane by lane, these to a few vector instructions.
    @inline(__always)
    private static func sextets(_ c: SIMD16<UInt8>) -> (SIMD16<UInt8>, SIMD16<UInt8>) {
        typealias V = SIMD16<UInt8>
        let c7 = c & V(repeating: 0x7F)   // bit 7 (not ASCII) is checked by the caller
        let seven = V(repeating: 7), one = V(repeating: 1)
        // 0xFF where lo <= c7 <= hi, else 0 (both differences are below 128 exactly when inside)
        let upper = (((c7 &- V(repeating: 65)) | (V(repeating: 90) &- c7)) &>> seven) &- one    // A-Z
        let lower = (((c7 &- V(repeating: 97)) | (V(repeating: 122) &- c7)) &>> seven) &- one   // a-z
        let digit = (((c7 &- V(repeating: 48)) | (V(repeating: 57) &- c7)) &>> seven) &- one    // 0-9
        let plus = (((c7 &- V(repeating: 43)) | (V(repeating: 43) &- c7)) &>> seven) &- one     // +
        let slash = (((c7 &- V(repeating: 47)) | (V(repeating: 47) &- c7)) &>> seven) &- one    // /
        let values = (upper & (c7 &- V(repeating: 65))) | (lower & (c7 &- V(repeating: 71)))
            | (digit & (c7 &+ V(repeating: 4))) | (plus & V(repeating: 62)) | (slash & V(repeating: 63))
        return (values, upper | lower | digit | plus | slash)
    }

    /// One character's 6-bit value and 1 if it is outside the alphabet (0 if inside), without
    /// branches: each range test is a mask made from the borrow of a subtraction.
    @inline(__always)
    private static func sextet(_ char: UInt8) -> (UInt32, UInt32) {
        let c = UInt32(char)
        // all ones when lo <= c <= hi, else zero
        @inline(__always) func within(_ lo: UInt32, _ hi: UInt32) -> UInt32 {
            ((c &- lo) | (hi &- c)) >> 31 &- 1
        }
        let upper = within(65, 90), lower = within(97, 122), digit = within(48, 57)
        let plus = within(43, 43), slash = within(47, 47)
        let value = (upper & (c &- 65)) | (lower & (c &- 71)) | (digit & (c &+ 4)) | (plus & 62) | (slash & 63)
        return (value & 0x3F, ((upper | lower | digit | plus | slash) & 1) ^ 1)
    }
}
