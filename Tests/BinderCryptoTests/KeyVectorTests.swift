import BinderCrypto
import XCTest

final class NIP49VectorTests: XCTestCase {
    func testDecryptVectors() throws {
        let cases = try XCTUnwrap(loadFixture("nip49.vectors")["decrypt"] as? [[String: Any]])
        XCTAssertEqual(cases.count, 4)
        for c in cases {
            let ncryptsec = c["ncryptsec"] as! String
            XCTAssertGreaterThan(ncryptsec.count, 90, "ncryptsec is longer than BIP-173's limit")
            let password = try SecureBytes(copyingUTF8: c["password"] as! String)
            let (key, _) = try NIP49.decrypt(ncryptsec, passphrase: password)
            XCTAssertEqual(try key.hexSecret().copyBytes(), Array((c["secret_key_hex"] as! String).utf8))
            if let npub = c["npub"] as? String { XCTAssertEqual(key.publicKey.npub, npub) }
            if let hexKey = c["pubkey_hex"] as? String { XCTAssertEqual(key.publicKey.hex, hexKey) }
            if let nsec = c["nsec"] as? String {
                XCTAssertEqual(try key.nsec().copyBytes(), Array(nsec.utf8))
                XCTAssertEqual(try SecretKey(nsec: nsec).publicKey, key.publicKey)
            }
            XCTAssertThrowsError(try NIP49.decrypt(ncryptsec, passphrase: try SecureBytes(copyingUTF8: "not the password"))) {
                XCTAssertEqual($0 as? NIP49.Error, .wrongPassphrase)
            }
        }
    }

    func testPassphraseIsNFKCNormalised() throws {
        // "Å" as A + combining ring, and the Angstrom sign, both normalise to U+00C5.
        let key = try SecretKey.generate()
        let ncryptsec = try NIP49.encrypt(key, passphrase: try SecureBytes(copyingUTF8: "\u{212B}bc"), logN: 4)
        let (decoded, security) = try NIP49.decrypt(ncryptsec, passphrase: try SecureBytes(copyingUTF8: "A\u{30A}bc"))
        XCTAssertEqual(decoded.publicKey, key.publicKey)
        XCTAssertEqual(security, .notKnownInsecure)
    }

    func testMalformedAndTampered() throws {
        let key = try SecretKey.generate()
        let ncryptsec = try NIP49.encrypt(key, passphrase: try SecureBytes(copyingUTF8: "pw"), logN: 4)
        var chars = Array(ncryptsec)
        chars[40] = chars[40] == "q" ? "p" : "q"
        XCTAssertThrowsError(try NIP49.decrypt(String(chars), passphrase: try SecureBytes(copyingUTF8: "pw"))) {
            guard case .malformed = $0 as? NIP49.Error else { return XCTFail("\($0)") }
        }
        XCTAssertThrowsError(try NIP49.decrypt("npub1kvt5rnqe3s3274gr470fdundrgufm3ecjqdxzx5hrnlvuvxfuzzqkayd48",
                                               passphrase: try SecureBytes(copyingUTF8: "pw")))
    }
}

final class Bech32Tests: XCTestCase {
    func testKnownKeys() throws {
        let key = try SecretKey(hex: "3501454135014541350145413501453fefb02227e449e57cf4d3a3ce05378683")
        XCTAssertEqual(key.publicKey.hex, "672a31bfc59d3f04548ec9b7daeeba2f61814e8ccc40448045007f5479f693a3")
        let npub = key.publicKey.npub
        XCTAssertTrue(npub.hasPrefix("npub1"))
        XCTAssertEqual(try PublicKey(npub: npub), key.publicKey)
        XCTAssertEqual(try PublicKey(npub: npub.uppercased()), key.publicKey)
    }

    func testErrors() {
        XCTAssertThrowsError(try Bech32.decode("npub1Kvt5rnqe")) { XCTAssertEqual($0 as? Bech32.DecodeError, .mixedCase) }
        XCTAssertThrowsError(try Bech32.decode("npub1kvt5rnqe3s3274gr470fdundrgufm3ecjqdxzx5hrnlvuvxfuzzqkayd49")) {
            XCTAssertEqual($0 as? Bech32.DecodeError, .checksum)
        }
        XCTAssertThrowsError(try SecretKey(nsec: "nsec1notakey")) { XCTAssertNotNil($0 as? KeyError) }
        XCTAssertThrowsError(try SecretKey(nsec: "npub1kvt5rnqe3s3274gr470fdundrgufm3ecjqdxzx5hrnlvuvxfuzzqkayd48"))
        XCTAssertThrowsError(try SecretKey(hex: String(repeating: "0", count: 64)))
        XCTAssertThrowsError(try SecretKey(hex: String(repeating: "f", count: 64)))
    }
}

