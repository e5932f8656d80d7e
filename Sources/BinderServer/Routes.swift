import BinderCrypto
import Foundation
import Hummingbird
import Logging
import NIOCore
import Synchronization

/// Per-user and per-request limits of `binder serve` (all configurable; see ServeCommand).
public struct ServeLimits: Sendable {
    /// Repositories one user may own.
    public var repositoriesPerUser: Int
    /// Bytes one user's repositories may take on disk; a push may bring at most what is left.
    public var bytesPerUser: Int64
    /// Largest push (receive-pack body, decompressed).
    public var pushBytes: Int
    /// Largest fetch request (upload-pack body, decompressed: wants and haves).
    public var fetchRequestBytes: Int
    /// Largest JSON body (the login), for anyone.
    public var jsonBytes: Int
    /// Challenge and verify requests per minute from one address (each).
    public var loginsPerMinute: Int
    /// git processes running at once.
    public var gitProcesses: Int
    public var gitTimeout: Duration

    public init(repositoriesPerUser: Int = 100, bytesPerUser: Int64 = 1 << 30, pushBytes: Int = 512 << 20,
                fetchRequestBytes: Int = 8 << 20, jsonBytes: Int = 16 << 10, loginsPerMinute: Int = 30,
                gitProcesses: Int = 8, gitTimeout: Duration = .seconds(600)) {
        self.repositoriesPerUser = repositoriesPerUser
        self.bytesPerUser = bytesPerUser
        self.pushBytes = pushBytes
        self.fetchRequestBytes = fetchRequestBytes
        self.jsonBytes = jsonBytes
        self.loginsPerMinute = loginsPerMinute
        self.gitProcesses = gitProcesses
        self.gitTimeout = gitTimeout
    }
}

/// The mgit-api endpoints (docs/FORMAT.md, "The server"). Every endpoint that needs a token
/// checks it before reading a byte of the body; bodies are read through `RequestBodyReader`
/// within the endpoint's limit. Status codes follow limbo.health's (401 token, 403 refused,
/// including upload-pack of an id that does not exist), with stricter creation rules.
final class Routes: Sendable {
    let repositories: RepositoryStore
    let tokens: TokenAuthority
    let challenges = ChallengeBook()
    let scans = ScanSessions()
    let git: GitBackend
    let limits: ServeLimits
    let logger: Logger
    /// The base URL put in QR payloads and that login events must name (`relay` tag); nil only
    /// on loopback (`BinderServer.Options.publicURL`), where `localURL` stands in for it.
    let publicURL: String?
    /// `http://HOST:PORT` as bound, set once the server listens: the QR payloads' base without
    /// `publicURL` (never the request's `Host`, which the client writes).
    private let localURL = Mutex<String?>(nil)
    /// Testing aid: this fraction of git requests fails with 503 (0: none), chosen by a fixed
    /// pseudo-random sequence so that a run can be repeated.
    let faultRate: Double
    private let gitRequests = Atomic<Int>(0)
    private let challengeLimiter: RateLimiter
    private let verifyLimiter: RateLimiter
    /// Repositories being created per owner (counted against the quota until published).
    private let creating = Mutex<[String: Int]>([:])
    /// How far a login event's `created_at` may be from the server's clock.
    static let clockSkew: Int64 = 600
    /// How long a clone QR's token lasts (at most as long as the token that asked for it).
    static let cloneTokenLifetime: Int64 = 600
    static let gitProtocol = HTTPFields.Element.Name("Git-Protocol")

    init(repositories: RepositoryStore, tokens: TokenAuthority, limits: ServeLimits, logger: Logger, publicURL: String?,
         faultRate: Double) {
        self.repositories = repositories
        self.tokens = tokens
        self.limits = limits
        self.logger = logger
        self.publicURL = publicURL
        self.faultRate = faultRate
        git = GitBackend(spool: repositories.spoolFolder, slots: ProcessSlots(limits.gitProcesses), timeout: limits.gitTimeout)
        challengeLimiter = RateLimiter(perMinute: limits.loginsPerMinute)
        verifyLimiter = RateLimiter(perMinute: limits.loginsPerMinute)
    }

