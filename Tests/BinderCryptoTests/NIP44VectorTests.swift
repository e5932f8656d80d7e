import BinderCrypto
import XCTest

final class NIP44VectorTests: XCTestCase {
    var v2: [String: Any] = [:]
    var valid: [String: Any] { v2["valid"] as! [String: Any] }
    var invalid: [String: Any] { v2["invalid"] as! [String: Any] }

    override func setUpWithError() throws {
        v2 = try XCTUnwrap(loadFixture("nip44.vectors")["v2"] as? [String: Any])
    }

    func secret(_ hexText: Any?) throws -> SecretKey {
        try SecretKey(bytes: try SecureBytes(copying: hex(hexText)))
    }

    func conversationKey(_ hexText: Any?) throws -> NIP44.ConversationKey {
        try NIP44.ConversationKey(raw: try SecureBytes(copying: hex(hexText)))
    }

    func testConversationKeys() throws {
        let cases = try XCTUnwrap(valid["get_conversation_key"] as? [[String: Any]])
        XCTAssertEqual(cases.count, 35)
        for c in cases {
            let key = try NIP44.ConversationKey(secretKey: try secret(c["sec1"]), publicKey: try PublicKey(xOnly: hex(c["pub2"])))
            XCTAssertEqual(try key.hexSecret.copyBytes(), Array((c["conversation_key"] as! String).utf8), "\(c)")
        }
    }

    func testMessageKeys() throws {
        let section = try XCTUnwrap(valid["get_message_keys"] as? [String: Any])
        let key = try conversationKey(section["conversation_key"])
        let cases = try XCTUnwrap(section["keys"] as? [[String: Any]])
        XCTAssertFalse(cases.isEmpty)
        for c in cases {
            let keys = try NIP44.messageKeys(key, nonce: hex(c["nonce"]))
            XCTAssertEqual(keys.chachaKey.copyBytes(), hex(c["chacha_key"]))
            XCTAssertEqual(keys.chachaNonce.copyBytes(), hex(c["chacha_nonce"]))
            XCTAssertEqual(keys.hmacKey.copyBytes(), hex(c["hmac_key"]))
        }
    }

    func testPaddedLengths() throws {
        let cases = try XCTUnwrap(valid["calc_padded_len"] as? [[Int]])
        XCTAssertEqual(cases.count, 24)
        for c in cases { XCTAssertEqual(NIP44.paddedLength(c[0]), c[1], "unpadded \(c[0])") }
    }

    func testEncryptDecrypt() throws {
        let cases = try XCTUnwrap(valid["encrypt_decrypt"] as? [[String: Any]])
        XCTAssertEqual(cases.count, 10)
        for c in cases {
            let sec1 = try secret(c["sec1"]), sec2 = try secret(c["sec2"])
            let key = try NIP44.ConversationKey(secretKey: sec1, publicKey: sec2.publicKey)
            XCTAssertEqual(try key.hexSecret.copyBytes(), Array((c["conversation_key"] as! String).utf8))
            // The same key from the other side.
            let reverse = try NIP44.ConversationKey(secretKey: sec2, publicKey: sec1.publicKey)
            XCTAssertTrue(try reverse.hexSecret.constantTimeEquals(try key.hexSecret))
            let plaintext = Array((c["plaintext"] as! String).utf8)
            let payload = try NIP44.encrypt(plaintext, key: key, nonce: hex(c["nonce"]))
            XCTAssertEqual(payload, c["payload"] as? String)
            XCTAssertEqual(try NIP44.decrypt(payload: payload, key: reverse).copyBytes(), plaintext)
        }
    }

