import BinderCrypto
import BinderSystem
import Foundation

/// Issues and checks the server's bearer tokens: HS256 JWTs (`{"alg":"HS256","typ":"JWT"}`)
/// whose payload names the user's public key, signed with a 32-byte secret that lives in
/// `<repos>/.binder-serve/jwt-secret` (0600), or with the secret of the operator's file
/// (`--token-secret-file`, the same file for every replica: configuration, never a database
/// row, so that a dump cannot mint tokens). Rotating the secret revokes every token.
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

    /// The secret in the operator's file `path` (`--token-secret-file`): its bytes as they are
    /// (one trailing newline dropped), at least 32 of them, e.g. `openssl rand -hex 32 > FILE`.
    /// The file must be private to its owner (like PostgreSQL's password file) and is never
    /// written: replicas share it, and one that made its own would refuse the others' tokens.
    static func readSecret(fromFile path: String) throws(TokenSecretFileError) -> SecureBytes {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .unreadable(path: path, errno: errno) }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw .unreadable(path: path, errno: errno) }
        guard status.st_mode & S_IFMT == S_IFREG else { throw .notAFile(path: path) }
        guard status.st_mode & 0o077 == 0 else { throw .notPrivate(path: path) }
        var bytes = [UInt8](repeating: 0, count: 4097)
        defer { secureZero(&bytes) }
        var count = 0
        while count < bytes.count {
            let got = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + count, $0.count - count) }
            if got < 0 && errno == EINTR { continue }
            guard got >= 0 else { throw .unreadable(path: path, errno: errno) }
            if got == 0 { break }
            count += got
        }
        guard count < bytes.count else { throw .tooLong(path: path) }
        if count > 0 && bytes[count - 1] == UInt8(ascii: "\n") { count -= 1 }
        if count > 0 && bytes[count - 1] == UInt8(ascii: "\r") { count -= 1 }
        guard count >= 32 else { throw .tooShort(path: path, count: count) }
        do { return try SecureBytes(copying: Array(bytes[..<count])) } catch { throw .noSecretMemory(path: path) }
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

/// Why `--token-secret-file` was refused.
enum TokenSecretFileError: Error, Equatable, CustomStringConvertible {
    case unreadable(path: String, errno: Int32)
    case notAFile(path: String)
    /// Group or others may read it: whoever reads it can make tokens for any key.
    case notPrivate(path: String)
    case tooShort(path: String, count: Int)
    case tooLong(path: String)
    case noSecretMemory(path: String)

    var description: String {
        switch self {
        case .unreadable(let path, let code): return "--token-secret-file \(path): \(String(cString: strerror(code)))"
        case .notAFile(let path): return "--token-secret-file \(path): not a regular file"
        case .notPrivate(let path):
            return "--token-secret-file \(path): group or others may read it (whoever reads it can make tokens): chmod 600 \(path)"
        case .tooShort(let path, let count):
            return "--token-secret-file \(path): \(count) bytes; at least 32 are needed (e.g. openssl rand -hex 32 > \(path))"
        case .tooLong(let path): return "--token-secret-file \(path): longer than 4096 bytes"
        case .noSecretMemory(let path): return "--token-secret-file \(path): no secret memory to hold it"
        }
    }
}
