import Yams

/// The tag YAML 1.1 gives a plain (unquoted, untagged) scalar: the rules of Yams' default
/// resolver (`Resolver.default`: bool, int, float, merge, null, timestamp, value, in that
/// order; else str), matched byte by byte instead of by its ICU regular expressions.
///
/// Rendering asks this of every string it writes (a string that would read back as something
/// else is quoted). Through Yams' resolver each question compiled or ran ICU expressions, and
/// the first one loaded ICU's regular-expression engine into the mount daemon: 2 MiB of code
/// pages kept resident for as long as it serves reads. `PlainScalarResolutionTests` holds
/// every rule to Yams' own answer, on tables of near misses and on random text.
///
/// Each rule is an ICU expression `^(?:…)$` matched without options, so:
/// - `^` is the start of the text only;
/// - `$` is its end, or just before a line terminator that ends it (`\n`, `\r`, `\r\n`,
///   U+000B, U+000C, U+0085, U+2028, U+2029): `"true\n"` is a bool, and a lone line
///   break is null (the null rule's empty alternative);
/// - every rule's characters are ASCII, so any other character fails every rule.
enum PlainScalarTag {
    static func of(_ text: String) -> Tag.Name {
        var text = text
        return text.withUTF8 { bytes in
            if let tag = tag(ofCore: bytes[...]) { return tag }
            // `$` before a final line terminator: the rules against the text without it.
            for length in finalTerminatorLengths(bytes) {
                if let tag = tag(ofCore: bytes[..<(bytes.count - length)]) { return tag }
            }
            return .str
        }
    }

    /// The UTF-8 lengths of the line terminators `bytes` ends with: "\r\n" (2) and its "\n"
    /// (1), or one terminator alone.
    private static func finalTerminatorLengths(_ bytes: UnsafeBufferPointer<UInt8>) -> [Int] {
        guard let last = bytes.last else { return [] }
        switch last {
        case 0x0A:
            return bytes.count >= 2 && bytes[bytes.count - 2] == 0x0D ? [2, 1] : [1]
        case 0x0B, 0x0C, 0x0D:
            return [1]
        case 0x85:
            return bytes.count >= 2 && bytes[bytes.count - 2] == 0xC2 ? [2] : [] // U+0085
        case 0xA8, 0xA9:
            // U+2028, U+2029
            return bytes.count >= 3 && bytes[bytes.count - 3] == 0xE2 && bytes[bytes.count - 2] == 0x80 ? [3] : []
        default:
            return []
        }
    }

    /// The first rule the whole of `core` matches, nil for none (str).
    private static func tag(ofCore core: Slice<UnsafeBufferPointer<UInt8>>) -> Tag.Name? {
        // Most text (keys, words, names) starts with a byte no rule starts with.
        if let first = core.first, !firstBytes.contains(first) { return nil }
        let s = Array(core)
        if isBool(s) { return .bool }
        if isInt(s) { return .int }
        if isFloat(s) { return .float }
        if s == [0x3C, 0x3C] { return .merge }  // <<
        if isNull(s) { return .null }
        if isTimestamp(s) { return .timestamp }
        if s == [0x3D] { return .value }  // =
        return nil
    }

    // MARK: The rules

    /// The bytes a text any rule matches can start with (the empty text aside).
    private static let firstBytes = Set("yYnNtTfFoO0123456789+-.<~=".utf8)

    private static let boolWords: Set<[UInt8]> = Set(["yes", "Yes", "YES", "no", "No", "NO", "true", "True", "TRUE",
                                                       "false", "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF"].map { Array($0.utf8) })
    private static let nullWords: Set<[UInt8]> = Set(["~", "null", "Null", "NULL", ""].map { Array($0.utf8) })

    /// `yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF`
    static func isBool(_ s: [UInt8]) -> Bool { s.count <= 5 && boolWords.contains(s) }

    /// `~|null|Null|NULL|` (empty)
    static func isNull(_ s: [UInt8]) -> Bool { s.count <= 4 && nullWords.contains(s) }

    /// `[-+]?0b[0-1_]+ | [-+]?0o?[0-7_]+ | [-+]?(?:0|[1-9][0-9_]*) | [-+]?0x[0-9a-fA-F_]+
    ///  | [-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+`
    static func isInt(_ s: [UInt8]) -> Bool {
        var i = 0
        if i < s.count, s[i] == plus || s[i] == minus { i += 1 }
        guard i < s.count else { return false }
        let rest = s[i...]
        if rest.first == zero {
            let after = rest.dropFirst()
            if after.isEmpty { return true }  // 0
            if after.first == UInt8(ascii: "b") { return after.count > 1 && after.dropFirst().allSatisfy { $0 == zero || $0 == one || $0 == underscore } }
            if after.first == UInt8(ascii: "x") { return after.count > 1 && after.dropFirst().allSatisfy { isHex($0) || $0 == underscore } }
            let octal = after.first == UInt8(ascii: "o") ? after.dropFirst() : after
            return !octal.isEmpty && octal.allSatisfy { ($0 >= zero && $0 <= UInt8(ascii: "7")) || $0 == underscore }
        }
        guard let first = rest.first, first >= one, first <= nine else { return false }
        // [1-9][0-9_]* alone, or followed by one or more `:[0-5]?[0-9]` (sexagesimal).
        guard let firstColon = rest.firstIndex(of: colon) else { return rest.dropFirst().allSatisfy { isDigit($0) || $0 == underscore } }
        return rest[rest.startIndex + 1..<firstColon].allSatisfy { isDigit($0) || $0 == underscore } && isSexagesimalTail(rest[firstColon...])
    }

