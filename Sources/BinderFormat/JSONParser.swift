/// Why a byte sequence is not JSON. `offset` is the byte position of the problem.
/// The message never quotes the input, so it is safe to log (documents hold health data).
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public let offset: Int
    public let message: String

    public init(offset: Int, message: String) {
        self.offset = offset
        self.message = message
    }

    public var description: String { "invalid JSON at byte \(offset): \(message)" }
}

extension JSONValue {
    /// Nesting deeper than this is rejected rather than risking the stack of a FUSE
    /// worker thread; real documents nest a few levels.
    public static let maximumNestingDepth = 512

    /// Parses strict RFC 8259 JSON (any value at the top level, surrounding whitespace
    /// allowed, nothing else after it). Strings must be valid UTF-8.
    ///
    /// Deliberate choices:
    /// - A repeated object key keeps its first position and its last value, like
    ///   JavaScript's `JSON.parse`.
    /// - A `\uXXXX` escape of a lone surrogate (not part of a valid pair) becomes U+FFFD:
    ///   Swift strings cannot hold lone surrogates. JavaScript would keep it, so such a
    ///   (never app-written) document does not round-trip byte for byte.
    public static func parse(_ data: [UInt8]) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(bytes: data)
        return try parser.parseDocument()
    }

    /// Whether `text` is exactly one JSON number literal (RFC 8259 grammar).
    static func isValidNumberLiteral(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard let first = bytes.first, first == UInt8(ascii: "-") || (0x30...0x39).contains(first) else { return false }
        var parser = JSONParser(bytes: bytes)
        do {
            _ = try parser.parseNumber()
        } catch {
            return false
        }
        return parser.position == bytes.count
    }

    /// Parses the UTF-8 text of a string.
    public static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8))
    }
}

