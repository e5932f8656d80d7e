import BinderGit
import Foundation
import Logging

/// `POST /api/auth/scan/session` → `{"sessionToken": "sctk_…", "repoId": "scan-…", "expiresAt": <unix seconds>}`.
public struct ScanSession: Decodable, Sendable {
    public let sessionToken: String
    public let repoId: String
    public let expiresAt: Int64
}

struct ScanSessionAsk: Encodable {
    let stagingRepoId: String
    /// binder serve's addition (limbo.health ignores it and gives one hour).
    let expiresIn: Int64?
}

/// `stagingRepoId` is binder's addition (limbo.health reads only the token): a session that
/// already expired is unknown to the server, which then removes the staging repository it
/// names if the caller owns it.
struct ScanRevokeAsk: Encodable {
    let sessionToken: String
    let stagingRepoId: String?
}

struct ScanRevokeAnswer: Decodable { let success: Bool? }

extension ServerClient {
    /// Opens a scan session on the staging repository `repoId` (already pushed).
    public func openScanSession(token: String, repoId: String, lifetime: Int64?) throws(SyncError) -> ScanSession {
        let session = try call("POST", "/api/auth/scan/session", body: ScanSessionAsk(stagingRepoId: repoId, expiresIn: lifetime),
                               token: token, as: ScanSession.self)
        guard session.repoId == repoId, session.sessionToken.hasPrefix("sctk_") else {
            throw .server(status: 200, message: "the scan session is not for \(repoId) or has no sctk_ token")
        }
        return session
    }

    /// Revokes a scan session (binder serve also removes its staging repository). False when the
    /// server no longer knows it (404: expired, or revoked already).
    @discardableResult
    public func revokeScanSession(token: String, sessionToken: String, stagingRepoId: String? = nil) throws(SyncError) -> Bool {
        do {
            _ = try call("POST", "/api/auth/scan/revoke", body: ScanRevokeAsk(sessionToken: sessionToken, stagingRepoId: stagingRepoId), token: token,
                         as: ScanRevokeAnswer.self)
            return true
        } catch .server(404, _) {
            return false
        }
    }

    /// `scan-<hex milliseconds>`, the id the app gives a staging repository.
    public static func newStagingID(now: Date = Date()) -> String {
        "scan-" + String(UInt64(now.timeIntervalSince1970 * 1000), radix: 16)
    }
}

/// Pushes a local staging repository's `main` to a new repository `repoId` on the server
/// (push-to-create, with the user's token, renewed once if refused).
public enum StagingPush {
    public static func push(repository: GitRepository, repoId: String, session: ServerSession,
                            progress: (@Sendable (TransferProgress) -> Void)? = nil) throws(SyncError) {
        let url = session.client.repositoryURL(repoId)
        let logger = Logger(label: "binder.share")
        let outcome = try session.authorized { (token: String) throws(SyncError) -> PushOutcome in
            let carrier = GitCarrier(repositoryURL: url, token: token, retry: session.client.retry, logger: logger)
            do throws(GitError) {
                return try repository.remotes.push(RemoteEndpoint(url: url, carrier: carrier), progress: progress)
            } catch {
                throw carrier.failure ?? SyncEngine.classify(error, lastAnswer: carrier.lastAnswer)
            }
        }
        if case .rejected(let why) = outcome {
            throw .rejected("\(repoId) exists on the server already (\(why)); try again")
        }
    }

    /// Fetches the staging repository `repoId` (the owner's token) into `repository`: its tip,
    /// nil when it is empty.
    public static func fetch(into repository: GitRepository, repoId: String, session: ServerSession) throws(SyncError) -> ObjectID? {
        let url = session.client.repositoryURL(repoId)
        let logger = Logger(label: "binder.share")
        return try session.authorized { (token: String) throws(SyncError) -> ObjectID? in
            let carrier = GitCarrier(repositoryURL: url, token: token, retry: session.client.retry, logger: logger,
                                     spoolDirectory: repository.gitDirectory)
            do throws(GitError) {
                return try repository.remotes.fetch(RemoteEndpoint(url: url, carrier: carrier))
            } catch {
                throw carrier.failure ?? SyncEngine.classify(error, lastAnswer: carrier.lastAnswer)
            }
        }
    }
}
