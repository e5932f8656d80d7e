internal import CSodium

extension Sidecar {
    /// The exact length of the attachment a sidecar holds, found without decrypting it all:
    /// the content is base64 text under a stream cipher, so its length is fixed by the
    /// ciphertext length and the `=` padding, and the padding is in the last two bytes of
    /// keystream. Only the wrapped key (DEK format), the text's first `wrapSample` bytes and
    /// its last ChaCha20 block are decrypted. Text wrapped into lines (seen in those bytes; see
    /// `content(ofText:)`) is decrypted whole instead.
    ///
    /// Nothing is authenticated here; a tampered sidecar still fails on its full decryption.
    /// Whenever the sidecar decrypts, the size is its content's size. Returns nil when the
    /// size cannot be known this way (then decrypt it whole).
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
        guard let hex = try? bytes.withBytes({ (b) throws(NIP44.Error) in
                  try NIP44.decrypt(payload: UnsafeRawBufferPointer(rebasing: b[3..<(3 + wrappedLength)]), key: key)
              }),
              hex.count == 64, let dek = Hex.decodeSecret(hex) else { return nil }
        // ChaCha20-Poly1305 (IETF) encrypts the message from block counter 1; block 0 keys Poly1305.
        let nonce = Array(bytes[(3 + wrappedLength)..<header])
        switch sizeOfText(ciphertext: bytes, start: header, length: textLength, key: dek, nonce: nonce, firstCounter: 1) {
        case .exact(let size): return size
        case .wrapped: return (try? decrypt(bytes, key: key))?.count
        case .invalid: return nil
        }
    }

    private static func legacyPlaintextSize(_ bytes: [UInt8], key: NIP44.ConversationKey) -> Int? {
        guard let raw = legacyRaw(bytes), raw.count >= 65, raw[0] == 0xFF else { return nil }
        let textLength = raw.count - 65
        if textLength == 0 { return 0 }
        let keys = NIP44.messageKeys(key, nonce: Array(raw[1..<33]))
        switch sizeOfText(ciphertext: raw, start: 33, length: textLength, key: keys.chachaKey,
                          nonce: keys.chachaNonce.copyBytes(), firstCounter: 0) {
        case .exact(let size): return size
        case .wrapped: return (try? decrypt(bytes, key: key))?.count
        case .invalid: return nil
        }
    }

    private enum TextSize { case exact(Int), wrapped, invalid }

    /// The decoded size of the base64 text at `start..<start + length` of a ChaCha20 (IETF)
    /// stream whose first block has counter `firstCounter`, from its first `wrapSample` bytes
    /// and its last two: `.wrapped` when those show line breaks (then the text must be decoded
    /// whole), `.invalid` when its length cannot be unbroken base64.
    private static func sizeOfText(ciphertext: [UInt8], start: Int, length: Int, key: SecureBytes, nonce: [UInt8],
                                   firstCounter: UInt32) -> TextSize {
        let head = keystreamXOR(ciphertext: ciphertext, start: start, range: 0..<min(wrapSample, length), key: key,
                                nonce: nonce, firstCounter: firstCounter)
        let tail = keystreamXOR(ciphertext: ciphertext, start: start, range: (length - min(2, length))..<length, key: key,
                                nonce: nonce, firstCounter: firstCounter)
        if head.withUnsafeBytes(showsWhitespace) || tail.withUnsafeBytes(showsWhitespace) { return .wrapped }
        guard length % 4 == 0, tail.count == 2 else { return .invalid }
        let pad = UInt8(ascii: "=")
        let padding = tail[1] == pad ? (tail[0] == pad ? 2 : 1) : 0
        return .exact(length / 4 * 3 - padding)
    }

    /// Decrypts bytes `range` of a ChaCha20 (IETF) stream that starts at `start` in `ciphertext`.
    private static func keystreamXOR(ciphertext: [UInt8], start: Int, range: Range<Int>, key: SecureBytes, nonce: [UInt8],
                                     firstCounter: UInt32) -> [UInt8] {
        guard !range.isEmpty else { return [] }
        let blockStart = range.lowerBound / 64 * 64
        let count = range.upperBound - blockStart
        var out = [UInt8](repeating: 0, count: count)
        ciphertext.withUnsafeBufferPointer { c in
            key.withUnsafeBytes { k in
                _ = crypto_stream_chacha20_ietf_xor_ic(&out, c.baseAddress! + start + blockStart, UInt64(count), nonce,
                                                      firstCounter + UInt32(blockStart / 64),
                                                      k.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        let wanted = Array(out[(range.lowerBound - blockStart)...])
        secureZero(&out)
        return wanted
    }
}
