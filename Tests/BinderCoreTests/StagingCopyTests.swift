import BinderCrypto
import BinderGit
import Foundation
import XCTest

@testable import BinderCore

/// The re-encryption of "Share with a doctor", file by file (the whole flow: ShareTests).
final class StagingCopyTests: XCTestCase {
    let mine = try! NIP44.ConversationKey(selfOf: try SecretKey.generate())
    let theirs = try! NIP44.ConversationKey(selfOf: try SecretKey.generate())
    let content: [UInt8] = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 13) }

    func testDEKSidecarIsRewrappedKeepingNonceAndCiphertext() throws {
        let original = try Sidecar.encrypt(content, key: mine)
        let shared = try StagingCopy.reencrypt(path: "a/b.png.enc", original, key: mine, throwaway: theirs)
        XCTAssertEqual(try Sidecar.decrypt(shared, key: theirs).copyBytes(), content)
        XCTAssertThrowsError(try Sidecar.decrypt(shared, key: mine))
        let oldHeader = 3 + (Int(original[1]) << 8 | Int(original[2]))
        let newHeader = 3 + (Int(shared[1]) << 8 | Int(shared[2]))
        XCTAssertEqual(Array(shared[newHeader...]), Array(original[oldHeader...]), "nonce and bulk ciphertext copied as they are")
    }

    func testLegacySidecarBecomesADEKSidecarUnderTheThrowawayKey() throws {
        let legacy = Sidecar.encryptLegacy(content, key: mine)
        let shared = try StagingCopy.reencrypt(path: "x.pdf.enc", legacy, key: mine, throwaway: theirs)
        XCTAssertEqual(Sidecar.format(of: shared), .dek)
        XCTAssertEqual(try Sidecar.decrypt(shared, key: theirs).copyBytes(), content)
    }

    func testDocumentsAreReencryptedAndBadOnesNamed() throws {
        let text = Array(#"{"value":"v","metadata":{"type":"note"},"children":[]}"#.utf8)
        let payload = Array(try NIP44.encrypt(text, key: mine).utf8)
        let shared = try StagingCopy.reencrypt(path: "visits/a.json", payload, key: mine, throwaway: theirs)
        XCTAssertEqual(try NIP44.decrypt(payload: shared, key: theirs).copyBytes(), text)
        XCTAssertThrowsError(try StagingCopy.reencrypt(path: "visits/b.json", Array("garbage".utf8), key: mine, throwaway: theirs)) { error in
            guard case StagingCopy.Failure.unreadable(let path, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(path, "visits/b.json")
        }
    }
}
