@testable import BinderServer
import BinderCrypto
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// The authentication middleware: every protected route refuses a request without a valid
/// token before it does anything; the open routes and unknown paths are not guarded.
@Suite struct AuthenticationTests {
    static let protectedRoutes: [(HTTPRequest.Method, String)] = [
        (.get, "/api/mgit/user/repositories"), (.get, "/api/mgit/qr/clone/alpha"),
        (.post, "/api/auth/scan/session"), (.post, "/api/auth/scan/revoke"),
        (.get, "/api/mgit/repos/alpha/info/refs?service=git-upload-pack"),
        (.get, "/api/mgit/repos/alpha/info/refs?service=git-receive-pack"),
        (.post, "/api/mgit/repos/alpha/git-upload-pack"), (.post, "/api/mgit/repos/alpha/git-receive-pack"),
    ]

    @Test(arguments: protectedRoutes)
    func aProtectedRouteWantsAToken(method: HTTPRequest.Method, uri: String) async throws {
        try await TestServer().test { client in
            for headers: HTTPFields in [[:], .bearer("not.a.token"), .bearer(""), [.authorization: "Basic dXNlcjpwYXNz"]] {
                let refused = try await client.execute(uri: uri, method: method, headers: headers, body: ByteBuffer(string: "{}"))
                #expect(refused.status == .unauthorized, "\(method) \(uri) \(headers)")
                #expect(refused.headers[.wwwAuthenticate] == "Bearer")
                #expect(try JSONBody.object(refused.body)["error"] as? String == "missing, bad or expired token")
            }
        }
    }

    @Test func openRoutesAndUnknownPathsAreNotGuarded() async throws {
        try await TestServer().test { client in
            let challenge = try await client.execute(uri: "/api/auth/nostr/challenge", method: .post, body: ByteBuffer(string: "{}"))
            #expect(challenge.status == .ok)
            let unknown = try await client.execute(uri: "/api/mgit/nothing", method: .get)
            #expect(unknown.status == .notFound)
        }
    }

    @Test func aCloneTokenReadsItsRepositoryOnly() async throws {
        let key = try SecretKey.generate()
        let server = try TestServer(publicURL: "https://binder.example.org")   // the QR's base (no socket here)
        try await server.makeRepository("alpha", owner: key.publicKey.hex)
        try await server.makeRepository("beta", owner: key.publicKey.hex)
        try await server.test { client in
            let token = try await Login.token(client, key: key)
            let qr = try await client.execute(uri: "/api/mgit/qr/clone/alpha", method: .get, headers: .bearer(token))
            #expect(qr.status == .ok)
            let payload = try JSONBody.object(qr.body)
            #expect(payload["action"] as? String == "mgit_clone")
            #expect(payload["clone_url"] as? String == "https://binder.example.org/api/mgit/repos/alpha")
            let clone = try #require(payload["jwt_token"] as? String)
            let refs = try await client.execute(uri: "/api/mgit/repos/alpha/info/refs?service=git-upload-pack", method: .get,
                                                headers: .bearer(clone))
            #expect(refs.status == .ok)
            #expect(JSONBody.text(refs.body).contains("refs/heads/main"))
            for uri in ["/api/mgit/repos/beta/info/refs?service=git-upload-pack", "/api/mgit/repos/alpha/info/refs?service=git-receive-pack",
                        "/api/mgit/user/repositories", "/api/mgit/qr/clone/alpha"] {
                let refused = try await client.execute(uri: uri, method: .get, headers: .bearer(clone))
                #expect(refused.status == .forbidden, "\(uri)")
            }
        }
    }

    @Test func anotherUsersRepositoryIsRefused() async throws {
        let owner = try SecretKey.generate(), stranger = try SecretKey.generate()
        let server = try TestServer()
        try await server.makeRepository("alpha", owner: owner.publicKey.hex)
        try await server.test { client in
            let token = try await Login.token(client, key: stranger)
            for (method, uri) in [(HTTPRequest.Method.get, "/api/mgit/repos/alpha/info/refs?service=git-upload-pack"),
                                  (.get, "/api/mgit/qr/clone/alpha"), (.post, "/api/mgit/repos/alpha/git-upload-pack")] {
                #expect(try await client.execute(uri: uri, method: method, headers: .bearer(token)).status == .forbidden, "\(uri)")
            }
        }
    }
}
