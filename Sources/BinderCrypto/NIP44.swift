import Foundation

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
        case secretMemory(SecureMemoryError)

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
            case .secretMemory(let error): return "NIP-44: \(error.description)"
            }
        }
    }

    /// The 32-byte conversation key shared by a secret key and a public key.
    public struct ConversationKey: Sendable {
        let key: SecureBytes

        /// HKDF-extract(salt "nip44-v2", the ECDH shared x); the shared x lives on the stack and
        /// is zeroed, so the key's 32 bytes are the only secret memory this needs.
        public init(secretKey: SecretKey, publicKey: PublicKey) throws(SecureMemoryError) {
            key = try secretKey.withSharedX(with: publicKey) { (ikm) throws(SecureMemoryError) in
                try Array("nip44-v2".utf8).withBytes { (salt) throws(SecureMemoryError) in try hmacSHA256(key: salt, [ikm]) }
            }
        }

        /// The key a binder's owner encrypts to themselves with.
        public init(selfOf secretKey: SecretKey) throws(SecureMemoryError) {
            try self.init(secretKey: secretKey, publicKey: secretKey.publicKey)
        }

        public init(raw: SecureBytes) throws(NIP44.Error) {
            guard raw.count == 32 else { throw .invalidKey("conversation key must be 32 bytes") }
            key = raw
        }

        public var hexSecret: SecureBytes { get throws(SecureMemoryError) { try key.hexSecret() } }
    }

    /// The per-message keys of NIP-44: HKDF-expand(conversation key, info = nonce, 76 bytes).
    public struct MessageKeys {
        public let chachaKey: SecureBytes   // 32 bytes
        public let chachaNonce: SecureBytes // 12 bytes
        public let hmacKey: SecureBytes     // 32 bytes
    }

    /// The message keys in secret memory, for tests and test vectors (encryption and decryption
    /// use `withMessageKeys`).
    public static func messageKeys(_ conversationKey: ConversationKey, nonce: [UInt8]) throws(SecureMemoryError) -> MessageKeys {
        precondition(nonce.count == 32, "NIP-44 nonce must be 32 bytes")
        return try nonce.withBytes { (n) throws(SecureMemoryError) in
            try withMessageKeys(conversationKey, nonce: n) { (key, chachaNonce, hmacKey) throws(SecureMemoryError) in
                MessageKeys(chachaKey: try SecureBytes(copying: key), chachaNonce: try SecureBytes(copying: chachaNonce),
                            hmacKey: try SecureBytes(copying: hmacKey))
            }
        }
    }

    /// Runs `body` with the per-message keys (ChaCha20 key, ChaCha20 nonce, HMAC key) held in
    /// scratch memory that is zeroed before this returns. Decrypting and encrypting a document
    /// allocate no secret memory for keys: `sodium_malloc` costs more than the cipher on 4 KB.
    static func withMessageKeys<R, E: Swift.Error>(
        _ conversationKey: ConversationKey, nonce: UnsafeRawBufferPointer,
        _ body: (_ chachaKey: UnsafeRawBufferPointer, _ chachaNonce: UnsafeRawBufferPointer,
                 _ hmacKey: UnsafeRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        precondition(nonce.count == 32, "NIP-44 nonce must be 32 bytes")
        return try withUnsafeTemporaryAllocation(byteCount: 96, alignment: 16) { (okm) throws(E) -> R in
            defer { secureZero(okm) }
            hkdfExpand(prk: conversationKey.key, info: nonce, into: okm)
            return try body(UnsafeRawBufferPointer(rebasing: okm[0..<32]), UnsafeRawBufferPointer(rebasing: okm[32..<44]),
                            UnsafeRawBufferPointer(rebasing: okm[44..<76]))
        }
    }

    /// HKDF-Expand (RFC 5869) with HMAC-SHA256, filling `out` (a multiple of 32 bytes);
    /// libsodium 1.0.18 has no HKDF of its own.
    static func hkdfExpand(prk: SecureBytes, info: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) {
        precondition(out.count % 32 == 0 && out.count <= 255 * 32)
        prk.withUnsafeBytes { key in
            for block in 0..<(out.count / 32) {
                var counter = UInt8(block + 1)
                withUnsafeBytes(of: &counter) { counterByte in
                    let target = UnsafeMutableRawBufferPointer(rebasing: out[(block * 32)..<((block + 1) * 32)])
                    if block == 0 {
                        hmacSHA256(key: key, [info, counterByte], into: target)
                    } else {
                        let previous = UnsafeRawBufferPointer(rebasing: out[((block - 1) * 32)..<(block * 32)])
                        hmacSHA256(key: key, [previous, info, counterByte], into: target)
                    }
                }
            }
        }
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
        return seal(paddedCount: 2 + paddedLength(count), key: key, nonce: nonce) { padded in
            padded[0] = UInt8(count >> 8)
            padded[1] = UInt8(count & 0xff)
            (padded.baseAddress! + 2).copyMemory(from: plaintext.baseAddress!, byteCount: count)
        }
    }

    /// A payload whose padded plaintext is `padded` exactly, with a valid MAC: lets the fuzz
    /// targets reach the checks that run after the MAC (length prefix, padding) with any bytes.
    @_spi(Fuzzing)
    public static func seal(padded: UnsafeRawBufferPointer, key: ConversationKey, nonce: [UInt8]? = nil) -> String {
        seal(paddedCount: padded.count, key: key, nonce: nonce) { target in
            if padded.count > 0 { target.baseAddress!.copyMemory(from: padded.baseAddress!, byteCount: padded.count) }
        }
    }

    /// `version || nonce || ChaCha20(padded plaintext) || MAC`, base64. `fill` puts the padded
    /// plaintext in place, where it is then encrypted: no copy of the plaintext outlives this
    /// call (the buffer becomes ciphertext).
    private static func seal(paddedCount: Int, key: ConversationKey, nonce: [UInt8]?,
                             fill: (UnsafeMutableRawBufferPointer) -> Void) -> String {
        let nonce = nonce ?? randomBytes(32)
        precondition(nonce.count == 32)
        var payload = [UInt8](repeating: 0, count: 1 + 32 + paddedCount + 32)
        payload[0] = 2
        payload.replaceSubrange(1..<33, with: nonce)
        payload.withUnsafeMutableBytes { out in
            let ciphertext = UnsafeMutableRawBufferPointer(rebasing: out[33..<(33 + paddedCount)])
            fill(ciphertext)
            nonce.withUnsafeBytes { n in
                withMessageKeys(key, nonce: n) { chachaKey, chachaNonce, hmacKey in
                    chacha20XOR(UnsafeRawBufferPointer(ciphertext), key: chachaKey, nonce: chachaNonce, into: ciphertext)
                    hmacSHA256(key: hmacKey, [UnsafeRawBufferPointer(rebasing: out[1..<(33 + paddedCount)])],
                               into: UnsafeMutableRawBufferPointer(rebasing: out[(33 + paddedCount)...]))
                }
            }
        }
        // Ciphertext is public: Foundation's encoder (libsodium's constant-time one is slower).
        return Data(payload).base64EncodedString()
    }

    public static func encrypt(_ plaintext: SecureBytes, key: ConversationKey, nonce: [UInt8]? = nil) throws(NIP44.Error) -> String {
        try plaintext.withUnsafeBytes { (p) throws(NIP44.Error) in try encrypt(p, key: key, nonce: nonce) }
    }

    public static func encrypt(_ plaintext: [UInt8], key: ConversationKey, nonce: [UInt8]? = nil) throws(NIP44.Error) -> String {
        try plaintext.withBytes { (p) throws(NIP44.Error) in try encrypt(p, key: key, nonce: nonce) }
    }

    /// The longest payload there is: base64 of a version byte, the nonce, the padded 65,535
    /// bytes with their length, and the MAC (1 + 32 + 2 + 65,536 + 32 = 65,603 bytes).
    public static let maximumPayloadLength = 87_472

    /// Decrypts a base64 payload (given as its ASCII bytes) into secret memory. The MAC is
    /// checked (in constant time) before anything is decrypted.
    public static func decrypt(payload: UnsafeRawBufferPointer, key: ConversationKey) throws(NIP44.Error) -> SecureBytes {
        let length = payload.count
        if length > 0 && payload[0] == UInt8(ascii: "#") { throw .unknownVersion("'#' (non-base64 future version)") }
        guard length >= 132 && length <= maximumPayloadLength else { throw .invalidPayloadSize(length) }
        // The payload is public (ciphertext): Foundation's decoder, several times faster than
        // libsodium's constant-time one, which stays for secret content.
        guard let data = Data(base64Encoded: Data(payload)) else { throw .invalidBase64 }
        guard data.count >= 99 && data.count <= 65_603 else { throw .invalidDataSize(data.count) }
        guard data.first == 2 else { throw .unknownVersion(String(data.first ?? 0)) }
        let macStart = data.count - 32
        return try data.withBytes { (d) throws(NIP44.Error) -> SecureBytes in
            try withMessageKeys(key, nonce: UnsafeRawBufferPointer(rebasing: d[1..<33])) {
                (chachaKey, chachaNonce, hmacKey) throws(NIP44.Error) -> SecureBytes in
                let authenticated = UnsafeRawBufferPointer(rebasing: d[1..<macStart])
                let macMatches = withUnsafeTemporaryAllocation(byteCount: 32, alignment: 8) { expected in
                    hmacSHA256(key: hmacKey, [authenticated], into: expected)
                    return constantTimeEqual(UnsafeRawBufferPointer(expected), UnsafeRawBufferPointer(rebasing: d[macStart...]))
                }
                guard macMatches else { throw .invalidMAC }
                return try open(ciphertext: UnsafeRawBufferPointer(rebasing: d[33..<macStart]),
                                chachaKey: chachaKey, chachaNonce: chachaNonce)
            }
        }
    }

    /// Decrypts `u16 BE length || plaintext || padding` straight into secret memory: the first
    /// ChaCha20 block (on the stack, zeroed) gives the length, which is checked against the
    /// padded size, then only the plaintext's bytes are decrypted. The padding is never
    /// decrypted (NIP-44 does not require it to be zero), and no copy of the plaintext is made.
    static func open(ciphertext: UnsafeRawBufferPointer, chachaKey: UnsafeRawBufferPointer,
                     chachaNonce: UnsafeRawBufferPointer) throws(NIP44.Error) -> SecureBytes {
        let padded = ciphertext.count
        guard padded >= 2 + 32 else { throw .invalidPadding("\(padded) padded bytes, at least 34 needed") }
        return try withUnsafeTemporaryAllocation(byteCount: 64, alignment: 16) { (first) throws(NIP44.Error) -> SecureBytes in
            defer { secureZero(first) }
            let head = min(64, padded)
            let firstBlock = UnsafeMutableRawBufferPointer(rebasing: first[0..<head])
            chacha20XOR(UnsafeRawBufferPointer(rebasing: ciphertext[0..<head]), key: chachaKey, nonce: chachaNonce,
                        counter: 0, into: firstBlock)
            let unpadded = try unpaddedLength(firstBlock[0], firstBlock[1], padded: padded)
            let plaintext: SecureBytes
            do throws(SecureMemoryError) { plaintext = try SecureBytes(zeroed: unpadded) } catch { throw .secretMemory(error) }
            plaintext.withUnsafeMutableBytes { out in
                let fromFirst = min(unpadded, head - 2)
                out.baseAddress!.copyMemory(from: first.baseAddress! + 2, byteCount: fromFirst)
                if unpadded > fromFirst {
                    // Bytes 64... of the padded text are blocks 1... of the keystream.
                    chacha20XOR(UnsafeRawBufferPointer(rebasing: ciphertext[64..<(2 + unpadded)]), key: chachaKey,
                                nonce: chachaNonce, counter: 1,
                                into: UnsafeMutableRawBufferPointer(rebasing: out[fromFirst...]))
                }
            }
            return plaintext
        }
    }

    /// The plaintext length a padded text of `padded` bytes declares in its first two bytes,
    /// once checked against the padded size.
    static func unpaddedLength(_ high: UInt8, _ low: UInt8, padded: Int) throws(NIP44.Error) -> Int {
        let unpadded = Int(high) << 8 | Int(low)
        guard unpadded >= 1 else { throw .invalidPadding("declared length is 0") }
        guard padded == 2 + paddedLength(unpadded) else {
            throw .invalidPadding("declared length \(unpadded) does not fit \(padded - 2) padded bytes")
        }
        return unpadded
    }

    public static func decrypt(payload: [UInt8], key: ConversationKey) throws(NIP44.Error) -> SecureBytes {
        try payload.withBytes { (p) throws(NIP44.Error) in try decrypt(payload: p, key: key) }
    }

    public static func decrypt(payload: String, key: ConversationKey) throws(NIP44.Error) -> SecureBytes {
        try decrypt(payload: Array(payload.utf8), key: key)
    }
}

private extension Data {
    /// `withUnsafeBytes` keeping a typed error, as `Array.withBytes`.
    func withBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        let result: Result<R, E> = withUnsafeBytes { bytes in Result { () throws(E) -> R in try body(bytes) } }
        return try result.get()
    }
}
