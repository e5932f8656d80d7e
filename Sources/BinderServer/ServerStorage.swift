import Foundation

// The server's state behind small protocols, so that the routes never know where it lives.
// `FolderRepositories` (bare repositories in one folder, git spawned per request) with the
// in-memory `ChallengeBook`, `ScanSessions` and `LoginCounters` is the first implementation
// (`ServerStorage.folder`); a database store implements the same protocols a second time.
// Every method may suspend and throws `StorageError` only: the routes turn each case into
// its HTTP answer (`StorageError.failure`), never by reading a message.

/// Which git Smart HTTP service a request is for (the `service` query and the POST path).
enum GitService: String, Sendable {
    case uploadPack = "git-upload-pack"
    case receivePack = "git-receive-pack"

    /// git's subcommand for it.
    var subcommand: String { self == .uploadPack ? "upload-pack" : "receive-pack" }
}

/// Why storage refused or failed; each case is one answer (see `failure`).
enum StorageError: Error, Equatable, CustomStringConvertible {
    /// The owner has `limit` repositories already (counting those being created).
    case repositoryQuota(limit: Int)
    /// The owner's repositories take all the bytes allowed.
    case storageQuotaUsedUp
    /// A push to a new id that does not create branches with objects (push-to-create only).
    case notACreatingPush
    /// Another creation of the same id won the race.
    case idTaken(String)
    /// A compare-and-swap found the ref elsewhere: `found` is where it points (nil: absent).
    case refConflict(ref: String, expected: String?, found: String?)
    /// Not a full ref name (`refs/…`) or not an object id.
    case badRefUpdate(ref: String)
    /// The repository was deleted by its owner (`RepositoryStorage.delete`): its tombstone.
    case gone(id: String, tombstone: RepositoryTombstone)
    /// The storage itself failed (git exited non-zero, a disk or database error): `detail` is
    /// for the log only, never sent.
    case backend(operation: String, detail: String)
    /// The storage cannot be reached now (the database is down, restarting or has no free
    /// connection within `PostgresStorage.Limits.acquireTimeout`): worth retrying shortly.
    /// `detail` is for the log only.
    case unavailable(operation: String, detail: String)

    var description: String {
        switch self {
        case .repositoryQuota(let limit): return "repository quota reached (\(limit) per user)"
        case .storageQuotaUsedUp: return "storage quota used up"
        case .notACreatingPush: return "a new repository is created only by a push that brings a branch and its objects"
        case .idTaken(let id): return "repository \(id) was created meanwhile"
        case .gone(let id, _): return "repository \(id) was deleted by its owner"
        case .refConflict(let ref, let expected, let found):
            return "\(ref) is at \(found ?? "nothing"), not \(expected ?? "nothing")"
        case .badRefUpdate(let ref): return "bad ref update of \(ref)"
        case .backend(let operation, let detail): return "\(operation): \(detail)"
        case .unavailable(let operation, let detail): return "\(operation): \(detail)"
        }
    }

    /// The HTTP answer, as the server gave it before storage had a protocol.
    var failure: ServeFailure {
        switch self {
        case .repositoryQuota: return ServeFailure(403, description)
        case .notACreatingPush: return ServeFailure(400, description)
        case .storageQuotaUsedUp: return ServeFailure(413, description)
        case .idTaken: return ServeFailure(403, "not authorized for this repository")
        case .refConflict: return ServeFailure(409, description)
        case .badRefUpdate: return ServeFailure(400, description)
        case .backend(let operation, _): return ServeFailure(500, operation)
        case .unavailable(let operation, _):
            var failure = ServeFailure(503, "\(operation): the server's database is unavailable, try again in a minute")
            failure.retryAfter = ServeFailure.unavailableRetryAfter
            return failure
        case .gone(let id, let tombstone): return .gone(id, tombstone)
        }
    }
}

