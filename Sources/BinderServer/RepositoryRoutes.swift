import Hummingbird

/// `GET /api/mgit/user/repositories`, `GET /api/mgit/qr/clone/:repoId` and
/// `DELETE /api/mgit/repos/:repoId`, for an account's token (`AccountAuthentication`).
/// Repositories are created by their first push (`SmartHTTPRoutes`).
struct RepositoryRoutes: Sendable {
    let environment: ServeEnvironment
    /// How long a clone QR's token lasts (at most as long as the token that asked for it).
    static let cloneTokenLifetime: Int64 = 600

    func collection() -> RouteCollection<ServeContext> {
        let routes = RouteCollection(context: ServeContext.self)
        routes.add(middleware: AccountAuthentication(tokens: environment.tokens))
        routes.get("/api/mgit/user/repositories") { _, context in try await list(context) }
        routes.get("/api/mgit/qr/clone/:repoId") { _, context in try await qrPayload(context) }
        routes.delete("/api/mgit/repos/:repoId") { _, context in try await delete(context) }
        return routes
    }

    private func list(_ context: ServeContext) async throws -> Response {
        let user = try context.user()
        return JSONReply.response(200, try await environment.storage.repositories.list(owner: user.pubkey))
    }

    /// limbo.health's deletion (docs/FORMAT.md, "The server"): the owner only (403 with
    /// limbo.health's words otherwise), 200 `{"status":"OK","repoId":…}`. The id then answers 410
    /// to its owner (`RepositoryTombstone`); a second deletion answers that 410 too, so that a
    /// client that lost the first answer can tell the deletion happened.
    private func delete(_ context: ServeContext) async throws -> Response {
        let user = try context.user()
        let id = try context.repositoryID()
        let storage = environment.storage.repositories
        guard let repository = try await storage.repository(id) else {
            if let tombstone = try await storage.tombstone(id), tombstone.owner == user.pubkey { throw ServeFailure.gone(id, tombstone) }
            return JSONReply.response(404, StatusReply(status: "error", reason: "Repository not found", repoId: nil))
        }
        guard repository.owner == user.pubkey else {
            return JSONReply.response(403, StatusReply(status: "error", reason: "Not authorized to delete this repository", repoId: nil))
        }
        _ = try await storage.delete(id, now: ServeEnvironment.now)
        environment.logger.info("repository deleted by its owner", metadata: ["repo": "\(id)"])
        return JSONReply.response(200, StatusReply(status: "OK", reason: nil, repoId: id))
    }

    private func qrPayload(_ context: ServeContext) async throws -> Response {
        let user = try context.user()
        let id = try context.repositoryID()
        guard let repository = try await environment.storage.repositories.repository(id) else {
            throw ServeFailure(404, "no such repository")
        }
        guard repository.owner == user.pubkey else { throw ServeFailure(403, "not your repository") }
        guard let base = environment.publicURL ?? environment.localURL.value else { throw ServeFailure(503, "not listening yet") }
        // The QR's token is for one clone: it fetches this repository only, for 10 minutes,
        // and cannot ask for another QR (docs/FORMAT.md, "The server").
        let now = ServeEnvironment.now
        let token = try environment.tokens.issueClone(for: user, repoId: id, now: now, expires: now + Self.cloneTokenLifetime)
        return JSONReply.response(200, ClonePayloadReply(action: "mgit_clone", clone_url: base + "/api/mgit/repos/" + id,
                                                         jwt_token: token, repo_name: id))
    }
}
