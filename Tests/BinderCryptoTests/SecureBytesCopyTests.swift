import BinderCrypto
import XCTest

/// `SecureBytes(copying:)` copies contiguous bytes at once and any other collection element by
/// element: the same bytes either way.
final class SecureBytesCopyTests: XCTestCase {
    func testEveryKindOfSourceIsCopiedWhole() throws {
        let bytes = (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let cases: [(String, () throws -> SecureBytes, [UInt8])] = [
            ("array", { try SecureBytes(copying: bytes) }, bytes),
            ("slice", { try SecureBytes(copying: bytes[5..<1_005]) }, Array(bytes[5..<1_005])),
            ("raw buffer", { try bytes.withUnsafeBytes { try SecureBytes(copying: $0) } }, bytes),
            ("empty", { try SecureBytes(copying: [UInt8]()) }, []),
            ("not contiguous", { try SecureBytes(copying: repeatElement(UInt8(7), count: 300)) }, [UInt8](repeating: 7, count: 300)),
            ("type-erased", { try SecureBytes(copying: AnyCollection(bytes)) }, bytes),
        ]
        for (name, make, expected) in cases {
            let copy = try make()
            XCTAssertEqual(copy.count, expected.count, name)
            XCTAssertEqual(copy.copyBytes(), expected, name)
        }
    }
}
