internal import CSodium

extension Sidecar {
    /// The exact length of the attachment a sidecar holds, found without decrypting it all:
    /// the content is base64 text under a stream cipher, so its length is fixed by the
    /// ciphertext length and the `=` padding, and the padding is in the last two bytes of
    /// keystream. Only the wrapped key (DEK format) and one ChaCha20 block are decrypted.
    ///
    /// Nothing is authenticated here; a tampered sidecar still fails on its full decryption.
    /// Returns nil when the size cannot be known this way (then decrypt it whole).
    public static func plaintextSize(_ bytes: [UInt8], key: NIP44.ConversationKey) -> Int? {
        guard !bytes.isEmpty else { return nil }
        switch format(of: bytes) {
        case .dek: return dekPlaintextSize(bytes, key: key)
        case .legacy: return legacyPlaintextSize(bytes, key: key)
        }
    }

    private static func dekPlaintextSize(_ bytes: [UInt8], key: NIP44.ConversationKey) -> Int? {
        guard bytes.count >= 3 else { return nil }
        let wrappedLength = Int(bytes[1]) << 8 | Int(bytes[2])
        let header = 3 + wrappedLength + aeadNonceSize
        guard bytes.count >= header + aeadTagSize else { return nil }
        let textLength = bytes.count - header - aeadTagSize
        if textLength == 0 { return 0 }
        guard textLength % 4 == 0,
              let hex = try? bytes.withBytes({ (b) throws(NIP44.Error) in
                  try NIP44.decrypt(payload: UnsafeRawBufferPointer(rebasing: b[3..<(3 + wrappedLength)]), key: key)
              }),
              hex.count == 64, let dek = Hex.decodeSecret(hex) else { return nil }
        // ChaCha20-Poly1305 (IETF) encrypts the message from block counter 1; block 0 keys Poly1305.
        let nonce = Array(bytes[(3 + wrappedLength)..<header])
        let tail = keystreamTail(ciphertext: bytes, start: header, length: textLength, key: dek, nonce: nonce, firstCounter: 1)
        return sizeFromBase64(length: textLength, lastTwo: tail)
    }

    private static func legacyPlaintextSize(_ bytes: [UInt8], key: NIP44.ConversationKey) -> Int? {
        guard let raw = Base64.decode(bytes), raw.count >= 65, raw[0] == 0xFF else { return nil }
        let textLength = raw.count - 65
        if textLength == 0 { return 0 }
        guard textLength % 4 == 0 else { return nil }
        let keys = NIP44.messageKeys(key, nonce: Array(raw[1..<33]))
        let tail = keystreamTail(ciphertext: raw, start: 33, length: textLength, key: keys.chachaKey,
                                 nonce: keys.chachaNonce.copyBytes(), firstCounter: 0)
        return sizeFromBase64(length: textLength, lastTwo: tail)
    }

    /// Decrypts the last two bytes of a ChaCha20 (IETF) stream of `length` bytes starting at
    /// `start`, whose first block has counter `firstCounter`.
    private static func keystreamTail(ciphertext: [UInt8], start: Int, length: Int, key: SecureBytes, nonce: [UInt8],
                                      firstCounter: UInt32) -> [UInt8] {
        let blockStart = (length - 2) / 64 * 64
        let count = length - blockStart
        var out = [UInt8](repeating: 0, count: count)
        ciphertext.withUnsafeBufferPointer { c in
            key.withUnsafeBytes { k in
                _ = crypto_stream_chacha20_ietf_xor_ic(&out, c.baseAddress! + start + blockStart, UInt64(count), nonce,
                                                      firstCounter + UInt32(blockStart / 64),
                                                      k.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        let tail = Array(out.suffix(2))
        secureZero(&out)
        return tail
    }

    private static func sizeFromBase64(length: Int, lastTwo: [UInt8]) -> Int? {
        let pad = UInt8(ascii: "=")
        let padding = lastTwo[1] == pad ? (lastTwo[0] == pad ? 2 : 1) : 0
        return length / 4 * 3 - padding
    }
}