/// A Smart HTTP answer body, read in chunks as it is sent (never whole in memory): from a
/// spool file for the folder store, from a query or a pack being built for another.
struct PackResponse: Sendable {
    /// Its size in bytes, when known before sending.
    let length: Int?
    /// The next bytes, at most `count`; empty at the end. Called by one task, in turn.
    let read: @Sendable (_ count: Int) async throws -> [UInt8]
}

/// What the server keeps of a repository its owner deleted, so that the id answers 410 to
/// its owner (not 404, not a fresh push-to-create): who owned it and when it was deleted.
/// Never a key, a ref or an object.
struct RepositoryTombstone: Sendable, Equatable {
    /// The owner's public key (hex), as `binder-owner` held it.
    let owner: String
    /// When it was deleted (Unix seconds).
    let deletedAt: Int64
}

/// One repository's owner and size, as the quota counts them.
struct StorageUsage: Sendable, Equatable {
    let repositories: Int
    let bytes: Int64
}

/// A push's place in its owner's quota, taken before the body is read: `bytesLeft` bounds the
/// body; `release` gives back the creation it counted (call it once the push is over).
struct PushReservation: Sendable {
    let bytesLeft: Int64
    let release: @Sendable () -> Void
}

/// The git side of a repository (or of an id not created yet): Smart HTTP, protocol v0/v1
/// and whatever v2 the implementation answers. Request bodies arrive decompressed, within the
/// route's limit, in a spool file; `protocolHeader` is the request's `Git-Protocol`, unchecked.
protocol SmartHTTPEndpoint: Sendable {
    /// The ref advertisement for `GET info/refs?service=…`, with the Smart HTTP preamble
    /// (`# service=…` and a flush) except for protocol v2, which has its own.
    func advertiseRefs(_ service: GitService, protocolHeader: String?) async throws(StorageError) -> [UInt8]
    /// git-upload-pack: the wants and haves of `request` answered with a pack.
    func uploadPack(_ request: SpoolFile, protocolHeader: String?) async throws(StorageError) -> PackResponse
    /// git-receive-pack: the objects of `request` stored and each ref command applied only if
    /// the ref is still at the command's old id (compare-and-swap, as git does), refusing
    /// non-fast-forwards and deletions, every object checked (`receive.fsckObjects`). Objects
    /// that no ref reaches may remain until compacted; a ref never points at a missing object.
    /// A failed command is reported in git's `report-status`, not thrown.
    func receivePack(_ request: SpoolFile, protocolHeader: String?) async throws(StorageError) -> PackResponse
}

/// One existing repository.
protocol StoredRepository: SmartHTTPEndpoint {
    var id: String { get }
    /// The owner's public key (hex); nil when the store cannot say (then nobody owns it).
    var owner: String? { get }
    /// Where the full ref `name` points; nil when absent.
    func ref(_ name: String) async throws(StorageError) -> String?
    /// Compare-and-swap: points `name` at `new` only if it is at `expected` now (nil: only if
    /// absent), atomically against every other update and push, else `.refConflict` naming
    /// where it is. `new` must be an object already stored here.
    func updateRef(_ name: String, from expected: String?, to new: String) async throws(StorageError)
    /// When the last scan session opened on this (staging) repository ends; nil if none was.
    func shareEnds() async throws(StorageError) -> Int64?
    /// Records `time` as when its sessions end, if later than what is recorded.
    func noteShareEnds(at time: Int64) async throws(StorageError)
}