    /// `[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)? | \.[0-9_]+(?:[eE][-+][0-9]+)?
    ///  | [-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]* | [-+]?\.(?:inf|Inf|INF) | \.(?:nan|NaN|NAN)`
    static func isFloat(_ s: [UInt8]) -> Bool {
        if [".nan", ".NaN", ".NAN"].contains(where: { s.elementsEqual($0.utf8) }) { return true }
        if s.first == dot {
            // \.[0-9_]+(?:[eE][-+][0-9]+)?
            var i = 1
            while i < s.count, isDigit(s[i]) || s[i] == underscore { i += 1 }
            guard i > 1 else { return isInfinity(s[...]) }
            if i == s.count { return true }
            guard s[i] | 0x20 == UInt8(ascii: "e"), i + 1 < s.count, s[i + 1] == plus || s[i + 1] == minus else { return false }
            return i + 2 < s.count && s[(i + 2)...].allSatisfy(isDigit)
        }
        var i = 0
        if i < s.count, s[i] == plus || s[i] == minus { i += 1 }
        guard i < s.count else { return false }
        if s[i] == dot { return isInfinity(s[i...]) }
        guard isDigit(s[i]) else { return false }
        i += 1
        while i < s.count, isDigit(s[i]) || s[i] == underscore { i += 1 }
        if i == s.count { return true }
        if s[i] == colon {
            // [0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
            guard let dotAt = s[i...].firstIndex(of: dot), isSexagesimalTail(s[i..<dotAt]) else { return false }
            return s[(dotAt + 1)...].allSatisfy { isDigit($0) || $0 == underscore }
        }
        if s[i] == dot {
            i += 1
            while i < s.count, isDigit(s[i]) || s[i] == underscore { i += 1 }
            if i == s.count { return true }
        }
        // [eE][-+]?[0-9]+
        guard s[i] | 0x20 == UInt8(ascii: "e") else { return false }
        i += 1
        if i < s.count, s[i] == plus || s[i] == minus { i += 1 }
        return i < s.count && s[i...].allSatisfy(isDigit)
    }

    /// `[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]
    ///  | [0-9]{4}-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?
    ///    (?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?`
    static func isTimestamp(_ s: [UInt8]) -> Bool {
        var i = 0
        func digits(_ least: Int, _ most: Int) -> Bool {
            let start = i
            while i < s.count, i - start < most, isDigit(s[i]) { i += 1 }
            // A run longer than `most` cannot be split: the byte after it must not be a digit.
            return i - start >= least && !(i < s.count && isDigit(s[i]))
        }
        func byte(_ b: UInt8) -> Bool {
            guard i < s.count, s[i] == b else { return false }
            i += 1
            return true
        }
        guard digits(4, 4), byte(minus) else { return false }
        let monthStart = i
        guard digits(1, 2), byte(minus) else { return false }
        let dayStart = i
        guard digits(1, 2) else { return false }
        // The date alone must be written in full (`YYYY-MM-DD`).
        if i == s.count { return dayStart - monthStart == 3 && i - dayStart == 2 }
        if s[i] == UInt8(ascii: "T") || s[i] == UInt8(ascii: "t") {
            i += 1
        } else {
            let spaces = i
            while i < s.count, s[i] == space || s[i] == tab { i += 1 }
            guard i > spaces else { return false }
        }
        guard digits(1, 2), byte(colon), digits(2, 2), byte(colon), digits(2, 2) else { return false }
        if byte(dot) { while i < s.count, isDigit(s[i]) { i += 1 } }
        if i == s.count { return true }
        while i < s.count, s[i] == space || s[i] == tab { i += 1 }
        if byte(UInt8(ascii: "Z")) { return i == s.count }
        guard byte(plus) || byte(minus), digits(1, 2) else { return false }
        if i == s.count { return true }
        return byte(colon) && digits(2, 2) && i == s.count
    }

    /// `[-+]?` already read; `\.(?:inf|Inf|INF)`.
    private static func isInfinity(_ s: ArraySlice<UInt8>) -> Bool {
        [".inf", ".Inf", ".INF"].contains { s.elementsEqual($0.utf8) }
    }

    /// `(?::[0-5]?[0-9])+`, the whole of `s`: each part after a colon is one digit, or two
    /// whose first is 0 to 5.
    private static func isSexagesimalTail(_ s: ArraySlice<UInt8>) -> Bool {
        guard s.first == colon else { return false }
        for part in s.dropFirst().split(separator: colon, omittingEmptySubsequences: false) {
            switch part.count {
            case 1: guard isDigit(part.first!) else { return false }
            case 2: guard part.first! >= zero, part.first! <= UInt8(ascii: "5"), isDigit(part.last!) else { return false }
            default: return false
            }
        }
        return true
    }

    private static func isDigit(_ b: UInt8) -> Bool { b >= zero && b <= nine }
    private static func isHex(_ b: UInt8) -> Bool { isDigit(b) || (b | 0x20 >= UInt8(ascii: "a") && b | 0x20 <= UInt8(ascii: "f")) }

    private static let zero = UInt8(ascii: "0"), one = UInt8(ascii: "1"), nine = UInt8(ascii: "9")
    private static let plus = UInt8(ascii: "+"), minus = UInt8(ascii: "-"), dot = UInt8(ascii: ".")
    private static let colon = UInt8(ascii: ":"), underscore = UInt8(ascii: "_")
    private static let space = UInt8(ascii: " "), tab = UInt8(ascii: "\t")
}
