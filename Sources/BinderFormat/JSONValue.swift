/// A JSON value that keeps everything needed to write its source back byte for byte.
///
/// Binder documents are compact JSON written by JavaScript (`JSON.stringify`). A
/// read-modify-write through the mount must leave every part the user did not touch
/// exactly as it was, so this type differs from Foundation's JSON objects and `Codable` on purpose:
/// - objects keep their key order (`JSONObject`);
/// - numbers keep their literal text (`"3"`, `"1.50"`, `"1e3"`): converting to `Double`
///   and back would rewrite `1.50` as `1.5` and lose precision on large integers;
/// - strings compare by their exact UTF-8 bytes, not by Swift's Unicode canonical
///   equivalence: a precomposed "é" and "e\u{301}" are different data.
public enum JSONValue: Sendable {
    case null
    case bool(Bool)
    /// A number as its literal text. It must be a valid JSON number
    /// (`-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`); the serializer writes it verbatim.
    case number(String)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)
}

// MARK: - Equality by bytes

extension JSONValue: Equatable {
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.number(a), .number(b)): return a.hasSameUTF8(as: b)
        case let (.string(a), .string(b)): return a.hasSameUTF8(as: b)
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)): return a == b
        default: return false
        }
    }
}

extension String {
    /// Exact byte equality. `==` on `String` treats canonically equivalent strings
    /// ("é" and "e\u{301}", even "K" and the Kelvin sign) as equal, which would let an
    /// edit silently go unnoticed or two distinct keys collide.
    @inlinable
    func hasSameUTF8(as other: String) -> Bool {
        utf8.count == other.utf8.count && utf8.elementsEqual(other.utf8)
    }
}

// MARK: - Building values

extension JSONValue {
    /// An integer number.
    public init<T: BinaryInteger>(_ value: T) {
        self = .number(String(value))
    }

    /// A number with this literal text, or nil if it is not a valid JSON number.
    public init?(numberLiteral text: String) {
        guard JSONValue.isValidNumberLiteral(text) else { return nil }
        self = .number(text)
    }

    /// A floating-point number written as JavaScript writes it (`Number.prototype.toString`),
    /// so that values the mount creates look like the apps' (`0.5`, `1e-7`, `1e+21`).
    /// NaN and infinities become `null`, as in `JSON.stringify`.
    public init(_ value: Double) {
        guard let text = JavaScriptNumberFormat.string(value) else {
            self = .null
            return
        }
        self = .number(text)
    }
}

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByStringLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral {
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .number(String(value)) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(JSONObject(elements))
    }
}

// MARK: - Reading values

extension JSONValue {
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    public var boolValue: Bool? {
        if case let .bool(value) = self { return value }
        return nil
    }

    public var stringValue: String? {
        if case let .string(value) = self { return value }
        return nil
    }

    /// The literal text of a number.
    public var numberText: String? {
        if case let .number(text) = self { return text }
        return nil
    }

    /// The number as an `Int` when it is an integer that fits (`3`, `3.0`, `3e2`).
    public var intValue: Int? {
        guard case let .number(text) = self else { return nil }
        if let exact = Int(text) { return exact }
        guard let double = Double(text), double.rounded() == double,
              double >= -9.007_199_254_740_992e15, double <= 9.007_199_254_740_992e15 else { return nil }
        return Int(double)
    }

    public var doubleValue: Double? {
        guard case let .number(text) = self else { return nil }
        return Double(text)
    }

    public var arrayValue: [JSONValue]? {
        if case let .array(value) = self { return value }
        return nil
    }

    public var objectValue: JSONObject? {
        if case let .object(value) = self { return value }
        return nil
    }
}
