/// SHA-1 over bytes, for the checksums that end a pack and a pack index (`PackWriter`).
///
/// Object ids come from libgit2 (`git_odb_hash`), but libgit2 has no public call that hashes
/// arbitrary bytes, and the one C library with SHA-1 already linked (OpenSSL's libcrypto) is
/// BinderCrypto's to import. These checksums only detect corruption of a file (git itself
/// uses plain SHA-1 for them, not the collision-detecting variant), so a plain FIPS 180-4
/// SHA-1 is enough. Tested against `sha1sum` (`PackWriterTests`).
struct SHA1 {
    private var h: (UInt32, UInt32, UInt32, UInt32, UInt32) = (0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0)
    /// Bytes of an incomplete block, waiting for more input.
    private var pending: [UInt8] = []
    private var length: UInt64 = 0

    init() { pending.reserveCapacity(64) }

    /// The digest of `bytes`.
    static func hash(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var sha = SHA1()
        sha.update(bytes)
        return sha.finish()
    }

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        length &+= UInt64(bytes.count)
        var rest = bytes
        if !pending.isEmpty {
            let take = min(64 - pending.count, rest.count)
            pending.append(contentsOf: rest.prefix(take))
            rest = UnsafeRawBufferPointer(rebasing: rest.dropFirst(take))
            guard pending.count == 64 else { return }
            let block = pending  // a copy: `compress` mutates self
            block.withUnsafeBytes { compress($0, blocks: 1) }
            pending.removeAll(keepingCapacity: true)
        }
        let blocks = rest.count / 64
        if blocks > 0 { compress(rest, blocks: blocks) }
        pending.append(contentsOf: rest.suffix(rest.count - blocks * 64))
    }

    mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The 20-byte digest (the hash is spent).
    mutating func finish() -> [UInt8] {
        let bits = length &* 8
        var tail: [UInt8] = [0x80]
        let padding = (64 + 56 - (pending.count + 1) % 64) % 64
        tail += [UInt8](repeating: 0, count: padding)
        for shift in stride(from: 56, through: 0, by: -8) { tail.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        let saved = length
        tail.withUnsafeBytes { update($0) }
        length = saved
        var digest: [UInt8] = []
        digest.reserveCapacity(20)
        for word in [h.0, h.1, h.2, h.3, h.4] {
            digest += [UInt8(truncatingIfNeeded: word >> 24), UInt8(truncatingIfNeeded: word >> 16),
                       UInt8(truncatingIfNeeded: word >> 8), UInt8(truncatingIfNeeded: word)]
        }
        return digest
    }

    private mutating func compress(_ data: UnsafeRawBufferPointer, blocks: Int) {
        var (a0, b0, c0, d0, e0) = h
        var w = (UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0),
                 UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0))
        withUnsafeMutableBytes(of: &w) { raw in
            let words = raw.bindMemory(to: UInt32.self)
            for block in 0..<blocks {
                let base = block * 64
                for i in 0..<16 {
                    words[i] = UInt32(bigEndian: data.loadUnaligned(fromByteOffset: base + i * 4, as: UInt32.self))
                }
                var a = a0, b = b0, c = c0, d = d0, e = e0
                // Four loops of twenty rounds, one function each (no branch inside a round).
                @inline(__always) func schedule(_ t: Int) -> UInt32 {
                    let s = t & 15
                    if t >= 16 {
                        let x = words[(s + 13) & 15] ^ words[(s + 8) & 15] ^ words[(s + 2) & 15] ^ words[s]
                        words[s] = (x << 1) | (x >> 31)
                    }
                    return words[s]
                }
                @inline(__always) func round(_ f: UInt32, _ k: UInt32, _ w: UInt32) {
                    let temp = ((a << 5) | (a >> 27)) &+ f &+ e &+ k &+ w
                    e = d
                    d = c
                    c = (b << 30) | (b >> 2)
                    b = a
                    a = temp
                }
                for t in 0..<20 { round((b & c) | (~b & d), 0x5A82_7999, schedule(t)) }
                for t in 20..<40 { round(b ^ c ^ d, 0x6ED9_EBA1, schedule(t)) }
                for t in 40..<60 { round((b & c) | (b & d) | (c & d), 0x8F1B_BCDC, schedule(t)) }
                for t in 60..<80 { round(b ^ c ^ d, 0xCA62_C1D6, schedule(t)) }
                a0 = a0 &+ a; b0 = b0 &+ b; c0 = c0 &+ c; d0 = d0 &+ d; e0 = e0 &+ e
            }
        }
        h = (a0, b0, c0, d0, e0)
    }
}
