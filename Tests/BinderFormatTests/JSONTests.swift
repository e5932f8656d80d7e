import Testing
@testable import BinderFormat

@Suite struct JSONParsingTests {
    @Test(arguments: [
        #"{"a":1,"b":[true,false,null],"c":{"d":"e"}}"#,
        #"[]"#, #"{}"#, #""""#, #"0"#, #"-0"#, #"1.50"#, #"1e3"#, #"-1.5E-7"#, #"1E+2"#,
        #"12345678901234567890123"#, #"null"#, #"true"#,
        #"{"z":1,"a":2,"m":3}"#,
        #"["é","e\u0301","陈美玲","🥜","\u2028","/","\u007f"]"#,
    ])
    func compactJSONRoundTrips(text: String) throws {
        // Written with the escapes JSON.stringify uses, so serialising gives the same bytes
        // once \u escapes of printable characters are decoded.
        let value = try JSONValue.parse(text)
        let again = try JSONValue.parse(value.serialized())
        #expect(again == value)
    }

    @Test func serializesLikeJavaScript() throws {
        // JSON.stringify("\"\\/\b\f\n\r\t\u0000\u001f\u007fé🥜\u2028")
        let value = JSONValue.string("\"\\/\u{8}\u{c}\n\r\t\u{0}\u{1f}\u{7f}é🥜\u{2028}")
        #expect(value.serialized() == "\"\\\"\\\\/\\b\\f\\n\\r\\t\\u0000\\u001f\u{7f}é🥜\u{2028}\"")
        let object: JSONValue = ["b": [1, .number("2.50"), nil, true], "a": ["x": "y"], "": []]
        #expect(object.serialized() == #"{"b":[1,2.50,null,true],"a":{"x":"y"},"":[]}"#)
    }

    @Test func decodesEscapes() throws {
        let value = try JSONValue.parse(#""\"\\\/\b\f\n\r\t\u00e9\u00C9\ud83e\udd5c""#)
        #expect(value == .string("\"\\/\u{8}\u{c}\n\r\t\u{e9}\u{c9}🥜"))
    }

    @Test func loneSurrogatesBecomeReplacementCharacters() throws {
        #expect(try JSONValue.parse(#""a\ud800b""#) == .string("a\u{FFFD}b"))
        #expect(try JSONValue.parse(#""\udc00""#) == .string("\u{FFFD}"))
        #expect(try JSONValue.parse(#""\ud800\u0041""#) == .string("\u{FFFD}A"))
        #expect(try JSONValue.parse(#""\ud800\ud800\udc00""#) == .string("\u{FFFD}\u{10000}"))
    }

    @Test func keepsNumberLiteralsExactly() throws {
        for literal in ["3", "1.50", "1e3", "1E3", "-0", "0.0", "1e-7", "123456789012345678901234567890", "2.5e+10"] {
            let value = try JSONValue.parse(literal)
            #expect(value == .number(literal))
            #expect(value.serialized() == literal)
        }
        #expect(JSONValue.number("1.5") != JSONValue.number("1.50"))
    }

    @Test func comparesStringsByBytesNotCanonicalEquivalence() throws {
        let precomposed = JSONValue.string("\u{e9}")
        let decomposed = JSONValue.string("e\u{301}")
        #expect("\u{e9}" == "e\u{301}") // what Swift's String == says
        #expect(precomposed != decomposed)
        #expect(JSONValue.string("\u{212A}") != .string("K")) // Kelvin sign
        let object = try JSONValue.parse(#"{"\u00e9":1,"e\u0301":2}"#)
        #expect(object.objectValue?.count == 2)
        #expect(object.objectValue?["e\u{301}"] == 2)
        #expect(object.objectValue?["\u{e9}"] == 1)
    }

    @Test func duplicateKeysKeepFirstPositionAndLastValueLikeJavaScript() throws {
        let value = try JSONValue.parse(#"{"a":1,"b":2,"a":3}"#)
        #expect(value.serialized() == #"{"a":3,"b":2}"#)
        // Many keys take the hashed path.
        let many = "{" + (0..<100).map { "\"k\($0 % 50)\":\($0)" }.joined(separator: ",") + "}"
        let object = try #require(try JSONValue.parse(many).objectValue)
        #expect(object.count == 50)
        #expect(object["k0"] == 50)
        #expect(object.keys.first == "k0")
    }

    @Test(arguments: [
        ("", 0), (" ", 1), ("{", 1), ("[1,]", 3), ("{\"a\":1,}", 7), ("01", 1), ("1.", 2), (".5", 0),
        ("1e", 2), ("+1", 0), ("-", 1), ("'a'", 0), ("\"a", 2), ("\"\\x\"", 2), ("\"\\u12G4\"", 5),
        ("\"a\u{1}\"", 2), ("tru", 0), ("nul", 0), ("[1 2]", 3), ("{\"a\" 1}", 5), ("{1:2}", 1),
        ("1 2", 2), ("// c\n1", 0), ("NaN", 0), ("[1]x", 3),
    ])
    func rejectsInvalidJSONWithPosition(text: String, offset: Int) {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(text) }
        do {
            _ = try JSONValue.parse(text)
        } catch {
            #expect(error.offset == offset, "\(text.debugDescription): \(error)")
        }
    }

    @Test(arguments: [
        [0x22, 0xFF, 0x22] as [UInt8],          // invalid byte
        [0x22, 0xC0, 0xAF, 0x22],               // overlong "/"
        [0x22, 0xED, 0xA0, 0x80, 0x22],         // encoded surrogate
        [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22],   // above U+10FFFF
        [0x22, 0xE2, 0x82, 0x22],               // truncated
        [0x22, 0xC3],                           // truncated at end
    ])
    func rejectsInvalidUTF8(bytes: [UInt8]) {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(bytes) }
    }

    @Test func acceptsSurroundingWhitespaceAndTopLevelScalars() throws {
        #expect(try JSONValue.parse(" \t\r\n[ 1 , { \"a\" : null } ] \n") == [1, ["a": nil]])
        #expect(try JSONValue.parse("\"x\"") == "x")
    }

    @Test func limitsNesting() throws {
        let deep = String(repeating: "[", count: 600) + String(repeating: "]", count: 600)
        #expect(throws: JSONParseError.self) { try JSONValue.parse(deep) }
        let fine = String(repeating: "[", count: 500) + String(repeating: "]", count: 500)
        #expect(try JSONValue.parse(fine).serialized() == fine)
    }

    @Test func errorDescriptionsDoNotQuoteInput() {
        do {
            _ = try JSONValue.parse("{\"secret diagnosis\": tru}")
            Issue.record("expected an error")
        } catch {
            #expect(!error.description.contains("secret"))
            #expect(error.description.contains("byte 21"))
        }
    }
}

@Suite struct JSONValueTests {
    @Test func objectKeepsOrderOnSetAndAppendsNewKeys() {
        var object: JSONObject = ["type": "visit", "created": "x", "tags": []]
        object["created"] = "y"
        object["updated"] = "z"
        #expect(object.keys == ["type", "created", "tags", "updated"])
        #expect(object["created"] == "y")
        #expect(object.removeValue(forKey: "tags") == [])
        #expect(object.removeValue(forKey: "tags") == nil)
        object["type"] = nil
        #expect(object.keys == ["created", "updated"])
        object.insert("note", forKey: "type", at: 0)
        #expect(object.keys == ["type", "created", "updated"])
        object.insert("moved", forKey: "updated", at: 99)
        #expect(object.keys == ["type", "created", "updated"])
        #expect(object.contains(key: "type"))
        #expect(!object.contains(key: "Type"))
        #expect(object.updateValue("visit", forKey: "type") == "note")
    }

