@testable import BinderServer
import BinderCrypto
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

/// `--fault-rate`: git's routes fail with 503 before anything else, in a repeatable sequence;
/// the other routes never.
@Suite struct FaultInjectionTests {
    @Test func everyGitRequestFailsAtRateOne() async throws {
        try await TestServer(faultRate: 1).test { client in
            for (method, uri) in [(HTTPRequest.Method.get, "/api/mgit/repos/alpha/info/refs?service=git-upload-pack"),
                                  (.post, "/api/mgit/repos/alpha/git-upload-pack"), (.post, "/api/mgit/repos/alpha/git-receive-pack")] {
                let failed = try await client.execute(uri: uri, method: method)
                #expect(failed.status == .serviceUnavailable, "\(uri)")
                #expect(try JSONBody.object(failed.body)["error"] as? String == "injected fault")
            }
            #expect(try await client.execute(uri: "/api/auth/nostr/challenge", method: .post, body: ByteBuffer(string: "{}")).status == .ok)
            #expect(try await client.execute(uri: "/api/mgit/user/repositories", method: .get).status == .unauthorized)
        }
    }

    @Test func faultsFollowTheFixedSequence() async throws {
        let rate = 0.5
        try await TestServer(faultRate: rate).test { client in
            for n in 1...24 {
                let answer = try await client.execute(uri: "/api/mgit/repos/alpha/info/refs?service=git-upload-pack", method: .get)
                #expect(answer.status == (FaultInjection.draw(n) < rate ? .serviceUnavailable : .unauthorized), "request \(n)")
            }
        }
    }

    @Test func noFaultsAtRateZero() async throws {
        try await TestServer(faultRate: 0).test { client in
            for _ in 0..<8 {
                let answer = try await client.execute(uri: "/api/mgit/repos/alpha/info/refs?service=git-upload-pack", method: .get)
                #expect(answer.status == .unauthorized)
            }
        }
    }
}
