import Foundation
import Hummingbird
import Logging
import Synchronization

/// What every route collection shares: the storage, the token authority, the limits, and the
/// URL the server answers at.
struct ServeEnvironment: Sendable {
    let storage: ServerStorage
    let tokens: TokenAuthority
    let limits: ServeLimits
    let logger: Logger
    /// The base URL put in QR payloads and that login events must name (`relay` tag); nil only
    /// on loopback (`BinderServer.Options.publicURL`), where `localURL` stands in for it.
    let publicURL: String?
    /// `http://HOST:PORT` as bound, set once the server listens: the QR payloads' base without
    /// `publicURL` (never the request's `Host`, which the client writes).
    let localURL = ListeningURL()

    static var now: Int64 { Int64(Date().timeIntervalSince1970) }
}

/// The URL the server was bound at, once it is.
final class ListeningURL: Sendable {
    /// Guards the URL (nil until the server listens).
    private let url = Mutex<String?>(nil)

    var value: String? { url.withLock { $0 } }

    func set(_ value: String) { url.withLock { $0 = value } }
}

/// Bearer tokens, as every protected route reads them.
enum BearerToken {
    /// The token's claims, whatever it grants; 401 for a missing, malformed, forged or expired one.
    static func claims(_ request: Request, tokens: TokenAuthority) throws -> TokenAuthority.Claims {
        guard let value = request.headers[.authorization], value.lowercased().hasPrefix("bearer ") else {
            throw ServeFailure(401, "missing, bad or expired token")
        }
        let token = value.dropFirst(7).trimmingCharacters(in: .whitespaces)
        guard !token.isEmpty, let claims = try? tokens.check(token, now: ServeEnvironment.now) else {
            throw ServeFailure(401, "missing, bad or expired token")
        }
        return claims
    }

    /// 403 unless `claims` grant `access` (a clone QR's token grants less than an account's).
    static func authorize(_ claims: TokenAuthority.Claims, _ access: TokenAuthority.Claims.Access) throws {
        guard claims.allows(access) else { throw ServeFailure(403, "this token only fetches the repository it was issued for") }
    }
}

/// The account routes' authentication: a bearer token that acts for its account (401 for a
/// missing, malformed, forged or expired one, 403 for a clone QR's), before a byte of the body
/// is read. The user's claims go into the context (`ServeContext.user()`).
struct AccountAuthentication: RouterMiddleware {
    typealias Context = ServeContext
    let tokens: TokenAuthority

    func handle(_ request: Request, context: ServeContext, next: (Request, ServeContext) async throws -> Response) async throws -> Response {
        let claims = try BearerToken.claims(request, tokens: tokens)
        try BearerToken.authorize(claims, .account)
        var context = context
        context.caller = .user(claims)
        return try await next(request, context)
    }
}

/// The git routes' authentication: a user by bearer token, or a doctor by scan token (the
/// query's `scan_token` or `Authorization: ScanToken …`, as limbo.health takes it); a bearer
/// token wins. What the caller may do with the repository is the route's to check (it depends
/// on the service). An expired session opens nothing: its token's lookup compares the expiry
/// itself. Finished shares are swept here at most once a minute per replica
/// (`ShareSweeper.sweepIfDue`), not on every request (2 statements each on the database).
struct GitAuthentication: RouterMiddleware {
    typealias Context = ServeContext
    let tokens: TokenAuthority
    let scans: any ScanSessionStorage
    let sweeper: ShareSweeper

    func handle(_ request: Request, context: ServeContext, next: (Request, ServeContext) async throws -> Response) async throws -> Response {
        // Housekeeping, not the request's: a sweep that fails (the database down) is logged and
        // tried again a minute later; the request goes on, and fails on its own operation if it must.
        do { try await sweeper.sweepIfDue() } catch {
            sweeper.logger.warning("share sweep failed", metadata: ["error": "\(error)"])
        }
        var context = context
        context.caller = try await caller(request)
        return try await next(request, context)
    }

