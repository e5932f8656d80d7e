import BinderCrypto
import Foundation
import Hummingbird
import NIOCore

/// Each request's context: Hummingbird's own, plus the address it came from (for the rate
/// limits) and who is calling, once an authentication middleware has said so.
struct ServeContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    /// The client's IP address ("unknown" for a socket without one): the socket's peer, or
    /// behind a trusted proxy the address it forwarded (set by `ClientAddressMiddleware`).
    var remoteAddress: String
    /// Set by `AccountAuthentication` or `GitAuthentication` before a protected route runs.
    var caller: Caller?

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress?.ipAddress ?? "unknown"
    }

    /// Hummingbird's own body collection is not used (see `RequestBodyReader`); kept small.
    var maxUploadSize: Int { 16 << 10 }

    /// The user a bearer token authenticated; 401 when none did (a route without the middleware).
    func user() throws -> TokenAuthority.Claims {
        guard case .user(let claims) = caller else { throw ServeFailure(401, "missing, bad or expired token") }
        return claims
    }

    /// The path's repository id, exactly as sent; 400 unless `RepositoryID.isValid`.
    func repositoryID() throws -> String {
        guard let id = parameters.get("repoId"), RepositoryID.isValid(id) else { throw ServeFailure(400, "bad repository id") }
        return id
    }
}

/// Who makes a request, as authenticated: a user by bearer token, or a doctor by scan token
/// (git routes only), which opens one staging repository.
enum Caller: Sendable {
    case user(TokenAuthority.Claims)
    case scan(repoId: String)
}

/// A refusal, answered as `{"error": "…"}` with its status (and `WWW-Authenticate` for 401).
struct ServeFailure: HTTPResponseError, CustomStringConvertible {
    let code: Int
    let message: String
    /// Set for 410: the deleted repository's tombstone (see `goneResponse`).
    var tombstone: RepositoryTombstone? = nil
    /// Set for a 503 of storage that is unavailable for a while (`StorageError.unavailable`):
    /// sent as `Retry-After`, and to git as text, the only type it shows. Other 503s (an
    /// injected fault, a full queue) keep their own answers.
    var retryAfter: String? = nil

    init(_ code: Int, _ message: String) {
        self.code = code
        self.message = message
    }

    /// 410 for a repository its owner deleted.
    static func gone(_ id: String, _ tombstone: RepositoryTombstone) -> ServeFailure {
        var failure = ServeFailure(410, "repository \(id) was deleted by its owner")
        failure.tombstone = tombstone
        return failure
    }

    var status: HTTPResponse.Status { .init(code: code) }
    var description: String { "\(code) \(message)" }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        if let tombstone { return Self.goneResponse(message, tombstone, request: request) }
        var response = JSONReply.response(code, ErrorReply(error: message))
        if retryAfter != nil && Self.isGitRequest(request) {
            // The only type git shows (as `remote: …`), so the user reads why.
            response = Response(status: status, headers: [.contentType: "text/plain; charset=utf-8"],
                                body: ResponseBody(byteBuffer: ByteBuffer(string: message + "\n")))
        }
        if code == 401 { response.headers[.wwwAuthenticate] = "Bearer" }
        if code == 429 { response.headers[.retryAfter] = "60" }
        if let retryAfter { response.headers[.retryAfter] = retryAfter }
        if code == 413 || code == 429 { response.headers[.connection] = "close" }
        return response
    }
}

extension ServeFailure {
    /// The reason a 410 carries, for machines: the only one there is today.
    static let goneReason = "deleted-by-owner"
    static let goneReasonHeader = HTTPFields.Element.Name("Binder-Gone")!

    /// `Retry-After` of a 503 from storage: PostgreSQL restarting takes seconds, the pool
    /// reconnects within about ten (DEPLOY.md).
    static let unavailableRetryAfter = "10"

    static func isGitRequest(_ request: Request) -> Bool {
        let path = request.uri.path
        return path.hasSuffix("/info/refs") || path.hasSuffix("/git-upload-pack") || path.hasSuffix("/git-receive-pack")
    }

    /// 410 with `Binder-Gone: deleted-by-owner`: to git's Smart HTTP requests as `text/plain`
    /// (the only type git shows, as `remote: …` lines), to the others as JSON
    /// `{"error", "reason", "deletedAt"}`. A client tells it apart by the status (binder serve
    /// answers 410 for nothing else) and the reason, never by the words.
    static func goneResponse(_ message: String, _ tombstone: RepositoryTombstone, request: Request) -> Response {
        let deletedAt = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(tombstone.deletedAt)))
        var response: Response
        if isGitRequest(request) {
            let text = "\(message) on \(deletedAt) (moved to a new key with binder key rotate, or deleted):"
                + " import the owner's new key (binder key import) and sync again, or clone the new repository\n"
            response = Response(status: .gone, headers: [.contentType: "text/plain; charset=utf-8"],
                                body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
        } else {
            response = JSONReply.response(410, GoneReply(error: message, reason: goneReason, deletedAt: deletedAt))
        }
        response.headers[goneReasonHeader] = goneReason
        return response
    }
}

enum JSONReply {
    static func response<Value: Encodable>(_ code: Int, _ value: Value) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = (try? encoder.encode(value)) ?? Data(#"{"error":"cannot encode the answer"}"#.utf8)
        return Response(status: .init(code: code), headers: [.contentType: "application/json"],
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// `body` as `Value`, or 400 naming what was expected.
    static func decode<Value: Decodable>(_ type: Value.Type, from body: ByteBuffer, expected: String) throws -> Value {
        do { return try JSONDecoder().decode(type, from: Data(body.readableBytesView)) } catch {
            throw ServeFailure(400, "expected \(expected)")
        }
    }
}

// MARK: - The protocol's JSON bodies (docs/FORMAT.md, "The server")

struct ErrorReply: Encodable {
    let error: String
}

/// A 410's body (`ServeFailure.goneResponse`).
struct GoneReply: Encodable {
    let error: String
    let reason: String
    let deletedAt: String
}

/// `{"status": …}` answers of the routes limbo.health answers that way (deletion).
struct StatusReply: Encodable {
    let status: String
    let reason: String?
    let repoId: String?
}

struct ChallengeReply: Encodable {
    let challenge: String
}

struct VerifyRequest: Decodable {
    let signedEvent: NostrEvent
    let challenge: String
    let userType: String?
}

struct VerifyReply: Encodable {
    struct Metadata: Encodable { let userType: String }
    let token: String
    let pubkey: String
    let metadata: Metadata
}

/// One entry of `GET /api/mgit/user/repositories`.
struct RepositorySummary: Codable, Sendable {
    let repoId: String
    let name: String
    let owner: String
    let role: String
    /// ISO 8601 time of the last commit of main; null for an empty repository.
    let lastCommit: String?

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(repoId, forKey: .repoId)
        try container.encode(name, forKey: .name)
        try container.encode(owner, forKey: .owner)
        try container.encode(role, forKey: .role)
        try container.encode(lastCommit, forKey: .lastCommit)   // null, not absent
    }
}

/// The web app's QR payload, as JSON.
struct ClonePayloadReply: Encodable {
    let action: String
    let clone_url: String
    let jwt_token: String
    let repo_name: String
}
