/// NIP-44 version 2: the encryption of every document in a binder.
///
/// Modeled on the reference implementation: explicit length checks first, the MAC checked in
/// constant time before anything is decrypted, and an error that names what is wrong.
public enum NIP44 {
    public static let minPlaintextSize = 1
    public static let maxPlaintextSize = 65_535

    public enum Error: Swift.Error, Equatable, CustomStringConvertible {
        case unknownVersion(String)
        case invalidPayloadSize(Int)
        case invalidBase64
        case invalidDataSize(Int)
        case invalidMAC
        case invalidPadding(String)
        case plaintextSize(Int)
        case invalidKey(String)

        public var description: String {
            switch self {
            case .unknownVersion(let v): return "NIP-44 payload: unknown encryption version \(v)"
            case .invalidPayloadSize(let n): return "NIP-44 payload: invalid length \(n) (must be 132...87472 base64 characters)"
            case .invalidBase64: return "NIP-44 payload: not valid base64"
            case .invalidDataSize(let n): return "NIP-44 payload: invalid decoded length \(n) (must be 99...65603 bytes)"
            case .invalidMAC: return "NIP-44 payload: MAC does not match (wrong key or tampered data)"
            case .invalidPadding(let why): return "NIP-44 payload: invalid padding (\(why))"
            case .plaintextSize(let n): return "NIP-44 plaintext: \(n) bytes is outside 1...65535"
            case .invalidKey(let why): return "NIP-44 key: \(why)"
            }
        }
    }

    /// The 32-byte conversation key shared by a secret key and a public key.
    public struct ConversationKey: Sendable {
        let key: SecureBytes

        public init(secretKey: SecretKey, publicKey: PublicKey) {
            let shared = secretKey.sharedX(with: publicKey)
            key = shared.withUnsafeBytes { ikm in
                Array("nip44-v2".utf8).withUnsafeBytes { salt in hmacSHA256(key: salt, [ikm]) }
            }
        }

        /// The key a binder's owner encrypts to themselves with.
        public init(selfOf secretKey: SecretKey) {
            self.init(secretKey: secretKey, publicKey: secretKey.publicKey)
        }

        public init(raw: SecureBytes) throws(NIP44.Error) {
            guard raw.count == 32 else { throw .invalidKey("conversation key must be 32 bytes") }
            key = raw
        }

        public var hexSecret: SecureBytes { key.hexSecret() }
    }

    /// The per-message keys of NIP-44: HKDF-expand(conversation key, info = nonce, 76 bytes).
    public struct MessageKeys {
        public let chachaKey: SecureBytes   // 32 bytes
        public let chachaNonce: SecureBytes // 12 bytes
        public let hmacKey: SecureBytes     // 32 bytes
    }

    public static func messageKeys(_ conversationKey: ConversationKey, nonce: [UInt8]) -> MessageKeys {
        precondition(nonce.count == 32, "NIP-44 nonce must be 32 bytes")
        let okm = hkdfExpand(prk: conversationKey.key, info: nonce, length: 76)
        return MessageKeys(chachaKey: okm.slice(0..<32), chachaNonce: okm.slice(32..<44), hmacKey: okm.slice(44..<76))
    }

    /// HKDF-Expand (RFC 5869) with HMAC-SHA256; libsodium 1.0.18 has no HKDF of its own.
    static func hkdfExpand(prk: SecureBytes, info: [UInt8], length: Int) -> SecureBytes {
        let out = SecureBytes(count: length)
        var previous: SecureBytes? = nil
        var written = 0
        var counter: UInt8 = 1
        while written < length {
            let block: SecureBytes = prk.withUnsafeBytes { key in
                info.withUnsafeBytes { infoBytes in
                    withUnsafeBytes(of: counter) { counterByte in
                        if let previous {
                            return previous.withUnsafeBytes { hmacSHA256(key: key, [$0, infoBytes, counterByte]) }
                        }
                        return hmacSHA256(key: key, [infoBytes, counterByte])
                    }
                }
            }
            let take = min(block.count, length - written)
            out.withUnsafeMutableBytes { o in
                block.withUnsafeBytes { b in
                    (o.baseAddress! + written).copyMemory(from: b.baseAddress!, byteCount: take)
                }
            }
            written += take
            previous = block
            counter += 1
        }
        return out
    }

    public static func paddedLength(_ unpadded: Int) -> Int {
        precondition(unpadded > 0)
        if unpadded <= 32 { return 32 }
        let nextPower = 1 << (Int.bitWidth - (unpadded - 1).leadingZeroBitCount)
        let chunk = nextPower <= 256 ? 32 : nextPower / 8
        return chunk * ((unpadded - 1) / chunk + 1)
    }

