internal import CSodium

/// Attachment sidecars (`*.enc`): the bytes of photos, PDFs and recordings, too large for a
/// NIP-44 document. See docs/FORMAT.md, "Attachments".
public enum Sidecar {
    public enum Error: Swift.Error, Equatable, CustomStringConvertible {
        case empty
        case truncated(String)
        case wrappedKey(NIP44.Error)
        case wrappedKeyNotHex
        case authenticationFailed
        case legacyNotBase64
        case legacyMAC
        case contentNotBase64
        case tooLarge(Int)

        public var description: String {
            switch self {
            case .empty: return "sidecar: file is empty"
            case .truncated(let what): return "sidecar: truncated (\(what))"
            case .wrappedKey(let e): return "sidecar: wrapped data key: \(e.description)"
            case .wrappedKeyNotHex: return "sidecar: wrapped data key does not decrypt to 64 hex characters"
            case .authenticationFailed: return "sidecar: content fails authentication (wrong key or tampered)"
            case .legacyNotBase64: return "sidecar (legacy 0xFF): file is not base64"
            case .legacyMAC: return "sidecar (legacy 0xFF): MAC does not match (wrong key or tampered)"
            case .contentNotBase64: return "sidecar: decrypted content is not base64 text"
            case .tooLarge(let n): return "sidecar: \(n) bytes is too large to encrypt"
            }
        }
    }

    public enum Format: Sendable, Equatable { case dek, legacy }

    /// Which format a sidecar is in: a raw `0x02` first byte is the DEK format; anything else
    /// is a base64 string (the legacy `0xFF` format).
    public static func format(of bytes: some Collection<UInt8>) -> Format {
        bytes.first == 0x02 ? .dek : .legacy
    }

    static let aeadNonceSize = Int(crypto_aead_chacha20poly1305_IETF_NPUBBYTES)
    static let aeadTagSize = Int(crypto_aead_chacha20poly1305_IETF_ABYTES)

    /// Encrypts an attachment in the current DEK format:
    /// `0x02 || len(u16 BE) || wrapped_dek || nonce(12) || ChaCha20-Poly1305(base64(bytes))`.
    public static func encrypt(_ content: UnsafeRawBufferPointer, key: NIP44.ConversationKey) throws(Sidecar.Error) -> [UInt8] {
        try seal(text: Base64.encodeSecret(SecureBytes(content)), key: key)
    }

