@testable import BinderServer
import BinderCrypto
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// A scan session's life: opened by the staging repository's owner only, its token opening
/// that repository only, revoked by its owner, after which the token and the copy are gone.
@Suite struct ScanSessionRouteTests {
    static func body(_ fields: [String: Any]) throws -> ByteBuffer { ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: fields)) }

    @Test func aSessionOpensItsStagingRepositoryUntilRevoked() async throws {
        let patient = try SecretKey.generate(), stranger = try SecretKey.generate()
        let server = try TestServer()
        try await server.makeRepository("scan-share1", owner: patient.publicKey.hex)
        try await server.makeRepository("records", owner: patient.publicKey.hex)
        try await server.test { client in
            let token = try await Login.token(client, key: patient)
            let strangerToken = try await Login.token(client, key: stranger)
            let open = { (bearer: String, id: String) in
                try await client.execute(uri: "/api/auth/scan/session", method: .post, headers: .bearer(bearer),
                                         body: try Self.body(["stagingRepoId": id, "expiresIn": 600]))
            }
            #expect(try await open(strangerToken, "scan-share1").status == .forbidden)
            #expect(try await open(token, "records").status == .badRequest)
            #expect(try await open(token, "scan-missing").status == .notFound)
            let opened = try await open(token, "scan-share1")
            #expect(opened.status == .ok)
            let session = try JSONBody.object(opened.body)
            let scanToken = try #require(session["sessionToken"] as? String)
            #expect(scanToken.hasPrefix("sctk_"))
            #expect(session["repoId"] as? String == "scan-share1")

            let refs = "/api/mgit/repos/scan-share1/info/refs?service=git-upload-pack"
            let byHeader = try await client.execute(uri: refs, method: .get, headers: [.authorization: "ScanToken " + scanToken])
            #expect(byHeader.status == .ok)
            #expect(JSONBody.text(byHeader.body).contains("refs/heads/main"))
            #expect(try await client.execute(uri: refs + "&scan_token=" + scanToken, method: .get).status == .ok)
            let elsewhere = try await client.execute(uri: "/api/mgit/repos/records/info/refs?service=git-upload-pack", method: .get,
                                                     headers: [.authorization: "ScanToken " + scanToken])
            #expect(elsewhere.status == .forbidden)
            #expect(try JSONBody.object(elsewhere.body)["error"] as? String == "Token not scoped to this repo")

            let revoke = { (bearer: String) in
                try await client.execute(uri: "/api/auth/scan/revoke", method: .post, headers: .bearer(bearer),
                                         body: try Self.body(["sessionToken": scanToken]))
            }
            #expect(try await revoke(strangerToken).status == .notFound)
            let revoked = try await revoke(token)
            #expect(revoked.status == .ok)
            #expect(try JSONBody.object(revoked.body)["success"] as? Bool == true)
            let after = try await client.execute(uri: refs, method: .get, headers: [.authorization: "ScanToken " + scanToken])
            #expect(after.status == .forbidden)
            #expect(try JSONBody.object(after.body)["error"] as? String == "Invalid scan token")
            #expect(try await server.storage.repositories.repository("scan-share1") == nil)
            #expect(try await server.storage.repositories.repository("records") != nil)
        }
    }

    @Test func aScanTokenNeverCreatesARepository() async throws {
        let patient = try SecretKey.generate()
        let server = try TestServer()
        try await server.makeRepository("scan-share2", owner: patient.publicKey.hex)
        try await server.test { client in
            let token = try await Login.token(client, key: patient)
            let opened = try await client.execute(uri: "/api/auth/scan/session", method: .post, headers: .bearer(token),
                                                  body: try Self.body(["stagingRepoId": "scan-share2"]))
            let scanToken = try #require(try JSONBody.object(opened.body)["sessionToken"] as? String)
            let push = try await client.execute(uri: "/api/mgit/repos/scan-share2/git-receive-pack", method: .post,
                                                headers: [.authorization: "ScanToken " + scanToken],
                                                body: ByteBuffer(string: "00000000"))
            #expect(push.status == .forbidden)   // not the main branch only: refused before git runs
            let other = try await client.execute(uri: "/api/mgit/repos/scan-other/info/refs?service=git-receive-pack", method: .get,
                                                 headers: [.authorization: "ScanToken " + scanToken])
            #expect(other.status == .forbidden)
        }
    }
}