    private func caller(_ request: Request) async throws -> Caller {
        let header = request.headers[.authorization]
        if header?.lowercased().hasPrefix("bearer ") == true { return .user(try BearerToken.claims(request, tokens: tokens)) }
        let scanToken: String?
        if let header, header.lowercased().hasPrefix("scantoken ") {
            scanToken = header.dropFirst(10).trimmingCharacters(in: .whitespaces)
        } else {
            scanToken = request.uri.queryParameters.get("scan_token").map { String($0) }
        }
        guard let scanToken else { return .user(try BearerToken.claims(request, tokens: tokens)) }
        // Unknown, revoked and expired tokens look alike: a session is forgotten when it ends.
        guard let repoId = try await scans.repository(forToken: scanToken, now: ServeEnvironment.now) else {
            throw ServeFailure(403, "Invalid scan token")
        }
        return .scan(repoId: repoId)
    }
}

/// Testing aid (`binder serve --fault-rate`): this fraction of the requests it guards (git's)
/// fails with 503 before anything else, chosen by a fixed pseudo-random sequence so that a
/// run can be repeated.
final class FaultInjection: RouterMiddleware {
    typealias Context = ServeContext
    let rate: Double
    /// Requests seen (counted only while faults are injected).
    private let requests = Atomic<Int>(0)

    init(rate: Double) { self.rate = rate }

    func handle(_ request: Request, context: ServeContext, next: (Request, ServeContext) async throws -> Response) async throws -> Response {
        if rate > 0, Self.draw(requests.add(1, ordering: .relaxed).newValue) < rate {
            throw ServeFailure(503, "injected fault")
        }
        return try await next(request, context)
    }

    /// A number in [0, 1) for the nth request (splitmix64): the same run injects the same faults.
    static func draw(_ n: Int) -> Double {
        var z = UInt64(truncatingIfNeeded: n) &* 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return Double(z >> 11) / Double(1 << 53)
    }
}

/// A replica's last run of a periodic job.
final class SweepClock: Sendable {
    /// Guards the time of the last run (nil: never).
    private let last = Mutex<Date?>(nil)

    /// True, and noted as run, when the last run is `every` seconds old or there was none.
    func due(now: Date, every seconds: TimeInterval) -> Bool {
        last.withLock { last in
            if let previous = last, now.timeIntervalSince(previous) < seconds { return false }
            last = now
            return true
        }
    }
}

/// Ends finished shares: drops expired sessions, and (at most once a minute) removes the
/// staging repositories no session serves: one shared, `collectionGrace` after its last
/// session ended (its owner collects the doctor's notes meanwhile); one never shared,
/// `orphanGrace` after its push.
struct ShareSweeper: Sendable {
    let storage: ServerStorage
    let logger: Logger
    /// When `sweepIfDue` last swept on this replica.
    let lastSwept = SweepClock()

    /// `sweep`, at most once a minute on this replica (the git routes): the sweep only ends
    /// shares whose tokens are refused already and removes staging repositories after graces
    /// of minutes to days, so a minute's delay changes nothing a request sees.
    func sweepIfDue() async throws(StorageError) {
        guard lastSwept.due(now: Date(), every: 60) else { return }
        try await sweep()
    }

    func sweep() async throws(StorageError) {
        for id in try await storage.scans.expire(now: ServeEnvironment.now) {
            logger.info("scan session expired; the staging repository waits for its owner to collect it", metadata: ["repo": "\(id)"])
        }
        let now = Date()
        guard try await storage.scans.orphanSweepDue(now: now) else { return }
        for staging in try await storage.repositories.stagingRepositories() where try await !storage.scans.isShared(staging.id) {
            let ended = try await storage.repositories.repository(staging.id)?.shareEnds()
            let due = ended.map { now.timeIntervalSince1970 > TimeInterval($0) + ScanPolicy.collectionGrace }
                ?? (now.timeIntervalSince(staging.modified) > ScanPolicy.orphanGrace)
            if due, try await storage.repositories.remove(staging.id) {
                logger.info(ended == nil ? "unshared staging repository removed" : "ended share's staging repository removed",
                            metadata: ["repo": "\(staging.id)"])
            }
        }
    }
}
