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
        /// nil for a login's token, which acts for its account. `"clone"` for the clone-QR's
        /// token, which only reads the repository `repoId` (docs/FORMAT.md, "The server").
        /// A scope this server does not know grants nothing.
        let scope: String?
        let repoId: String?

        /// What a token was issued for, checked by `allows`.
        enum Access: Equatable {
            /// Everything the account may do: listing, QR payloads, shares, pushes.
            case account
            /// Fetching (upload-pack) the repository with this id.
            case read(repoId: String)
        }

        static let cloneScope = "clone"

        func allows(_ access: Access) -> Bool {
            switch (scope, access) {
            case (nil, _): return true
            case (Self.cloneScope?, .read(let id)): return repoId == id
            default: return false
            }
        }
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

    /// A login's token for `pubkey`, valid `lifetime` seconds.
    func issue(pubkey: String, userType: String, now: Int64) throws -> String {
        try sign(Claims(pubkey: pubkey, userType: userType, iat: now, exp: now + lifetime,
                        jti: Hex.encode(randomBytes(12)), scope: nil, repoId: nil))
    }

    /// The clone-QR's token: reads `repoId` only, until `expires` (never later than the token
    /// that asked for it), and cannot ask for another (`Claims.allows`).
    func issueClone(for owner: Claims, repoId: String, now: Int64, expires: Int64) throws -> String {
        try sign(Claims(pubkey: owner.pubkey, userType: owner.userType, iat: now, exp: min(expires, owner.exp),
                        jti: Hex.encode(randomBytes(12)), scope: Claims.cloneScope, repoId: repoId))
    }

    private func sign(_ claims: Claims) throws -> String {
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
