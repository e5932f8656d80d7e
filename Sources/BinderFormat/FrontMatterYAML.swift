import Yams

/// Metadata ⇄ YAML, through Yams' node API (mappings keep their order).
///
/// Writing: every string whose plain form YAML would read as something else (a number,
/// bool, null, date, merge key…) is double-quoted, so `npi: "0123456789"` and
/// `created: "2026-02-09T14:30:00.000Z"` come back as strings; numbers are written as
/// their literal text; multi-line strings as literal blocks (`|`) when libyaml can do so
/// losslessly, otherwise double-quoted; lines are never folded (width unlimited); and
/// non-ASCII text is written as is.
///
/// Reading (also YAML written by hand): quoted scalars are strings; plain scalars are
/// resolved as YAML 1.1 would, then mapped onto JSON conservatively:
/// - int/float → a JSON number only if the text is a valid JSON number, so the literal is
///   kept (`1.50`, `1e3`); otherwise the text as a string (`0123456789`, `0x1F`, `1_000`,
///   `.inf`, `+1`);
/// - `true`/`True`/`TRUE`/`false`/… → bool. YAML 1.1's `yes`/`no`/`on`/`off` stay
///   strings (YAML 1.2 reads them so, and `country: NO` should not become false);
///   they are still quoted when written, for other YAML readers;
/// - `null`, `~`, empty → null;
/// - timestamps and everything else → the text as a string;
/// - mapping keys → their text (`1: a` has the key "1"); a key that is a list or a
///   mapping is rejected;
/// - anchors and aliases are resolved; merge keys (`<<: *base`) are applied (explicit
///   keys win, then earlier merges); expansion is capped at `maximumValues` values.
///
/// Known limit: Yams checks for duplicate keys after decoding them as Swift strings, so
/// two keys of one mapping that differ in bytes but not as Swift strings cannot be read
/// back: canonically equivalent Unicode (precomposed "é" vs "e\u{301}"), or keys equal
/// but for a leading U+FEFF (see `LeadingByteOrderMarks`). Such a file is rejected with
/// a "duplicate key" error, never silently merged.
enum FrontMatterYAML {
    /// Upper bound on values produced from one front matter block. Real metadata has a
    /// few dozen; the cap stops an alias "billion laughs" from exhausting memory.
    static let maximumValues = 100_000

    /// Upper bound on the levels of lists and mappings in front matter, the metadata mapping
    /// itself being level 1. The metadata is saved one level down in its document's JSON,
    /// which is read up to `JSONValue.maximumNestingDepth` levels deep: deeper metadata would
    /// be saved and then unreadable.
    static let maximumDepth = JSONValue.maximumNestingDepth - 1

    // MARK: Writing

    static func render(_ metadata: JSONObject) -> String {
        do {
            let text = try Yams.serialize(node: node(for: .object(metadata)), indent: 2, width: -1,
                                          allowUnicode: true, lineBreak: .ln)
            return unescapingAstralCharacters(text)
        } catch {
            // libyaml's emitter only fails on malformed event streams, which `node(for:)`
            // never builds. Should it happen, compact JSON still shows the metadata and
            // reads back as YAML flow style (unless it holds raw characters libyaml
            // refuses, such as DEL, in which case saving reports an error).
            return metadata.serialized() + "\n"
        }
    }

    /// The node `render` writes for `value` (see `NodeBuilder`).
    static func node(for value: JSONValue) -> Node { NodeBuilder().node(for: value) }

