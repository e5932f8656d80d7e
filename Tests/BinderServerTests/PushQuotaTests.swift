@testable import BinderServer
import Foundation
import Testing

/// `RepositoryStorage.reservePush` on the folder store: a creation holds its place in the
/// owner's repository quota until released; a push with no byte left is refused.
@Suite struct PushQuotaTests {
    @Test func aCreationCountsUntilItIsReleased() async throws {
        let server = try TestServer(limits: ServeLimits(repositoriesPerUser: 2))
        defer { try? FileManager.default.removeItem(atPath: server.folder) }
        let repositories = server.storage.repositories
        try await server.makeRepository("kept", owner: "alice")
        let first = try await repositories.reservePush(owner: "alice", creating: true)
        await #expect(throws: StorageError.repositoryQuota(limit: 2)) {
            _ = try await repositories.reservePush(owner: "alice", creating: true)
        }
        await #expect(throws: StorageError.repositoryQuota(limit: 2)) { try await repositories.checkCreationQuota(owner: "alice") }
        // A push to an existing repository and another owner's creation are not held up.
        let update = try await repositories.reservePush(owner: "alice", creating: false)
        update.release()
        let bobs = try await repositories.reservePush(owner: "bob", creating: true)
        bobs.release()
        first.release()
        let second = try await repositories.reservePush(owner: "alice", creating: true)
        second.release()
        try await repositories.checkCreationQuota(owner: "alice")
    }

    @Test func noByteLeftRefusesThePushAndReleasesItsPlace() async throws {
        let server = try TestServer(limits: ServeLimits(repositoriesPerUser: 2, bytesPerUser: 1))
        defer { try? FileManager.default.removeItem(atPath: server.folder) }
        let repositories = server.storage.repositories
        try await server.makeRepository("full", owner: "alice")
        await #expect(throws: StorageError.storageQuotaUsedUp) {
            _ = try await repositories.reservePush(owner: "alice", creating: true)
        }
        // The refused creation gave its place back: one more repository may still be made.
        try await repositories.checkCreationQuota(owner: "alice")
        let fresh = try await repositories.reservePush(owner: "carol", creating: true)
        #expect(fresh.bytesLeft == 1)
        fresh.release()
    }
}
