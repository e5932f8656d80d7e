import BinderCrypto
import Foundation
import Logging
import Synchronization

/// One HTTP request, body fully received (and decompressed).
struct Request: Sendable {
    let method: String
    let path: String
    let query: [String: String]
    /// Header names lowercased.
    let headers: [String: String]
    let body: [UInt8]

    var bearerToken: String? {
        guard let value = headers["authorization"], value.lowercased().hasPrefix("bearer ") else { return nil }
        let token = value.dropFirst(7).trimmingCharacters(in: .whitespaces)
        return token.isEmpty ? nil : token
    }
}

/// A request's target (`/path?name=value&…`) as the router reads it: path and query, each
/// percent-decoded where it can be. Any bytes a client sends are read, never trapped on.
@_spi(Fuzzing)
public enum RequestTarget {
    public static func split(_ uri: String) -> (path: String, query: [String: String]) {
        let path: String, queryString: String
        if let mark = uri.firstIndex(of: "?") {
            path = String(uri[..<mark]); queryString = String(uri[uri.index(after: mark)...])
        } else {
            path = uri; queryString = ""
        }
        var query: [String: String] = [:]
        for pair in queryString.split(separator: "&") {
            // Empty pieces kept: `=` and `=x` have an empty name (and always a first piece).
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0]).removingPercentEncoding ?? String(parts[0])
            query[name] = parts.count > 1 ? (String(parts[1]).removingPercentEncoding ?? String(parts[1])) : ""
        }
        return (path.removingPercentEncoding ?? path, query)
    }
}

struct Response: Sendable {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]

    static func json(_ status: Int, _ object: Any) -> Response {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return Response(status: status, headers: [("Content-Type", "application/json")], body: [UInt8](data))
    }

    static func error(_ status: Int, _ message: String) -> Response {
        var response = json(status, ["error": message])
        if status == 401 { response.headers.append(("WWW-Authenticate", "Bearer")) }
        return response
    }
}

/// The mgit-api endpoints (see docs/FORMAT.md, "The server"), answered synchronously: the
/// HTTP layer calls `handle` off its event loops.
final class Router: Sendable {
    let repositories: RepositoryStore
    let tokens: TokenAuthority
    let challenges = ChallengeBook()
    let git = GitBackend()
    let logger: Logger
    /// The base URL put in QR payloads; nil: taken from the request's Host header.
    let publicURL: String?
    /// Testing aid: this fraction of git requests fails with 503 (0: none), chosen by a fixed
    /// pseudo-random sequence so that a run can be repeated.
    let faultRate: Double
    private let gitRequests = Atomic<Int>(0)
    /// How far a login event's `created_at` may be from the server's clock.
    static let clockSkew: Int64 = 600

    init(repositories: RepositoryStore, tokens: TokenAuthority, logger: Logger, publicURL: String?, faultRate: Double) {
        self.repositories = repositories
        self.tokens = tokens
        self.logger = logger
        self.publicURL = publicURL
        self.faultRate = faultRate
    }

    func handle(_ request: Request) -> Response {
        let now = Int64(Date().timeIntervalSince1970)
        let segments = request.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        switch (request.method, segments) {
        case ("POST", ["api", "auth", "nostr", "challenge"]):
            return .json(200, ["challenge": challenges.make(now: now)])
        case ("POST", ["api", "auth", "nostr", "verify"]):
            return verify(request, now: now)
        case ("GET", ["api", "mgit", "user", "repositories"]):
            guard let user = authenticate(request, now: now) else { return .error(401, "missing, bad or expired token") }
            let list = repositories.list(owner: user.pubkey).map { summary -> [String: Any] in
                var entry: [String: Any] = ["repoId": summary.repoId, "name": summary.name, "owner": summary.owner,
                                            "role": summary.role]
                entry["lastCommit"] = summary.lastCommit ?? NSNull()
                return entry
            }
            return .json(200, list)
        case ("GET", let s) where s.count == 5 && Array(s[0..<4]) == ["api", "mgit", "qr", "clone"]:
            return qrPayload(request, repoId: s[4], now: now)
        case (_, let s) where s.count >= 5 && Array(s[0..<3]) == ["api", "mgit", "repos"]:
            return smartHTTP(request, repoId: s[3], rest: Array(s[4...]), now: now)
        default:
            return .error(404, "no such endpoint")
        }
    }

    /// A number in [0, 1) for the nth request (splitmix64): the same run injects the same faults.
    static func draw(_ n: Int) -> Double {
        var z = UInt64(truncatingIfNeeded: n) &* 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return Double(z >> 11) / Double(1 << 53)
    }

    // MARK: - Login

    private struct VerifyBody: Decodable {
        let signedEvent: NostrEvent
        let challenge: String
        let userType: String?
    }