    /// Builds the node tree of one rendering.
    ///
    /// Scalars carry the tag they resolve to (never `.implicit`): Yams' emitter asks every
    /// implicit scalar's tag of its resolver, a handful of ICU regular expressions each, only
    /// to pass it to libyaml with both implicit flags set, which drops it from the output.
    /// The text written is the same either way (FrontMatterTests); the rendering is faster.
    ///
    /// The tags hold Yams' rule-less resolver (`.basic`): no scalar's tag is left to it, and a
    /// list's or a mapping's resolves by its kind alone. Naming `.default` compiled its ICU
    /// regular expressions in the daemon at its first rendering (see `PlainScalarTag`).
    ///
    /// The tags are made once per rendering, not once per node: each `Tag` made with Yams'
    /// defaults builds a `Constructor`, three dictionaries of closures, which took a fifth of
    /// a cold `grep -r`'s rendering. A scalar's tag is never changed once explicit, so one
    /// instance serves every scalar of its kind; an `.implicit` tag is resolved in place by
    /// Yams (its name changes), so each list and mapping gets its own, sharing the constructor.
    struct NodeBuilder {
        private let constructor = Constructor.default
        private let null: Tag, bool: Tag, int: Tag, float: Tag, str: Tag

        init() {
            null = Tag(.null, .basic, constructor)
            bool = Tag(.bool, .basic, constructor)
            int = Tag(.int, .basic, constructor)
            float = Tag(.float, .basic, constructor)
            str = Tag(.str, .basic, constructor)
        }

        func node(for value: JSONValue) -> Node {
            switch value {
            case .null:
                return Node("null", null, .plain)
            case let .bool(flag):
                return Node(flag ? "true" : "false", bool, .plain)
            case let .number(text):
                return Node(text, text.utf8.contains { $0 == UInt8(ascii: ".") || $0 | 0x20 == UInt8(ascii: "e") } ? float : int, .plain)
            case let .string(text):
                return Node(text, str, scalarStyle(for: text, isKey: false))
            case let .array(elements):
                return Node(elements.map(node(for:)), Tag(.implicit, .basic, constructor), sequenceStyle(for: elements))
            case let .object(object):
                let pairs = object.map { entry in
                    (Node(entry.key, str, scalarStyle(for: entry.key, isKey: true)), node(for: entry.value))
                }
                return Node(pairs, Tag(.implicit, .basic, constructor), .block)
            }
        }
    }

    fileprivate static func scalarStyle(for text: String, isKey: Bool) -> Node.Scalar.Style {
        // A backslash forces double quotes so that, in the emitted text, every backslash
        // starts an escape inside a double-quoted scalar (see unescapingAstralCharacters).
        if text.utf8.contains(UInt8(ascii: "\\")) || plainTag(text) != .str {
            return .doubleQuoted
        }
        if text.utf8.contains(UInt8(ascii: "\n")) {
            // libyaml falls back to double quotes when a literal block would not round-trip.
            return isKey ? .doubleQuoted : .literal
        }
        return .any // plain when libyaml allows it, else quoted
    }

    /// The tag YAML gives a plain (unquoted, untagged) scalar with this text, by Yams'
    /// default resolver: the rules writing and reading must agree on (`PlainScalarTag`).
    static func plainTag(_ text: String) -> Tag.Name { PlainScalarTag.of(text) }

    /// The tag of a composed scalar: its explicit tag (quoted and block scalars carry
    /// `!!str`), else the one its plain text resolves to.
    static func tagName(of scalar: Node.Scalar) -> Tag.Name {
        let explicit = scalar.tag.rawValue
        if explicit.isEmpty { return plainTag(scalar.string) }
        if explicit == Tag.Name.nonSpecific.rawValue { return .str }
        return Tag.Name(rawValue: explicit)
    }

    /// Short lists of scalars read best inline (`tags: [annual, bp]`); anything else is
    /// written one item per line.
    fileprivate static func sequenceStyle(for elements: [JSONValue]) -> Node.Sequence.Style {
        var length = 0
        for element in elements {
            switch element {
            case .null, .bool, .number:
                length += 6
            case let .string(text):
                if text.utf8.contains(UInt8(ascii: "\n")) { return .block }
                length += text.utf8.count + 2
            case .array, .object:
                return .block
            }
        }
        return length <= 60 ? .flow : .block
    }