final class NostrEventTests: XCTestCase {
    func testEventIDsMatchIndependentImplementation() throws {
        let fixture = try loadFixture("nip01-event-ids")
        let events = try XCTUnwrap(fixture["events"] as? [[String: Any]])
        XCTAssertEqual(events.count, 4)
        let signer = try SecretKey(hex: "3501454135014541350145413501453fefb02227e449e57cf4d3a3ce05378683")
        for e in events {
            var event = NostrEvent(pubkey: e["pubkey"] as! String, createdAt: (e["created_at"] as! NSNumber).int64Value,
                                   kind: e["kind"] as! Int, tags: e["tags"] as! [[String]], content: e["content"] as! String)
            XCTAssertEqual(event.computedID, e["id"] as? String, "serialisation: \(event.canonicalSerialization)")
            // The example signature (random aux data) verifies, and so does a fresh one of ours.
            event.id = e["id"] as! String
            event.sig = e["sig_example"] as! String
            XCTAssertNoThrow(try event.verify())
            event.sign(with: signer)
            XCTAssertEqual(event.id, e["id"] as? String)
            XCTAssertNoThrow(try event.verify())
            // Tampering is caught.
            var tampered = event
            tampered.content += "x"
            XCTAssertThrowsError(try tampered.verify()) { XCTAssertEqual($0 as? NostrEvent.Error, .badID) }
            var forged = event
            forged.sig = String(repeating: "0", count: 128)
            XCTAssertThrowsError(try forged.verify()) { XCTAssertEqual($0 as? NostrEvent.Error, .badSignature) }
        }
    }

    func testSlashIsNotEscaped() {
        let event = NostrEvent(pubkey: "00", createdAt: 1, kind: 1, tags: [["a", "b/c"]], content: "x/y")
        XCTAssertEqual(event.canonicalSerialization, "[0,\"00\",1,1,[[\"a\",\"b/c\"]],\"x/y\"]")
    }

    func testAuthenticationEvent() throws {
        let key = try SecretKey.generate()
        let event = NostrEvent.authentication(challenge: "abc", secretKey: key, createdAt: 1_700_000_000)
        XCTAssertEqual(event.kind, 22242)
        XCTAssertEqual(event.tags, [["challenge", "abc"]])
        XCTAssertEqual(event.content, "abc")
        XCTAssertEqual(event.pubkey, key.publicKey.hex)
        XCTAssertNoThrow(try event.verify())
        let named = NostrEvent.authentication(challenge: "abc", secretKey: key, createdAt: 1_700_000_000, relay: "https://limbo.health")
        XCTAssertEqual(named.tags, [["relay", "https://limbo.health"], ["challenge", "abc"]])
        XCTAssertNoThrow(try named.verify())
    }
}

final class SidecarTests: XCTestCase {
    let key = try! NIP44.ConversationKey(selfOf: try SecretKey.generate())

    func testDEKRoundTripAndLayout() throws {
        for size in [0, 1, 3, 4096, 1_000_003] {
            let content = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            let sidecar = try Sidecar.encrypt(content, key: key)
            XCTAssertEqual(sidecar[0], 0x02)
            let wrappedLength = Int(sidecar[1]) << 8 | Int(sidecar[2])
            // The wrapped DEK is a NIP-44 payload whose plaintext is 64 lowercase hex characters.
            let dekHex = try NIP44.decrypt(payload: Array(sidecar[3..<(3 + wrappedLength)]), key: key)
            XCTAssertEqual(dekHex.count, 64)
            XCTAssertTrue(dekHex.copyBytes().allSatisfy { (48...57).contains($0) || (97...102).contains($0) })
            // ChaCha20-Poly1305 over the base64 text: nonce 12 + ct + tag 16.
            XCTAssertEqual(sidecar.count, 3 + wrappedLength + 12 + Base64.encodedLength(size) + 16)
            XCTAssertEqual(try Sidecar.decrypt(sidecar, key: key).copyBytes(), content)
        }
    }