    func register(on router: Router<ServeContext>) {
        router.post("/api/auth/nostr/challenge") { request, context in try await self.challenge(request, context) }
        router.post("/api/auth/nostr/verify") { request, context in try await self.verify(request, context) }
        router.post("/api/auth/scan/session") { request, _ in try await self.openScanSession(request) }
        router.post("/api/auth/scan/revoke") { request, _ in try await self.revokeScanSession(request) }
        router.get("/api/mgit/user/repositories") { request, _ in try self.list(request) }
        router.get("/api/mgit/qr/clone/:repoId") { request, context in try self.qrPayload(request, context) }
        router.get("/api/mgit/repos/:repoId/info/refs") { request, context in try await self.advertise(request, context) }
        router.post("/api/mgit/repos/:repoId/git-upload-pack") { request, context in
            try await self.exchange(.uploadPack, request, context)
        }
        router.post("/api/mgit/repos/:repoId/git-receive-pack") { request, context in
            try await self.exchange(.receivePack, request, context)
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

    private static var now: Int64 { Int64(Date().timeIntervalSince1970) }

    /// Called once the server listens on `url`.
    func listening(at url: String) {
        localURL.withLock { $0 = url }
    }

    // MARK: - Login

    private func challenge(_ request: Request, _ context: ServeContext) async throws -> Response {
        guard challengeLimiter.allow(context.remoteAddress) else { throw ServeFailure(429, "too many login attempts; wait a minute") }
        _ = try await RequestBodyReader.collect(request, limit: limits.jsonBytes)
        return JSONReply.response(200, ChallengeReply(challenge: challenges.make(for: context.remoteAddress, now: Self.now)))
    }

    private func verify(_ request: Request, _ context: ServeContext) async throws -> Response {
        guard verifyLimiter.allow(context.remoteAddress) else { throw ServeFailure(429, "too many login attempts; wait a minute") }
        let body = try await RequestBodyReader.collect(request, limit: limits.jsonBytes)
        let verify = try JSONReply.decode(VerifyRequest.self, from: body, expected: "{signedEvent, challenge, userType}")
        let now = Self.now
        // Single use: a challenge is consumed by the first attempt that names it.
        guard challenges.consume(verify.challenge, now: now) else { throw ServeFailure(401, "unknown or expired challenge") }
        let e = verify.signedEvent
        guard e.kind == 22242 else { throw ServeFailure(401, "event kind must be 22242") }
        guard e.content == verify.challenge, e.tags.contains(["challenge", verify.challenge]) else {
            throw ServeFailure(401, "event does not answer the challenge")
        }
        guard e.isFresh(now: now, allowedSkew: Self.clockSkew) else { throw ServeFailure(401, "event created_at is not fresh") }
        // An event that names its server (binder's clients do; the apps do not) must name this
        // one, as clients reach it (`--public-url`): else another server is handing on what was
        // signed for it, to log in here as its user.
        if let publicURL, let relay = e.tags.first(where: { $0.count >= 2 && $0[0] == "relay" })?[1],
           Self.normalizedURL(relay) != Self.normalizedURL(publicURL) {
            throw ServeFailure(401, "the event was signed for another server")
        }
        do { try e.verify() } catch { throw ServeFailure(401, "event signature: \(error)") }
        let userType = verify.userType ?? "patient"
        guard ["patient", "provider"].contains(userType) else { throw ServeFailure(400, "unknown userType") }
        let token = try tokens.issue(pubkey: e.pubkey, userType: userType, now: now)
        logger.info("login", metadata: ["pubkey": "\(e.pubkey.prefix(16))…"])
        return JSONReply.response(200, VerifyReply(token: token, pubkey: e.pubkey, metadata: .init(userType: userType)))
    }

    /// A URL as compared for `relay`: lowercased, without trailing slashes.
    static func normalizedURL(_ url: String) -> String {
        var text = url.trimmingCharacters(in: .whitespaces).lowercased()
        while text.hasSuffix("/") { text.removeLast() }
        return text
    }

    /// The claims of a token that grants `access`: 401 for a missing, malformed, forged or
    /// expired token, 403 for one issued for less (a clone QR's).
    private func authenticate(_ request: Request, for access: TokenAuthority.Claims.Access) throws -> TokenAuthority.Claims {
        let claims = try bearerClaims(request)
        try authorize(claims, access)
        return claims
    }

    private func authorize(_ claims: TokenAuthority.Claims, _ access: TokenAuthority.Claims.Access) throws {
        guard claims.allows(access) else { throw ServeFailure(403, "this token only fetches the repository it was issued for") }
    }

    /// The token's claims, whatever it grants; 401 for a missing, malformed, forged or expired one.
    private func bearerClaims(_ request: Request) throws -> TokenAuthority.Claims {
        guard let value = request.headers[.authorization], value.lowercased().hasPrefix("bearer ") else {
            throw ServeFailure(401, "missing, bad or expired token")
        }
        let token = value.dropFirst(7).trimmingCharacters(in: .whitespaces)
        guard !token.isEmpty, let claims = try? tokens.check(token, now: Self.now) else {
            throw ServeFailure(401, "missing, bad or expired token")
        }
        return claims
    }

    /// The path's repository id, exactly as sent; 400 unless `RepositoryID.isValid`.
    private func repositoryID(_ context: ServeContext) throws -> String {
        guard let id = context.parameters.get("repoId"), RepositoryID.isValid(id) else {
            throw ServeFailure(400, "bad repository id")
        }
        return id
    }

    // MARK: - Repositories

    private func list(_ request: Request) throws -> Response {
        let user = try authenticate(request, for: .account)
        return JSONReply.response(200, repositories.list(owner: user.pubkey))
    }

    private func qrPayload(_ request: Request, _ context: ServeContext) throws -> Response {
        let user = try authenticate(request, for: .account)
        let id = try repositoryID(context)
        guard repositories.exists(id) else { throw ServeFailure(404, "no such repository") }
        guard repositories.owner(id) == user.pubkey else { throw ServeFailure(403, "not your repository") }
        guard let base = publicURL ?? localURL.withLock({ $0 }) else { throw ServeFailure(503, "not listening yet") }
        // The QR's token is for one clone: it fetches this repository only, for 10 minutes,
        // and cannot ask for another QR (docs/FORMAT.md, "The server").
        let now = Self.now
        let token = try tokens.issueClone(for: user, repoId: id, now: now, expires: now + Self.cloneTokenLifetime)
        return JSONReply.response(200, ClonePayloadReply(action: "mgit_clone", clone_url: base + "/api/mgit/repos/" + id,
                                                         jwt_token: token, repo_name: id))
    }

    // MARK: - Scan sessions (Share with a doctor)

    /// Who makes a git request: a user by bearer token, or a doctor by scan token (the query's
    /// `scan_token` or `Authorization: ScanToken …`, as limbo.health takes it); a bearer token wins.
    enum Caller {
        case user(TokenAuthority.Claims)
        case scan(repoId: String)
    }

    private func gitCaller(_ request: Request) throws -> Caller {
        endFinishedShares()
        let header = request.headers[.authorization]
        if header?.lowercased().hasPrefix("bearer ") == true { return .user(try bearerClaims(request)) }
        let scanToken: String?
        if let header, header.lowercased().hasPrefix("scantoken ") {
            scanToken = header.dropFirst(10).trimmingCharacters(in: .whitespaces)
        } else {
            scanToken = request.uri.queryParameters.get("scan_token").map { String($0) }
        }
        guard let scanToken else { return .user(try bearerClaims(request)) }
        // Unknown, revoked and expired tokens look alike: a session is forgotten when it ends.
        guard let repoId = scans.repository(forToken: scanToken, now: Self.now) else { throw ServeFailure(403, "Invalid scan token") }
        return .scan(repoId: repoId)
    }

    /// A scan token opens its own staging repository only, and never creates one.
    private func checkScanAccess(_ caller: Caller, id: String, service: GitBackend.Service) throws {
        guard case .scan(let repoId) = caller, repoId == id else { throw ServeFailure(403, "Token not scoped to this repo") }
        guard repositories.exists(id) else {
            throw ServeFailure(404, service == .receivePack ? "Repository not found (scan tokens cannot create repos)" : "Repository not found")
        }
    }

    /// Drops expired sessions, and (at most once a minute) removes the staging repositories no
    /// session serves: one shared, `collectionGrace` after its last session ended (its owner
    /// collects the doctor's notes meanwhile); one never shared, `orphanGrace` after its push.
    private func endFinishedShares() {
        for id in scans.expire(now: Self.now) {
            logger.info("scan session expired; the staging repository waits for its owner to collect it", metadata: ["repo": "\(id)"])
        }
        let now = Date()
        guard scans.orphanSweepDue(now: now) else { return }
        for staging in repositories.stagingRepositories() where !scans.isShared(staging.id) {
            let ended = repositories.shareEnds(staging.id)
            let due = ended.map { now.timeIntervalSince1970 > TimeInterval($0) + ScanSessions.collectionGrace }
                ?? (now.timeIntervalSince(staging.modified) > ScanSessions.orphanGrace)
            if due, repositories.remove(staging.id) {
                logger.info(ended == nil ? "unshared staging repository removed" : "ended share's staging repository removed",
                            metadata: ["repo": "\(staging.id)"])
            }
        }
    }

    /// `POST /api/auth/scan/session` `{stagingRepoId, expiresIn?}`: only the owner of an existing
    /// `scan-…` repository may open a session on it (limbo.health checks neither).
    private func openScanSession(_ request: Request) async throws -> Response {
        let user = try authenticate(request, for: .account)
        endFinishedShares()
        let body = try await RequestBodyReader.collect(request, limit: limits.jsonBytes)
        let asked = try JSONReply.decode(ScanSessionRequest.self, from: body, expected: "{stagingRepoId, expiresIn?}")
        guard let id = asked.stagingRepoId, !id.isEmpty else { throw ServeFailure(400, "stagingRepoId is required") }
        guard ScanSessions.isStagingID(id) else { throw ServeFailure(400, #"stagingRepoId must start with "scan-""#) }
        guard RepositoryID.isValid(id) else { throw ServeFailure(400, "bad repository id") }
        guard repositories.exists(id) else { throw ServeFailure(404, "no staging repository \(id): push it first") }
        guard repositories.owner(id) == user.pubkey else { throw ServeFailure(403, "not your staging repository") }
        let lifetime = asked.expiresIn ?? ScanSessions.defaultLifetime
        guard lifetime > 0, lifetime <= ScanSessions.maxLifetime else {
            throw ServeFailure(400, "expiresIn must be 1 to \(ScanSessions.maxLifetime) seconds")
        }
        let session = scans.open(repoId: id, owner: user.pubkey, now: Self.now, lifetime: lifetime)
        repositories.noteShareEnds(id, at: session.expiresAt)
        logger.info("scan session opened", metadata: ["repo": "\(id)", "expires": "\(session.expiresAt)"])
        return JSONReply.response(200, ScanSessionReply(sessionToken: session.token, repoId: id, expiresAt: session.expiresAt))
    }

    /// `POST /api/auth/scan/revoke` `{sessionToken}`: ends the caller's own session and removes
    /// its staging repository (unless another session of the same repository is still live).
    private func revokeScanSession(_ request: Request) async throws -> Response {
        let user = try authenticate(request, for: .account)
        endFinishedShares()
        let body = try await RequestBodyReader.collect(request, limit: limits.jsonBytes)
        let asked = try JSONReply.decode(ScanRevokeRequest.self, from: body, expected: "{sessionToken}")
        guard let token = asked.sessionToken, !token.isEmpty else { throw ServeFailure(400, "sessionToken is required") }
        guard let ended = scans.revoke(token: token, owner: user.pubkey) else {
            // Expired already (or the server restarted): its owner may still end the staging
            // repository it names, which is kept only for the owner to collect from.
            if let id = asked.stagingRepoId, ScanSessions.isStagingID(id), RepositoryID.isValid(id), repositories.exists(id),
               repositories.owner(id) == user.pubkey, !scans.isShared(id), repositories.shareEnds(id) != nil, repositories.remove(id) {
                logger.info("ended share's staging repository removed by its owner", metadata: ["repo": "\(id)"])
            }
            throw ServeFailure(404, "Session not found or not owned by you")
        }
        if !ended.stillShared, repositories.remove(ended.repoId) {
            logger.info("scan session revoked; staging repository removed", metadata: ["repo": "\(ended.repoId)"])
        }
        return JSONReply.response(200, ScanRevokeReply(success: true))
    }

    // MARK: - Git Smart HTTP

    private func injectFault() throws {
        if faultRate > 0, Self.draw(gitRequests.add(1, ordering: .relaxed).newValue) < faultRate {
            throw ServeFailure(503, "injected fault")
        }
    }

    /// `GET info/refs?service=…`. For an id that does not exist: receive-pack answers 200 with
    /// no refs (so the client pushes; nothing is created yet), upload-pack 403.
    private func advertise(_ request: Request, _ context: ServeContext) async throws -> Response {
        try injectFault()
        let caller = try gitCaller(request)
        let id = try repositoryID(context)
        guard let name = request.uri.queryParameters.get("service"), let service = GitBackend.Service(rawValue: name) else {
            throw ServeFailure(400, "service not supported (only smart HTTP is served)")
        }
        let repository: String
        guard case .user(let user) = caller else {
            try checkScanAccess(caller, id: id, service: service)
            return try await advertisement(service, id: id, repository: repositories.path(id), request)
        }
        try authorize(user, service == .uploadPack ? .read(repoId: id) : .account)
        if repositories.exists(id) {
            guard repositories.owner(id) == user.pubkey else { throw ServeFailure(403, "not authorized for this repository") }
            repository = repositories.path(id)
        } else {
            guard service == .receivePack else { throw ServeFailure(403, "not authorized for this repository") }
            try checkRepositoryQuota(user.pubkey)
            repository = repositories.emptyTemplate
        }
        return try await advertisement(service, id: id, repository: repository, request)
    }

    private func advertisement(_ service: GitBackend.Service, id: String, repository: String, _ request: Request) async throws -> Response {
        let body: [UInt8]
        let protocolHeader = Self.gitProtocol.flatMap { request.headers[$0] }
        do {
            body = try await git.advertisement(service, repository: repository, protocolHeader: protocolHeader)
        } catch {
            logger.error("git failed", metadata: ["repo": "\(id)", "error": "\(error)"])
            throw ServeFailure(500, "git failed")
        }
        return Response(status: .ok, headers: [.contentType: "application/x-\(service.rawValue)-advertisement",
                                               .cacheControl: "no-cache"],
                        body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// `POST git-upload-pack` / `git-receive-pack`: owner checked and limits worked out before
    /// the body is read; a receive-pack for a new id creates the repository only if its push
    /// stores a branch.
    private func exchange(_ service: GitBackend.Service, _ request: Request, _ context: ServeContext) async throws -> Response {
        try injectFault()
        let caller = try gitCaller(request)
        let id = try repositoryID(context)
        let exists = repositories.exists(id)
        // Whose quota a push counts against: the caller's, or for a scan token the staging repository's owner's.
        let owner: String
        switch caller {
        case .scan:
            try checkScanAccess(caller, id: id, service: service)
            guard let repositoryOwner = repositories.owner(id) else { throw ServeFailure(404, "Repository not found") }
            owner = repositoryOwner
        case .user(let user):
            try authorize(user, service == .uploadPack ? .read(repoId: id) : .account)
            if exists {
                guard repositories.owner(id) == user.pubkey else { throw ServeFailure(403, "not authorized for this repository") }
            } else if service == .uploadPack {
                throw ServeFailure(403, "not authorized for this repository")
            }
            owner = user.pubkey
        }
        let limit: Int
        // A creation holds its place in the owner's quota from here until it is published or fails.
        var reserved = false
        defer { if reserved { creating.withLock { $0[owner, default: 1] -= 1 } } }
        if service == .uploadPack {
            limit = limits.fetchRequestBytes
        } else {
            if !exists {
                try checkRepositoryQuota(owner, reserve: true)
                reserved = true
            }
            let left = limits.bytesPerUser - repositories.usage(owner: owner).bytes
            guard left > 0 else { throw ServeFailure(413, "storage quota used up") }
            limit = Int(min(Int64(limits.pushBytes), left))
        }
        let input = try SpoolFile(folder: repositories.spoolFolder)
        try await RequestBodyReader.spool(request, limit: limit, to: input)
        let protocolHeader = Self.gitProtocol.flatMap { request.headers[$0] }
        if case .scan = caller, service == .receivePack, try !Self.isProbe(input) {
            // A doctor's token writes notes onto the shared copy's main branch, nothing else
            // (no other branch or tag to fill the patient's quota with).
            try input.rewind()
            guard let push = ReceivePackRequest.parse(try input.read(upTo: 1 << 20)),
                  push.commands.allSatisfy({ $0.ref == "refs/heads/main" }) else {
                throw ServeFailure(403, "a scan token updates the shared copy's main branch only")
            }
        }
        let output: GitBackend.Output
        if exists {
            output = try await runGit(service, id: id, repository: repositories.path(id), input: input, protocolHeader: protocolHeader)
            if service == .receivePack { repositories.noteChanged(id) }
        } else if try Self.isProbe(input) {
            // git sends a bare flush before a large push to see that the request would be
            // accepted; for a new id it is answered as the empty repository would, creating nothing.
            output = try await runGit(service, id: id, repository: repositories.emptyTemplate, input: input,
                                      protocolHeader: protocolHeader)
        } else {
            output = try await create(id, owner: owner, input: input, protocolHeader: protocolHeader)
        }
        return Self.gitResponse(service, output)
    }

    /// Push-to-create: the body must create branches and carry a pack; it is received into a
    /// staged repository that is moved into place only if a branch was stored.
    private func create(_ id: String, owner: String, input: SpoolFile, protocolHeader: String?) async throws -> GitBackend.Output {
        try input.rewind()
        guard let push = ReceivePackRequest.parse(try input.read(upTo: 1 << 20)), push.createsBranchesWithObjects else {
            throw ServeFailure(400, "a new repository is created only by a push that brings a branch and its objects")
        }
        let staging: String
        do { staging = try repositories.stage(id, owner: owner) } catch {
            logger.error("staging failed: \(error)")
            throw ServeFailure(500, "cannot create the repository")
        }
        defer { try? FileManager.default.removeItem(atPath: staging) }
        let output = try await runGit(.receivePack, id: id, repository: staging, input: input, protocolHeader: protocolHeader)
        guard repositories.hasBranch(at: staging) else { return output }   // git's report says why
        guard repositories.publish(staging, as: id) else { throw ServeFailure(403, "not authorized for this repository") }
        logger.info("created repository", metadata: ["repo": "\(id)"])
        return output
    }

    private func runGit(_ service: GitBackend.Service, id: String, repository: String, input: SpoolFile,
                        protocolHeader: String?) async throws -> GitBackend.Output {
        do {
            let output = try await git.serve(service, repository: repository, input: input, protocolHeader: protocolHeader)
            guard output.status == 0 else { throw GitFailure(description: "exit \(output.status): \(output.errors)") }
            return output
        } catch {
            logger.error("git failed", metadata: ["repo": "\(id)", "error": "\(error)"])
            throw ServeFailure(500, "git failed")
        }
    }

    /// True when the body is git's probe: a single flush packet, `0000`.
    private static func isProbe(_ input: SpoolFile) throws -> Bool {
        try input.rewind()
        return try input.read(upTo: 5) == Array("0000".utf8)
    }

    /// 403 once `owner` has as many repositories as allowed, counting those being created;
    /// with `reserve`, the check also counts one more creation for `owner` (released by the caller).
    private func checkRepositoryQuota(_ owner: String, reserve: Bool = false) throws {
        let owned = repositories.usage(owner: owner).repositories
        let allowed = creating.withLock { creating -> Bool in
            guard owned + creating[owner, default: 0] < limits.repositoriesPerUser else { return false }
            if reserve { creating[owner, default: 0] += 1 }
            return true
        }
        guard allowed else { throw ServeFailure(403, "repository quota reached (\(limits.repositoriesPerUser) per user)") }
    }

    /// git's stdout, streamed from its spool file.
    private static func gitResponse(_ service: GitBackend.Service, _ output: GitBackend.Output) -> Response {
        let stdout = output.stdout
        let size = stdout.size
        try? stdout.rewind()
        let body = ResponseBody(contentLength: size) { writer in
            while true {
                let chunk = try stdout.read(upTo: 256 << 10)
                if chunk.isEmpty { break }
                try await writer.write(ByteBuffer(bytes: chunk))
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: [.contentType: "application/x-\(service.rawValue)-result", .cacheControl: "no-cache"],
                        body: body)
    }
}
