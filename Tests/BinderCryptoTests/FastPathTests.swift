@_spi(Fuzzing) @testable import BinderCrypto
import XCTest

/// The fast decryption paths: the SIMD base64 decoder against libsodium's, sidecars decrypted
/// chunk by chunk across chunk boundaries, NIP-44 opened straight into secret memory.
final class FastPathTests: XCTestCase {
    let key = try! NIP44.ConversationKey(raw: try SecureBytes(copying: [UInt8](repeating: 9, count: 32)))

    private func fastDecode(_ text: [UInt8]) -> [UInt8]? {
        let lastTwo = text.count >= 2 ? (text[text.count - 2], text[text.count - 1]) : (0, 0)
        guard let size = Base64Decoder.decodedCount(textCount: text.count, lastTwo: lastTwo) else { return nil }
        var out = [UInt8](repeating: 0, count: size)
        let ok = text.withUnsafeBytes { t in out.withUnsafeMutableBytes { Base64Decoder.decode(t, into: $0) } }
        return ok ? out : nil
    }

    /// Round trips of every length up to 300 and some long ones, then single-character
    /// mutations (any byte, anywhere, padding included): accepted and refused exactly as
    /// libsodium's strict decoder does, with the same bytes, except that bytes above 0x7F are
    /// always refused.
    func testBase64DecoderAgreesWithLibsodium() {
        var generator = SplitMix(seed: 44)
        var mutations = 0, refused = 0
        for length in Array(0...300) + [4_095, 4_096, 50_000] {
            let bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            let text = Base64.encode(bytes)
            XCTAssertEqual(fastDecode(text), bytes, "length \(length)")
            guard !text.isEmpty else { continue }
            for _ in 0..<(length > 300 ? 200 : 12) {
                var mutated = text
                let position = Int(generator.next() % UInt64(text.count))
                let choice = generator.next() % 4
                mutated[position] = choice == 0 ? UInt8(ascii: "=")
                    : choice == 1 ? Array("A+/z9\n !".utf8)[Int(generator.next() % 8)]
                    : UInt8(truncatingIfNeeded: generator.next())
                // libsodium 1.0.18 takes some bytes above 0x7F for base64 digits; they are not.
                let expected = mutated[position] < 0x80 ? Base64.decode(mutated) : nil
                XCTAssertEqual(fastDecode(mutated), expected, "length \(length), byte \(mutated[position]) at \(position)")
                mutations += 1
                if expected == nil { refused += 1 }
            }
        }
        XCTAssertGreaterThan(refused, mutations / 4)   // the mutations do reach the refusals
        XCTAssertNil(fastDecode(Array("QR==".utf8)))   // bits left over by the padding must be zero
        XCTAssertEqual(fastDecode(Array("QQ==".utf8)), [0x41])
        XCTAssertNil(fastDecode(Array("QQ=".utf8)))
    }

    /// Sidecars whose text ends just before, on and after a chunk boundary, and large ones
    /// (their own mapping), decrypt to the same bytes and report the same size.
    func testSidecarRoundTripAcrossChunks() throws {
        let perChunk = Sidecar.chunkBytes / 4 * 3
        var generator = SplitMix(seed: 3)
        for size in [0, 1, 2, 3, 4, 5, perChunk - 1, perChunk, perChunk + 1, 2 * perChunk + 2, 1_000_001, 2_500_000] {
            let content = (0..<size).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            let sidecar = try Sidecar.encrypt(content, key: key)
            XCTAssertEqual(try Sidecar.decrypt(sidecar, key: key).copyBytes(), content, "size \(size)")
            XCTAssertEqual(Sidecar.plaintextSize(sidecar, key: key), size)
        }
    }

    /// A flipped bit anywhere after the header fails authentication before anything is decoded;
    /// a bad character deep inside an authenticated text is refused, not skipped.
    func testTamperedAndMalformedSidecars() throws {
        let content = [UInt8](repeating: 0x61, count: 100_000)
        let sidecar = try Sidecar.encrypt(content, key: key)
        for position in [sidecar.count - 1, sidecar.count - 17, sidecar.count - 5_000, sidecar.count / 2] {
            var tampered = sidecar
            tampered[position] ^= 0x01
            XCTAssertThrowsError(try Sidecar.decrypt(tampered, key: key)) {
                XCTAssertEqual($0 as? Sidecar.Error, .authenticationFailed)
            }
        }
        var text = Base64.encode(content)
        for bad: UInt8 in [UInt8(ascii: "!"), 0xC3, UInt8(ascii: "="), 0] {
            text[70_000] = bad
            let sealed = try Sidecar.seal(text: try SecureBytes(copying: text), key: key)
            XCTAssertThrowsError(try Sidecar.decrypt(sealed, key: key)) {
                XCTAssertEqual($0 as? Sidecar.Error, .contentNotBase64)
            }
        }
    }

    /// NIP-44 plaintexts of every length around the first ChaCha20 block (62 bytes of plaintext
    /// fit in it) and the largest, decrypted straight into secret memory.
    func testNIP44RoundTripAroundTheFirstBlock() throws {
        for length in Array(1...200) + [4_096, 65_535] {
            let plaintext = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
            let payload = try NIP44.encrypt(plaintext, key: key)
            XCTAssertEqual(try NIP44.decrypt(payload: payload, key: key).copyBytes(), plaintext, "length \(length)")
        }
    }
}