    func testLegacyRoundTrip() throws {
        let content = Array("%PDF-1.4 legacy".utf8)
        let sidecar = Sidecar.encryptLegacy(content, key: key)
        XCTAssertEqual(Sidecar.format(of: sidecar), .legacy)
        XCTAssertEqual(Base64.decode(sidecar)?.first, 0xFF)
        XCTAssertEqual(try Sidecar.decrypt(sidecar, key: key).copyBytes(), content)
    }

    func testWrongKeyTruncatedTampered() throws {
        let content = [UInt8](repeating: 0xAB, count: 5000)
        let other = try NIP44.ConversationKey(selfOf: try SecretKey.generate())
        let sidecar = try Sidecar.encrypt(content, key: key)
        XCTAssertThrowsError(try Sidecar.decrypt(sidecar, key: other)) {
            XCTAssertEqual($0 as? Sidecar.Error, .wrappedKey(.invalidMAC))
        }
        XCTAssertThrowsError(try Sidecar.decrypt(Array(sidecar.prefix(100)), key: key)) {
            guard case .truncated = $0 as? Sidecar.Error else { return XCTFail("\($0)") }
        }
        var tampered = sidecar
        tampered[tampered.count - 40] ^= 1
        XCTAssertThrowsError(try Sidecar.decrypt(tampered, key: key)) {
            XCTAssertEqual($0 as? Sidecar.Error, .authenticationFailed)
        }
        XCTAssertThrowsError(try Sidecar.decrypt([], key: key)) { XCTAssertEqual($0 as? Sidecar.Error, .empty) }

        let legacy = Sidecar.encryptLegacy(content, key: key)
        XCTAssertThrowsError(try Sidecar.decrypt(legacy, key: other)) { XCTAssertEqual($0 as? Sidecar.Error, .legacyMAC) }
        XCTAssertThrowsError(try Sidecar.decrypt(Array(legacy.prefix(40)), key: key))
        XCTAssertThrowsError(try Sidecar.decrypt(Array("not base64 at all!".utf8), key: key)) {
            XCTAssertEqual($0 as? Sidecar.Error, .legacyNotBase64)
        }
    }

    func testInlineBase64() {
        XCTAssertEqual(try Sidecar.decodeInline("aGVsbG8=")?.copyBytes(), Array("hello".utf8))
        XCTAssertNil(try Sidecar.decodeInline("not*base64"))
        XCTAssertEqual(Sidecar.inlineSize("aGVs bG8=\n"), 5)
        XCTAssertNil(Sidecar.inlineSize("aGVsbG8"))
    }
}

final class SecureBytesTests: XCTestCase {
    func testSliceAndEquality() throws {
        let a = try SecureBytes(copying: [1, 2, 3, 4])
        XCTAssertEqual(try a.copying(1..<3).copyBytes(), [2, 3])
        XCTAssertTrue(a.constantTimeEquals(try SecureBytes(copying: [1, 2, 3, 4])))
        XCTAssertFalse(a.constantTimeEquals(try SecureBytes(copying: [1, 2, 3, 5])))
        XCTAssertFalse(a.constantTimeEquals(try SecureBytes(copying: [1, 2, 3])))
        XCTAssertEqual(try SecureBytes(zeroed: 0).count, 0)
        XCTAssertEqual(try SecureBytes(copying: [0xAB, 0x01]).hexSecret().copyBytes(), Array("ab01".utf8))
    }
}

final class SidecarSizeTests: XCTestCase {
    func testSizeWithoutFullDecryption() throws {
        let key = try NIP44.ConversationKey(selfOf: try SecretKey.generate())
        for size in [0, 1, 2, 3, 4, 47, 48, 49, 50, 95, 96, 97, 1000, 65_537, 3_000_001] {
            let content = [UInt8](repeating: 0x5A, count: size)
            XCTAssertEqual(Sidecar.plaintextSize(try Sidecar.encrypt(content, key: key), key: key), size, "DEK \(size)")
            XCTAssertEqual(Sidecar.plaintextSize(Sidecar.encryptLegacy(content, key: key), key: key), size, "legacy \(size)")
        }
        XCTAssertNil(Sidecar.plaintextSize([0x02, 0x00], key: key))
        let other = try NIP44.ConversationKey(selfOf: try SecretKey.generate())
        XCTAssertNil(Sidecar.plaintextSize(try Sidecar.encrypt([1, 2, 3], key: key), key: other))
    }
}