    /// The DEK format around `text`, which should be base64 (`encrypt` gives it so); the fuzz
    /// targets seal any bytes, to reach what runs after authentication.
    @_spi(Fuzzing)
    public static func seal(text: SecureBytes, key: NIP44.ConversationKey) throws(Sidecar.Error) -> [UInt8] {
        Sodium.ensureReady()
        let dek = randomSecret(32)
        let wrapped: [UInt8]
        do { wrapped = Array(try NIP44.encrypt(dek.hexSecret(), key: key).utf8) } catch { throw .wrappedKey(error) }
        guard wrapped.count <= Int(UInt16.max) else { throw .wrappedKey(.invalidPayloadSize(wrapped.count)) }
        let nonce = randomBytes(aeadNonceSize)
        let header = 1 + 2 + wrapped.count + aeadNonceSize
        var out = [UInt8](repeating: 0, count: header + text.count + aeadTagSize)
        out[0] = 0x02
        out[1] = UInt8(wrapped.count >> 8)
        out[2] = UInt8(wrapped.count & 0xff)
        out.replaceSubrange(3..<(3 + wrapped.count), with: wrapped)
        out.replaceSubrange((3 + wrapped.count)..<header, with: nonce)
        var written: UInt64 = 0
        out.withUnsafeMutableBytes { o in
            text.withUnsafeBytes { t in
                dek.withUnsafeBytes { k in
                    _ = crypto_aead_chacha20poly1305_ietf_encrypt(
                        (o.baseAddress! + header).assumingMemoryBound(to: UInt8.self), &written,
                        t.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(t.count),
                        nil, 0, nil, nonce, k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
        }
        precondition(Int(written) == text.count + aeadTagSize)
        return out
    }

    public static func encrypt(_ content: [UInt8], key: NIP44.ConversationKey) throws(Sidecar.Error) -> [UInt8] {
        try content.withBytes { (c) throws(Sidecar.Error) in try encrypt(c, key: key) }
    }

    /// Decrypts a sidecar of either format to the attachment's original bytes.
    public static func decrypt(_ bytes: [UInt8], key: NIP44.ConversationKey) throws(Sidecar.Error) -> SecureBytes {
        guard !bytes.isEmpty else { throw .empty }
        switch format(of: bytes) {
        case .dek: return try decryptDEK(bytes, key: key)
        case .legacy: return try decryptLegacy(bytes, key: key)
        }
    }

    static func decryptDEK(_ bytes: [UInt8], key: NIP44.ConversationKey) throws(Sidecar.Error) -> SecureBytes {
        Sodium.ensureReady()
        guard bytes.count >= 3 else { throw .truncated("no wrapped-key length") }
        let wrappedLength = Int(bytes[1]) << 8 | Int(bytes[2])
        let header = 3 + wrappedLength + aeadNonceSize
        guard bytes.count >= header + aeadTagSize else {
            throw .truncated("\(bytes.count) bytes, header and tag need \(header + aeadTagSize)")
        }
        let hex: SecureBytes
        do {
            hex = try bytes.withBytes { (b) throws(NIP44.Error) in
                try NIP44.decrypt(payload: UnsafeRawBufferPointer(rebasing: b[3..<(3 + wrappedLength)]), key: key)
            }
        } catch { throw .wrappedKey(error) }
        guard hex.count == 64, let dek = Hex.decodeSecret(hex) else { throw .wrappedKeyNotHex }
        let cipherCount = bytes.count - header
        let text = SecureBytes(count: cipherCount - aeadTagSize)
        var written: UInt64 = 0
        let rc = bytes.withUnsafeBytes { b in
            text.withUnsafeMutableBytes { t in
                dek.withUnsafeBytes { k in
                    crypto_aead_chacha20poly1305_ietf_decrypt(
                        t.baseAddress!.assumingMemoryBound(to: UInt8.self), &written, nil,
                        (b.baseAddress! + header).assumingMemoryBound(to: UInt8.self), UInt64(cipherCount),
                        nil, 0,
                        (b.baseAddress! + 3 + wrappedLength).assumingMemoryBound(to: UInt8.self),
                        k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
        }
        guard rc == 0 else { throw .authenticationFailed }
        return try content(ofText: text)
    }

    /// The bytes a legacy sidecar's base64 holds (line breaks and spaces ignored).
    static func legacyRaw(_ bytes: [UInt8]) -> [UInt8]? {
        Base64.decode(bytes.filter { $0 != UInt8(ascii: "\n") && $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: " ") })
    }

    static func decryptLegacy(_ bytes: [UInt8], key: NIP44.ConversationKey) throws(Sidecar.Error) -> SecureBytes {
        guard let raw = legacyRaw(bytes) else { throw .legacyNotBase64 }
        guard raw.count >= 1 + 32 + 32 else { throw .truncated("legacy sidecar of \(raw.count) bytes") }
        guard raw[0] == 0xFF else { throw .legacyNotBase64 }
        let nonce = Array(raw[1..<33])
        let macStart = raw.count - 32
        let keys = NIP44.messageKeys(key, nonce: nonce)
        return try raw.withBytes { (r) throws(Sidecar.Error) -> SecureBytes in
            let expected = keys.hmacKey.withUnsafeBytes { hmacSHA256(key: $0, [UnsafeRawBufferPointer(rebasing: r[1..<macStart])]) }
            let ok = expected.withUnsafeBytes { constantTimeEqual($0, UnsafeRawBufferPointer(rebasing: r[macStart...])) }
            guard ok else { throw .legacyMAC }
            let ciphertext = UnsafeRawBufferPointer(rebasing: r[33..<macStart])
            let text = SecureBytes(count: ciphertext.count)
            keys.chachaKey.withUnsafeBytes { k in
                keys.chachaNonce.withUnsafeBytes { n in
                    text.withUnsafeMutableBytes { chacha20XOR(ciphertext, key: k, nonce: n, into: $0) }
                }
            }
            return try content(ofText: text)
        }
    }

    /// The attachment's bytes from the base64 text a sidecar holds. The text is unbroken, or
    /// wrapped into lines from the start (MIME and PEM writers break lines every 64 or 76
    /// characters) or ends with a line break: whitespace is ignored only when it shows in the
    /// first `wrapSample` bytes or the last two. Whitespace that starts deeper in is refused,
    /// because `plaintextSize` reads only those bytes and must never give a wrong size.
    static func content(ofText text: SecureBytes) throws(Sidecar.Error) -> SecureBytes {
        let wrapped = text.withUnsafeBytes { t in
            showsWhitespace(UnsafeRawBufferPointer(rebasing: t.prefix(wrapSample)))
                || showsWhitespace(UnsafeRawBufferPointer(rebasing: t.suffix(2)))
        }
        guard let content = Base64.decodeSecret(text, ignoringWhitespace: wrapped) else { throw .contentNotBase64 }
        return content
    }

    /// How much of a sidecar's text (two ChaCha20 blocks) shows whether it is wrapped.
    static let wrapSample = 128

    static func showsWhitespace(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.contains { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
    }

    /// Writes the legacy `0xFF` format. binder never writes it for new attachments; it exists so
    /// tests can make legacy sidecars and so a legacy one can be re-encrypted in place.
    public static func encryptLegacy(_ content: [UInt8], key: NIP44.ConversationKey, nonce: [UInt8]? = nil) -> [UInt8] {
        sealLegacy(text: Base64.encode(content), key: key, nonce: nonce)
    }

    /// The legacy format around `text` (base64 when `encryptLegacy` gives it; any bytes from the
    /// fuzz targets).
    @_spi(Fuzzing)
    public static func sealLegacy(text: [UInt8], key: NIP44.ConversationKey, nonce: [UInt8]? = nil) -> [UInt8] {
        let nonce = nonce ?? randomBytes(32)
        let keys = NIP44.messageKeys(key, nonce: nonce)
        var raw = [UInt8](repeating: 0, count: 1 + 32 + text.count + 32)
        raw[0] = 0xFF
        raw.replaceSubrange(1..<33, with: nonce)
        raw.withUnsafeMutableBytes { out in
            let ciphertext = UnsafeMutableRawBufferPointer(rebasing: out[33..<(33 + text.count)])
            keys.chachaKey.withUnsafeBytes { k in
                keys.chachaNonce.withUnsafeBytes { n in
                    text.withUnsafeBytes { chacha20XOR($0, key: k, nonce: n, into: ciphertext) }
                }
            }
            let mac = keys.hmacKey.withUnsafeBytes { hmacSHA256(key: $0, [UnsafeRawBufferPointer(rebasing: out[1..<(33 + text.count)])]) }
            mac.withUnsafeBytes { (out.baseAddress! + 33 + text.count).copyMemory(from: $0.baseAddress!, byteCount: 32) }
        }
        return Base64.encode(raw)
    }

    /// Inline attachments (the original spec): the document's `value` is base64 of the bytes.
    public static func decodeInline(_ value: String) -> SecureBytes? {
        Base64.decodeSecret(SecureBytes(utf8: value))
    }
}
