internal import CSodium
internal import CCrypto

/// libsodium must be initialised once per process before any other call; `sodium_init` is
/// itself idempotent and thread-safe, and a static `let` runs it exactly once.
enum Sodium {
    static let ready: Bool = {
        let rc = sodium_init()
        precondition(rc >= 0, "libsodium failed to initialise")
        return true
    }()

    static func ensureReady() { _ = ready }
}

/// Cryptographically secure random bytes (libsodium's `randombytes_buf`).
public func randomBytes(_ count: Int) -> [UInt8] {
    Sodium.ensureReady()
    var out = [UInt8](repeating: 0, count: count)
    out.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, count) }
    return out
}

/// Fills a secret buffer with random bytes without the bytes ever passing through an array.
public func randomSecret(_ count: Int) throws(SecureMemoryError) -> SecureBytes {
    Sodium.ensureReady()
    let secret = try SecureBytes(zeroed: count)
    secret.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, $0.count) }
    return secret
}

/// Constant-time comparison of two equal-length byte strings (`sodium_memcmp`).
public func constantTimeEqual(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    guard a.count == b.count else { return false }
    if a.count == 0 { return true }
    return sodium_memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0
}

/// Zeroes memory in a way the compiler may not elide.
public func secureZero(_ buffer: UnsafeMutableRawBufferPointer) {
    guard let base = buffer.baseAddress, buffer.count > 0 else { return }
    sodium_memzero(base, buffer.count)
}

public func secureZero(_ array: inout [UInt8]) {
    array.withUnsafeMutableBytes { secureZero($0) }
}

/// HMAC-SHA256 over the concatenation of `parts`.
func hmacSHA256(key: UnsafeRawBufferPointer, _ parts: [UnsafeRawBufferPointer]) throws(SecureMemoryError) -> SecureBytes {
    let out = try SecureBytes(zeroed: Int(crypto_auth_hmacsha256_BYTES))
    out.withUnsafeMutableBytes { hmacSHA256(key: key, parts, into: $0) }
    return out
}

/// HMAC-SHA256 of the concatenated `parts` into `out` (32 bytes), without allocating secret
/// memory: the padded key, the inner hash and the hash states live on the stack and are zeroed
/// before this returns. SHA-256 is OpenSSL's (SHA-NI where the CPU has it): NIP-44 MACs the
/// whole payload, and libsodium's portable SHA-256 was 70% of decrypting a 4 KB document.
func hmacSHA256(key: UnsafeRawBufferPointer, _ parts: [UnsafeRawBufferPointer], into out: UnsafeMutableRawBufferPointer) {
    precondition(out.count == 32)
    withUnsafeTemporaryAllocation(byteCount: 64 + 64 + 32, alignment: 16) { scratch in
        defer { secureZero(scratch) }
        let block = UnsafeMutableRawBufferPointer(rebasing: scratch[0..<64])
        let pad = UnsafeMutableRawBufferPointer(rebasing: scratch[64..<128])
        let inner = UnsafeMutableRawBufferPointer(rebasing: scratch[128..<160])
        block.initializeMemory(as: UInt8.self, repeating: 0)
        if key.count > 64 {
            SHA256(key.baseAddress!.assumingMemoryBound(to: UInt8.self), key.count,
                   block.baseAddress!.assumingMemoryBound(to: UInt8.self))
        } else if key.count > 0 {
            block.baseAddress!.copyMemory(from: key.baseAddress!, byteCount: key.count)
        }
        var context = SHA256_CTX()
        defer { withUnsafeMutableBytes(of: &context) { secureZero($0) } }
        for i in 0..<64 { pad[i] = block[i] ^ 0x36 }
        SHA256_Init(&context)
        SHA256_Update(&context, pad.baseAddress!, 64)
        for part in parts where part.count > 0 { SHA256_Update(&context, part.baseAddress!, part.count) }
        SHA256_Final(inner.baseAddress!.assumingMemoryBound(to: UInt8.self), &context)
        for i in 0..<64 { pad[i] = block[i] ^ 0x5c }
        SHA256_Init(&context)
        SHA256_Update(&context, pad.baseAddress!, 64)
        SHA256_Update(&context, inner.baseAddress!, 32)
        SHA256_Final(out.baseAddress!.assumingMemoryBound(to: UInt8.self), &context)
    }
}

/// OpenSSL's Poly1305 (AVX2), fetched once for the process; nil when the configured provider
/// lacks it (then libsodium's serves). An `EVP_MAC` is immutable and shared between threads.
private nonisolated(unsafe) let openSSLPoly1305: OpaquePointer? = EVP_MAC_fetch(nil, "POLY1305", nil)

