import Foundation
import Hummingbird
import NIOCore

/// git Smart HTTP under `/api/mgit/repos/:repoId/`: `GET info/refs`, `POST git-upload-pack`
/// and `POST git-receive-pack`, behind `FaultInjection` and `GitAuthentication`. Who may do
/// what is decided here before the body is read (owner, clone QR scope, scan token scope,
/// quota); how the repository answers is the storage's (`SmartHTTPEndpoint`). Status codes
/// follow limbo.health's: 403 for upload-pack of an id that does not exist.
struct SmartHTTPRoutes: Sendable {
    let environment: ServeEnvironment
    let sweeper: ShareSweeper
    let faultRate: Double
    static let gitProtocol = HTTPFields.Element.Name("Git-Protocol")

    func collection() -> RouteCollection<ServeContext> {
        let routes = RouteCollection(context: ServeContext.self)
        routes.add(middleware: FaultInjection(rate: faultRate))
        routes.add(middleware: GitAuthentication(tokens: environment.tokens, scans: environment.storage.scans, sweeper: sweeper))
        routes.get("/api/mgit/repos/:repoId/info/refs") { request, context in try await advertise(request, context) }
        routes.post("/api/mgit/repos/:repoId/git-upload-pack") { request, context in
            try await exchange(.uploadPack, request, context)
        }
        routes.post("/api/mgit/repos/:repoId/git-receive-pack") { request, context in
            try await exchange(.receivePack, request, context)
        }
        return routes
    }

    private var repositories: any RepositoryStorage { environment.storage.repositories }

