import BinderCrypto
import Foundation

/// One repository on the server, as `GET /api/mgit/user/repositories` lists it: limbo.health
/// sends `{id, name, description, created, type, access}`, `binder serve` `{repoId, name,
/// lastCommit, …}`; fields binder does not use are ignored.
public struct RemoteRepository: Sendable, Equatable, Decodable {
    public let id: String
    public let name: String
    public let lastCommit: String?
    public let created: String?

    public init(id: String, name: String, lastCommit: String?, created: String?) {
        self.id = id
        self.name = name
        self.lastCommit = lastCommit
        self.created = created
    }

    enum CodingKeys: String, CodingKey { case id, repoId, name, lastCommit, created }

    public init(from decoder: any Decoder) throws {
        let fields = try decoder.container(keyedBy: CodingKeys.self)
        guard let id = try fields.decodeIfPresent(String.self, forKey: .id) ?? fields.decodeIfPresent(String.self, forKey: .repoId) else {
            throw DecodingError.keyNotFound(CodingKeys.id, .init(codingPath: fields.codingPath, debugDescription: "no id"))
        }
        self.id = id
        name = try fields.decodeIfPresent(String.self, forKey: .name) ?? id
        lastCommit = try fields.decodeIfPresent(String.self, forKey: .lastCommit)
        created = try fields.decodeIfPresent(String.self, forKey: .created)
    }

    /// The phone's staging copies for sharing with a doctor (`scan-<hex time>`): not binders
    /// of their own, and hidden the way the phone hides them.
    public var isStagingCopy: Bool { id.hasPrefix("scan-") }
}

/// The web app's QR payload: `{"action":"mgit_clone","clone_url","jwt_token","repo_name"}`.
public struct ClonePayload: Sendable, Decodable {
    public let cloneURL: String
    public let token: String
    public let repoName: String

    enum CodingKeys: String, CodingKey {
        case action, cloneURL = "clone_url", token = "jwt_token", repoName = "repo_name"
    }

    public init(from decoder: any Decoder) throws {
        let fields = try decoder.container(keyedBy: CodingKeys.self)
        guard try fields.decodeIfPresent(String.self, forKey: .action) == "mgit_clone" else {
            throw SyncError.configuration("the QR payload's action is not \"mgit_clone\"")
        }
        guard let url = try? fields.decode(String.self, forKey: .cloneURL), !url.isEmpty else {
            throw SyncError.configuration("the QR payload has no clone_url")
        }
        guard let token = try? fields.decode(String.self, forKey: .token), !token.isEmpty else {
            throw SyncError.configuration("the QR payload has no jwt_token")
        }
        cloneURL = url
        self.token = token
        repoName = (try? fields.decodeIfPresent(String.self, forKey: .repoName)) ?? ""
    }

    public init(json: [UInt8]) throws(SyncError) {
        do {
            self = try JSONDecoder().decode(ClonePayload.self, from: Data(json))
        } catch let error as SyncError {
            throw error
        } catch {
            throw .configuration("the QR payload is not a JSON object")
        }
    }

    /// The server's base URL and the repository id, from `<base>/api/mgit/repos/<id>`.
    public func split() throws(SyncError) -> (server: String, repoId: String) {
        guard let range = cloneURL.range(of: "/api/mgit/repos/", options: .backwards) else {
            throw .configuration("the QR payload's clone_url is not an mgit repository URL")
        }
        var id = String(cloneURL[range.upperBound...])
        while id.hasSuffix("/") { id.removeLast() }
        if id.hasSuffix(".git") { id.removeLast(4) }
        guard !id.isEmpty, !id.contains("/") else { throw .configuration("the QR payload's clone_url names no repository") }
        return (String(cloneURL[..<range.lowerBound]), id)
    }
}

/// The server's REST endpoints (login and listings), over HTTPS with certificate checks (plain
/// HTTP only to this machine's loopback). Synchronous: callers are the command line and the
/// mount's sync thread.
public struct ServerClient: Sendable {
    /// The normalised base URL, e.g. `https://limbo.health`.
    public let base: String
    public static let defaultServer = "https://limbo.health"
    /// How each call is retried (the command's and the mount's alike: one request at a time).
    public private(set) var retry: RetryPolicy

