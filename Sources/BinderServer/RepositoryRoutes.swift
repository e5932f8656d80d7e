import Hummingbird

/// `GET /api/mgit/user/repositories` and `GET /api/mgit/qr/clone/:repoId`, for an account's
/// token (`AccountAuthentication`). Repositories are created by their first push (`SmartHTTPRoutes`).
struct RepositoryRoutes: Sendable {
    let environment: ServeEnvironment
    /// How long a clone QR's token lasts (at most as long as the token that asked for it).
    static let cloneTokenLifetime: Int64 = 600

    func collection() -> RouteCollection<ServeContext> {
        let routes = RouteCollection(context: ServeContext.self)
        routes.add(middleware: AccountAuthentication(tokens: environment.tokens))
        routes.get("/api/mgit/user/repositories") { _, context in try await list(context) }
        routes.get("/api/mgit/qr/clone/:repoId") { _, context in try await qrPayload(context) }
        return routes
    }

    private func list(_ context: ServeContext) async throws -> Response {
        let user = try context.user()
        return JSONReply.response(200, try await environment.storage.repositories.list(owner: user.pubkey))
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
