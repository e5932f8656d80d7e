import BinderCrypto
import Foundation
import Synchronization

/// The rules of scan sessions, whatever store keeps them: staging ids, lifetimes, and how
/// long a staging repository outlives its sessions.
enum ScanPolicy {
    static let prefix = "scan-"
    static let defaultLifetime: Int64 = 3600
    /// The longest session a patient may ask for.
    static let maxLifetime: Int64 = 7 * 24 * 3600
    /// A staging repository pushed without any session opened on it is removed after this long.
    static let orphanGrace: TimeInterval = 600
    /// A staging repository whose sessions expired is kept this long after the last of them
    /// for its owner to collect the doctor's notes (the doctor's token no longer opens it): a
    /// patient offline when the share ended must not lose a note that reached the server.
    static let collectionGrace: TimeInterval = 30 * 24 * 3600

    static func isStagingID(_ id: String) -> Bool { id.hasPrefix(prefix) && id.count > prefix.count }
}

/// The scan sessions of "Share with a doctor" (limbo.health's `/api/auth/scan/*`): a session
/// token (`sctk_` and 64 hex characters) gives read-write git access to one `scan-…` staging
/// repository until it expires or its owner revokes it. Stricter than limbo.health: only the
/// owner of an existing staging repository may open a session on it. Revoked by its owner,
/// the staging repository goes at once; expired, it stays `ScanPolicy.collectionGrace` for its
/// owner to collect from (the expiry is written in the repository, `StoredRepository.shareEnds`).
///
/// Sessions are kept in memory only, by the SHA-256 of their token (a token is never stored):
/// a restart of the server ends every session; their repositories then wait out the same
/// grace.
final class ScanSessions: Sendable {
    struct Session: Sendable {
        let repoId: String
        let owner: String
        let expiresAt: Int64
    }

    /// By the token's SHA-256 (hex).
    private let sessions = Mutex<[String: Session]>([:])
    private let lastOrphanSweep = Mutex<Date>(.distantPast)

    private static func digest(_ token: String) -> String { Hex.encode(sha256(Array(token.utf8))) }

    /// A new session on `repoId` for `owner`, lasting `lifetime` seconds: its token.
    func open(repoId: String, owner: String, now: Int64, lifetime: Int64) -> (token: String, expiresAt: Int64) {
        let token = "sctk_" + Hex.encode(randomBytes(32))
        let session = Session(repoId: repoId, owner: owner, expiresAt: now + lifetime)
        sessions.withLock { $0[Self.digest(token)] = session }
        return (token, session.expiresAt)
    }

    /// The repository a live token opens; nil for an unknown, revoked or expired token.
    func repository(forToken token: String, now: Int64) -> String? {
        sessions.withLock { sessions in
            guard let session = sessions[Self.digest(token)], session.expiresAt > now else { return nil }
            return session.repoId
        }
    }

    /// Ends the session of `token` if `owner` opened it: the staging repository it served,
    /// and whether another session still uses that repository; nil when not found.
    func revoke(token: String, owner: String) -> (repoId: String, stillShared: Bool)? {
        sessions.withLock { sessions in
            let key = Self.digest(token)
            guard let session = sessions[key], session.owner == owner else { return nil }
            sessions[key] = nil
            return (session.repoId, sessions.values.contains { $0.repoId == session.repoId })
        }
    }

    /// Drops expired sessions: the staging repositories no live session uses any more.
    func expire(now: Int64) -> [String] {
        sessions.withLock { sessions in
            let expired = sessions.filter { $0.value.expiresAt <= now }
            guard !expired.isEmpty else { return [] }
            for key in expired.keys { sessions[key] = nil }
            let live = Set(sessions.values.map(\.repoId))
            return Array(Set(expired.values.map(\.repoId)).subtracting(live))
        }
    }

    func isShared(_ repoId: String) -> Bool { sessions.withLock { $0.values.contains { $0.repoId == repoId } } }

    /// True at most once a minute: time to look for staging repositories nobody opened a session on.
    func orphanSweepDue(now: Date) -> Bool {
        lastOrphanSweep.withLock { last in
            guard now.timeIntervalSince(last) >= 60 else { return false }
            last = now
            return true
        }
    }
}

/// `POST /api/auth/scan/session` body. `expiresIn` (seconds) is binder's addition; limbo.health
/// ignores it and gives one hour.
struct ScanSessionRequest: Decodable {
    let stagingRepoId: String?
    let expiresIn: Int64?
}

struct ScanSessionReply: Encodable {
    let sessionToken: String
    let repoId: String
    let expiresAt: Int64
}

struct ScanRevokeRequest: Decodable {
    let sessionToken: String?
    /// binder's addition: the staging repository of a session that already expired.
    let stagingRepoId: String?
}

struct ScanRevokeReply: Encodable {
    let success: Bool
}

extension ScanSessions: ScanSessionStorage {}
