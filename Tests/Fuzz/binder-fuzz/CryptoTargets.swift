@_spi(Fuzzing) import BinderCrypto

/// Targets for the encrypted formats. Fuzz inputs cannot forge a MAC, so besides raw payloads
/// each target also seals fuzz bytes with a valid MAC (`@_spi(Fuzzing)` entry points) to reach
/// the parsing after authentication, and checks encrypt/decrypt round trips.
enum CryptoTargets {
    /// The conversation keys of the NIP-44 test vectors: seeds made from the vectors' payloads
    /// pass the MAC with the key their second byte selects.
    static let keys: [NIP44.ConversationKey] = [
        "c41c775356fd92eadc63ff5a0dc1da211b268cbea22316767095b2871ea1412d",
        "3e2b52a63be47d34fe0a80e34e73d436d6963bc8f39827f327057a9986c20a45",
        "d5a2f879123145a4b291d767428870f5a8d9e5007193321795b40183d4ab8c2b",
        "3b15c977e20bfe4b8482991274635edd94f366595b1a3d2993515705ca3cedb8",
        "4f1538411098cf11c8af216836444787c462d47f97287f46cf7edb2c4915b8a5",
        "75fe686d21a035f0c7cd70da64ba307936e5ca0b20710496a6b6b5f573377bdd",
    ].map { hex in
        guard let raw = Hex.decode(hex), let key = try? NIP44.ConversationKey(raw: try SecureBytes(copying: raw)) else {
            fatalError("bad built-in key") // constant data, not input
        }
        return key
    }

    static let fixedNonce = [UInt8](repeating: 0x5A, count: 32)

    static func key(_ selector: UInt8?) -> NIP44.ConversationKey { keys[Int(selector ?? 0) % keys.count] }

    /// Input: mode byte, key byte, then the data. Modes: 0 a payload to decrypt; 1 padded
    /// plaintext sealed with a valid MAC, then decrypted; 2 plaintext through encrypt/decrypt.
    static func nip44(_ bytes: [UInt8]) {
        let (mode, rest) = split(bytes)
        let key = key(rest.first)
        let data = Array(rest.dropFirst())
        switch mode % 3 {
        case 0:
            if let plaintext = try? NIP44.decrypt(payload: data, key: key) {
                check((1...65_535).contains(plaintext.count), "NIP-44 plaintext of \(plaintext.count) bytes")
            }
        case 1:
            let payload = data.withUnsafeBytes { NIP44.seal(padded: $0, key: key, nonce: fixedNonce) }
            let result = Result { () throws(NIP44.Error) in try NIP44.decrypt(payload: payload, key: key) }
            let declared = data.count >= 2 ? Int(data[0]) << 8 | Int(data[1]) : 0
            let valid = (34...65_538).contains(data.count) && declared >= 1
                && data.count == 2 + NIP44.paddedLength(declared)
            switch result {
            case .success(let plaintext):
                check(valid, "NIP-44 accepted padding that does not fit its length")
                check(plaintext.copyBytes() == Array(data[2..<(2 + declared)]), "NIP-44 unpadded the wrong bytes")
            case .failure(let error):
                check(!valid, "NIP-44 refused valid padding: \(error)")
            }
        default:
            guard (1...65_535).contains(data.count) else {
                check((try? NIP44.encrypt(data, key: key)) == nil, "NIP-44 encrypted \(data.count) bytes")
                return
            }
            do {
                let payload = try NIP44.encrypt(data, key: key, nonce: fixedNonce)
                let plaintext = try NIP44.decrypt(payload: payload, key: key).copyBytes()
                check(plaintext == data, "NIP-44 round trip changed the plaintext")
            } catch {
                check(false, "NIP-44 round trip failed: \(error)")
            }
        }
    }

    static let passphrase = try! SecureBytes(copyingUTF8: "nostr")

