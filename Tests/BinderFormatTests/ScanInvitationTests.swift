import Foundation
import Testing
import BinderFormat

/// The share's QR payload as `binder open-share` reads it (limbo-share-protocol.md §2.6).
@Suite struct ScanInvitationTests {
    static let key = "0123456789abcdef0123456789ABCDEF0123456789abcdef0123456789abcdef"
    static let app = #"{"action":"scan_session","ephemeralPrivkey":"\#(key)","sessionToken":"sctk_00ff","repoId":"scan-19b2f3c4d5e","expiresAt":1771234567,"endpoint":"https://limbo.health/"}"#

    static func parse(_ text: String) throws(ScanInvitation.Failure) -> ScanInvitation {
        try ScanInvitation(parsing: Array(text.utf8))
    }

    @Test func theAppsPayloadParses() throws {
        let invitation = try Self.parse(Self.app)
        #expect(invitation.privateKeyHex == Self.key.lowercased())
        #expect(invitation.sessionToken == "sctk_00ff")
        #expect(invitation.repoId == "scan-19b2f3c4d5e")
        #expect(invitation.expiresAt == 1_771_234_567)
        #expect(invitation.endpoint == "https://limbo.health")
        #expect(invitation.hasExpired(now: Date(timeIntervalSince1970: 1_771_234_567)))
        #expect(!invitation.hasExpired(now: Date(timeIntervalSince1970: 1_771_234_566)))
    }

    @Test func withoutAnEndpointItIsLimboHealth() throws {
        #expect(try Self.parse(Self.app.replacingOccurrences(of: #","endpoint":"https://limbo.health/""#, with: "")).endpoint == "https://limbo.health")
    }

    /// Found by the fuzzer: `HTTPS://` passed the check but was kept as spelled.
    @Test func theSchemeIsKeptInLowerCase() throws {
        let cases = [("HTTPS://limbo.health/", "https://limbo.health"), ("Http://127.0.0.1:9", "http://127.0.0.1:9")]
        for (given, kept) in cases {
            #expect(try Self.parse(Self.app.replacingOccurrences(of: "https://limbo.health/", with: given)).endpoint == kept)
        }
    }

    @Test func eachFieldIsHeldToItsShape() {
        let cases: [(String, ScanInvitation.Failure)] = [
            ("[1]", .notAnObject),
            (Self.app.replacingOccurrences(of: "scan_session", with: "mgit_clone"), .invalid(field: "action", why: "is not scan_session")),
            (Self.app.replacingOccurrences(of: Self.key, with: String(Self.key.dropLast())), .invalid(field: "ephemeralPrivkey", why: "is not 64 hex characters")),
            (Self.app.replacingOccurrences(of: "sctk_00ff", with: "sctk 00ff"), .invalid(field: "sessionToken", why: "is not a token (1 to 256 letters, digits, '-' and '_')")),
            (Self.app.replacingOccurrences(of: "scan-19b2f3c4d5e", with: "../x"), .invalid(field: "repoId", why: "is not a repository id (1 to 100 letters, digits, '-', '_', '.')")),
            (Self.app.replacingOccurrences(of: "scan-19b2f3c4d5e", with: ".git"), .invalid(field: "repoId", why: "is not a repository id (1 to 100 letters, digits, '-', '_', '.')")),
            (Self.app.replacingOccurrences(of: "1771234567", with: "\"soon\""), .missing(field: "expiresAt")),
            (Self.app.replacingOccurrences(of: "https://limbo.health/", with: "https://limbo.health/api"),
             .invalid(field: "endpoint", why: "is not an http(s) URL of a server (scheme, host, optional port, no path)")),
            (Self.app.replacingOccurrences(of: "https://limbo.health/", with: "ftp://limbo.health"),
             .invalid(field: "endpoint", why: "is not an http(s) URL of a server (scheme, host, optional port, no path)")),
            (Self.app.replacingOccurrences(of: #""sessionToken":"sctk_00ff","#, with: ""), .missing(field: "sessionToken")),
        ]
        for (text, failure) in cases {
            #expect(throws: failure, "\(text)") { try Self.parse(text) }
        }
        #expect(throws: ScanInvitation.Failure.tooLong(5000)) { try ScanInvitation(parsing: Array(repeating: 0x20, count: 5000)) }
        #expect(throws: ScanInvitation.Failure.self) { try Self.parse("hello doctor") }
    }
}
