import BinderCrypto
import XCTest

/// Keys, passphrases and their encodings need secret memory too: when it runs out, each step
/// throws a typed error naming it (the command says "out of secret memory" and exits 1) instead
/// of stopping the process, and works again once memory is back. The arena's test limit stands
/// in for a kernel refusing regions.
final class KeyMemoryExhaustionTests: XCTestCase {
    override func tearDown() {
        SecureBytes.limitForTesting(nil)
    }

    /// Runs `body` with no secret memory to be had beyond what is in use now.
    func withoutSecretMemory(_ body: () throws -> Void) rethrows {
        SecureBytes.limitForTesting(SecureBytes.bytesInUseForTesting)
        defer { SecureBytes.limitForTesting(nil) }
        try body()
    }

    func assertExhausted<T>(_ operation: @autoclosure () throws -> T, _ what: String, line: UInt = #line) {
        do {
            _ = try operation()
            XCTFail("\(what) should fail without secret memory", line: line)
        } catch let error as SecureMemoryError {
            XCTAssertTrue(error.description.hasPrefix("out of secret memory"), "\(what): \(error)", line: line)
        } catch KeyError.secretMemory {
        } catch NIP49.Error.secretMemory {
        } catch {
            XCTFail("\(what): unexpected \(error)", line: line)
        }
    }

    func testKeyStepsThrowWhenSecretMemoryRunsOutAndWorkAfter() throws {
        let key = try SecretKey.generate()
        let nsec = String(decoding: try key.nsec().copyBytes(), as: UTF8.self)
        let passphrase = try SecureBytes(copyingUTF8: "correct horse")
        let ncryptsec = try NIP49.encrypt(key, passphrase: passphrase, logN: 1)
        let base64 = try SecureBytes(copyingUTF8: "QUJD")
        try withoutSecretMemory {
            assertExhausted(try SecretKey.generate(), "generating a key")
            assertExhausted(try SecretKey(nsec: nsec), "importing an nsec")
            assertExhausted(try SecretKey(hex: String(repeating: "1", count: 64)), "importing a hex key")
            assertExhausted(try key.nsec(), "showing the nsec")
            assertExhausted(try key.hexSecret(), "the hex key")
            assertExhausted(try NIP44.ConversationKey(selfOf: key), "the conversation key")
            assertExhausted(try NIP49.encrypt(key, passphrase: passphrase, logN: 1), "encrypting the key")
            assertExhausted(try NIP49.decrypt(ncryptsec, passphrase: passphrase), "decrypting the key")
            assertExhausted(try Base64.decodeSecret(base64), "decoding base64 into secret memory")
            assertExhausted(try randomSecret(32), "a random secret")
        }
        // Memory is back: every step works, and the key survived.
        XCTAssertEqual(String(decoding: try SecretKey(nsec: nsec).nsec().copyBytes(), as: UTF8.self), nsec)
        let (opened, _) = try NIP49.decrypt(ncryptsec, passphrase: passphrase)
        XCTAssertTrue(try opened.hexSecret().constantTimeEquals(try key.hexSecret()))
        XCTAssertEqual(try Base64.decodeSecret(base64)?.copyBytes(), Array("ABC".utf8))
    }

    /// Legacy sidecars (the staging copy of "share with a doctor" re-seals them) keep their
    /// message keys on the stack: sealing needs no secret memory at all.
    func testSealingALegacySidecarNeedsNoSecretMemory() throws {
        let key = try NIP44.ConversationKey(selfOf: try SecretKey.generate())
        let content = Array("a scanned letter".utf8)
        var sealed: [UInt8] = []
        withoutSecretMemory { sealed = Sidecar.encryptLegacy(content, key: key) }
        XCTAssertEqual(try Sidecar.decrypt(sealed, key: key).copyBytes(), content)
    }
}
