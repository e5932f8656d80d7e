@testable import BinderServer
import BinderCrypto
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// Listing, and what a push to a new id is told before it sends anything.
@Suite struct RepositoryRouteTests {
    @Test func eachUserListsTheirOwnRepositories() async throws {
        let alice = try SecretKey.generate(), bob = try SecretKey.generate()
        let server = try TestServer()
        try await server.makeRepository("beta", owner: alice.publicKey.hex, commits: 2)
        try await server.makeRepository("alpha", owner: alice.publicKey.hex)
        try await server.makeRepository("gamma", owner: bob.publicKey.hex)
        try await server.test { client in
            let token = try await Login.token(client, key: alice)
            let listing = try await client.execute(uri: "/api/mgit/user/repositories", method: .get, headers: .bearer(token))
            #expect(listing.status == .ok)
            let entries = try JSONBody.array(listing.body)
            #expect(entries.map { $0["repoId"] as? String } == ["alpha", "beta"])
            #expect(entries.allSatisfy { $0["owner"] as? String == alice.publicKey.hex && $0["role"] as? String == "owner" })
            #expect(entries.allSatisfy { ($0["lastCommit"] as? String)?.isEmpty == false })
            let bobs = try await client.execute(uri: "/api/mgit/user/repositories", method: .get,
                                                headers: .bearer(try await Login.token(client, key: bob)))
            #expect(try JSONBody.array(bobs.body).map { $0["repoId"] as? String } == ["gamma"])
        }
    }

    @Test func aNewIdIsAdvertisedEmptyForPushesWithinTheQuota() async throws {
        let key = try SecretKey.generate()
        let server = try TestServer(limits: ServeLimits(repositoriesPerUser: 1))
        try await server.test { client in
            let token = try await Login.token(client, key: key)
            let empty = try await client.execute(uri: "/api/mgit/repos/fresh/info/refs?service=git-receive-pack", method: .get,
                                                 headers: .bearer(token))
            #expect(empty.status == .ok)
            #expect(empty.headers[.contentType] == "application/x-git-receive-pack-advertisement")
            #expect(JSONBody.text(empty.body).hasPrefix("001f# service=git-receive-pack\n0000"))
            #expect(!JSONBody.text(empty.body).contains("refs/heads/"))
            let fetch = try await client.execute(uri: "/api/mgit/repos/fresh/info/refs?service=git-upload-pack", method: .get,
                                                 headers: .bearer(token))
            #expect(fetch.status == .forbidden)
            try await server.makeRepository("first", owner: key.publicKey.hex)
            let full = try await client.execute(uri: "/api/mgit/repos/second/info/refs?service=git-receive-pack", method: .get,
                                                headers: .bearer(token))
            #expect(full.status == .forbidden)
            #expect(try JSONBody.object(full.body)["error"] as? String == "repository quota reached (1 per user)")
            let bad = try await client.execute(uri: "/api/mgit/repos/Bad..id/info/refs?service=git-receive-pack", method: .get,
                                               headers: .bearer(token))
            #expect(bad.status == .badRequest)
        }
    }

    /// A deletion cut between its tombstone and the removal (a kill, a power cut) is finished
    /// when the server starts; the id is gone for every request even before that.
    @Test func aDeletionCutAfterItsTombstoneIsFinishedAtStart() async throws {
        let key = try SecretKey.generate()
        let server = try TestServer()
        defer { try? FileManager.default.removeItem(atPath: server.folder) }
        try await server.makeRepository("doomed", owner: key.publicKey.hex)
        let store = server.folderRepositories.store
        try store.writeTombstone("doomed", owner: key.publicKey.hex, at: 1_800_000_000)
        #expect(store.exists("doomed"))
        #expect(server.folderRepositories.repository("doomed") == nil)
        #expect(store.tombstone("doomed") == RepositoryTombstone(owner: key.publicKey.hex, deletedAt: 1_800_000_000))
        try store.prepare()
        #expect(!store.exists("doomed"))
        #expect(store.usage(owner: key.publicKey.hex).repositories == 0)
        #expect(store.tombstone("doomed") != nil)
    }
}
