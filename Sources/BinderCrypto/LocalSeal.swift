internal import CSodium

/// Authenticated encryption of binder's own local files (the listing index in the git
/// directory): libsodium's XChaCha20-Poly1305 (IETF) under a key derived from the binder's
/// conversation key with a label per use, so that no such key is ever a NIP-44 key and one
/// file's key opens no other kind of file. A sealed file is `nonce (24) || ciphertext || tag
/// (16)`; the caller's header goes in as additional data, so it is authenticated too.
/// Opening checks the tag before a byte is returned: nothing unauthenticated is ever parsed.
public struct LocalSeal: Sendable {
    public enum Error: Swift.Error, Sendable, Equatable, CustomStringConvertible {
        /// Shorter than a nonce and a tag.
        case truncated(Int)
        /// The tag did not verify: tampered, truncated, or sealed under another key or header.
        case invalidTag
        case secretMemory(SecureMemoryError)

        public var description: String {
            switch self {
            case .truncated(let n): "sealed file of \(n) bytes is shorter than its nonce and tag"
            case .invalidTag: "sealed file does not authenticate (tampered, truncated or another key)"
            case .secretMemory(let error): "sealed file: \(error.description)"
            }
        }
    }

    public static let nonceBytes = Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
    public static let tagBytes = Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)
    static let keyBytes = Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES)

    private let key: SecureBytes

    /// The key for `label` ("binder listing-index v1"): HMAC-SHA256 keyed by the conversation
    /// key over a fixed domain prefix and the label (HKDF-expand with one block).
    public init(conversationKey: NIP44.ConversationKey, label: String) throws(SecureMemoryError) {
        Sodium.ensureReady()
        let info = Array(("binder local-seal\u{0}" + label).utf8) + [1]
        key = try conversationKey.key.withUnsafeBytes { (ikm) throws(SecureMemoryError) in
            // Array's withUnsafeBytes rethrows untyped: carry the typed error out in a Result.
            try info.withUnsafeBytes { bytes in
                Result { () throws(SecureMemoryError) in try hmacSHA256(key: ikm, [bytes]) }
            }.get()
        }
    }

    /// `plaintext` sealed with a random nonce, `header` authenticated alongside.
    public func seal(_ plaintext: UnsafeRawBufferPointer, header: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Self.nonceBytes + plaintext.count + Self.tagBytes)
        out.withUnsafeMutableBytes { buffer in
            if let source = plaintext.baseAddress { (buffer.baseAddress! + Self.nonceBytes).copyMemory(from: source, byteCount: plaintext.count) }
            sealInPlace(buffer, header: header)
        }
        return out
    }

    /// Seals in place: `buffer` holds room for the nonce, then the plaintext, then room for the
    /// tag, and is left holding the sealed file's body (`seal`'s form). No second buffer the
    /// size of the plaintext: the listing index of 100,000 records is 25 MB (libsodium allows
    /// the ciphertext to be written over the message).
    public func sealInPlace(_ buffer: UnsafeMutableRawBufferPointer, header: [UInt8]) {
        precondition(buffer.count >= Self.nonceBytes + Self.tagBytes, "no room for the nonce and the tag")
        let base = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
        randombytes_buf(base, Self.nonceBytes)
        let message = base + Self.nonceBytes
        let length = buffer.count - Self.nonceBytes - Self.tagBytes
        var written: UInt64 = 0
        header.withUnsafeBytes { ad in
            key.withUnsafeBytes { k in
                _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                    message, &written, message, UInt64(length),
                    ad.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(ad.count), nil,
                    base, k.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
    }

    /// The plaintext of `sealed`, into secret memory; throws unless the tag verifies.
    public func open(_ sealed: UnsafeRawBufferPointer, header: [UInt8]) throws(Error) -> SecureBytes {
        guard sealed.count >= Self.nonceBytes + Self.tagBytes, let base = sealed.baseAddress else {
            throw .truncated(sealed.count)
        }
        let count = sealed.count - Self.nonceBytes - Self.tagBytes
        let out: SecureBytes
        // A spare byte: libsodium wants somewhere to write even when the plaintext is empty.
        do { out = try SecureBytes(zeroed: count, spare: 1) } catch { throw .secretMemory(error) }
        let start = base.assumingMemoryBound(to: UInt8.self)
        var written: UInt64 = 0
        let rc = out.withUnsafeMutableBytes { plain in
            header.withUnsafeBytes { ad in
                key.withUnsafeBytes { k in
                    crypto_aead_xchacha20poly1305_ietf_decrypt(
                        plain.baseAddress!.assumingMemoryBound(to: UInt8.self), &written, nil,
                        start + Self.nonceBytes, UInt64(sealed.count - Self.nonceBytes),
                        ad.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(ad.count),
                        start, k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
        }
        guard rc == 0, Int(written) == count else { throw .invalidTag }
        return out
    }
}