private struct JSONParser {
    let bytes: [UInt8]
    var position = 0
    var depth = 0

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        guard position == bytes.count else { throw error("unexpected data after the JSON value") }
        return value
    }

    // MARK: Values

    mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard position < bytes.count else { throw error("unexpected end of input, expected a value") }
        switch bytes[position] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw error("unexpected character, expected a value")
        }
    }

    mutating func parseObject() throws(JSONParseError) -> JSONValue {
        try enterContainer()
        position += 1 // {
        var pairs: [(String, JSONValue)] = []
        skipWhitespace()
        if peek(UInt8(ascii: "}")) {
            position += 1
            depth -= 1
            return .object(JSONObject())
        }
        while true {
            skipWhitespace()
            guard peek(UInt8(ascii: "\"")) else { throw error("expected a string key") }
            let key = try parseString()
            skipWhitespace()
            guard peek(UInt8(ascii: ":")) else { throw error("expected ':' after an object key") }
            position += 1
            skipWhitespace()
            pairs.append((key, try parseValue()))
            skipWhitespace()
            if peek(UInt8(ascii: ",")) {
                position += 1
            } else if peek(UInt8(ascii: "}")) {
                position += 1
                break
            } else {
                throw error("expected ',' or '}' in an object")
            }
        }
        depth -= 1
        return .object(JSONObject(pairs))
    }

    mutating func parseArray() throws(JSONParseError) -> JSONValue {
        try enterContainer()
        position += 1 // [
        var elements: [JSONValue] = []
        skipWhitespace()
        if peek(UInt8(ascii: "]")) {
            position += 1
            depth -= 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue())
            skipWhitespace()
            if peek(UInt8(ascii: ",")) {
                position += 1
            } else if peek(UInt8(ascii: "]")) {
                position += 1
                break
            } else {
                throw error("expected ',' or ']' in an array")
            }
        }
        depth -= 1
        return .array(elements)
    }

    mutating func enterContainer() throws(JSONParseError) {
        depth += 1
        guard depth <= JSONValue.maximumNestingDepth else {
            throw error("nesting deeper than \(JSONValue.maximumNestingDepth) levels")
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        let matches = literal.withUTF8Buffer { expected in
            position + count <= bytes.count && bytes[position..<position + count].elementsEqual(expected)
        }
        guard matches else { throw error("invalid literal") }
        position += count
    }

    // MARK: Numbers

    /// Validates the RFC 8259 number grammar and returns the literal text unchanged.
    mutating func parseNumber() throws(JSONParseError) -> String {
        let start = position
        if peek(UInt8(ascii: "-")) { position += 1 }
        if peek(UInt8(ascii: "0")) {
            position += 1
        } else if digitCount() == 0 {
            throw error("invalid number: expected a digit")
        }
        if peek(UInt8(ascii: ".")) {
            position += 1
            guard digitCount() > 0 else { throw error("invalid number: expected a digit after '.'") }
        }
        if peek(UInt8(ascii: "e")) || peek(UInt8(ascii: "E")) {
            position += 1
            if peek(UInt8(ascii: "+")) || peek(UInt8(ascii: "-")) { position += 1 }
            guard digitCount() > 0 else { throw error("invalid number: expected a digit in the exponent") }
        }
        return String(decoding: bytes[start..<position], as: UTF8.self)
    }

    mutating func digitCount() -> Int {
        let start = position
        while position < bytes.count, bytes[position] >= UInt8(ascii: "0"), bytes[position] <= UInt8(ascii: "9") {
            position += 1
        }
        return position - start
    }

    // MARK: Strings

    mutating func parseString() throws(JSONParseError) -> String {
        position += 1 // opening quote
        var output: [UInt8] = []
        var runStart = position
        while true {
            guard position < bytes.count else { throw error("unterminated string") }
            let byte = bytes[position]
            switch byte {
            case UInt8(ascii: "\""):
                output.append(contentsOf: bytes[runStart..<position])
                position += 1
                return String(decoding: output, as: UTF8.self)
            case UInt8(ascii: "\\"):
                output.append(contentsOf: bytes[runStart..<position])
                try parseEscape(into: &output)
                runStart = position
            case 0..<0x20:
                throw error("unescaped control character in a string")
            case 0x20..<0x80:
                position += 1
            default:
                try skipUTF8Sequence()
            }
        }
    }

    mutating func parseEscape(into output: inout [UInt8]) throws(JSONParseError) {
        position += 1 // backslash
        guard position < bytes.count else { throw error("unterminated escape") }
        let escaped = bytes[position]
        position += 1
        switch escaped {
        case UInt8(ascii: "\""): output.append(0x22)
        case UInt8(ascii: "\\"): output.append(0x5C)
        case UInt8(ascii: "/"): output.append(0x2F)
        case UInt8(ascii: "b"): output.append(0x08)
        case UInt8(ascii: "f"): output.append(0x0C)
        case UInt8(ascii: "n"): output.append(0x0A)
        case UInt8(ascii: "r"): output.append(0x0D)
        case UInt8(ascii: "t"): output.append(0x09)
        case UInt8(ascii: "u"):
            let scalar = try parseUnicodeEscape()
            UTF8.encode(scalar) { output.append($0) }
        default:
            position -= 1
            throw error("invalid escape sequence")
        }
    }

    /// Reads the four hex digits after `\u`, combining a surrogate pair when a low
    /// surrogate escape follows a high one.
    mutating func parseUnicodeEscape() throws(JSONParseError) -> Unicode.Scalar {
        let first = try parseHex4()
        if (0xD800..<0xDC00).contains(first) {
            let save = position
            if position + 1 < bytes.count, bytes[position] == UInt8(ascii: "\\"), bytes[position + 1] == UInt8(ascii: "u") {
                position += 2
                let second = try parseHex4()
                if (0xDC00..<0xE000).contains(second) {
                    let combined = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
                    return Unicode.Scalar(combined) ?? Self.replacement
                }
            }
            // Lone high surrogate: replace it and re-read what followed as its own escape.
            position = save
            return Self.replacement
        }
        return Unicode.Scalar(first) ?? Self.replacement // lone low surrogate
    }

    static let replacement: Unicode.Scalar = "\u{FFFD}"

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard position + 4 <= bytes.count else { throw error("incomplete \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw error("invalid hex digit in a \\u escape")
            }
            value = value << 4 | UInt32(digit)
            position += 1
        }
        return value
    }

    mutating func skipUTF8Sequence() throws(JSONParseError) {
        guard let length = UTF8Validation.sequenceLength(in: bytes, at: position) else {
            throw error("invalid UTF-8")
        }
        position += length
    }

    // MARK: Helpers

    func peek(_ byte: UInt8) -> Bool {
        position < bytes.count && bytes[position] == byte
    }

    mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    func error(_ message: String) -> JSONParseError {
        JSONParseError(offset: position, message: message)
    }
}