    /// `GET info/refs?service=…`. For an id that does not exist: receive-pack answers 200 with
    /// no refs (so the client pushes; nothing is created yet), upload-pack 403.
    private func advertise(_ request: Request, _ context: ServeContext) async throws -> Response {
        let id = try context.repositoryID()
        guard let name = request.uri.queryParameters.get("service"), let service = GitService(rawValue: name) else {
            throw ServeFailure(400, "service not supported (only smart HTTP is served)")
        }
        let endpoint: any SmartHTTPEndpoint
        switch context.caller {
        case .scan(let repoId):
            endpoint = try await scanAccess(repoId, id: id, service: service)
        case .user(let user):
            try BearerToken.authorize(user, service == .uploadPack ? .read(repoId: id) : .account)
            if let repository = try await repositories.repository(id) {
                guard repository.owner == user.pubkey else { throw ServeFailure(403, "not authorized for this repository") }
                endpoint = repository
            } else {
                try await refuseDeleted(id, to: user)
                guard service == .receivePack else { throw ServeFailure(403, "not authorized for this repository") }
                try await repositories.checkCreationQuota(owner: user.pubkey)
                endpoint = repositories.unborn
            }
        case nil:
            throw ServeFailure(401, "missing, bad or expired token")
        }
        let body = try await endpoint.advertiseRefs(service, protocolHeader: Self.gitProtocol.flatMap { request.headers[$0] })
        return Response(status: .ok, headers: [.contentType: "application/x-\(service.rawValue)-advertisement",
                                               .cacheControl: "no-cache"],
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// An id its owner deleted is never served nor created again: 410 to its owner (who can
    /// tell "deleted" from "never existed"), 403 to anyone else, as for someone else's repository.
    private func refuseDeleted(_ id: String, to user: TokenAuthority.Claims) async throws {
        guard let tombstone = try await repositories.tombstone(id) else { return }
        guard tombstone.owner == user.pubkey else { throw ServeFailure(403, "not authorized for this repository") }
        throw ServeFailure.gone(id, tombstone)
    }

    /// A scan token opens its own staging repository only, and never creates one.
    private func scanAccess(_ repoId: String, id: String, service: GitService) async throws -> any StoredRepository {
        guard repoId == id else { throw ServeFailure(403, "Token not scoped to this repo") }
        guard let repository = try await repositories.repository(id) else {
            throw ServeFailure(404, service == .receivePack ? "Repository not found (scan tokens cannot create repos)" : "Repository not found")
        }
        return repository
    }

    /// `POST git-upload-pack` / `git-receive-pack`: owner checked and limits worked out before
    /// the body is read; a receive-pack for a new id creates the repository only if its push
    /// stores a branch.
    private func exchange(_ service: GitService, _ request: Request, _ context: ServeContext) async throws -> Response {
        let id = try context.repositoryID()
        let repository = try await repositories.repository(id)
        // Whose quota a push counts against: the caller's, or for a scan token the staging repository's owner's.
        let owner: String
        switch context.caller {
        case .scan(let repoId):
            guard let repositoryOwner = try await scanAccess(repoId, id: id, service: service).owner else {
                throw ServeFailure(404, "Repository not found")
            }
            owner = repositoryOwner
        case .user(let user):
            try BearerToken.authorize(user, service == .uploadPack ? .read(repoId: id) : .account)
            if let repository {
                guard repository.owner == user.pubkey else { throw ServeFailure(403, "not authorized for this repository") }
            } else {
                try await refuseDeleted(id, to: user)
                if service == .uploadPack { throw ServeFailure(403, "not authorized for this repository") }
            }
            owner = user.pubkey
        case nil:
            throw ServeFailure(401, "missing, bad or expired token")
        }
        let limit: Int
        // A creation holds its place in the owner's quota from here until it is published or fails.
        var reservation: PushReservation?
        defer { reservation?.release() }
        if service == .uploadPack {
            limit = environment.limits.fetchRequestBytes
        } else {
            let reserved = try await repositories.reservePush(owner: owner, creating: repository == nil)
            reservation = reserved
            limit = Int(min(Int64(environment.limits.pushBytes), reserved.bytesLeft))
        }
        let input = try repositories.spool()
        try await RequestBodyReader.spool(request, limit: limit, to: input)
        let protocolHeader = Self.gitProtocol.flatMap { request.headers[$0] }
        if case .scan = context.caller, service == .receivePack, try !Self.isProbe(input) {
            // A doctor's token writes notes onto the shared copy's main branch, nothing else
            // (no other branch or tag to fill the patient's quota with).
            try input.rewind()
            guard let push = ReceivePackRequest.parse(try input.read(upTo: 1 << 20)),
                  push.commands.allSatisfy({ $0.ref == "refs/heads/main" }) else {
                throw ServeFailure(403, "a scan token updates the shared copy's main branch only")
            }
        }
        let output: PackResponse
        if let repository {
            output = try await Self.serve(service, on: repository, input, protocolHeader)
        } else if try Self.isProbe(input) {
            // git sends a bare flush before a large push to see that the request would be
            // accepted; for a new id it is answered as the empty repository would, creating nothing.
            output = try await Self.serve(service, on: repositories.unborn, input, protocolHeader)
        } else {
            let creation = try await repositories.create(id, owner: owner, byPush: input, protocolHeader: protocolHeader)
            if creation.created { environment.logger.info("created repository", metadata: ["repo": "\(id)"]) }
            output = creation.response
        }
        return Self.response(service, output)
    }

    private static func serve(_ service: GitService, on endpoint: any SmartHTTPEndpoint, _ input: SpoolFile,
                              _ protocolHeader: String?) async throws(StorageError) -> PackResponse {
        switch service {
        case .uploadPack: return try await endpoint.uploadPack(input, protocolHeader: protocolHeader)
        case .receivePack: return try await endpoint.receivePack(input, protocolHeader: protocolHeader)
        }
    }

    /// True when the body is git's probe: a single flush packet, `0000`.
    private static func isProbe(_ input: SpoolFile) throws -> Bool {
        try input.rewind()
        return try input.read(upTo: 5) == Array("0000".utf8)
    }

    /// The storage's answer, streamed.
    private static func response(_ service: GitService, _ output: PackResponse) -> Response {
        let body = ResponseBody(contentLength: output.length) { writer in
            while true {
                let chunk = try await output.read(256 << 10)
                if chunk.isEmpty { break }
                try await writer.write(ByteBuffer(bytes: chunk))
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: [.contentType: "application/x-\(service.rawValue)-result", .cacheControl: "no-cache"],
                        body: body)
    }
}
