@_spi(Fuzzing) import BinderCrypto
import Foundation
import XCTest

/// Inputs found by fuzzing (scripts/fuzz) or by reading the decoders for traps, kept as tests:
/// each failed, trapped or gave a wrong answer before its fix.
final class FuzzRegressionTests: XCTestCase {
    let key = try! NIP44.ConversationKey(raw: try SecureBytes(copying: [UInt8](repeating: 7, count: 32)))

    /// Fuzz input `56 00 00 00 00 00` (sidecar target, DEK text `00 00 00 00`): libsodium skipped
    /// the NUL bytes as ignorable whitespace, so the sidecar "decrypted" to nothing while its size
    /// read as 3 bytes.
    func testSidecarTextOfNULBytesIsNotBase64() throws {
        let file = try Sidecar.seal(text: try SecureBytes(copying: [0, 0, 0, 0]), key: key)
        XCTAssertThrowsError(try Sidecar.decrypt(file, key: key)) { XCTAssertEqual($0 as? Sidecar.Error, .contentNotBase64) }
        XCTAssertNil(try Base64.decodeSecret(try SecureBytes(copying: [0x51, 0x51, 0, 0x3D, 0x3D])))
        XCTAssertEqual(try Base64.decodeSecret(try SecureBytes(copying: Array("QQ==\n".utf8)))?.copyBytes(), [0x41])
    }

    /// Base64 wrapped into 76-character lines (as MIME writers do) decrypted, but its size read
    /// without decrypting counted the line breaks as content: `stat` said more bytes than a read gave.
    func testWrappedSidecarTextHasItsExactSize() throws {
        let content = [UInt8]((0..<1000).map { UInt8(truncatingIfNeeded: $0 * 7) })
        let wrapped = Array(Data(content).base64EncodedString(options: [.lineLength76Characters, .endLineWithLineFeed]).utf8) + [0x0A]
        let dek = try Sidecar.seal(text: try SecureBytes(copying: wrapped), key: key)
        XCTAssertEqual(try Sidecar.decrypt(dek, key: key).copyBytes(), content)
        XCTAssertEqual(Sidecar.plaintextSize(dek, key: key), content.count)
        let legacy = Sidecar.sealLegacy(text: wrapped, key: key)
        XCTAssertEqual(try Sidecar.decrypt(legacy, key: key).copyBytes(), content)
        XCTAssertEqual(Sidecar.plaintextSize(legacy, key: key), content.count)
    }

    /// Whitespace that starts deep inside the text cannot be seen by the size reader, so it is
    /// refused rather than shown at a wrong size.
    func testSidecarTextBrokenOnlyDeepInsideIsRefused() throws {
        var text = Array(Data([UInt8](repeating: 0xAB, count: 300)).base64EncodedString().utf8)
        text.insert(0x0A, at: 200)
        let file = try Sidecar.seal(text: try SecureBytes(copying: text), key: key)
        XCTAssertThrowsError(try Sidecar.decrypt(file, key: key)) { XCTAssertEqual($0 as? Sidecar.Error, .contentNotBase64) }
    }

    /// A legacy sidecar whose outer base64 has line breaks decrypts; its size is now read too.
    func testLegacySidecarWithLineBreaksHasASize() throws {
        let content = [UInt8](repeating: 0x42, count: 500)
        let file = Sidecar.encryptLegacy(content, key: key)
        var broken = [UInt8]()
        for (index, byte) in file.enumerated() {
            broken.append(byte)
            if index % 64 == 63 { broken.append(0x0A) }
        }
        XCTAssertEqual(try Sidecar.decrypt(broken, key: key).copyBytes(), content)
        XCTAssertEqual(Sidecar.plaintextSize(broken, key: key), content.count)
    }

