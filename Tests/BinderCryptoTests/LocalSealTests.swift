@testable import BinderCrypto
import XCTest

/// Sealing binder's own local files (the listing index): in place or into a new buffer, the
/// same file; opened only with the same key, label and header, untouched.
final class LocalSealTests: XCTestCase {
    let key = try! NIP44.ConversationKey(raw: try SecureBytes(copying: [UInt8](repeating: 9, count: 32)))
    let header = Array("binder-test-header".utf8)

    private func sealedInPlace(_ plaintext: [UInt8], _ seal: LocalSeal) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: LocalSeal.nonceBytes) + plaintext + [UInt8](repeating: 0, count: LocalSeal.tagBytes)
        buffer.withUnsafeMutableBytes { seal.sealInPlace($0, header: header) }
        return buffer
    }

    private func opened(_ sealed: [UInt8], _ seal: LocalSeal, header: [UInt8]? = nil) throws -> [UInt8] {
        let plain = try sealed.withUnsafeBytes { try seal.open($0, header: header ?? self.header) }
        return plain.withUnsafeBytes { Array($0) }
    }

    func testSealedInPlaceOpensLikeSealed() throws {
        let seal = try LocalSeal(conversationKey: key, label: "test v1")
        for count in [0, 1, 63, 64, 65, 4096, 100_000] {
            let plaintext = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            let inPlace = sealedInPlace(plaintext, seal)
            let copied = plaintext.withUnsafeBytes { seal.seal($0, header: header) }
            XCTAssertEqual(inPlace.count, copied.count, "\(count)")
            XCTAssertEqual(try opened(inPlace, seal), plaintext, "\(count)")
            XCTAssertEqual(try opened(copied, seal), plaintext, "\(count)")
            if count >= 64 {
                // The message was written over, and each seal has a nonce of its own.
                XCTAssertNil(inPlace.firstRange(of: plaintext[..<64]), "\(count)")
                XCTAssertNotEqual(inPlace.prefix(LocalSeal.nonceBytes), copied.prefix(LocalSeal.nonceBytes))
            }
        }
    }

    func testASealedFileOpensOnlyUntouchedUnderItsKeyLabelAndHeader() throws {
        let seal = try LocalSeal(conversationKey: key, label: "test v1")
        let plaintext = Array("titles and tags".utf8)
        let sealed = sealedInPlace(plaintext, seal)
        for index in [0, LocalSeal.nonceBytes, LocalSeal.nonceBytes + 5, sealed.count - 1] {
            var tampered = sealed
            tampered[index] ^= 1
            XCTAssertThrowsError(try opened(tampered, seal), "byte \(index)") { XCTAssertEqual($0 as? LocalSeal.Error, .invalidTag) }
        }
        XCTAssertThrowsError(try opened(Array(sealed.dropLast()), seal)) { XCTAssertEqual($0 as? LocalSeal.Error, .invalidTag) }
        XCTAssertThrowsError(try opened(Array(sealed.prefix(30)), seal)) { XCTAssertEqual($0 as? LocalSeal.Error, .truncated(30)) }
        XCTAssertThrowsError(try opened(sealed, seal, header: Array("another header".utf8)))
        XCTAssertThrowsError(try opened(sealed, try LocalSeal(conversationKey: key, label: "test v2")))
        let otherKey = try NIP44.ConversationKey(raw: try SecureBytes(copying: [UInt8](repeating: 8, count: 32)))
        XCTAssertThrowsError(try opened(sealed, try LocalSeal(conversationKey: otherKey, label: "test v1")))
        XCTAssertEqual(try opened(sealed, seal), plaintext)
    }
}
