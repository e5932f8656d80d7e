import BinderCrypto
import BinderSystem
import Foundation

/// Issues and checks the server's bearer tokens: HS256 JWTs (`{"alg":"HS256","typ":"JWT"}`)
/// whose payload names the user's public key, signed with a 32-byte secret that lives in
/// `<repos>/.binder-serve/jwt-secret` (0600). Rotating the secret revokes every token.
final class TokenAuthority: Sendable {
    struct Claims: Codable, Sendable {
        let pubkey: String
        let userType: String
        let iat: Int64
        let exp: Int64
        let jti: String
    }

    enum Rejection: Error, CustomStringConvertible {
        case malformed, badSignature, expired
        var description: String {
            switch self {
            case .malformed: return "malformed token"
            case .badSignature: return "bad token signature"
            case .expired: return "token expired"
            }
        }
    }

    private let secret: SecureBytes
    let lifetime: Int64

    init(secret: SecureBytes, lifetime: Int64) {
        self.secret = secret
        self.lifetime = lifetime
    }

    /// Loads the secret from `path`, making a new one if there is none or `rotate` is set.
    /// Without secret memory for it, the server does not start (`ServerError.setup`).
    static func loadSecret(at path: String, rotate: Bool) throws -> SecureBytes {
        let fm = FileManager.default
        if !rotate, let data = fm.contents(atPath: path), data.count == 32 {
            var bytes = [UInt8](data)
            defer { secureZero(&bytes) }
            do { return try SecureBytes(copying: bytes) } catch { throw ServerError.setup("the token secret: \(error)") }
        }
        let fresh: SecureBytes
        do { fresh = try randomSecret(32) } catch { throw ServerError.setup("the token secret: \(error)") }
        try fm.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true,
                               attributes: [.posixPermissions: 0o700])
        do {
            try fresh.withUnsafeBytes { (bytes) throws(PrivateFile.WriteError) in try PrivateFile.write(path, bytes: bytes) }
        } catch { throw ServerError.setup(error.description) }
        return fresh
    }

    /// The JOSE header: only HS256 is accepted.
    private struct Header: Codable {
        let alg: String
        let typ: String?
    }

    func issue(pubkey: String, userType: String, now: Int64, lifetime: Int64? = nil) throws -> String {
        let claims = Claims(pubkey: pubkey, userType: userType, iat: now, exp: now + (lifetime ?? self.lifetime),
                            jti: Hex.encode(randomBytes(12)))
        let header = Base64URL.encode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
        let payload = Base64URL.encode(Array(try JSONEncoder().encode(claims)))
        let signingInput = header + "." + payload
        return signingInput + "." + Base64URL.encode(HMACSHA256.tag(Array(signingInput.utf8), key: secret))
    }

    /// The claims of a valid, unexpired token.
    func check(_ token: String, now: Int64) throws(Rejection) -> Claims {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = Base64URL.decode(parts[0]), let payload = Base64URL.decode(parts[1]),
              let signature = Base64URL.decode(parts[2]) else { throw .malformed }
        guard let decoded = try? JSONDecoder().decode(Header.self, from: Data(header)), decoded.alg == "HS256" else {
            throw .malformed
        }
        guard HMACSHA256.verify(signature, message: Array((parts[0] + "." + parts[1]).utf8), key: secret) else {
            throw .badSignature
        }
        guard let claims = try? JSONDecoder().decode(Claims.self, from: Data(payload)) else { throw .malformed }
        guard claims.exp > now else { throw .expired }
        return claims
    }
}
