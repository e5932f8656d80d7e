import BinderCore
import BinderCrypto
import BinderGit
import Foundation
import Logging

/// A doctor's side of a share (`binder open-share`): the staging repository fetched and pushed
/// with the scan token alone (`Authorization: ScanToken …`), no account and no key of the
/// doctor's own. The token reaches only this one repository, and only until the share ends.
public struct ScanAccess: Sendable {
    public let client: ServerClient
    public let repoId: String
    private let sessionToken: String
    let logger: Logger

    public init(endpoint: String, repoId: String, sessionToken: String, logger: Logger) throws(SyncError) {
        client = try ServerClient(server: endpoint)
        self.repoId = repoId
        self.sessionToken = sessionToken
        self.logger = logger
    }

    /// `repository`'s endpoint; a fetched pack is spooled in its git directory.
    private func endpoint(_ repository: GitRepository) -> (RemoteEndpoint, GitCarrier) {
        let url = client.repositoryURL(repoId)
        let carrier = GitCarrier(repositoryURL: url, token: sessionToken, scheme: "ScanToken", retry: client.retry, logger: logger,
                                 spoolDirectory: repository.gitDirectory)
        return (RemoteEndpoint(url: url, carrier: carrier), carrier)
    }

    /// Fetches the staging repository's `main` into `repository` and makes it the local `main`:
    /// its tip (nil: the patient's push has not landed, the repository is empty).
    public func clone(into repository: GitRepository) throws(SyncError) -> ObjectID? {
        guard let tip = try fetch(repository) else { return nil }
        do { try repository.refs.setReference("refs/heads/main", to: tip, expected: nil, force: true, message: "open-share") } catch {
            throw .configuration("\(error)")
        }
        return tip
    }

    /// Fetches the staging repository's `main` into `refs/remotes/origin/main`: its tip (nil:
    /// empty). The local `main` does not move.
    public func fetch(_ repository: GitRepository) throws(SyncError) -> ObjectID? {
        let (remote, carrier) = endpoint(repository)
        do { return try repository.remotes.fetch(remote) } catch {
            throw Self.explained(carrier.failure ?? SyncEngine.classify(error, lastAnswer: carrier.lastAnswer))
        }
    }

    /// Pushes the local `main` (the doctor's notes on top of what was fetched).
    public func push(_ repository: GitRepository) throws(SyncError) {
        let (remote, carrier) = endpoint(repository)
        let outcome: PushOutcome
        do { outcome = try repository.remotes.push(remote) } catch {
            throw Self.explained(carrier.failure ?? SyncEngine.classify(error, lastAnswer: carrier.lastAnswer))
        }
        if case .rejected(let why) = outcome {
            throw .rejected("the shared repository moved on meanwhile (\(why))")
        }
    }

    /// Pushes the local `main`, after fetching the staging repository's tip and merging the
    /// local commits onto it when it moved on meanwhile (the scan page or another doctor pushed
    /// a note), as a sync does (`BinderMerger`, author `author`); fetching first also because
    /// libgit2 refuses, before sending anything, to push over a remote tip it has not got. A
    /// push refused as not a fast-forward (a note landed between the fetch and the push) is
    /// fetched, merged and pushed again, `retry` bounding the tries. Returns whether a merge
    /// moved the local `main` (the view has to show it).
    @discardableResult
    public func pushMerging(_ repository: GitRepository, key: NIP44.ConversationKey, author: Signature,
                            retry: RetryPolicy) throws(SyncError) -> Bool {
        var merged = false
        try retry.run({ () throws(SyncError) in
            if let tip = try fetch(repository) {
                let outcome = try SyncEngine.mergeRetrying(repository: repository, key: key, remote: tip, author: author)
                if outcome != .upToDate {
                    merged = true
                    logger.info("merged the shared repository's new commits", metadata: ["conflicts": "\(outcome.conflicts.count)"])
                }
            }
            try push(repository)
        }, onRetry: { error, wait in
            logger.info("push failed; trying again", metadata: ["in_seconds": "\(wait)", "error": "\(error)"])
        })
        return merged
    }

    /// A refusal in the words of the share: the server's reason ("Session revoked", "Session
    /// expired", …) kept.
    static func explained(_ error: SyncError) -> SyncError {
        switch error {
        case .forbidden(let why), .unauthorized(let why):
            return .forbidden("the share is over (\(why)): the patient revoked it or it expired")
        case .server(404, let why):
            return .forbidden("the share is over (\(why)): the server no longer has it")
        default:
            return error
        }
    }
}