/// Poly1305 of the concatenated `parts` under the one-time `key` (32 bytes) into `out` (16 bytes).
func poly1305(key: UnsafeRawBufferPointer, _ parts: [UnsafeRawBufferPointer], into out: UnsafeMutableRawBufferPointer) {
    precondition(key.count == 32 && out.count == 16)
    if let mac = openSSLPoly1305, let context = EVP_MAC_CTX_new(mac) {
        defer { EVP_MAC_CTX_free(context) }  // clears the key state
        var written = 0
        var ok = EVP_MAC_init(context, key.baseAddress!.assumingMemoryBound(to: UInt8.self), 32, nil) == 1
        for part in parts where ok && part.count > 0 {
            ok = EVP_MAC_update(context, part.baseAddress!.assumingMemoryBound(to: UInt8.self), part.count) == 1
        }
        if ok && EVP_MAC_final(context, out.baseAddress!.assumingMemoryBound(to: UInt8.self), &written, 16) == 1
            && written == 16 {
            return
        }
    }
    var state = crypto_onetimeauth_poly1305_state()
    defer { withUnsafeMutableBytes(of: &state) { secureZero($0) } }
    _ = crypto_onetimeauth_poly1305_init(&state, key.baseAddress!.assumingMemoryBound(to: UInt8.self))
    for part in parts where part.count > 0 {
        _ = crypto_onetimeauth_poly1305_update(&state, part.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                               UInt64(part.count))
    }
    _ = crypto_onetimeauth_poly1305_final(&state, out.baseAddress!.assumingMemoryBound(to: UInt8.self))
}

/// SHA-256 of a byte string.
public func sha256(_ data: UnsafeRawBufferPointer) -> [UInt8] {
    Sodium.ensureReady()
    var out = [UInt8](repeating: 0, count: Int(crypto_hash_sha256_BYTES))
    out.withUnsafeMutableBufferPointer { o in
        _ = crypto_hash_sha256(o.baseAddress!, data.baseAddress?.assumingMemoryBound(to: UInt8.self),
                               UInt64(data.count))
    }
    return out
}

public func sha256(_ bytes: [UInt8]) -> [UInt8] {
    bytes.withUnsafeBytes { sha256($0) }
}

/// SHA-1 of a byte string (OpenSSL's, with the CPU's SHA extensions): only for the checksums
/// that end a git pack and its index (BinderGit's PackWriter), which detect a damaged file;
/// never for anything an attacker must not forge.
public func sha1(_ data: UnsafeRawBufferPointer) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: Int(SHA_DIGEST_LENGTH))
    out.withUnsafeMutableBufferPointer { o in
        _ = SHA1(data.baseAddress?.assumingMemoryBound(to: UInt8.self), data.count, o.baseAddress!)
    }
    return out
}

/// SHA-1 fed in pieces (OpenSSL's), for the checksum of a pack written front to back without
/// being whole in memory. The same caveat as `sha1`: a damaged file's checksum, nothing more.
public struct SHA1Stream {
    private var context = SHA_CTX()

    public init() {
        SHA1_Init(&context)
    }

    public mutating func update(_ data: UnsafeRawBufferPointer) {
        guard let base = data.baseAddress, data.count > 0 else { return }
        SHA1_Update(&context, base, data.count)
    }

    /// The digest of everything fed so far. The stream is spent afterwards.
    public mutating func finish() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(SHA_DIGEST_LENGTH))
        out.withUnsafeMutableBufferPointer { _ = SHA1_Final($0.baseAddress!, &context) }
        return out
    }
}

/// ChaCha20 (IETF, 96-bit nonce) keystream XOR starting at block counter 0.
func chacha20XOR(_ data: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer,
                 into out: UnsafeMutableRawBufferPointer) {
    precondition(key.count == 32 && nonce.count == 12 && out.count == data.count)
    guard data.count > 0 else { return }
    _ = crypto_stream_chacha20_ietf_xor(out.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                        data.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                        UInt64(data.count),
                                        nonce.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                        key.baseAddress!.assumingMemoryBound(to: UInt8.self))
}

/// ChaCha20 (IETF) keystream XOR starting at block `counter`.
func chacha20XOR(_ data: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer,
                 counter: UInt32, into out: UnsafeMutableRawBufferPointer) {
    precondition(key.count == 32 && nonce.count == 12 && out.count == data.count)
    guard data.count > 0 else { return }
    _ = crypto_stream_chacha20_ietf_xor_ic(out.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                           data.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                           UInt64(data.count),
                                           nonce.baseAddress!.assumingMemoryBound(to: UInt8.self), counter,
                                           key.baseAddress!.assumingMemoryBound(to: UInt8.self))
}

/// Raw ChaCha20 throughput probe for benchmarks: XORs `count` bytes in place.
public func chacha20Benchmark(buffer: inout [UInt8]) {
    Sodium.ensureReady()
    let key = [UInt8](repeating: 7, count: 32), nonce = [UInt8](repeating: 1, count: 12)
    let count = buffer.count
    buffer.withUnsafeMutableBytes { b in
        key.withUnsafeBytes { k in
            nonce.withUnsafeBytes { n in
                _ = crypto_stream_chacha20_ietf_xor(b.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                                    b.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                                    UInt64(count),
                                                    n.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                                    k.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
    }
}
