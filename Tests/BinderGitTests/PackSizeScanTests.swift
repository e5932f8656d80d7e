import Foundation
import XCTest
@testable import BinderGit

/// The scan of a pushed pack before libgit2 indexes it (binder serve's git engine): real packs
/// pass whatever the read size, an object or a delta's result past the limit is refused, and
/// bytes that are not a whole pack are.
final class PackSizeScanTests: XCTestCase {
    /// A pack git made of two commits of a 12 KB text, the second a one-line change (a delta).
    func twoCommitPack(in tmp: TemporaryDirectory) throws -> [UInt8] {
        let work = tmp.sub("work")
        try git("init", "-q", work)
        for (index, last) in ["line", "changed"].enumerated() {
            try (String(repeating: "line\n", count: 2_400) + last + "\n").write(toFile: work + "/f.txt", atomically: true, encoding: .utf8)
            try git("add", "-A", in: work)
            try git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c\(index)", in: work)
        }
        return [UInt8](try gitData(["pack-objects", "--stdout", "--revs", "-q"], in: work, input: Data("HEAD\n".utf8)))
    }

    func testRealPacksPassAtAnyReadSizeAndLargeObjectsDoNot() throws {
        let tmp = try TemporaryDirectory()
        let pack = try twoCommitPack(in: tmp)
        for chunk in [1, 2, 3, 7, 64, 4096, 1 << 20] {
            XCTAssertNoThrow(try PackSizeScan.check(pack, chunk: chunk, limit: 1 << 20), "read \(chunk) at a time")
        }
        // The text is 12,008 bytes: refused below that, whether whole or as a delta's result.
        XCTAssertThrowsError(try PackSizeScan.check(pack, chunk: 64, limit: 12_000)) { error in
            XCTAssertEqual(error as? PackScanRefusal, .objectTooLarge(size: 12_008, limit: 12_000))
        }
    }

    func testAPackDeclaringAHugeObjectOrCutShortIsRefused() throws {
        // One blob entry declaring 2^31 bytes (type 3, size in a varint), whose data is empty.
        var huge: [UInt8] = Array("PACK".utf8) + [0, 0, 0, 2, 0, 0, 0, 1, 0xb0, 0x80, 0x80, 0x80, 0x40]
        huge += [0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01]
        XCTAssertThrowsError(try PackSizeScan.check(huge, chunk: 5, limit: 1 << 20)) { error in
            XCTAssertEqual(error as? PackScanRefusal, .objectTooLarge(size: 1 << 31, limit: 1 << 20))
        }
        let tmp = try TemporaryDirectory()
        let pack = try twoCommitPack(in: tmp)
        for bytes in [Array(pack.prefix(pack.count / 2)), Array(pack.prefix(11)), Array("PACK".utf8) + [0, 0, 0, 9, 0, 0, 0, 0], []] {
            XCTAssertThrowsError(try PackSizeScan.check(bytes, chunk: 16, limit: 1 << 20)) { error in
                guard case .corrupt = error as? PackScanRefusal else { return XCTFail("\(error)") }
            }
        }
    }
}
