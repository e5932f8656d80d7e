@testable import BinderServer
@testable import BinderSync
import BinderCrypto
import BinderGit
import Foundation
import Logging
import Synchronization
import Testing

/// The sync client (`ServerClient`, `HTTPExchange`, `GitCarrier`) against an in-process
/// `binder serve` on loopback: login with a real signature, listing, Smart HTTP through the
/// carrier (push-to-create, fetch), refusals typed, retries on 5xx.
@Suite struct ServerClientTests {
    static let quickRetry = RetryPolicy(base: 0.01, maximum: 0.02, attempts: 3)
    static let logger = Logger(label: "sync-test") { _ in SwiftLogNoOpLogHandler() }

    @Test func loginListsTheUsersRepositoriesWithoutStagingCopies() async throws {
        let key = try SecretKey.generate(), other = try SecretKey.generate()
        let server = try InProcessServer()
        try server.makeRepository("records", owner: key.publicKey.hex)
        try server.makeRepository("scan-share", owner: key.publicKey.hex)
        try server.makeRepository("elsewhere", owner: other.publicKey.hex)
        try await server.serving { url in
            let listed = try await onThread {
                let client = try ServerClient(server: url, retry: Self.quickRetry)
                return try client.repositories(token: try client.login(secretKey: key))
            }
            #expect(listed.map(\.id) == ["records"])
            #expect(listed.first?.lastCommit != nil)
        }
    }

    @Test func aBadTokenIsUnauthorizedNotRetried() async throws {
        try await InProcessServer().serving { url in
            let outcome = try await onThread { () -> SyncError? in
                do { _ = try ServerClient(server: url, retry: Self.quickRetry).repositories(token: "not.a.token"); return nil } catch {
                    return error as? SyncError
                }
            }
            guard case .unauthorized(let why)? = outcome else { Issue.record("expected unauthorized, got \(String(describing: outcome))"); return }
            #expect(why == "missing, bad or expired token")
        }
    }

    @Test func aPushCreatesTheRepositoryAndAFetchBringsItBack() async throws {
        let key = try SecretKey.generate()
        let server = try InProcessServer()
        let scratch = server.folder + "-client"
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        try await server.serving { url in
            let (pushed, fetched) = try await onThread { () -> (ObjectID?, ObjectID?) in
                let client = try ServerClient(server: url, retry: Self.quickRetry)
                let token = try client.login(secretKey: key)
                let carrier = GitCarrier(repositoryURL: client.repositoryURL("made-by-push"), token: token, retry: Self.quickRetry,
                                         logger: Self.logger)
                let work = try LocalGit.commitOnce(in: scratch + "/work")
                let local = try GitRepository.open(path: work)
                _ = try local.remotes.push(RemoteEndpoint(url: client.repositoryURL("made-by-push"), carrier: carrier))
                let copy = try GitRepository.create(path: scratch + "/copy.git", bare: true)
                let fetched = try copy.remotes.fetch(RemoteEndpoint(url: client.repositoryURL("made-by-push"), carrier: carrier))
                return (try local.refs.branchTip(), fetched)
            }
            #expect(pushed != nil)
            #expect(fetched == pushed)
            let stored = try await server.repositories.repository("made-by-push")
            #expect(stored?.owner == key.publicKey.hex)
            #expect(try await stored?.ref("refs/heads/main") == pushed?.description)
        }
    }

    @Test func aMissingRepositoryIsForbiddenToFetch() async throws {
        let key = try SecretKey.generate()
        try await InProcessServer().serving { url in
            let outcome = try await onThread { () -> Error? in
                let client = try ServerClient(server: url, retry: Self.quickRetry)
                let carrier = GitCarrier(repositoryURL: client.repositoryURL("nothing-here"), token: try client.login(secretKey: key),
                                         retry: Self.quickRetry, logger: Self.logger)
                do { _ = try carrier.exchange(.uploadPackAdvertisement, body: []); return nil } catch { return error }
            }
            guard case .forbidden? = outcome as? SyncError else { Issue.record("expected forbidden, got \(String(describing: outcome))"); return }
        }
    }

    @Test func aFailingServerIsRetriedThenReported() async throws {
        let key = try SecretKey.generate()
        try await InProcessServer(faultRate: 1).serving { url in
            let retries = RetryCount()
            let outcome = try await onThread { () -> Error? in
                let client = try ServerClient(server: url, retry: Self.quickRetry)
                let token = try client.login(secretKey: key)   // not a git route: no fault
                var policy = Self.quickRetry
                policy.onRetry = { _, _ in retries.count.add(1, ordering: .relaxed) }
                let carrier = GitCarrier(repositoryURL: client.repositoryURL("any"), token: token, retry: policy, logger: Self.logger)
                do { _ = try carrier.exchange(.receivePackAdvertisement, body: []); return nil } catch { return error }
            }
            guard case .server(let status, let message)? = outcome as? SyncError else {
                Issue.record("expected a server error, got \(String(describing: outcome))"); return
            }
            #expect(status == 503)
            #expect(message == "injected fault")
            #expect(retries.count.load(ordering: .relaxed) == 2)
        }
    }
}

/// Retries heard, from the client's thread.
final class RetryCount: Sendable {
    let count = Atomic<Int>(0)
}