    @Test func objectEqualityDependsOnOrder() {
        let first: JSONObject = ["a": 1, "b": 2]
        let second: JSONObject = ["b": 2, "a": 1]
        #expect(first != second)
        #expect(first == JSONObject([("a", 1), ("b", 2)]))
    }

    @Test func accessors() {
        #expect(JSONValue.number("3").intValue == 3)
        #expect(JSONValue.number("3.0").intValue == 3)
        #expect(JSONValue.number("3e2").intValue == 300)
        #expect(JSONValue.number("3.5").intValue == nil)
        #expect(JSONValue.number("1.5").doubleValue == 1.5)
        #expect(JSONValue.string("3").intValue == nil)
        #expect(JSONValue.bool(true).boolValue == true)
        #expect(JSONValue.null.isNull)
        #expect(JSONValue(42) == .number("42"))
        #expect(JSONValue(-7 as Int64) == .number("-7"))
    }

    @Test(arguments: [
        (0.0, "0"), (-0.0, "0"), (1.0, "1"), (100.0, "100"), (0.1, "0.1"), (-2.5, "-2.5"),
        (1e21, "1e+21"), (1e20, "100000000000000000000"), (1e-7, "1e-7"), (0.000001, "0.000001"),
        (1.5e300, "1.5e+300"), (Double.leastNonzeroMagnitude, "5e-324"), (123456789.125, "123456789.125"),
        (1.7976931348623157e308, "1.7976931348623157e+308"), (0.3, "0.3"), (12345.6789e-10, "0.00000123456789"),
    ])
    func doublesAreWrittenLikeJavaScript(value: Double, expected: String) {
        #expect(JSONValue(value) == .number(expected))
    }

    @Test func numberLiteralsAreValidated() {
        #expect(JSONValue(numberLiteral: "1.50") == .number("1.50"))
        #expect(JSONValue(numberLiteral: "-0e-0") == .number("-0e-0"))
        for invalid in ["", "01", "1.", "+1", "0x1F", "1_000", ".5", "1e", "NaN", " 1", "1 "] {
            #expect(JSONValue(numberLiteral: invalid) == nil, "\(invalid)")
        }
    }

    @Test func nonFiniteDoublesBecomeNull() {
        #expect(JSONValue(Double.nan) == .null)
        #expect(JSONValue(Double.infinity) == .null)
    }
}
