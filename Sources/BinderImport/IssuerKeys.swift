import BinderFormat
import Crypto
import Foundation

/// A SMART Health Card issuer's public keys (`--issuer-keys FILE`: the JWKS the issuer
/// publishes under `<iss>/.well-known/`), and the ES256 check of a card's JWS against
/// them with swift-crypto's P-256: the key whose `kid` the JWS header names verifies the
/// signature over `header.payload` (SHA-256, the signature as `r || s`).
public struct IssuerKeys: Sendable {
    /// The P-256 keys by `kid`.
    let keys: [String: P256.Signing.PublicKey]

    /// What a card's signature is, checked against these keys.
    enum Verdict: Equatable {
        case valid
        /// The header names no key of the file (or names none).
        case noKey
        /// A key of the file, and a signature that is not its.
        case invalid
    }

    /// The JWKS in the file at `path` (at most 1 MiB: a JWKS is a few keys).
    public static func read(path: String) throws(ImportError) -> IssuerKeys {
        try parse(try SourceReader.load(path: path, file: path, maximumBytes: 1 << 20), file: path)
    }

    /// The JWKS in `bytes` (read from `file`): its `EC`/`P-256` keys with a `kid`; other keys
    /// are passed over. A file with none is refused.
    public static func parse(_ bytes: [UInt8], file: String) throws(ImportError) -> IssuerKeys {
        let value: JSONValue
        do { value = try JSONValue.parse(bytes) } catch {
            throw .malformedJSON(file: file, line: SourceReader.line(of: error.offset, in: bytes), reason: error.message)
        }
        var keys: [String: P256.Signing.PublicKey] = [:]
        for entry in value.objectValue?["keys"]?.arrayValue ?? [] {
            guard let key = entry.objectValue, key["kty"]?.stringValue == "EC", key["crv"]?.stringValue == "P-256",
                  let kid = key["kid"]?.stringValue, let x = key["x"]?.stringValue.flatMap(SmartHealthCard.base64URL),
                  let y = key["y"]?.stringValue.flatMap(SmartHealthCard.base64URL), x.count == 32, y.count == 32,
                  let publicKey = try? P256.Signing.PublicKey(rawRepresentation: x + y) else { continue }
            keys[kid] = publicKey
        }
        guard !keys.isEmpty else { throw .malformedJSON(file: file, line: 1, reason: "no P-256 key with a kid under \"keys\" (a JWKS)") }
        return IssuerKeys(keys: keys)
    }

    /// Whether `jws` (`header.payload.signature`) is signed by the key its header names.
    func check(_ jws: String) -> Verdict {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = SmartHealthCard.base64URL(parts[0]),
              let kid = (try? JSONValue.parse(header))?.objectValue?["kid"]?.stringValue, let key = keys[kid] else { return .noKey }
        guard let raw = SmartHealthCard.base64URL(parts[2]), let signature = try? P256.Signing.ECDSASignature(rawRepresentation: raw) else {
            return .invalid
        }
        return key.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8)) ? .valid : .invalid
    }
}