    /// Encrypts `plaintext` (1...65,535 bytes) to a base64 payload. `nonce` is for test vectors;
    /// leave it nil to draw a fresh random one.
    public static func encrypt(_ plaintext: UnsafeRawBufferPointer, key: ConversationKey,
                               nonce: [UInt8]? = nil) throws(NIP44.Error) -> String {
        let count = plaintext.count
        guard count >= minPlaintextSize && count <= maxPlaintextSize else { throw .plaintextSize(count) }
        let nonce = nonce ?? randomBytes(32)
        precondition(nonce.count == 32)
        let keys = messageKeys(key, nonce: nonce)
        let paddedCount = 2 + paddedLength(count)
        let padded = SecureBytes(count: paddedCount)
        padded.withUnsafeMutableBytes { p in
            p[0] = UInt8(count >> 8)
            p[1] = UInt8(count & 0xff)
            (p.baseAddress! + 2).copyMemory(from: plaintext.baseAddress!, byteCount: count)
        }
        // payload = version || nonce || ciphertext || mac
        var payload = [UInt8](repeating: 0, count: 1 + 32 + paddedCount + 32)
        payload[0] = 2
        payload.replaceSubrange(1..<33, with: nonce)
        payload.withUnsafeMutableBytes { out in
            let ciphertext = UnsafeMutableRawBufferPointer(rebasing: out[33..<(33 + paddedCount)])
            keys.chachaKey.withUnsafeBytes { k in
                keys.chachaNonce.withUnsafeBytes { n in
                    padded.withUnsafeBytes { chacha20XOR($0, key: k, nonce: n, into: ciphertext) }
                }
            }
            let mac = keys.hmacKey.withUnsafeBytes { hk in
                hmacSHA256(key: hk, [UnsafeRawBufferPointer(rebasing: out[1..<(33 + paddedCount)])])
            }
            mac.withUnsafeBytes { (out.baseAddress! + 33 + paddedCount).copyMemory(from: $0.baseAddress!, byteCount: 32) }
        }
        return String(decoding: Base64.encode(payload), as: UTF8.self)
    }

    public static func encrypt(_ plaintext: SecureBytes, key: ConversationKey, nonce: [UInt8]? = nil) throws(NIP44.Error) -> String {
        try plaintext.withUnsafeBytes { (p) throws(NIP44.Error) in try encrypt(p, key: key, nonce: nonce) }
    }

    public static func encrypt(_ plaintext: [UInt8], key: ConversationKey, nonce: [UInt8]? = nil) throws(NIP44.Error) -> String {
        try plaintext.withBytes { (p) throws(NIP44.Error) in try encrypt(p, key: key, nonce: nonce) }
    }

    /// Decrypts a base64 payload (given as its ASCII bytes) into secret memory.
    public static func decrypt(payload: UnsafeRawBufferPointer, key: ConversationKey) throws(NIP44.Error) -> SecureBytes {
        let length = payload.count
        if length > 0 && payload[0] == UInt8(ascii: "#") { throw .unknownVersion("'#' (non-base64 future version)") }
        guard length >= 132 && length <= 87_472 else { throw .invalidPayloadSize(length) }
        guard let data = Base64.decode(payload) else { throw .invalidBase64 }
        guard data.count >= 99 && data.count <= 65_603 else { throw .invalidDataSize(data.count) }
        guard data[0] == 2 else { throw .unknownVersion(String(data[0])) }
        let nonce = Array(data[1..<33])
        let macStart = data.count - 32
        let keys = messageKeys(key, nonce: nonce)
        return try data.withBytes { (d) throws(NIP44.Error) -> SecureBytes in
            let authenticated = UnsafeRawBufferPointer(rebasing: d[1..<macStart])
            let expected = keys.hmacKey.withUnsafeBytes { hmacSHA256(key: $0, [authenticated]) }
            let macMatches = expected.withUnsafeBytes {
                constantTimeEqual($0, UnsafeRawBufferPointer(rebasing: d[macStart...]))
            }
            guard macMatches else { throw .invalidMAC }
            let ciphertext = UnsafeRawBufferPointer(rebasing: d[33..<macStart])
            let padded = SecureBytes(count: ciphertext.count)
            keys.chachaKey.withUnsafeBytes { k in
                keys.chachaNonce.withUnsafeBytes { n in
                    padded.withUnsafeMutableBytes { chacha20XOR(ciphertext, key: k, nonce: n, into: $0) }
                }
            }
            let unpadded = Int(padded[0]) << 8 | Int(padded[1])
            guard unpadded >= 1 else { throw .invalidPadding("declared length is 0") }
            guard padded.count == 2 + paddedLength(unpadded) else {
                throw .invalidPadding("declared length \(unpadded) does not fit \(padded.count - 2) padded bytes")
            }
            return padded.slice(2..<(2 + unpadded))
        }
    }

    public static func decrypt(payload: [UInt8], key: ConversationKey) throws(NIP44.Error) -> SecureBytes {
        try payload.withBytes { (p) throws(NIP44.Error) in try decrypt(payload: p, key: key) }
    }

    public static func decrypt(payload: String, key: ConversationKey) throws(NIP44.Error) -> SecureBytes {
        try decrypt(payload: Array(payload.utf8), key: key)
    }
}
