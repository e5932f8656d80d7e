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
        case secretMemory(SecureMemoryError)

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
            case .secretMemory(let error): return "sidecar: \(error.description)"
            }
        }
    }

    public enum Format: Sendable, Equatable { case dek, legacy }

    /// Which format a sidecar is in: a raw `0x02` first byte is the DEK format; anything else
    /// is a base64 string (the legacy `0xFF` format).
    /// The most bytes a stored sidecar of an attachment of up to `size` bytes has, in any form
    /// binder reads (base64 text is 4/3 of the bytes, and may be wrapped into lines): bounded
    /// here by twice the size and a MiB.
    public static func maximumStoredSize(ofAttachment size: Int) -> Int {
        size > (Int.max - (1 << 20)) / 2 ? .max : size * 2 + (1 << 20)
    }

    public static func format(of bytes: some Collection<UInt8>) -> Format {
        bytes.first == 0x02 ? .dek : .legacy
    }

    static let aeadNonceSize = Int(crypto_aead_chacha20poly1305_IETF_NPUBBYTES)
    static let aeadTagSize = Int(crypto_aead_chacha20poly1305_IETF_ABYTES)

    /// Encrypts an attachment in the current DEK format:
    /// `0x02 || len(u16 BE) || wrapped_dek || nonce(12) || ChaCha20-Poly1305(base64(bytes))`.
    public static func encrypt(_ content: UnsafeRawBufferPointer, key: NIP44.ConversationKey) throws(Sidecar.Error) -> [UInt8] {
        let text: SecureBytes
        do throws(SecureMemoryError) { text = try Base64.encodeToSecret(content) } catch { throw .secretMemory(error) }
        return try seal(text: text, key: key)
    }

    /// The DEK format around `text`, which should be base64 (`encrypt` gives it so); the fuzz
    /// targets seal any bytes, to reach what runs after authentication.
    @_spi(Fuzzing)
    public static func seal(text: SecureBytes, key: NIP44.ConversationKey) throws(Sidecar.Error) -> [UInt8] {
        Sodium.ensureReady()
        let dek = try secret(count: 32)
        dek.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, $0.count) }
        let hex = try secret(count: 64)
        hex.withUnsafeMutableBytes { o in dek.withUnsafeBytes { i in Hex.encode(i, into: o) } }
        let wrapped: [UInt8]
        do { wrapped = Array(try NIP44.encrypt(hex, key: key).utf8) } catch { throw .wrappedKey(error) }
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
        try bytes.withBytes { (b) throws(Sidecar.Error) in try decrypt(b, key: key) }
    }

    /// Decrypts a sidecar of either format, read where it lies (a blob in libgit2's buffer).
    public static func decrypt(_ bytes: UnsafeRawBufferPointer, key: NIP44.ConversationKey) throws(Sidecar.Error) -> SecureBytes {
        guard !bytes.isEmpty else { throw .empty }
        switch format(of: bytes) {
        case .dek: return try decryptDEK(bytes, key: key)
        case .legacy: return try decryptLegacy(bytes, key: key)
        }
    }

    /// The DEK format, decrypted without holding the base64 text whole: the Poly1305 tag is
    /// checked over the ciphertext first (as libsodium's `..._ietf_decrypt` does), then the
    /// text is decrypted `chunkBytes` at a time into scratch memory (zeroed after) and decoded
    /// straight into the attachment's secret buffer, whose size the text's length and last two
    /// characters give. Text wrapped into lines takes the whole-text path (`content(ofText:)`).
    static func decryptDEK(_ bytes: UnsafeRawBufferPointer, key: NIP44.ConversationKey) throws(Sidecar.Error) -> SecureBytes {
        Sodium.ensureReady()
        guard bytes.count >= 3 else { throw .truncated("no wrapped-key length") }
        let wrappedLength = Int(bytes[1]) << 8 | Int(bytes[2])
        let header = 3 + wrappedLength + aeadNonceSize
        guard bytes.count >= header + aeadTagSize else {
            throw .truncated("\(bytes.count) bytes, header and tag need \(header + aeadTagSize)")
        }
        let hex: SecureBytes
        do {
            hex = try NIP44.decrypt(payload: UnsafeRawBufferPointer(rebasing: bytes[3..<(3 + wrappedLength)]), key: key)
        } catch { throw .wrappedKey(error) }
        return try withDEK(hex: hex) { (dek) throws(Sidecar.Error) -> SecureBytes in
            let nonce = UnsafeRawBufferPointer(rebasing: bytes[(3 + wrappedLength)..<header])
            let ciphertext = UnsafeRawBufferPointer(rebasing: bytes[header..<(bytes.count - aeadTagSize)])
            let tag = UnsafeRawBufferPointer(rebasing: bytes[(bytes.count - aeadTagSize)...])
            guard poly1305Matches(ciphertext: ciphertext, tag: tag, key: dek, nonce: nonce) else {
                throw .authenticationFailed
            }
            return try decryptText(ciphertext, key: dek, nonce: nonce)
        }
    }

    /// Runs `body` with the 32-byte DEK the 64 hex characters `hex` spell, on the stack (zeroed after).
    static func withDEK<R>(hex: SecureBytes, _ body: (UnsafeRawBufferPointer) throws(Sidecar.Error) -> R)
        throws(Sidecar.Error) -> R {
        guard hex.count == 64 else { throw .wrappedKeyNotHex }
        return try withUnsafeTemporaryAllocation(byteCount: 32, alignment: 16) { (dek) throws(Sidecar.Error) -> R in
            defer { secureZero(dek) }
            guard hex.withUnsafeBytes({ Hex.decode($0, into: dek) }) else { throw .wrappedKeyNotHex }
            return try body(UnsafeRawBufferPointer(dek))
        }
    }

    /// ChaCha20-Poly1305 (IETF, no associated data): the tag is Poly1305, keyed by keystream
    /// block 0, over `ciphertext || zero padding to 16 || le64(0) || le64(count)`.
    private static func poly1305Matches(ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer,
                                        key: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer) -> Bool {
        withUnsafeTemporaryAllocation(byteCount: 64 + 16 + 16 + 16, alignment: 16) { scratch in
            defer { secureZero(scratch) }
            scratch.initializeMemory(as: UInt8.self, repeating: 0)
            let block0 = UnsafeMutableRawBufferPointer(rebasing: scratch[0..<64])
            let expected = UnsafeMutableRawBufferPointer(rebasing: scratch[64..<80])
            let trailer = UnsafeMutableRawBufferPointer(rebasing: scratch[80..<96])
            let padding = (16 - ciphertext.count % 16) % 16
            let zeros = UnsafeRawBufferPointer(rebasing: scratch[96..<(96 + padding)])
            chacha20XOR(UnsafeRawBufferPointer(block0), key: key, nonce: nonce, counter: 0, into: block0)
            trailer.storeBytes(of: UInt64(ciphertext.count).littleEndian, toByteOffset: 8, as: UInt64.self)
            poly1305(key: UnsafeRawBufferPointer(rebasing: block0[0..<32]),
                     [ciphertext, zeros, UnsafeRawBufferPointer(trailer)], into: expected)
            return constantTimeEqual(UnsafeRawBufferPointer(expected), tag)
        }
    }

    /// Text decrypted and decoded per chunk: a multiple of 64 (ChaCha20 blocks) and of 4 (base64 groups).
    static let chunkBytes = 48 << 10

    /// The attachment in an authenticated DEK ciphertext (ChaCha20 from block counter 1).
    private static func decryptText(_ ciphertext: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer,
                                    nonce: UnsafeRawBufferPointer) throws(Sidecar.Error) -> SecureBytes {
        let length = ciphertext.count
        guard let shape = textShape(ciphertext, key: key, nonce: nonce) else { return try secret(count: 0) }
        if shape.wrapped {
            let text = try secret(count: length)
            text.withUnsafeMutableBytes { chacha20XOR(ciphertext, key: key, nonce: nonce, counter: 1, into: $0) }
            return try content(ofText: text)
        }
        guard let size = Base64Decoder.decodedCount(textCount: length, lastTwo: shape.lastTwo) else {
            throw .contentNotBase64
        }
        let content = try secret(count: size)
        let valid = content.withUnsafeMutableBytes { decryptAndDecode(ciphertext, key: key, nonce: nonce, into: $0) }
        guard valid else { throw .contentNotBase64 }
        return content
    }

    /// Whether the text is wrapped into lines (its first `wrapSample` characters or its last two
    /// show whitespace) and its last two characters (which give the attachment's length),
    /// decrypting only those; nil for an empty text.
    private static func textShape(_ ciphertext: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer,
                                  nonce: UnsafeRawBufferPointer) -> (wrapped: Bool, lastTwo: (UInt8, UInt8))? {
        let length = ciphertext.count
        return withUnsafeTemporaryAllocation(byteCount: 256, alignment: 16) { scratch in
            defer { secureZero(scratch) }
            guard length > 0 else { return nil }
            let head = min(wrapSample, length)
            let headText = UnsafeMutableRawBufferPointer(rebasing: scratch[0..<head])
            chacha20XOR(UnsafeRawBufferPointer(rebasing: ciphertext[0..<head]), key: key, nonce: nonce, counter: 1,
                        into: headText)
            let tailStart = (length - min(2, length)) / 64 * 64
            let tailText = UnsafeMutableRawBufferPointer(rebasing: scratch[128..<(128 + length - tailStart)])
            chacha20XOR(UnsafeRawBufferPointer(rebasing: ciphertext[tailStart...]), key: key, nonce: nonce,
                        counter: 1 + UInt32(tailStart / 64), into: tailText)
            let lastTwo = UnsafeRawBufferPointer(rebasing: tailText.suffix(2))
            let wrapped = showsWhitespace(UnsafeRawBufferPointer(headText)) || showsWhitespace(lastTwo)
            return (wrapped, lastTwo.count == 2 ? (lastTwo[0], lastTwo[1]) : (0, lastTwo[0]))
        }
    }

    /// Decrypts unwrapped base64 text `chunkBytes` at a time into zeroed scratch and decodes
    /// each chunk straight into `out`; false when the text is not base64.
    private static func decryptAndDecode(_ ciphertext: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer,
                                         nonce: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) -> Bool {
        let length = ciphertext.count
        let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: min(chunkBytes, length), alignment: 64)
        defer {
            secureZero(scratch)
            scratch.deallocate()
        }
        var valid = true
        var offset = 0
        while offset < length {
            let count = min(chunkBytes, length - offset)
            let text = UnsafeMutableRawBufferPointer(rebasing: scratch[0..<count])
            chacha20XOR(UnsafeRawBufferPointer(rebasing: ciphertext[offset..<(offset + count)]), key: key,
                        nonce: nonce, counter: 1 + UInt32(offset / 64), into: text)
            let outStart = offset / 4 * 3
            if offset + count < length {
                let ok = Base64Decoder.decodeFullGroups(
                    UnsafeRawBufferPointer(text),
                    into: UnsafeMutableRawBufferPointer(rebasing: out[outStart..<(outStart + count / 4 * 3)]))
                valid = valid && ok
            } else {
                let ok = Base64Decoder.decode(UnsafeRawBufferPointer(text),
                                              into: UnsafeMutableRawBufferPointer(rebasing: out[outStart...]))
                valid = valid && ok
            }
            offset += count
        }
        return valid
    }

    private static func secret(count: Int) throws(Sidecar.Error) -> SecureBytes {
        do throws(SecureMemoryError) { return try SecureBytes(zeroed: count) } catch { throw .secretMemory(error) }
    }

    /// The bytes a legacy sidecar's base64 holds (line breaks and spaces ignored).
    static func legacyRaw(_ bytes: some Collection<UInt8>) -> [UInt8]? {
        Base64.decode(bytes.filter { $0 != UInt8(ascii: "\n") && $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: " ") })
    }

    static func decryptLegacy(_ bytes: UnsafeRawBufferPointer, key: NIP44.ConversationKey) throws(Sidecar.Error) -> SecureBytes {
        guard let raw = legacyRaw(bytes) else { throw .legacyNotBase64 }
        guard raw.count >= 1 + 32 + 32 else { throw .truncated("legacy sidecar of \(raw.count) bytes") }
        guard raw[0] == 0xFF else { throw .legacyNotBase64 }
        let macStart = raw.count - 32
        return try raw.withBytes { (r) throws(Sidecar.Error) -> SecureBytes in
            try NIP44.withMessageKeys(key, nonce: UnsafeRawBufferPointer(rebasing: r[1..<33])) {
                (chachaKey, chachaNonce, hmacKey) throws(Sidecar.Error) -> SecureBytes in
                let ok = withUnsafeTemporaryAllocation(byteCount: 32, alignment: 8) { expected in
                    hmacSHA256(key: hmacKey, [UnsafeRawBufferPointer(rebasing: r[1..<macStart])], into: expected)
                    return constantTimeEqual(UnsafeRawBufferPointer(expected), UnsafeRawBufferPointer(rebasing: r[macStart...]))
                }
                guard ok else { throw .legacyMAC }
                let ciphertext = UnsafeRawBufferPointer(rebasing: r[33..<macStart])
                let text = try secret(count: ciphertext.count)
                text.withUnsafeMutableBytes { chacha20XOR(ciphertext, key: chachaKey, nonce: chachaNonce, into: $0) }
                return try content(ofText: text)
            }
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
        if wrapped {
            let decoded: SecureBytes?
            do throws(SecureMemoryError) { decoded = try Base64.decodeSecret(text, ignoringWhitespace: true) } catch { throw .secretMemory(error) }
            guard let decoded else { throw .contentNotBase64 }
            return decoded
        }
        let lastTwo = text.withUnsafeBytes { t in t.count >= 2 ? (t[t.count - 2], t[t.count - 1]) : (0, 0) }
        guard let size = Base64Decoder.decodedCount(textCount: text.count, lastTwo: lastTwo) else { throw .contentNotBase64 }
        let content = try secret(count: size)
        let valid = text.withUnsafeBytes { t in content.withUnsafeMutableBytes { Base64Decoder.decode(t, into: $0) } }
        guard valid else { throw .contentNotBase64 }
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
        precondition(nonce.count == 32, "NIP-44 nonce must be 32 bytes")  // a test's vector, never input
        var raw = [UInt8](repeating: 0, count: 1 + 32 + text.count + 32)
        raw[0] = 0xFF
        raw.replaceSubrange(1..<33, with: nonce)
        raw.withUnsafeMutableBytes { out in
            let ciphertext = UnsafeMutableRawBufferPointer(rebasing: out[33..<(33 + text.count)])
            let mac = UnsafeMutableRawBufferPointer(rebasing: out[(33 + text.count)...])
            // The message keys live in scratch memory zeroed on return: no secret memory to run out of.
            NIP44.withMessageKeys(key, nonce: UnsafeRawBufferPointer(rebasing: out[1..<33])) { chachaKey, chachaNonce, hmacKey in
                text.withUnsafeBytes { chacha20XOR($0, key: chachaKey, nonce: chachaNonce, into: ciphertext) }
                hmacSHA256(key: hmacKey, [UnsafeRawBufferPointer(rebasing: out[1..<(33 + text.count)])], into: mac)
            }
        }
        return Base64.encode(raw)
    }

    /// Inline attachments (the original spec): the document's `value` is base64 of the bytes;
    /// nil when it is not base64.
    public static func decodeInline(_ value: String) throws(SecureMemoryError) -> SecureBytes? {
        try Base64.decodeSecret(try SecureBytes(copyingUTF8: value), ignoringWhitespace: true)
    }

    /// How many bytes `decodeInline(value)` gives when `value` is well-formed base64, worked
    /// out without decoding (no secret memory needed: a listing shows the size).
    public static func inlineSize(_ value: String) -> Int? {
        var characters = 0, padding = 0
        for byte in value.utf8 where byte != 0x20 && byte != 0x09 && byte != 0x0d && byte != 0x0a {
            characters += 1
            padding = byte == UInt8(ascii: "=") ? padding + 1 : 0
        }
        guard characters % 4 == 0, padding <= 2 else { return nil }
        return characters / 4 * 3 - padding
    }
}
