internal import CSodium
import Foundation

/// NIP-49: a secret key encrypted with a passphrase, as `ncryptsec1…`.
///
/// Layout of the 91 bech32 data bytes: version 0x02 || log_n || salt(16) || nonce(24) ||
/// key-security byte || XChaCha20-Poly1305(secret key, ad = key-security byte) (48).
public enum NIP49 {
    public enum Error: Swift.Error, Equatable, CustomStringConvertible {
        case malformed(String)
        case unsupportedVersion(UInt8)
        case wrongPassphrase
        case scryptFailed(logN: UInt8)
        case invalidKey(String)
        case secretMemory(SecureMemoryError)

        public var description: String {
            switch self {
            case .malformed(let why): return "ncryptsec is malformed: \(why)"
            case .unsupportedVersion(let v): return "ncryptsec version \(v) is not supported"
            case .wrongPassphrase: return "wrong passphrase"
            case .scryptFailed(let n): return "scrypt failed (log_n \(n); out of memory?)"
            case .invalidKey(let why): return "ncryptsec holds an invalid key: \(why)"
            case .secretMemory(let error): return error.description
            }
        }
    }

    /// What is known about how the key was handled before it was encrypted (NIP-49).
    public enum KeySecurity: UInt8, Sendable {
        case knownInsecure = 0x00
        case notKnownInsecure = 0x01
        case unknown = 0x02
    }

    public static let defaultLogN: UInt8 = 16
    /// scrypt with log_n 22 needs 4 GiB; higher is refused before any memory is asked for.
    public static let maximumLogN: UInt8 = 22

    /// The passphrase as NIP-49 wants it: Unicode NFKC, then UTF-8, in secret memory.
    static func normalizedPassphrase(_ passphrase: SecureBytes) throws(SecureMemoryError) -> SecureBytes {
        let text = passphrase.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        return try SecureBytes(copyingUTF8: text.precomposedStringWithCompatibilityMapping)
    }

    /// `count` zero bytes of secret memory, or `.secretMemory`.
    static func secretBuffer(_ count: Int) throws(NIP49.Error) -> SecureBytes {
        do throws(SecureMemoryError) { return try SecureBytes(zeroed: count) } catch { throw .secretMemory(error) }
    }

    static func scryptKey(_ passphrase: SecureBytes, salt: [UInt8], logN: UInt8) throws(NIP49.Error) -> SecureBytes {
        Sodium.ensureReady()
        guard logN >= 1 && logN <= maximumLogN else { throw .malformed("log_n \(logN) is out of range") }
        let normalized: SecureBytes
        do throws(SecureMemoryError) { normalized = try normalizedPassphrase(passphrase) } catch { throw .secretMemory(error) }
        let key = try secretBuffer(32)
        let rc = key.withUnsafeMutableBytes { k in
            normalized.withUnsafeBytes { p in
                crypto_pwhash_scryptsalsa208sha256_ll(p.baseAddress!.assumingMemoryBound(to: UInt8.self), p.count,
                                                      salt, salt.count, UInt64(1) << UInt64(logN), 8, 1,
                                                      k.baseAddress!.assumingMemoryBound(to: UInt8.self), 32)
            }
        }
        guard rc == 0 else { throw .scryptFailed(logN: logN) }
        return key
    }

    public static func encrypt(_ secretKey: SecretKey, passphrase: SecureBytes, logN: UInt8 = defaultLogN,
                               keySecurity: KeySecurity = .notKnownInsecure) throws(NIP49.Error) -> String {
        let salt = randomBytes(16)
        let nonce = randomBytes(Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES))
        let key = try scryptKey(passphrase, salt: salt, logN: logN)
        var ad = keySecurity.rawValue
        var ciphertext = [UInt8](repeating: 0, count: 32 + Int(crypto_aead_xchacha20poly1305_ietf_ABYTES))
        var written: UInt64 = 0
        secretKey.withUnsafeBytes { s in
            key.withUnsafeBytes { k in
                _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                    &ciphertext, &written, s.baseAddress!.assumingMemoryBound(to: UInt8.self), 32,
                    &ad, 1, nil, nonce, k.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        let data = [0x02, logN] + salt + nonce + [ad] + ciphertext
        return Bech32.encode(hrp: "ncryptsec", data: data)
    }

    /// The fields of an `ncryptsec1…`, checked for shape but not decrypted.
    @_spi(Fuzzing)
    public struct Fields: Sendable {
        public let logN: UInt8
        public let salt: [UInt8]
        public let nonce: [UInt8]
        public let keySecurity: UInt8
        public let ciphertext: [UInt8]
    }

    @_spi(Fuzzing)
    public static func fields(of ncryptsec: String) throws(NIP49.Error) -> Fields {
        let decoded: (hrp: String, data: [UInt8])
        do { decoded = try Bech32.decode(ncryptsec.trimmingASCIIWhitespace()) } catch { throw .malformed(error.description) }
        guard decoded.hrp == "ncryptsec" else { throw .malformed("prefix is \(decoded.hrp), expected ncryptsec") }
        let data = decoded.data
        guard data.count == 91 else { throw .malformed("holds \(data.count) bytes, expected 91") }
        guard data[0] == 0x02 else { throw .unsupportedVersion(data[0]) }
        guard data[1] >= 1 && data[1] <= maximumLogN else { throw .malformed("log_n \(data[1]) is out of range") }
        return Fields(logN: data[1], salt: Array(data[2..<18]), nonce: Array(data[18..<42]), keySecurity: data[42],
                      ciphertext: Array(data[43...]))
    }

    public static func decrypt(_ ncryptsec: String, passphrase: SecureBytes) throws(NIP49.Error) -> (key: SecretKey, security: KeySecurity?) {
        let fields = try fields(of: ncryptsec)
        let nonce = fields.nonce, ciphertext = fields.ciphertext
        var ad = fields.keySecurity
        let key = try scryptKey(passphrase, salt: fields.salt, logN: fields.logN)
        let secret = try secretBuffer(32)
        var written: UInt64 = 0
        let rc = secret.withUnsafeMutableBytes { s in
            key.withUnsafeBytes { k in
                crypto_aead_xchacha20poly1305_ietf_decrypt(
                    s.baseAddress!.assumingMemoryBound(to: UInt8.self), &written, nil,
                    ciphertext, UInt64(ciphertext.count), &ad, 1, nonce,
                    k.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        guard rc == 0 else { throw .wrongPassphrase }
        do {
            return (try SecretKey(bytes: secret), KeySecurity(rawValue: ad))
        } catch { throw .invalidKey(error.description) }
    }
}
