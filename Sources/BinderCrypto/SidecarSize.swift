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
        bytes.withUnsafeBytes { plaintextSize($0, key: key) }
    }

    /// `plaintextSize` of a sidecar read where it lies (a blob in libgit2's buffer): a listing
    /// sizes each attachment without copying it (a copy was 4 MiB of the heap's peak for a 3 MB
    /// attachment in a folder being listed).
    public static func plaintextSize(_ bytes: UnsafeRawBufferPointer, key: NIP44.ConversationKey) -> Int? {
        guard !bytes.isEmpty else { return nil }
        switch format(of: bytes) {
        case .dek: return dekPlaintextSize(bytes, key: key)
        case .legacy: return legacyPlaintextSize(bytes, key: key)
        }
    }

    private static func dekPlaintextSize(_ bytes: UnsafeRawBufferPointer, key: NIP44.ConversationKey) -> Int? {
        guard bytes.count >= 3 else { return nil }
        let wrappedLength = Int(bytes[1]) << 8 | Int(bytes[2])
        let header = 3 + wrappedLength + aeadNonceSize
        guard bytes.count >= header + aeadTagSize else { return nil }
        let textLength = bytes.count - header - aeadTagSize
        if textLength == 0 { return 0 }
        guard let hex = try? NIP44.decrypt(payload: UnsafeRawBufferPointer(rebasing: bytes[3..<(3 + wrappedLength)]), key: key) else {
            return nil
        }
        // ChaCha20-Poly1305 (IETF) encrypts the message from block counter 1; block 0 keys Poly1305.
        let size = try? withDEK(hex: hex) { (dek) throws(Sidecar.Error) -> TextSize in
            sizeOfText(ciphertext: bytes, start: header, length: textLength, key: dek,
                       nonce: UnsafeRawBufferPointer(rebasing: bytes[(3 + wrappedLength)..<header]), firstCounter: 1)
        }
        switch size {
        case .exact(let size): return size
        case .wrapped: return (try? decrypt(bytes, key: key))?.count
        case .invalid, nil: return nil
        }
    }

    private static func legacyPlaintextSize(_ bytes: UnsafeRawBufferPointer, key: NIP44.ConversationKey) -> Int? {
        guard let raw = legacyRaw(bytes), raw.count >= 65, raw[0] == 0xFF else { return nil }
        let textLength = raw.count - 65
        if textLength == 0 { return 0 }
        let size = raw.withUnsafeBytes { r in
            NIP44.withMessageKeys(key, nonce: UnsafeRawBufferPointer(rebasing: r[1..<33])) { chachaKey, chachaNonce, _ in
                sizeOfText(ciphertext: r, start: 33, length: textLength, key: chachaKey, nonce: chachaNonce, firstCounter: 0)
            }
        }
        switch size {
        case .exact(let size): return size
        case .wrapped: return (try? decrypt(bytes, key: key))?.count
        case .invalid: return nil
        }
    }

    enum TextSize { case exact(Int), wrapped, invalid }

    /// The decoded size of the base64 text at `start..<start + length` of a ChaCha20 (IETF)
    /// stream whose first block has counter `firstCounter`, from its first `wrapSample` bytes
    /// and its last two: `.wrapped` when those show line breaks (then the text must be decoded
    /// whole), `.invalid` when its length cannot be unbroken base64.
    private static func sizeOfText(ciphertext: UnsafeRawBufferPointer, start: Int, length: Int,
                                   key: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer,
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
    private static func keystreamXOR(ciphertext: UnsafeRawBufferPointer, start: Int, range: Range<Int>,
                                     key: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer,
                                     firstCounter: UInt32) -> [UInt8] {
        guard !range.isEmpty else { return [] }
        let blockStart = range.lowerBound / 64 * 64
        let count = range.upperBound - blockStart
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { o in
            chacha20XOR(UnsafeRawBufferPointer(rebasing: ciphertext[(start + blockStart)..<(start + range.upperBound)]),
                        key: key, nonce: nonce, counter: firstCounter + UInt32(blockStart / 64), into: o)
        }
        let wanted = Array(out[(range.lowerBound - blockStart)...])
        secureZero(&out)
        return wanted
    }
}
