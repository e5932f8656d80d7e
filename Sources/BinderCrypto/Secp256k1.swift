internal import CSecp256k1

/// The one libsecp256k1 context of the process. After creation and randomisation it is only
/// read, which libsecp256k1 allows from any number of threads at once.
final class Secp256k1Context: @unchecked Sendable {
    static let shared = Secp256k1Context()

    let pointer: OpaquePointer

    private init() {
        guard let ctx = secp256k1_context_create(binder_secp_context_sign_verify()) else {
            fatalError("secp256k1_context_create failed")
        }
        // Blinding against side channels; done once, before the context is shared.
        var seed = randomBytes(32)
        _ = secp256k1_context_randomize(ctx, seed)
        secureZero(&seed)
        pointer = ctx
    }

    deinit { secp256k1_context_destroy(pointer) }
}

/// A 32-byte x-only (BIP-340) public key, shown as `npub1…` or 64 hex characters.
public struct PublicKey: Hashable, Sendable {
    public let bytes: [UInt8]

    /// Validates that `bytes` is the x-coordinate of a point on the curve.
    public init(xOnly bytes: [UInt8]) throws(KeyError) {
        guard bytes.count == 32 else { throw .invalidPublicKey("public key must be 32 bytes, got \(bytes.count)") }
        var parsed = secp256k1_xonly_pubkey()
        guard secp256k1_xonly_pubkey_parse(Secp256k1Context.shared.pointer, &parsed, bytes) == 1 else {
            throw .invalidPublicKey("public key is not a point on secp256k1")
        }
        self.bytes = bytes
    }

    /// 32 bytes libsecp256k1 has just serialised from a point: valid by construction.
    fileprivate init(serialised bytes: [UInt8]) {
        self.bytes = bytes
    }

    public init(hex: String) throws(KeyError) {
        guard let raw = Hex.decode(hex), raw.count == 32 else {
            throw .invalidPublicKey("public key hex must be 64 hex characters")
        }
        try self.init(xOnly: raw)
    }

    public var hex: String { Hex.encode(bytes) }
    public var npub: String { Bech32.encode(hrp: "npub", data: bytes) }

    public init(npub: String) throws(KeyError) {
        let decoded: (hrp: String, data: [UInt8])
        do { decoded = try Bech32.decode(npub) } catch { throw .malformed("npub: \(error.description)") }
        guard decoded.hrp == "npub" else { throw .malformed("expected an npub, got \(decoded.hrp)") }
        try self.init(xOnly: decoded.data)
    }

    /// The full curve point with even y, as libsecp256k1 wants it for ECDH and verification.
    func evenYPoint() -> secp256k1_pubkey {
        var compressed = [UInt8](repeating: 0x02, count: 33)
        compressed.replaceSubrange(1..<33, with: bytes)
        var point = secp256k1_pubkey()
        let ok = secp256k1_ec_pubkey_parse(Secp256k1Context.shared.pointer, &point, compressed, 33)
        precondition(ok == 1, "validated x-only key failed to parse")
        return point
    }

    func xOnlyPoint() -> secp256k1_xonly_pubkey {
        var parsed = secp256k1_xonly_pubkey()
        let ok = secp256k1_xonly_pubkey_parse(Secp256k1Context.shared.pointer, &parsed, bytes)
        precondition(ok == 1, "validated x-only key failed to parse")
        return parsed
    }
}

/// A secp256k1 secret key held in secret memory.
public struct SecretKey: Sendable {
    let secret: SecureBytes

