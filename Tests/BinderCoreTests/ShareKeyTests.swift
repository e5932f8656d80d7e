@testable import BinderCore
import BinderCrypto
import XCTest

/// The share's throwaway key as `binder share` writes it into the payload and `open-share` and
/// `--collect` read it back, and the share book's secrets sealed to the user's own key.
final class ShareKeyTests: XCTestCase {
    func testAPayloadsHexGivesBackTheSameConversationKey() throws {
        let made = try ShareKey.generate()
        let hex = try made.hex()
        XCTAssertEqual(hex.count, 64)
        let read = try ShareKey(hex: hex)
        // Both sides encrypt to the same key: what one seals, the other opens.
        let sealed = try NIP44.encrypt(Array("note".utf8), key: made.conversationKey)
        XCTAssertEqual(try NIP44.decrypt(payload: sealed, key: read.conversationKey).copyBytes(), Array("note".utf8))
    }

    func testAKeyThatIsNotOneIsRefusedWithOneLine() {
        for hex in ["", "zz", String(repeating: "0", count: 64), String(repeating: "f", count: 64), String(repeating: "a", count: 63)] {
            XCTAssertThrowsError(try ShareKey(hex: hex), hex) { error in
                XCTAssertEqual("\(error)", "the payload's key is not a valid secp256k1 key")
            }
        }
    }

    func testSealedSecretsOpenWithTheirKeyOnly() throws {
        struct Secrets: Codable, Equatable { let token: String; let paths: [String] }
        let secrets = Secrets(token: "scan-token", paths: ["visits", "labs/x.md"])
        let mine = try SecretKey.generate(), other = try SecretKey.generate()
        let sealed = try SealedToSelf.seal(secrets, key: mine)
        XCTAssertFalse(sealed.contains("scan-token"))
        XCTAssertEqual(SealedToSelf.open(Secrets.self, from: sealed, key: mine), secrets)
        XCTAssertNil(SealedToSelf.open(Secrets.self, from: sealed, key: other))
        XCTAssertNil(SealedToSelf.open(Secrets.self, from: "not sealed", key: mine))
    }
}
