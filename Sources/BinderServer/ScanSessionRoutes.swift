import Hummingbird

/// `POST /api/auth/scan/session` and `/revoke` ("Share with a doctor"), for an account's token
/// (`AccountAuthentication`).
struct ScanSessionRoutes: Sendable {
    let environment: ServeEnvironment
    let sweeper: ShareSweeper

    func collection() -> RouteCollection<ServeContext> {
        let routes = RouteCollection(context: ServeContext.self)
        routes.add(middleware: AccountAuthentication(tokens: environment.tokens))
        routes.post("/api/auth/scan/session") { request, context in try await open(request, context) }
        routes.post("/api/auth/scan/revoke") { request, context in try await revoke(request, context) }
        return routes
    }

    private var storage: ServerStorage { environment.storage }

    /// The request's JSON body, once finished shares are swept.
    private func read<Body: Decodable>(_ type: Body.Type, _ request: Request, expected: String) async throws -> Body {
        try await sweeper.sweep()
        let body = try await RequestBodyReader.collect(request, limit: environment.limits.jsonBytes)
        return try JSONReply.decode(type, from: body, expected: expected)
    }

    /// `{stagingRepoId, expiresIn?}`: only the owner of an existing `scan-…` repository may
    /// open a session on it (limbo.health checks neither).
    private func open(_ request: Request, _ context: ServeContext) async throws -> Response {
        let user = try context.user()
        let asked = try await read(ScanSessionRequest.self, request, expected: "{stagingRepoId, expiresIn?}")
        guard let id = asked.stagingRepoId, !id.isEmpty else { throw ServeFailure(400, "stagingRepoId is required") }
        guard ScanPolicy.isStagingID(id) else { throw ServeFailure(400, #"stagingRepoId must start with "scan-""#) }
        guard RepositoryID.isValid(id) else { throw ServeFailure(400, "bad repository id") }
        guard let repository = try await storage.repositories.repository(id) else {
            throw ServeFailure(404, "no staging repository \(id): push it first")
        }
        guard repository.owner == user.pubkey else { throw ServeFailure(403, "not your staging repository") }
        let lifetime = asked.expiresIn ?? ScanPolicy.defaultLifetime
        guard lifetime > 0, lifetime <= ScanPolicy.maxLifetime else {
            throw ServeFailure(400, "expiresIn must be 1 to \(ScanPolicy.maxLifetime) seconds")
        }
        let session = try await storage.scans.open(repoId: id, owner: user.pubkey, now: ServeEnvironment.now, lifetime: lifetime)
        try await repository.noteShareEnds(at: session.expiresAt)
        environment.logger.info("scan session opened", metadata: ["repo": "\(id)", "expires": "\(session.expiresAt)"])
        return JSONReply.response(200, ScanSessionReply(sessionToken: session.token, repoId: id, expiresAt: session.expiresAt))
    }

    /// `{sessionToken}`: ends the caller's own session and removes its staging repository
    /// (unless another session of the same repository is still live).
    private func revoke(_ request: Request, _ context: ServeContext) async throws -> Response {
        let user = try context.user()
        let asked = try await read(ScanRevokeRequest.self, request, expected: "{sessionToken}")
        guard let token = asked.sessionToken, !token.isEmpty else { throw ServeFailure(400, "sessionToken is required") }
        guard let ended = try await storage.scans.revoke(token: token, owner: user.pubkey) else {
            // Expired already (or the server restarted): its owner may still end the staging
            // repository it names, which is kept only for the owner to collect from.
            if let id = asked.stagingRepoId, ScanPolicy.isStagingID(id), RepositoryID.isValid(id),
               let repository = try await storage.repositories.repository(id), repository.owner == user.pubkey,
               try await !storage.scans.isShared(id), try await repository.shareEnds() != nil,
               try await storage.repositories.remove(id) {
                environment.logger.info("ended share's staging repository removed by its owner", metadata: ["repo": "\(id)"])
            }
            throw ServeFailure(404, "Session not found or not owned by you")
        }
        if !ended.stillShared, try await storage.repositories.remove(ended.repoId) {
            environment.logger.info("scan session revoked; staging repository removed", metadata: ["repo": "\(ended.repoId)"])
        }
        return JSONReply.response(200, ScanRevokeReply(success: true))
    }
}