    private func verify(_ request: Request, now: Int64) -> Response {
        guard let body = try? JSONDecoder().decode(VerifyBody.self, from: Data(request.body)) else {
            return .error(400, "expected {signedEvent, challenge, userType}")
        }
        // Single use: a challenge is consumed by the first attempt that names it.
        guard challenges.consume(body.challenge, now: now) else { return .error(401, "unknown or expired challenge") }
        let e = body.signedEvent
        guard e.kind == 22242 else { return .error(401, "event kind must be 22242") }
        guard e.content == body.challenge, e.tags.contains(["challenge", body.challenge]) else {
            return .error(401, "event does not answer the challenge")
        }
        guard e.isFresh(now: now, allowedSkew: Self.clockSkew) else { return .error(401, "event created_at is not fresh") }
        do { try e.verify() } catch { return .error(401, "event signature: \(error)") }
        let userType = body.userType ?? "patient"
        guard ["patient", "provider"].contains(userType) else { return .error(400, "unknown userType") }
        let token = tokens.issue(pubkey: e.pubkey, userType: userType, now: now)
        logger.info("login", metadata: ["pubkey": "\(e.pubkey.prefix(16))…"])
        return .json(200, ["token": token, "pubkey": e.pubkey, "metadata": ["userType": userType]])
    }

    private func authenticate(_ request: Request, now: Int64) -> TokenAuthority.Claims? {
        guard let token = request.bearerToken else { return nil }
        return try? tokens.check(token, now: now)
    }

    // MARK: - Repositories

    private func qrPayload(_ request: Request, repoId: String, now: Int64) -> Response {
        guard let user = authenticate(request, now: now) else { return .error(401, "missing, bad or expired token") }
        guard RepositoryStore.isValidID(repoId), repositories.exists(repoId) else { return .error(404, "no such repository") }
        guard repositories.owner(repoId) == user.pubkey else { return .error(403, "not your repository") }
        let base = publicURL ?? "http://" + (request.headers["host"] ?? "127.0.0.1")
        // The QR's token is for one clone: short-lived.
        let token = tokens.issue(pubkey: user.pubkey, userType: user.userType, now: now, lifetime: 600)
        return .json(200, ["action": "mgit_clone", "clone_url": base + "/api/mgit/repos/" + repoId,
                           "jwt_token": token, "repo_name": repoId])
    }

    private func smartHTTP(_ request: Request, repoId: String, rest: [String], now: Int64) -> Response {
        let service: GitBackend.Service
        let advertise: Bool
        switch (request.method, rest) {
        case ("GET", ["info", "refs"]):
            guard let name = request.query["service"], let s = GitBackend.Service(rawValue: name) else {
                return .error(403, "only smart HTTP is served")
            }
            service = s; advertise = true
        case ("POST", ["git-upload-pack"]): service = .uploadPack; advertise = false
        case ("POST", ["git-receive-pack"]): service = .receivePack; advertise = false
        default: return .error(404, "no such endpoint")
        }
        if faultRate > 0, Self.draw(gitRequests.add(1, ordering: .relaxed).newValue) < faultRate {
            return .error(503, "injected fault")
        }
        guard let user = authenticate(request, now: now) else { return .error(401, "missing, bad or expired token") }
        guard RepositoryStore.isValidID(repoId) else { return .error(400, "bad repository id") }
        if !repositories.exists(repoId) {
            guard service == .receivePack else { return .error(404, "no such repository") }
            do { try repositories.create(repoId, owner: user.pubkey) } catch {
                logger.error("create failed: \(error)")
                return .error(500, "cannot create the repository")
            }
            logger.info("created repository", metadata: ["repo": "\(repoId)"])
        }
        guard repositories.owner(repoId) == user.pubkey else { return .error(403, "not your repository") }

        let path = repositories.path(repoId)
        let protocolHeader = request.headers["git-protocol"]
        do {
            if advertise {
                let body = try git.advertisement(service, repository: path, protocolHeader: protocolHeader)
                return Response(status: 200, headers: [("Content-Type", "application/x-\(service.rawValue)-advertisement"),
                                                       ("Cache-Control", "no-cache")], body: body)
            }
            let body = try git.serve(service, repository: path, body: request.body, protocolHeader: protocolHeader)
            return Response(status: 200, headers: [("Content-Type", "application/x-\(service.rawValue)-result"),
                                                   ("Cache-Control", "no-cache")], body: body)
        } catch {
            logger.error("git failed", metadata: ["repo": "\(repoId)", "error": "\(error)"])
            return .error(500, "git failed")
        }
    }
}

enum ServerError: Error, CustomStringConvertible {
    case setup(String)
    var description: String {
        switch self { case .setup(let why): return why }
    }
}
