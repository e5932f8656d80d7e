internal import CSodium

/// HMAC-SHA-256 (libsodium's `crypto_auth_hmacsha256`): what signs the self-hosted server's
/// tokens (HS256 JWTs).
public enum HMACSHA256 {
    public static let keyBytes = Int(crypto_auth_hmacsha256_KEYBYTES)

    /// The 32-byte tag of `message` under `key` (any length; 32 bytes recommended).
    public static func tag(_ message: [UInt8], key: SecureBytes) -> [UInt8] {
        Sodium.ensureReady()
        var state = crypto_auth_hmacsha256_state()
        var out = [UInt8](repeating: 0, count: Int(crypto_auth_hmacsha256_BYTES))
        key.withUnsafeBytes { k in
            _ = crypto_auth_hmacsha256_init(&state, k.baseAddress!.assumingMemoryBound(to: UInt8.self), k.count)
        }
        message.withUnsafeBufferPointer { m in
            _ = crypto_auth_hmacsha256_update(&state, m.baseAddress, UInt64(m.count))
        }
        out.withUnsafeMutableBufferPointer { o in _ = crypto_auth_hmacsha256_final(&state, o.baseAddress!) }
        withUnsafeMutableBytes(of: &state) { secureZero($0) }
        return out
    }

    /// True when `tag` is `message`'s tag under `key`; compared in constant time.
    public static func verify(_ tag: [UInt8], message: [UInt8], key: SecureBytes) -> Bool {
        let expected = self.tag(message, key: key)
        guard tag.count == expected.count else { return false }
        return tag.withUnsafeBytes { a in expected.withUnsafeBytes { b in constantTimeEqual(a, b) } }
    }
}

/// URL-safe base64 without padding (RFC 4648 §5), as JWTs use.
public enum Base64URL {
    public static func encode(_ bytes: [UInt8]) -> String {
        Sodium.ensureReady()
        let variant = sodium_base64_VARIANT_URLSAFE_NO_PADDING
        let length = sodium_base64_encoded_len(bytes.count, variant)
        var out = [CChar](repeating: 0, count: length)
        bytes.withUnsafeBufferPointer { b in
            _ = sodium_bin2base64(&out, length, b.baseAddress, b.count, variant)
        }
        return String(decoding: out.prefix(length - 1).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Strict decode; nil on characters outside the alphabet or on padding.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        Sodium.ensureReady()
        let input = Array(text.utf8)
        var out = [UInt8](repeating: 0, count: input.count / 4 * 3 + 3)
        var written = 0
        let rc = input.withUnsafeBufferPointer { i in
            out.withUnsafeMutableBufferPointer { o in
                i.withMemoryRebound(to: CChar.self) { chars in
                    sodium_base642bin(o.baseAddress!, o.count, chars.baseAddress, chars.count, nil, &written, nil,
                                      sodium_base64_VARIANT_URLSAFE_NO_PADDING)
                }
            }
        }
        guard rc == 0 else { return nil }
        out.removeSubrange(written...)
        return out
    }
}
