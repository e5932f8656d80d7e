import Foundation
import Hummingbird

/// `POST /api/auth/nostr/challenge` and `/verify`: a NIP-42 style login (docs/FORMAT.md, "The
/// server"), open to anyone, so rate-limited per address and bounded in body size.
struct LoginRoutes: Sendable {
    let environment: ServeEnvironment
    /// How far a login event's `created_at` may be from the server's clock.
    static let clockSkew: Int64 = 600

    func collection() -> RouteCollection<ServeContext> {
        let routes = RouteCollection(context: ServeContext.self)
        routes.post("/api/auth/nostr/challenge") { request, context in try await challenge(request, context) }
        routes.post("/api/auth/nostr/verify") { request, context in try await verify(request, context) }
        return routes
    }

    private var storage: ServerStorage { environment.storage }

    private func challenge(_ request: Request, _ context: ServeContext) async throws -> Response {
        guard try await storage.counters.take(.challenge, address: context.remoteAddress) else {
            throw ServeFailure(429, "too many login attempts; wait a minute")
        }
        _ = try await RequestBodyReader.collect(request, limit: environment.limits.jsonBytes)
        let challenge = try await storage.challenges.make(for: context.remoteAddress, now: ServeEnvironment.now)
        return JSONReply.response(200, ChallengeReply(challenge: challenge))
    }

    private func verify(_ request: Request, _ context: ServeContext) async throws -> Response {
        guard try await storage.counters.take(.verify, address: context.remoteAddress) else {
            throw ServeFailure(429, "too many login attempts; wait a minute")
        }
        let body = try await RequestBodyReader.collect(request, limit: environment.limits.jsonBytes)
        let verify = try JSONReply.decode(VerifyRequest.self, from: body, expected: "{signedEvent, challenge, userType}")
        let now = ServeEnvironment.now
        // Single use: a challenge is consumed by the first attempt that names it.
        guard try await storage.challenges.consume(verify.challenge, now: now) else {
            throw ServeFailure(401, "unknown or expired challenge")
        }
        let e = verify.signedEvent
        guard e.kind == 22242 else { throw ServeFailure(401, "event kind must be 22242") }
        guard e.content == verify.challenge, e.tags.contains(["challenge", verify.challenge]) else {
            throw ServeFailure(401, "event does not answer the challenge")
        }
        guard e.isFresh(now: now, allowedSkew: Self.clockSkew) else { throw ServeFailure(401, "event created_at is not fresh") }
        // An event that names its server (binder's clients do; the apps do not) must name this
        // one, as clients reach it (`--public-url`): else another server is handing on what was
        // signed for it, to log in here as its user.
        if let publicURL = environment.publicURL, let relay = e.tags.first(where: { $0.count >= 2 && $0[0] == "relay" })?[1],
           Self.normalizedURL(relay) != Self.normalizedURL(publicURL) {
            throw ServeFailure(401, "the event was signed for another server")
        }
        do { try e.verify() } catch { throw ServeFailure(401, "event signature: \(error)") }
        let userType = verify.userType ?? "patient"
        guard ["patient", "provider"].contains(userType) else { throw ServeFailure(400, "unknown userType") }
        let token = try environment.tokens.issue(pubkey: e.pubkey, userType: userType, now: now)
        environment.logger.info("login", metadata: ["pubkey": "\(e.pubkey.prefix(16))…"])
        return JSONReply.response(200, VerifyReply(token: token, pubkey: e.pubkey, metadata: .init(userType: userType)))
    }

    /// A URL as compared for `relay`: lowercased, without trailing slashes.
    static func normalizedURL(_ url: String) -> String {
        var text = url.trimmingCharacters(in: .whitespaces).lowercased()
        while text.hasSuffix("/") { text.removeLast() }
        return text
    }
}
