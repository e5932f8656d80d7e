import XCTest
@testable import BinderGit

final class ObjectIDTests: XCTestCase {
    func testHexRoundTrip() throws {
        let hex = "937b19eca5042f1867c9113c2c4a32b4a7d4341d"
        let id = try oid(hex)
        XCTAssertEqual(id.description, hex)
        XCTAssertEqual(id.hex, hex)
        XCTAssertEqual(id.bytes.count, 20)
        XCTAssertEqual(id.bytes.first, 0x93)
        XCTAssertEqual(id.bytes.last, 0x1d)
        XCTAssertEqual(ObjectID(bytes: id.bytes), id)
        XCTAssertEqual(ObjectID(hex: hex.uppercased()), id)
        XCTAssertEqual(Set([id, try oid(hex)]).count, 1)
    }

    func testInvalidHex() {
        XCTAssertNil(ObjectID(hex: ""))
        XCTAssertNil(ObjectID(hex: "937b19eca5042f1867c9113c2c4a32b4a7d4341"))    // 39
        XCTAssertNil(ObjectID(hex: "937b19eca5042f1867c9113c2c4a32b4a7d4341dd"))  // 41
        XCTAssertNil(ObjectID(hex: "937b19eca5042f1867c9113c2c4a32b4a7d4341g"))
        XCTAssertNil(ObjectID(bytes: [UInt8](repeating: 0, count: 19)))
    }

    /// The raw-memory initialiser (the listing index's decoder) gives what the generic one does.
    func testFromRawBytesInMemory() throws {
        let id = try oid("937b19eca5042f1867c9113c2c4a32b4a7d4341d")
        let framed: [UInt8] = [0xAA] + id.bytes + [0xBB]
        framed.withUnsafeBytes { raw in
            XCTAssertEqual(ObjectID(bytes: UnsafeRawBufferPointer(rebasing: raw[1..<21])), id)
            XCTAssertNil(ObjectID(bytes: UnsafeRawBufferPointer(rebasing: raw[1..<20])))
            XCTAssertNil(ObjectID(bytes: UnsafeRawBufferPointer(rebasing: raw[0..<22])))
        }
    }

    func testOrderMatchesHexOrder() throws {
        let hexes = ["00000000000000000000000000000000000000ff", "0000000000000000000000000000000000000100",
                     "ff00000000000000000000000000000000000000", "0f00000000000000000000000000000000000001"]
        let ids = try hexes.map { try oid($0) }
        XCTAssertEqual(ids.sorted().map(\.hex), hexes.sorted())
    }
}