    /// Validates range (0 < k < n). Copies the bytes into secret memory.
    public init(bytes: SecureBytes) throws(KeyError) {
        guard bytes.count == 32 else { throw .invalidSecretKey("secret key must be 32 bytes, got \(bytes.count)") }
        let ok = bytes.withUnsafeBytes {
            secp256k1_ec_seckey_verify(Secp256k1Context.shared.pointer,
                                       $0.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        guard ok == 1 else { throw .invalidSecretKey("secret key is zero or not below the curve order") }
        self.secret = bytes
    }

    /// A fresh random key.
    public static func generate() throws(SecureMemoryError) -> SecretKey {
        while true {
            let candidate = try randomSecret(32)  // out of range about once in 2^128 draws
            if let key = try? SecretKey(bytes: candidate) { return key }
        }
    }

    /// From 64 hex characters.
    public init(hex: String) throws(KeyError) {
        guard var raw = Hex.decode(hex.trimmingASCIIWhitespace()), raw.count == 32 else {
            throw .malformed("secret key hex must be 64 hex characters")
        }
        defer { secureZero(&raw) }
        try self.init(bytes: Self.secretCopy(raw))
    }

    /// From `nsec1…`.
    public init(nsec: String) throws(KeyError) {
        var decoded: (hrp: String, data: [UInt8])
        do { decoded = try Bech32.decode(nsec.trimmingASCIIWhitespace()) } catch { throw .malformed("nsec: \(error.description)") }
        defer { secureZero(&decoded.data) }
        guard decoded.hrp == "nsec" else { throw .malformed("expected an nsec, got \(decoded.hrp)") }
        guard decoded.data.count == 32 else { throw .malformed("nsec must hold 32 bytes, holds \(decoded.data.count)") }
        try self.init(bytes: Self.secretCopy(decoded.data))
    }

    private static func secretCopy(_ bytes: [UInt8]) throws(KeyError) -> SecureBytes {
        do throws(SecureMemoryError) { return try SecureBytes(copying: bytes) } catch { throw .secretMemory(error) }
    }

    public var publicKey: PublicKey {
        var keypair = makeKeypair()
        defer { withUnsafeMutableBytes(of: &keypair) { secureZero($0) } }
        var xonly = secp256k1_xonly_pubkey()
        var parity: Int32 = 0
        _ = secp256k1_keypair_xonly_pub(Secp256k1Context.shared.pointer, &xonly, &parity, &keypair)
        var out = [UInt8](repeating: 0, count: 32)
        _ = secp256k1_xonly_pubkey_serialize(Secp256k1Context.shared.pointer, &out, &xonly)
        return PublicKey(serialised: out)
    }

    /// `nsec1…`, as a secret.
    public func nsec() throws(SecureMemoryError) -> SecureBytes {
        var raw = secret.copyBytes()
        defer { secureZero(&raw) }
        return try SecureBytes(copyingUTF8: Bech32.encode(hrp: "nsec", data: raw))
    }

    /// 64 lowercase hex characters, as a secret.
    public func hexSecret() throws(SecureMemoryError) -> SecureBytes { try secret.hexSecret() }

    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try secret.withUnsafeBytes(body)
    }

    func makeKeypair() -> secp256k1_keypair {
        var keypair = secp256k1_keypair()
        let ok = secret.withUnsafeBytes {
            secp256k1_keypair_create(Secp256k1Context.shared.pointer, &keypair,
                                     $0.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        precondition(ok == 1, "validated secret key rejected by keypair_create")
        return keypair
    }

    /// Runs `body` with ECDH as NIP-44 defines it (the shared point's x-coordinate, unhashed),
    /// held in scratch memory that is zeroed before this returns.
    func withSharedX<R, E: Error>(with publicKey: PublicKey, _ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        var point = publicKey.evenYPoint()
        return try withUnsafeTemporaryAllocation(byteCount: 32, alignment: 16) { (shared) throws(E) -> R in
            defer { secureZero(shared) }
            let ok = secret.withUnsafeBytes { s in
                binder_ecdh_xonly(Secp256k1Context.shared.pointer,
                                  shared.baseAddress!.assumingMemoryBound(to: UInt8.self), &point,
                                  s.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
            // Both keys were validated, and the group has prime order: the product is never infinity.
            precondition(ok == 1, "ECDH failed with a validated key pair")
            return try body(UnsafeRawBufferPointer(shared))
        }
    }

    /// BIP-340 Schnorr signature of a 32-byte message, with fresh auxiliary randomness.
    public func schnorrSign(_ message32: [UInt8]) -> [UInt8] {
        precondition(message32.count == 32)
        var keypair = makeKeypair()
        defer { withUnsafeMutableBytes(of: &keypair) { secureZero($0) } }
        var aux = randomBytes(32)
        var signature = [UInt8](repeating: 0, count: 64)
        let ok = secp256k1_schnorrsig_sign32(Secp256k1Context.shared.pointer, &signature, message32, &keypair, &aux)
        precondition(ok == 1, "schnorrsig_sign32 failed")
        return signature
    }
}

extension PublicKey {
    /// BIP-340 verification of a 64-byte signature over a 32-byte message.
    public func verifySchnorr(signature: [UInt8], message32: [UInt8]) -> Bool {
        guard signature.count == 64, message32.count == 32 else { return false }
        var point = xOnlyPoint()
        return secp256k1_schnorrsig_verify(Secp256k1Context.shared.pointer, signature, message32, 32, &point) == 1
    }
}

public enum KeyError: Error, Equatable, CustomStringConvertible {
    case invalidSecretKey(String)
    case invalidPublicKey(String)
    case malformed(String)
    case secretMemory(SecureMemoryError)

    public var description: String {
        switch self {
        case .invalidSecretKey(let why), .invalidPublicKey(let why), .malformed(let why): return why
        case .secretMemory(let error): return error.description
        }
    }
}

extension StringProtocol {
    func trimmingASCIIWhitespace() -> String {
        let scalars = unicodeScalars
        var start = scalars.startIndex, end = scalars.endIndex
        while start < end, scalars[start].properties.isWhitespace { start = scalars.index(after: start) }
        while end > start, scalars[scalars.index(before: end)].properties.isWhitespace { end = scalars.index(before: end) }
        return String(String.UnicodeScalarView(scalars[start..<end]))
    }
}