    /// This client with another retry policy (a command's deadline and retry notices).
    public func retrying(_ policy: RetryPolicy) -> ServerClient {
        var copy = self
        copy.retry = policy
        return copy
    }

    public init(server: String, retry: RetryPolicy = .request) throws(SyncError) {
        var base = server.trimmingCharacters(in: .whitespaces)
        while base.hasSuffix("/") { base.removeLast() }
        guard let url = URL(string: base), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty,
              url.query == nil, url.user == nil else {
            throw .configuration("'\(server)' is not a server URL like https://limbo.health")
        }
        if scheme == "http" {
            guard Self.isLoopback(host) else {
                throw .configuration("refusing plain http to \(host): tokens and binders travel only over https (http is allowed to this machine only)")
            }
        } else if scheme != "https" {
            throw .configuration("'\(server)': only https (or http to this machine) is supported")
        }
        self.base = base
        self.retry = retry
    }

    /// `localhost`, `::1`, or an IPv4 address in 127.0.0.0/8 written as one (four decimal
    /// parts): a name that only starts with "127." (`127.attacker.example`) is a name like any.
    static func isLoopback(_ host: String) -> Bool {
        let h = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        if h == "localhost" || h == "::1" { return true }
        let parts = h.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts.allSatisfy({ !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
              parts.allSatisfy({ (Int($0) ?? 256) <= 255 }) else { return false }
        return parts[0] == "127"
    }

    /// Smart HTTP URL of a repository.
    public func repositoryURL(_ repoId: String) -> String { base + "/api/mgit/repos/" + repoId }

    /// Signs a fresh challenge with `secretKey` (kind 22242) and returns the JWT.
    public func login(secretKey: SecretKey) throws(SyncError) -> String {
        let challenge = try call("POST", "/api/auth/nostr/challenge", body: Empty(), token: nil, as: ChallengeAnswer.self)
        guard !challenge.challenge.isEmpty, challenge.challenge.utf8.count <= 1024 else {
            throw .server(status: 200, message: "the challenge is empty or longer than 1024 bytes")
        }
        let event = NostrEvent.authentication(challenge: challenge.challenge, secretKey: secretKey,
                                              createdAt: Int64(Date().timeIntervalSince1970), relay: base)
        let request = VerifyRequest(signedEvent: SignedEvent(event), challenge: challenge.challenge, userType: "patient")
        let verified = try call("POST", "/api/auth/nostr/verify", body: request, token: nil, as: VerifyAnswer.self)
        guard !verified.token.isEmpty else { throw .server(status: 200, message: "no token in the answer") }
        return verified.token
    }

    /// The user's repositories, `scan-*` staging copies left out.
    public func repositories(token: String) throws(SyncError) -> [RemoteRepository] {
        try call("GET", "/api/mgit/user/repositories", body: Optional<Empty>.none, token: token, as: [RemoteRepository].self,
                 limits: .listing)
            .filter { !$0.isStagingCopy }
    }

    /// How a deletion ended.
    public enum Deletion: Sendable, Equatable {
        /// Deleted now.
        case deleted
        /// Deleted before (binder serve's 410), or not there (404: limbo.health forgets a
        /// deleted id; a never-created one is as good as deleted).
        case alreadyGone
    }

    /// `DELETE /api/mgit/repos/<repoId>` (limbo.health's route, and binder serve's): the owner
    /// deletes a repository. 403 (another account's) is `.forbidden`, 401 `.unauthorized`.
    public func deleteRepository(_ repoId: String, token: String) throws(SyncError) -> Deletion {
        do {
            _ = try call("DELETE", "/api/mgit/repos/" + repoId, body: Optional<Empty>.none, token: token, as: DeletionAnswer.self)
            return .deleted
        } catch .gone {
            return .alreadyGone
        } catch .server(404, _) {
            return .alreadyGone
        }
    }

    /// True when the server answers that `repoId`'s owner deleted it (binder serve's 410 to a
    /// fetch's first request); false for any other answer, or none.
    public func isDeletedByOwner(_ repoId: String, token: String) -> Bool {
        let url = repositoryURL(repoId) + "/info/refs?service=git-upload-pack"
        let answer = try? retry.run(within: { (patience) throws(SyncError) -> HTTPAnswer in
            try HTTPExchange.send(method: .GET, url: url, headers: [("Authorization", "Bearer " + token)], body: nil,
                                  limits: .advertisement, patience: patience)
        })
        return answer?.status == 410
    }

    // MARK: - HTTP

    /// One JSON call, retried with backoff while the server is unreachable or answers 5xx/429
    /// (after a `Retry-After`, as long as it says, at most a minute).
    func call<Body: Encodable, Answer: Decodable>(_ method: String, _ path: String, body: Body?, token: String?,
                                                          as _: Answer.Type, limits: AnswerLimits = .json) throws(SyncError) -> Answer {
        var headers = [("Accept", "application/json")]
        if let token { headers.append(("Authorization", "Bearer " + token)) }
        var bytes: [UInt8]?
        if let body {
            headers.append(("Content-Type", "application/json"))
            do { bytes = [UInt8](try JSONEncoder().encode(body)) } catch { throw .configuration("cannot encode the request: \(error)") }
        }
        let url = base + path
        let answer = try retry.run(within: { (patience) throws(SyncError) -> HTTPAnswer in
            let answer = try HTTPExchange.send(method: .init(rawValue: method), url: url, headers: headers, body: bytes, limits: limits,
                                               patience: patience)
            try Self.check(answer)
            return answer
        })
        do {
            return try JSONDecoder().decode(Answer.self, from: Data(answer.body))
        } catch {
            throw .server(status: answer.status, message: "the answer to \(path) is not what the protocol says (\(Self.decodingSummary(error)))")
        }
    }

    /// Throws for a status that is not 2xx, with the server's own words when it sent some; a
    /// 429 or 503 with `Retry-After` is `.busy` (the retry waits what the server asked).
    static func check(_ answer: HTTPAnswer) throws(SyncError) {
        guard !(200..<300).contains(answer.status) else { return }
        let reason = (try? JSONDecoder().decode(ErrorAnswer.self, from: Data(answer.body)))?.text.map { String($0.prefix(200)) }
            ?? "HTTP \(answer.status)"
        switch (answer.status, answer.retryAfter) {
        case (401, _): throw .unauthorized(reason)
        case (403, _): throw .forbidden(reason)
        case (410, _): throw .gone(reason)
        case (429, let wait?), (503, let wait?): throw .busy(status: answer.status, message: reason, retryAfter: wait)
        default: throw .server(status: answer.status, message: reason)
        }
    }

    /// Which field a decoding failure was about (never the values: they may be a token).
    static func decodingSummary(_ error: any Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, _): return "no field \(key.stringValue)"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context),
             DecodingError.dataCorrupted(let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return path.isEmpty ? "not JSON of the expected shape" : "bad field \(path)"
        default: return "not JSON"
        }
    }
}

