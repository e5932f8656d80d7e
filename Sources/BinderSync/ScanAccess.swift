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

    private func endpoint() -> (RemoteEndpoint, GitCarrier) {
        let url = client.repositoryURL(repoId)
        let carrier = GitCarrier(repositoryURL: url, token: sessionToken, scheme: "ScanToken", retry: client.retry, logger: logger)
        return (RemoteEndpoint(url: url, carrier: carrier), carrier)
    }

    /// Fetches the staging repository's `main` into `repository` and makes it the local `main`:
    /// its tip (nil: the patient's push has not landed, the repository is empty).
    public func clone(into repository: GitRepository) throws(SyncError) -> ObjectID? {
        let (remote, carrier) = endpoint()
        do {
            guard let tip = try repository.fetch(remote) else { return nil }
            try repository.setReference("refs/heads/main", to: tip, expected: nil, force: true, message: "open-share")
            return tip
        } catch {
            throw Self.explained(carrier.failure ?? SyncEngine.classify(error))
        }
    }

    /// Pushes the local `main` (the doctor's notes on top of what was fetched).
    public func push(_ repository: GitRepository) throws(SyncError) {
        let (remote, carrier) = endpoint()
        let outcome: PushOutcome
        do { outcome = try repository.push(remote) } catch {
            throw Self.explained(carrier.failure ?? SyncEngine.classify(error))
        }
        if case .rejected(let why) = outcome {
            throw .rejected("the shared repository moved on meanwhile (\(why))")
        }
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