    func testLongMessages() throws {
        let cases = try XCTUnwrap(valid["encrypt_decrypt_long_msg"] as? [[String: Any]])
        XCTAssertEqual(cases.count, 3)
        for c in cases {
            let key = try conversationKey(c["conversation_key"])
            let pattern = Array((c["pattern"] as! String).utf8)
            let repeatCount = c["repeat"] as! Int
            let plaintext = Array([[UInt8]](repeating: pattern, count: repeatCount).joined())
            XCTAssertEqual(Hex.encode(sha256(plaintext)), c["plaintext_sha256"] as? String)
            let payload = try NIP44.encrypt(plaintext, key: key, nonce: hex(c["nonce"]))
            XCTAssertEqual(Hex.encode(sha256(Array(payload.utf8))), c["payload_sha256"] as? String)
            XCTAssertEqual(try NIP44.decrypt(payload: payload, key: key).copyBytes(), plaintext)
        }
    }

    func testInvalidMessageLengths() throws {
        let lengths = try XCTUnwrap(invalid["encrypt_msg_lengths"] as? [Int])
        XCTAssertEqual(lengths.count, 4)
        let key = try NIP44.ConversationKey(raw: try SecureBytes(copying: [UInt8](repeating: 1, count: 32)))
        for length in lengths {
            XCTAssertThrowsError(try NIP44.encrypt([UInt8](repeating: 0x61, count: length), key: key)) { error in
                XCTAssertEqual(error as? NIP44.Error, .plaintextSize(length))
            }
        }
    }

    func testInvalidConversationKeys() throws {
        let cases = try XCTUnwrap(invalid["get_conversation_key"] as? [[String: Any]])
        XCTAssertEqual(cases.count, 8)
        for c in cases {
            // Either the secret key or the public key must be refused; nothing may be derived.
            let secretKey = try? secret(c["sec1"])
            let publicKey = try? PublicKey(xOnly: hex(c["pub2"]))
            XCTAssertTrue(secretKey == nil || publicKey == nil, "accepted: \(c["note"] ?? c)")
        }
    }

    func testInvalidPayloads() throws {
        let cases = try XCTUnwrap(invalid["decrypt"] as? [[String: Any]])
        XCTAssertEqual(cases.count, 12)
        for c in cases {
            let key = try conversationKey(c["conversation_key"])
            let note = c["note"] as? String ?? ""
            XCTAssertThrowsError(try NIP44.decrypt(payload: c["payload"] as! String, key: key), note) { error in
                guard let error = error as? NIP44.Error else { return XCTFail("untyped error for \(note)") }
                // The error must name the same kind of problem as the vector's note.
                let lowered = note.lowercased()
                switch error {
                case .unknownVersion: XCTAssertTrue(lowered.contains("version"), "\(note) -> \(error)")
                case .invalidMAC: XCTAssertTrue(lowered.contains("mac"), "\(note) -> \(error)")
                case .invalidPadding: XCTAssertTrue(lowered.contains("padding"), "\(note) -> \(error)")
                case .invalidPayloadSize, .invalidDataSize, .invalidBase64:
                    XCTAssertTrue(lowered.contains("size") || lowered.contains("length") || lowered.contains("base64"),
                                  "\(note) -> \(error)")
                default: XCTFail("\(note) -> \(error)")
                }
            }
        }
    }

    func testSelfConversationKeyRoundTripAndWrongKey() throws {
        let owner = try SecretKey.generate(), other = try SecretKey.generate()
        let key = try NIP44.ConversationKey(selfOf: owner)
        let text = Array("{\"value\":\"# Visit\",\"metadata\":{}}".utf8)
        let payload = try NIP44.encrypt(text, key: key)
        XCTAssertEqual(try NIP44.decrypt(payload: payload, key: key).copyBytes(), text)
        XCTAssertThrowsError(try NIP44.decrypt(payload: payload, key: try NIP44.ConversationKey(selfOf: other))) {
            XCTAssertEqual($0 as? NIP44.Error, .invalidMAC)
        }
        // Two encryptions of the same text differ (fresh nonces).
        XCTAssertNotEqual(payload, try NIP44.encrypt(text, key: key))
    }
}