// MARK: - Wire types

struct Empty: Codable {}

/// `POST /api/auth/nostr/challenge` → `{"challenge": "<64 hex>", "tag": "login"}`.
struct ChallengeAnswer: Decodable { let challenge: String }

/// The signed NIP-01 event, as the verify endpoint takes it.
struct SignedEvent: Encodable {
    let id: String, pubkey: String, created_at: Int64, kind: Int, tags: [[String]], content: String, sig: String

    init(_ event: NostrEvent) {
        id = event.id; pubkey = event.pubkey; created_at = event.createdAt; kind = event.kind
        tags = event.tags; content = event.content; sig = event.sig
    }
}

/// `POST /api/auth/nostr/verify`; `userType` is always "patient" (else the server makes a provider account).
struct VerifyRequest: Encodable {
    let signedEvent: SignedEvent
    let challenge: String
    let userType: String
}

struct VerifyAnswer: Decodable { let token: String }

/// `DELETE /api/mgit/repos/<repoId>` → `{"status": "OK", "repoId": …}`.
struct DeletionAnswer: Decodable { let status: String }

/// `{"error": …}` (auth middleware) or `{"status": "error", "reason": …}` (route handlers).
struct ErrorAnswer: Decodable {
    let error: String?
    let reason: String?
    let message: String?
    var text: String? { error ?? reason ?? message }
}