    /// Input: mode byte, then an `ncryptsec` (mode 0) or 32 secret key bytes (mode 1).
    static func nip49(_ bytes: [UInt8]) {
        let (mode, rest) = split(bytes)
        if mode % 2 == 0 {
            let text = String(decoding: rest, as: UTF8.self)
            guard let fields = try? NIP49.fields(of: text) else { return }
            check(fields.salt.count == 16 && fields.nonce.count == 24 && fields.ciphertext.count == 48, "NIP-49 field sizes")
            // scrypt at the vectors' log_n costs 100 ms; decrypt fully only the cheap ones.
            if fields.logN <= 4 { _ = try? NIP49.decrypt(text, passphrase: passphrase) }
        } else {
            guard rest.count >= 32, let key = try? SecretKey(bytes: try SecureBytes(copying: rest.prefix(32))) else { return }
            do {
                let sealed = try NIP49.encrypt(key, passphrase: passphrase, logN: 1)
                let opened = try NIP49.decrypt(sealed, passphrase: passphrase)
                let same = try opened.key.hexSecret().constantTimeEquals(try key.hexSecret())
                check(same, "NIP-49 round trip changed the key")
            } catch {
                check(false, "NIP-49 round trip failed: \(error)")
            }
        }
    }

    /// Input: mode byte, then bech32 text (0), bytes to encode (1) or hex text (2).
    static func bech32(_ bytes: [UInt8]) {
        let (mode, rest) = split(bytes)
        switch mode % 3 {
        case 0:
            let text = String(decoding: rest, as: UTF8.self)
            _ = try? PublicKey(npub: text)
            _ = try? SecretKey(nsec: text)
            guard let decoded = try? Bech32.decode(text) else { return }
            let again = Bech32.encode(hrp: decoded.hrp, data: decoded.data)
            check(again == String(decoding: text.utf8.map { (65...90).contains($0) ? $0 + 32 : $0 }, as: UTF8.self),
                  "bech32 decode then encode changed the text")
        case 1:
            let hrp = "npub"
            let decoded = try? Bech32.decode(Bech32.encode(hrp: hrp, data: rest))
            check(decoded?.hrp == hrp && decoded?.data == rest, "bech32 round trip changed the data")
        default:
            let text = String(decoding: rest, as: UTF8.self)
            _ = try? PublicKey(hex: text)
            _ = try? SecretKey(hex: text)
            if let raw = Hex.decode(text) { check(Hex.decode(Hex.encode(raw)) == raw, "hex round trip") }
        }
    }

    /// Input: mode byte, key byte, then: 0 a sidecar file; 1/2 the text inside a DEK/legacy
    /// sidecar sealed with a valid tag; 3 an inline attachment's value; 4 attachment bytes
    /// through encrypt/decrypt. Whenever a sidecar decrypts, its size read without decrypting
    /// it (`plaintextSize`) must be nil or exact.
    static func sidecar(_ bytes: [UInt8]) {
        let (mode, rest) = split(bytes)
        let key = key(rest.first)
        let data = Array(rest.dropFirst())
        func checkSize(_ file: [UInt8]) {
            let size = Sidecar.plaintextSize(file, key: key)
            guard let content = try? Sidecar.decrypt(file, key: key) else { return }
            check(size == nil || size == content.count, "sidecar size \(size ?? -1) but \(content.count) bytes decrypted")
        }
        switch mode % 5 {
        case 0:
            checkSize(data)
        case 1:
            guard let file = try? Sidecar.seal(text: try SecureBytes(copying: data), key: key) else {
                check(false, "sidecar sealing failed")
                return
            }
            checkSize(file)
        case 2:
            checkSize(Sidecar.sealLegacy(text: data, key: key, nonce: fixedNonce))
        case 3:
            _ = try? Sidecar.decodeInline(String(decoding: data, as: UTF8.self))
        default:
            do {
                let file = try Sidecar.encrypt(data, key: key)
                let content = try Sidecar.decrypt(file, key: key).copyBytes()
                check(content == data, "sidecar round trip changed the content")
                check(Sidecar.plaintextSize(file, key: key) == data.count, "sidecar size of a fresh sidecar")
                let legacy = Sidecar.encryptLegacy(data, key: key, nonce: fixedNonce)
                let legacyContent = try Sidecar.decrypt(legacy, key: key).copyBytes()
                check(legacyContent == data, "legacy sidecar round trip")
                check(Sidecar.plaintextSize(legacy, key: key) == data.count, "sidecar size of a legacy sidecar")
            } catch {
                check(false, "sidecar round trip failed: \(error)")
            }
        }
    }

    /// Input: an event's JSON, as a client sends it to log in.
    static func nostrEvent(_ bytes: [UInt8]) {
        guard let event = try? NostrEvent(json: bytes) else { return }
        _ = try? event.verify()
        _ = event.isFresh(now: 1_763_767_000, allowedSkew: 600)
        let again = try? NostrEvent(json: Array(event.json.utf8))
        check(again == event, "event JSON round trip changed the event")
    }
}