    /// libyaml escapes characters outside the Basic Multilingual Plane (emoji…) as
    /// `\UXXXXXXXX` even with unicode output allowed. Writes them as themselves instead.
    /// Safe because backslashes occur only inside double-quoted scalars (strings with a
    /// backslash are always double-quoted), where each one starts an escape.
    static func unescapingAstralCharacters(_ yaml: String) -> String {
        let bytes = Array(yaml.utf8)
        guard bytes.contains(UInt8(ascii: "\\")) else { return yaml }
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            guard bytes[index] == UInt8(ascii: "\\"), index + 1 < bytes.count else {
                output.append(bytes[index])
                index += 1
                continue
            }
            if bytes[index + 1] == UInt8(ascii: "U"), index + 10 <= bytes.count,
               let code = UInt32(String(decoding: bytes[index + 2..<index + 10], as: UTF8.self), radix: 16),
               code >= 0x10000, let scalar = Unicode.Scalar(code) {
                UTF8.encode(scalar) { output.append($0) }
                index += 10
            } else {
                output.append(contentsOf: bytes[index...index + 1])
                index += 2
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    // MARK: Reading

    /// Parses a YAML block into an object. `lineOffset` is added to YAML line numbers so
    /// errors name lines of the whole file.
    static func parse(_ yaml: String, lineOffset: Int) throws(FrontMatterError) -> JSONObject {
        let root: Node?
        do {
            // UTF-8 named outright: Yams' default encoding reads the whole process environment
            // (for `YAMS_DEFAULT_ENCODING`) on every parse, and prints to stdout when it is set.
            root = try Yams.compose(yaml: yaml, .default, .default, .utf8)
        } catch {
            throw describe(error, in: yaml, lineOffset: lineOffset)
        }
        var reader = NodeReader(source: yaml, lineOffset: lineOffset)
        switch root {
        case nil:
            return JSONObject() // empty block, or comments only
        case let .mapping(mapping)?:
            return try reader.object(mapping)
        case let .scalar(scalar)? where scalar.style == .plain && tagName(of: scalar) == .null:
            return JSONObject() // `~` or `null`
        case let other?:
            throw .invalidYAML(line: other.mark.map { $0.line + lineOffset },
                               problem: "front matter must be a mapping of keys to values")
        }
    }

    /// Yams' own descriptions quote the offending YAML; keep only position and problem.
    private static func describe(_ error: any Error, in yaml: String, lineOffset: Int) -> FrontMatterError {
        guard let yamlError = error as? YamlError else {
            return .invalidYAML(line: nil, problem: "cannot be read as YAML")
        }
        func problem(_ context: YamlError.Context?, _ text: String) -> String {
            guard let context else { return text }
            return "\(text) (\(context.text) from line \(context.mark.line + lineOffset))"
        }
        switch yamlError {
        case let .scanner(context, text, mark, _), let .parser(context, text, mark, _),
             let .composer(context, text, mark, _):
            return .invalidYAML(line: mark.line + lineOffset, problem: problem(context, text))
        case let .reader(text, offset, _, _):
            // `offset` counts Characters; count "\n" scalars, as "\r\n" is one Character.
            let line = offset.map { yaml.prefix($0).unicodeScalars.filter { $0 == "\n" }.count + 1 + lineOffset }
            return .invalidYAML(line: line, problem: text)
        case let .duplicatedKeysInMapping(_, context):
            return .invalidYAML(line: context.mark.line + lineOffset, problem: "duplicate key")
        default:
            return .invalidYAML(line: nil, problem: "cannot be read as YAML")
        }
    }
}

/// Converts composed YAML nodes to JSON values (rules in `FrontMatterYAML`).
private struct NodeReader {
    let lineOffset: Int
    var remaining = FrontMatterYAML.maximumValues
    /// Lists and mappings open around the node being read, below the metadata mapping.
    var depth = 0
    var byteOrderMarks: LeadingByteOrderMarks

    init(source: String, lineOffset: Int) {
        self.lineOffset = lineOffset
        self.byteOrderMarks = LeadingByteOrderMarks(source: source)
    }

    mutating func value(_ node: Node) throws(FrontMatterError) -> JSONValue {
        remaining -= 1
        guard remaining >= 0 else {
            throw failure(node, "more than \(FrontMatterYAML.maximumValues) values (aliases expand too far)")
        }
        switch node {
        case let .scalar(scalar):
            return Self.scalarValue(byteOrderMarks.text(of: scalar), tag: FrontMatterYAML.tagName(of: scalar))
        case let .sequence(sequence):
            try enterContainer(node)
            defer { depth -= 1 }
            var elements: [JSONValue] = []
            elements.reserveCapacity(sequence.count)
            for element in sequence {
                elements.append(try value(element))
            }
            return .array(elements)
        case let .mapping(mapping):
            try enterContainer(node)
            defer { depth -= 1 }
            return .object(try object(mapping))
        case .alias:
            throw failure(node, "unresolved alias")
        }
    }

    /// Counts one more open list or mapping below the metadata mapping (level 1).
    private mutating func enterContainer(_ node: Node) throws(FrontMatterError) {
        depth += 1
        guard depth + 1 <= FrontMatterYAML.maximumDepth else {
            depth -= 1
            throw failure(node, "lists and mappings nested deeper than \(FrontMatterYAML.maximumDepth) levels")
        }
    }

    mutating func object(_ mapping: Node.Mapping) throws(FrontMatterError) -> JSONObject {
        var explicitKeys = Set<UTF8Key>()
        for (keyNode, _) in mapping where !Self.isMergeKey(keyNode) {
            explicitKeys.insert(UTF8Key(try keyText(keyNode)))
        }
        var pairs: [(String, JSONValue)] = []
        var present = Set<UTF8Key>()
        for (keyNode, valueNode) in mapping {
            if Self.isMergeKey(keyNode) {
                for source in try mergeSources(valueNode) {
                    for (key, merged) in source where !explicitKeys.contains(UTF8Key(key)) {
                        if present.insert(UTF8Key(key)).inserted { pairs.append((key, merged)) }
                    }
                }
            } else {
                let key = try keyText(keyNode)
                guard present.insert(UTF8Key(key)).inserted else { throw failure(keyNode, "duplicate key") }
                pairs.append((key, try value(valueNode)))
            }
        }
        return JSONObject(pairs)
    }

    /// The mappings a `<<` key merges: one mapping or a list of them, earlier first.
    private mutating func mergeSources(_ node: Node) throws(FrontMatterError) -> [JSONObject] {
        switch node {
        case let .mapping(mapping):
            return [try object(mapping)]
        case let .sequence(sequence):
            var sources: [JSONObject] = []
            for element in sequence {
                guard case let .mapping(mapping) = element else {
                    throw failure(element, "'<<' must merge a mapping or a list of mappings")
                }
                sources.append(try object(mapping))
            }
            return sources
        default:
            throw failure(node, "'<<' must merge a mapping or a list of mappings")
        }
    }

    private mutating func keyText(_ node: Node) throws(FrontMatterError) -> String {
        guard case let .scalar(scalar) = node else {
            throw failure(node, "a key must be a single value, not a list or a mapping")
        }
        return byteOrderMarks.text(of: scalar)
    }

    private static func isMergeKey(_ node: Node) -> Bool {
        guard case let .scalar(scalar) = node, scalar.style == .plain else { return false }
        return FrontMatterYAML.tagName(of: scalar) == .merge
    }

    private static let trueWords: Set<String> = ["true", "True", "TRUE"]
    private static let falseWords: Set<String> = ["false", "False", "FALSE"]

    private static func scalarValue(_ text: String, tag: Tag.Name) -> JSONValue {
        switch tag {
        case .str:
            return .string(text)
        case .null:
            return .null
        case .bool:
            if trueWords.contains(text) { return .bool(true) }
            if falseWords.contains(text) { return .bool(false) }
            return .string(text)
        case .int, .float:
            return JSONValue.isValidNumberLiteral(text) ? .number(text) : .string(text)
        default:
            return .string(text) // timestamps, binary, custom tags: keep the text
        }
    }

    private func failure(_ node: Node, _ problem: String) -> FrontMatterError {
        .invalidYAML(line: node.mark.map { $0.line + lineOffset }, problem: problem)
    }
}

/// Puts back a U+FEFF that Yams dropped from the start of a scalar.
///
/// Yams decodes each scalar with Foundation's `String(bytes:encoding: .utf8)`, which
/// discards a leading byte order mark, so `"\uFEFFx"` would read back as `"x"`. When a
/// scalar's source starts with U+FEFF (raw, or the escapes `\uFEFF` / `\U0000FEFF` in
/// double quotes), the dropped character is restored. The
/// source position comes from the scalar's mark (line, and column in Unicode scalars,
/// with line breaks counted as libyaml counts them).
private struct LeadingByteOrderMarks {
    private let source: [UInt8]
    private let mayContainMarks: Bool
    private var lineStarts: [Int]?

    private static let mark: [UInt8] = [0xEF, 0xBB, 0xBF]

    init(source text: String) {
        source = Array(text.utf8)
        // Only a raw U+FEFF or an escape spelling FEFF can produce one.
        let lowered = text.lowercased()
        mayContainMarks = text.unicodeScalars.contains("\u{FEFF}") || lowered.contains("\\ufeff")
            || lowered.contains("\\u0000feff")
    }

    mutating func text(of scalar: Node.Scalar) -> String {
        let text = scalar.string
        // Foundation drops exactly one leading mark, so one is missing whenever the
        // source starts with one, even if the decoded text still starts with another.
        guard mayContainMarks,
              let mark = scalar.mark, let start = offset(line: mark.line, column: mark.column),
              sourceStartsWithMark(at: start, style: scalar.style) else { return text }
        return "\u{FEFF}" + text
    }

    private func sourceStartsWithMark(at start: Int, style: Node.Scalar.Style) -> Bool {
        switch style {
        case .plain:
            return has(Self.mark, at: start)
        case .singleQuoted:
            return has([UInt8(ascii: "'")], at: start) && has(Self.mark, at: start + 1)
        case .doubleQuoted:
            guard has([UInt8(ascii: "\"")], at: start) else { return false }
            let body = start + 1
            return has(Self.mark, at: body) || hasEscape("u", "FEFF", at: body) || hasEscape("U", "0000FEFF", at: body)
        default:
            return false
        }
    }

    private func has(_ bytes: [UInt8], at index: Int) -> Bool {
        index >= 0 && index + bytes.count <= source.count && source[index..<index + bytes.count].elementsEqual(bytes)
    }

    private func hasEscape(_ letter: Character, _ hex: String, at index: Int) -> Bool {
        let length = 2 + hex.utf8.count
        guard index + length <= source.count, source[index] == UInt8(ascii: "\\"),
              source[index + 1] == letter.asciiValue else { return false }
        return String(decoding: source[index + 2..<index + length], as: UTF8.self).uppercased() == hex
    }

    /// Byte offset of a 1-based (line, column) mark.
    private mutating func offset(line: Int, column: Int) -> Int? {
        let starts = lineStarts ?? computeLineStarts()
        lineStarts = starts
        guard line >= 1, line <= starts.count else { return nil }
        var index = starts[line - 1]
        for _ in 1..<max(1, column) {
            guard index < source.count else { return nil }
            index += UTF8Validation.sequenceLength(in: source, at: index) ?? 1
        }
        return index
    }

    /// Line starts with libyaml's line breaks: CR LF, CR, LF, NEL, LS and PS.
    private func computeLineStarts() -> [Int] {
        var starts = [0]
        var index = 0
        while index < source.count {
            let breakLength: Int
            switch source[index] {
            case 0x0D: breakLength = index + 1 < source.count && source[index + 1] == 0x0A ? 2 : 1
            case 0x0A: breakLength = 1
            case 0xC2 where has([0xC2, 0x85], at: index): breakLength = 2
            case 0xE2 where has([0xE2, 0x80, 0xA8], at: index) || has([0xE2, 0x80, 0xA9], at: index): breakLength = 3
            default:
                index += 1
                continue
            }
            index += breakLength
            starts.append(index)
        }
        return starts
    }
}
