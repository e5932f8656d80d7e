/// Bech32 (BIP-173) as NIP-19 uses it, without BIP-173's 90-character limit: an
/// `ncryptsec` is 162 characters long.
public enum Bech32 {
    public enum DecodeError: Error, Equatable, CustomStringConvertible {
        case mixedCase, noSeparator, invalidCharacter(Character), checksum, tooShort, padding

        public var description: String {
            switch self {
            case .mixedCase: return "mixes upper and lower case"
            case .noSeparator: return "has no '1' separator"
            case .invalidCharacter(let c): return "has a character outside bech32 ('\(c)')"
            case .checksum: return "checksum does not match (a typo?)"
            case .tooShort: return "is too short"
            case .padding: return "has invalid padding bits"
            }
        }
    }

    private static let charset = Array("qpzry9x8gf2tvdw0s3jn54khce6mua7l".utf8)
    private static let reverse: [Int8] = {
        var table = [Int8](repeating: -1, count: 128)
        for (i, c) in charset.enumerated() { table[Int(c)] = Int8(i) }
        return table
    }()

    private static func polymod(_ values: [UInt8]) -> UInt32 {
        let generator: [UInt32] = [0x3b6a_57b2, 0x2650_8e6d, 0x1ea1_19fa, 0x3d42_33dd, 0x2a14_62b3]
        var chk: UInt32 = 1
        for v in values {
            let top = chk >> 25
            chk = (chk & 0x1ff_ffff) << 5 ^ UInt32(v)
            for i in 0..<5 where (top >> i) & 1 == 1 { chk ^= generator[i] }
        }
        return chk
    }

    private static func hrpExpand(_ hrp: [UInt8]) -> [UInt8] {
        hrp.map { $0 >> 5 } + [0] + hrp.map { $0 & 31 }
    }

    static func convertBits(_ data: [UInt8], from: Int, to: Int, pad: Bool) -> [UInt8]? {
        var acc = 0, bits = 0
        var out = [UInt8]()
        let maxv = (1 << to) - 1
        for value in data {
            acc = (acc << from) | Int(value)
            bits += from
            while bits >= to {
                bits -= to
                out.append(UInt8((acc >> bits) & maxv))
            }
        }
        if pad {
            if bits > 0 { out.append(UInt8((acc << (to - bits)) & maxv)) }
        } else if bits >= from || ((acc << (to - bits)) & maxv) != 0 {
            return nil
        }
        return out
    }

    public static func encode(hrp: String, data: [UInt8]) -> String {
        let hrpBytes = Array(hrp.utf8)
        let words = convertBits(data, from: 8, to: 5, pad: true)!
        let mod = polymod(hrpExpand(hrpBytes) + words + [0, 0, 0, 0, 0, 0]) ^ 1
        let checksum = (0..<6).map { UInt8((mod >> (5 * (5 - $0))) & 31) }
        return String(decoding: hrpBytes + [UInt8(ascii: "1")] + (words + checksum).map { charset[Int($0)] },
                      as: UTF8.self)
    }

    public static func decode(_ text: String) throws(DecodeError) -> (hrp: String, data: [UInt8]) {
        let raw = Array(text.utf8)
        let hasLower = raw.contains { $0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z") }
        let hasUpper = raw.contains { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }
        if hasLower && hasUpper { throw .mixedCase }
        let lowered = raw.map { ($0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z")) ? $0 + 32 : $0 }
        guard let separator = lowered.lastIndex(of: UInt8(ascii: "1")), separator >= 1 else { throw .noSeparator }
        guard lowered.count - separator - 1 >= 6 else { throw .tooShort }
        let hrp = Array(lowered[..<separator])
        for c in hrp where c < 33 || c > 126 { throw .invalidCharacter(Character(UnicodeScalar(c))) }
        var words = [UInt8]()
        for c in lowered[(separator + 1)...] {
            guard c < 128, reverse[Int(c)] >= 0 else { throw .invalidCharacter(Character(UnicodeScalar(c))) }
            words.append(UInt8(reverse[Int(c)]))
        }
        guard polymod(hrpExpand(hrp) + words) == 1 else { throw .checksum }
        guard let data = convertBits(Array(words.dropLast(6)), from: 5, to: 8, pad: false) else { throw .padding }
        return (String(decoding: hrp, as: UTF8.self), data)
    }
}