    /// What follows the MAC, with any padded bytes: a typed error for every bad length prefix.
    func testNIP44PaddingChecksAfterTheMAC() throws {
        func decrypt(_ padded: [UInt8]) throws -> [UInt8] {
            let payload = padded.withUnsafeBytes { NIP44.seal(padded: $0, key: key) }
            return try NIP44.decrypt(payload: payload, key: key).copyBytes()
        }
        XCTAssertEqual(try decrypt([0, 3] + Array("abc".utf8) + [UInt8](repeating: 0, count: 29)), Array("abc".utf8))
        XCTAssertThrowsError(try decrypt([UInt8](repeating: 0, count: 34))) {
            XCTAssertEqual($0 as? NIP44.Error, .invalidPadding("declared length is 0"))
        }
        XCTAssertThrowsError(try decrypt([0xFF, 0xFF] + [UInt8](repeating: 0, count: 32))) {
            guard case .invalidPadding? = $0 as? NIP44.Error else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try decrypt([0, 33] + [UInt8](repeating: 0, count: 32))) {
            guard case .invalidPadding? = $0 as? NIP44.Error else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try decrypt([0, 1])) { XCTAssertEqual($0 as? NIP44.Error, .invalidPayloadSize(92)) }
    }

    /// A login event's `created_at` is any Int64 a client sends: `abs(created_at - now)` trapped on
    /// overflow (created_at = Int64.min), which stopped the whole server.
    func testFreshnessOfExtremeCreatedAt() throws {
        var event = try NostrEvent(json: Array(#"{"id":"","pubkey":"","created_at":-9223372036854775808,"kind":22242,"tags":[],"content":"","sig":""}"#.utf8))
        XCTAssertEqual(event.createdAt, .min)
        XCTAssertFalse(event.isFresh(now: 1_763_767_000, allowedSkew: 600))
        event.createdAt = .max
        XCTAssertFalse(event.isFresh(now: 1_763_767_000, allowedSkew: 600))
        event.createdAt = 1_763_767_500
        XCTAssertTrue(event.isFresh(now: 1_763_767_000, allowedSkew: 600))
        XCTAssertThrowsError(try NostrEvent(json: Array(#"{"id":1}"#.utf8))) { XCTAssertEqual($0 as? NostrEvent.Error, .malformed) }
    }

    /// An event read from a client may hold quotes in its id, pubkey or sig; its JSON still reads back.
    func testEventJSONEscapesEveryField() throws {
        let event = NostrEvent(pubkey: "p\"k", createdAt: 1, kind: 1, tags: [["a\\"]], content: "c\n", id: "i\"d", sig: "s\u{1}")
        XCTAssertEqual(try NostrEvent(json: Array(event.json.utf8)), event)
    }

    /// log_n above 22 (scrypt would want 8 GiB and more) is refused while reading the fields.
    func testNcryptsecLogNIsCheckedBeforeScrypt() throws {
        let key = try SecretKey(hex: String(repeating: "01", count: 32))
        let sealed = try NIP49.encrypt(key, passphrase: try SecureBytes(copyingUTF8: "x"), logN: 1)
        var data = try Bech32.decode(sealed).data
        for logN: UInt8 in [0, 23, 255] {
            data[1] = logN
            let text = Bech32.encode(hrp: "ncryptsec", data: data)
            XCTAssertThrowsError(try NIP49.fields(of: text)) { XCTAssertEqual($0 as? NIP49.Error, .malformed("log_n \(logN) is out of range")) }
        }
    }

    /// Every seed of the fuzz corpora that is a valid payload or sidecar still decrypts (the
    /// seeds are meant to get past the MAC).
    func testFuzzSeedsMadeFromTheVectorsDecrypt() throws {
        let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fuzz/corpus")
        let vectorKey = try NIP44.ConversationKey(raw: try SecureBytes(copying: try XCTUnwrap(Hex.decode("c41c775356fd92eadc63ff5a0dc1da211b268cbea22316767095b2871ea1412d"))))
        let valid = try Data(contentsOf: corpus.appendingPathComponent("nip44/valid-0"))
        XCTAssertEqual(try NIP44.decrypt(payload: [UInt8](valid.dropFirst(2)), key: vectorKey).count, 1)
        for name in ["dek", "legacy"] {
            let seed = try Data(contentsOf: corpus.appendingPathComponent("sidecar/\(name)"))
            let file = [UInt8](seed.dropFirst(2))
            let content = try Sidecar.decrypt(file, key: vectorKey)
            XCTAssertEqual(content.count, 208)
            XCTAssertEqual(Sidecar.plaintextSize(file, key: vectorKey), 208)
        }
    }
}
