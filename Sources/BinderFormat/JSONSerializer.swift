// Compact serialization, byte-compatible with JavaScript's `JSON.stringify(value)`,
// which is how the apps write every document: re-encrypting a document the user did not
// change must produce the same plaintext.

extension JSONValue {
    /// Compact JSON exactly as `JSON.stringify` writes it: no whitespace, `"` `\` and
    /// control characters escaped (`\b \f \n \r \t`, others as lowercase `\u00xx`),
    /// `/` and non-ASCII left as they are. Numbers are written as their literal text.
    public func serialized() -> String {
        String(decoding: serializedBytes(), as: UTF8.self)
    }

    /// `serialized()` as UTF-8 bytes, ready to encrypt.
    public func serializedBytes() -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(256)
        JSONWriter.write(self, into: &output)
        return output
    }
}

extension JSONObject {
    public func serialized() -> String {
        JSONValue.object(self).serialized()
    }
}

enum JSONWriter {
    static func write(_ value: JSONValue, into output: inout [UInt8]) {
        switch value {
        case .null:
            output.append(contentsOf: "null".utf8)
        case let .bool(flag):
            output.append(contentsOf: (flag ? "true" : "false").utf8)
        case let .number(text):
            output.append(contentsOf: text.utf8)
        case let .string(text):
            writeString(text, into: &output)
        case let .array(elements):
            output.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                write(element, into: &output)
            }
            output.append(UInt8(ascii: "]"))
        case let .object(object):
            output.append(UInt8(ascii: "{"))
            for (index, entry) in object.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                writeString(entry.key, into: &output)
                output.append(UInt8(ascii: ":"))
                write(entry.value, into: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    static func writeString(_ text: String, into output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): output.append(contentsOf: [0x5C, UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): output.append(contentsOf: [0x5C, 0x5C])
            case 0x08: output.append(contentsOf: [0x5C, UInt8(ascii: "b")])
            case 0x0C: output.append(contentsOf: [0x5C, UInt8(ascii: "f")])
            case 0x0A: output.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: output.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: output.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0..<0x20:
                output.append(contentsOf: [0x5C, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                           hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0x0F)]])
            default:
                output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }
}

/// ECMAScript `Number::toString` for finite doubles, built on Swift's shortest
/// round-trip digits (both pick the shortest digit string that reads back exactly).
enum JavaScriptNumberFormat {
    static func string(_ value: Double) -> String? {
        guard value.isFinite else { return nil }
        if value == 0 { return "0" } // JavaScript prints -0 as "0" too
        let negative = value < 0
        let (digits, exponent) = decimalDigits(of: abs(value))
        return (negative ? "-" : "") + format(digits: digits, pointPosition: exponent)
    }

    /// Splits Swift's description ("1.5e-07", "100.0", "0.001") into significant digits
    /// `d1…dk` and `n` such that the value is `0.d1…dk × 10^n`.
    private static func decimalDigits(of value: Double) -> (digits: [Character], n: Int) {
        let text = value.description
        let parts = text.split(separator: "e", maxSplits: 1)
        let mantissa = parts[0]
        let exponent = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
        let pieces = mantissa.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        let integerPart = Array(pieces[0])
        let fractionPart = pieces.count > 1 ? Array(pieces[1]) : []
        var digits = integerPart + fractionPart
        var n = integerPart.count + exponent
        while let first = digits.first, first == "0" {
            digits.removeFirst()
            n -= 1
        }
        while let last = digits.last, last == "0" { digits.removeLast() }
        return (digits, n)
    }

    private static func format(digits: [Character], pointPosition n: Int) -> String {
        let k = digits.count
        let all = String(digits)
        if k <= n && n <= 21 {
            return all + String(repeating: "0", count: n - k)
        }
        if 0 < n && n <= 21 {
            return String(digits[0..<n]) + "." + String(digits[n...])
        }
        if -6 < n && n <= 0 {
            return "0." + String(repeating: "0", count: -n) + all
        }
        let e = n - 1
        let exponent = (e >= 0 ? "e+" : "e-") + String(abs(e))
        if k == 1 { return all + exponent }
        return String(digits[0]) + "." + String(digits[1...]) + exponent
    }
}