/// Repositories and their owners, quotas and the creation of new ones.
protocol RepositoryStorage: Sendable {
    /// The repository `id` (valid by `RepositoryID.isValid`); nil when it does not exist.
    func repository(_ id: String) async throws(StorageError) -> (any StoredRepository)?
    /// Answers for an id that does not exist yet: advertises no refs and answers git's probe
    /// (a lone flush) as an empty repository would, creating nothing.
    var unborn: any SmartHTTPEndpoint { get }
    /// Push-to-create: `request` must create branches with objects (else `.notACreatingPush`);
    /// the repository `id` owned by `owner` exists afterwards only if the push stored a branch,
    /// all at once (no request sees it half made). `.idTaken` if another creation won.
    func create(_ id: String, owner: String, byPush request: SpoolFile,
                protocolHeader: String?) async throws(StorageError) -> (response: PackResponse, created: Bool)
    /// `owner`'s repositories, sorted by id, with their last commit on main.
    func list(owner: String) async throws(StorageError) -> [RepositorySummary]
    /// `.repositoryQuota` when `owner` may not create another repository now.
    func checkCreationQuota(owner: String) async throws(StorageError)
    /// Takes a push's place in `owner`'s quota (with `creating`, one more repository, held
    /// until `release`): `.repositoryQuota`, or `.storageQuotaUsedUp` when no byte is left. A
    /// store that can must check the bytes again inside the push's own transaction.
    func reservePush(owner: String, creating: Bool) async throws(StorageError) -> PushReservation
    /// Removes `id` at once for every request; false when it was not there. Leaves no
    /// tombstone (an ended share's staging repository).
    func remove(_ id: String) async throws(StorageError) -> Bool
    /// Its owner's deletion: the tombstone recorded durably first (owner, `now`), then `id`
    /// removed as `remove` does; its bytes and its place leave the owner's quota. From then on
    /// `repository(id)` is nil, `tombstone(id)` is not, and `create(id, …)` throws `.gone`.
    func delete(_ id: String, now: Int64) async throws(StorageError) -> RepositoryTombstone
    /// The tombstone of `id` if its owner deleted it.
    func tombstone(_ id: String) async throws(StorageError) -> RepositoryTombstone?
    /// The `scan-…` staging repositories, with when each last changed.
    func stagingRepositories() async throws(StorageError) -> [(id: String, modified: Date)]
    /// A new spool file for a request body (unlinked; gone with its descriptor).
    func spool() throws(StorageError) -> SpoolFile
}

/// Outstanding login challenges: issued by one replica, answerable at any.
protocol ChallengeStorage: Sendable {
    /// A new random challenge for the client at `address`, valid for a few minutes.
    func make(for address: String, now: Int64) async throws(StorageError) -> String
    /// True exactly once for a challenge issued and not expired; every later call is false.
    func consume(_ challenge: String, now: Int64) async throws(StorageError) -> Bool
}

/// Scan sessions ("Share with a doctor"), kept by their token's digest, never the token.
protocol ScanSessionStorage: Sendable {
    /// A new session on `repoId` for `owner`: its token (shown once) and expiry.
    func open(repoId: String, owner: String, now: Int64, lifetime: Int64) async throws(StorageError) -> (token: String, expiresAt: Int64)
    /// The repository a live token opens; nil for an unknown, revoked or expired one.
    func repository(forToken token: String, now: Int64) async throws(StorageError) -> String?
    /// Ends `owner`'s session of `token`: its repository and whether another session still
    /// shares it; nil when there is no such session of `owner`'s.
    func revoke(token: String, owner: String) async throws(StorageError) -> (repoId: String, stillShared: Bool)?
    /// Drops expired sessions: the repositories no live session shares any more.
    func expire(now: Int64) async throws(StorageError) -> [String]
    func isShared(_ repoId: String) async throws(StorageError) -> Bool
    /// True at most once a minute (across replicas if shared): time to sweep staging repositories.
    func orphanSweepDue(now: Date) async throws(StorageError) -> Bool
}

/// The rate limits' counters.
enum RateCounter: Sendable {
    case challenge, verify
}

protocol RateCounters: Sendable {
    /// Takes one request of `counter` for `address`: false when its allowance is spent.
    func take(_ counter: RateCounter, address: String) async throws(StorageError) -> Bool
}

/// Everything the routes keep, in one value.
struct ServerStorage: Sendable {
    let repositories: any RepositoryStorage
    let challenges: any ChallengeStorage
    let scans: any ScanSessionStorage
    let counters: any RateCounters
}
