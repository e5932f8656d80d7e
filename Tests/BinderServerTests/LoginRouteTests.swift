@testable import BinderServer
import BinderCrypto
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// `POST /api/auth/nostr/challenge` and `/verify` with real secp256k1 signatures.
@Suite struct LoginRouteTests {
    @Test func aSignedChallengeGivesATokenThatListsRepositories() async throws {
        let key = try SecretKey.generate()
        try await TestServer().test { client in
            let challenge = try await Login.challenge(client)
            #expect(challenge.utf8.count == 64)
            let event = NostrEvent.authentication(challenge: challenge, secretKey: key, createdAt: Int64(Date().timeIntervalSince1970))
            let verified = try await Login.verify(client, event, challenge: challenge)
            #expect(verified.status == .ok)
            let answer = try JSONBody.object(verified.body)
            #expect(answer["pubkey"] as? String == key.publicKey.hex)
            let token = try #require(answer["token"] as? String)
            let listing = try await client.execute(uri: "/api/mgit/user/repositories", method: .get, headers: .bearer(token))
            #expect(listing.status == .ok)
            #expect(JSONBody.text(listing.body) == "[]")
        }
    }

    @Test func aChallengeIsAnsweredOnce() async throws {
        let key = try SecretKey.generate()
        try await TestServer().test { client in
            let challenge = try await Login.challenge(client)
            let event = NostrEvent.authentication(challenge: challenge, secretKey: key, createdAt: Int64(Date().timeIntervalSince1970))
            #expect(try await Login.verify(client, event, challenge: challenge).status == .ok)
            let again = try await Login.verify(client, event, challenge: challenge)
            #expect(again.status == .unauthorized)
            #expect(try JSONBody.object(again.body)["error"] as? String == "unknown or expired challenge")
        }
    }

    @Test func aTamperedEventIsRefused() async throws {
        let key = try SecretKey.generate()
        try await TestServer().test { client in
            let challenge = try await Login.challenge(client)
            var event = NostrEvent.authentication(challenge: challenge, secretKey: key, createdAt: Int64(Date().timeIntervalSince1970))
            event.createdAt -= 1   // the id and signature no longer match
            let refused = try await Login.verify(client, event, challenge: challenge)
            #expect(refused.status == .unauthorized)
            #expect((try JSONBody.object(refused.body)["error"] as? String)?.hasPrefix("event signature") == true)
        }
    }

    @Test(arguments: [("https://binder.example.org/", HTTPResponse.Status.ok),
                      ("https://elsewhere.example.org", HTTPResponse.Status.unauthorized)])
    func anEventMustNameThisServer(relay: String, status: HTTPResponse.Status) async throws {
        let key = try SecretKey.generate()
        try await TestServer(publicURL: "https://binder.example.org").test { client in
            let challenge = try await Login.challenge(client)
            let event = NostrEvent.authentication(challenge: challenge, secretKey: key, createdAt: Int64(Date().timeIntervalSince1970),
                                                  relay: relay)
            #expect(try await Login.verify(client, event, challenge: challenge).status == status)
        }
    }

    @Test func loginsAreRateLimitedPerAddress() async throws {
        try await TestServer(limits: ServeLimits(loginsPerMinute: 2)).test { client in
            for _ in 0..<2 {
                #expect(try await client.execute(uri: "/api/auth/nostr/challenge", method: .post, body: ByteBuffer(string: "{}")).status == .ok)
            }
            let refused = try await client.execute(uri: "/api/auth/nostr/challenge", method: .post, body: ByteBuffer(string: "{}"))
            #expect(refused.status == .tooManyRequests)
            #expect(refused.headers[.retryAfter] == "60")
        }
    }
}
