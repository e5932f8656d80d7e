import Foundation
import XCTest

/// Loads a JSON file from this target's Fixtures folder (copied from shared/vectors).
func loadFixture(_ name: String) throws -> [String: Any] {
    let url = try XCTUnwrap(Bundle.module.url(forResource: name, withExtension: "json", subdirectory: "Fixtures"),
                            "fixture \(name).json missing")
    let object = try JSONSerialization.jsonObject(with: Data(contentsOf: url))
    return try XCTUnwrap(object as? [String: Any])
}

func hex(_ any: Any?) -> [UInt8] {
    guard let s = any as? String, let bytes = hexDecode(s) else { return [] }
    return bytes
}

func hexDecode(_ s: String) -> [UInt8]? {
    var out = [UInt8]()
    var chars = Array(s.utf8)[...]
    while chars.count >= 2 {
        guard let b = UInt8(String(decoding: chars.prefix(2), as: UTF8.self), radix: 16) else { return nil }
        out.append(b)
        chars = chars.dropFirst(2)
    }
    return chars.isEmpty ? out : nil
}
