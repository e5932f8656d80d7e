import Testing
import Yams
@testable import BinderFormat

/// `parse(render(m, v)) == (m, v)` over generated metadata of every JSON shape and
/// values of every kind. Seeded, so a failure names a reproducible case.
@Suite struct FrontMatterPropertyTests {
    /// 4 × 1,000 cases; shards run in parallel.
    static let casesPerShard = 1_000

    @Test(arguments: 0..<4)
    func renderThenParseIsIdentity(shard: Int) throws {
        var random = SeededGenerator(seed: 0xB1DE_5EED &+ UInt64(shard))
        for index in 0..<Self.casesPerShard {
            var generator = MetadataGenerator(random: random)
            let metadata = generator.object(depth: 0)
            let value = generator.markdownValue()
            random = generator.random

            let file = FrontMatter.render(metadata: metadata, value: value)
            let parsed: (metadata: JSONObject?, value: String)
            do {
                parsed = try FrontMatter.parse(file.bytes)
            } catch {
                Issue.record("shard \(shard) case \(index): \(error)\nmetadata: \(metadata.serialized())\nfile: \(file.debugDescription)")
                continue
            }
            #expect(parsed.metadata == metadata, "shard \(shard) case \(index): \(metadata.serialized())\n\(file.debugDescription)")
            #expect(parsed.value.bytes == value.bytes, "shard \(shard) case \(index): value \(value.debugDescription)")
        }
    }

    @Test func generatedMetadataSurvivesThroughDocuments() throws {
        var random = SeededGenerator(seed: 42)
        for _ in 0..<500 {
            var generator = MetadataGenerator(random: random)
            var metadata = generator.object(depth: 1)
            metadata.insert("note", forKey: "type", at: 0)
            let document = MedicalDocument(value: generator.markdownValue(), metadata: metadata)
            random = generator.random
            // JSON round trip of the whole document, then the markdown view.
            let reread = try MedicalDocument(plaintext: document.serializedBytes())
            #expect(reread == document)
            let parsed = try FrontMatter.parse(FrontMatter.render(reread).bytes)
            #expect(MedicalDocument(value: parsed.value, metadata: try #require(parsed.metadata)) == document)
        }
    }
}

@Suite struct ExplicitScalarTagsTests {
    /// The same tree with every tag implicit, as Yams builds it from text.
    static func implicit(_ node: Node) -> Node {
        switch node {
        case let .scalar(scalar): return Node(scalar.string, .implicit, scalar.style)
        case let .sequence(sequence): return Node(sequence.map(implicit), .implicit, sequence.style)
        case let .mapping(mapping): return Node(mapping.map { (implicit($0.key), implicit($0.value)) }, .implicit, mapping.style)
        case .alias: return node
        }
    }

    /// Scalars are built with the tag they resolve to, so that Yams' emitter does not run its
    /// resolver's regular expressions; libyaml drops the tag either way. The text must be
    /// byte for byte what implicit tags give.
    @Test func explicitTagsWriteTheSameTextAsImplicitOnes() throws {
        var random = SeededGenerator(seed: 0x7A65)
        for index in 0..<1_500 {
            var generator = MetadataGenerator(random: random)
            let metadata = generator.object(depth: 0)
            random = generator.random
            let node = FrontMatterYAML.node(for: .object(metadata))
            let explicit = try Yams.serialize(node: node, indent: 2, width: -1, allowUnicode: true, lineBreak: .ln)
            let reference = try Yams.serialize(node: Self.implicit(node), indent: 2, width: -1, allowUnicode: true, lineBreak: .ln)
            #expect(explicit == reference, "case \(index): \(metadata.serialized())")
        }
    }
}

@Suite struct PlainScalarResolutionTests {
    /// Yams' default resolver itself: the ICU regular expressions `PlainScalarTag` replaces.
    static func resolverTag(_ text: String) -> Yams.Tag.Name {
        Resolver.default.resolveTag(of: Node(text))
    }

    /// Every rule of `PlainScalarTag` agrees with Yams' resolver: on look-alikes, on the apps'
    /// timestamps and their near misses, on words, on every line terminator `$` may match
    /// before, and on random text over the rules' own characters (where a rule is easiest to
    /// get almost right).
    @Test func agreesWithYamsResolver() {
        var generator = MetadataGenerator(random: SeededGenerator(seed: 99))
        var samples = MetadataGenerator.lookAlikes + MetadataGenerator.pieces
        for _ in 0..<3_000 { samples.append(generator.string()) }
        for _ in 0..<500 { samples.append(generator.number()) }
        // The apps' timestamps and near misses.
        samples += ["2026-02-09T14:30:00.000Z", "2026-02-09T14:30:00Z", "2026-02-09T14:30:00.123456Z", "1999-12-31T23:59:59.9Z",
                    "2026-02-09T14:30:00.000", "2026-02-09 14:30:00.000Z", "2026-2-09T14:30:00.000Z", "2026-02-09T14:30:00.Z",
                    "2026-02-09T14:30:00.000ZZ", "2026-02-09T14:30:00.0a0Z", "2026-02-09t14:30:00.000Z", "20260-02-09T14:30:00.000Z",
                    "2026-02-09", "2026-2-09", "2026-02-9", "2026-02-09 ", "2026-02-09T", "2026-1-2 3:04:05", "2026-1-2\t\t3:04:05 +1",
                    "2026-01-02T03:04:05 -07:30", "2026-01-02T03:04:05-7", "2026-01-02T03:04:05+123", "2026-01-02T03:04:05 Z",
                    "2026-01-02T03:04:05.Z", "2026-01-02T3:04:05", "2026-01-02T003:04:05", "2026-01-02T03:4:05", "2026-01-02T03:04:5"]
        for _ in 0..<300 {
            samples.append(Timestamps.string(seconds: Int64.random(in: 0...4_000_000_000), nanoseconds: Int32.random(in: 0..<1_000_000_000)))
        }
        // Words: the bool and null words and their near misses.
        samples += ["type", "tags", "npi", "Note", "types", "nothing", "o", "n", "y", "Y", "on", "ON", "oN", "nULL", "NuLL",
                    "Yes!", "noé", "nö", "Off.", "FALSE", "False", "fALSE", "truE", "tru", "nul", "nulls", "yess", "a", "Z", "z~",
                    "x-ray", "Dr. Sato", "~", "<<", "=", "<", "==", "<<<", "~~", ""]
        // Numbers of every YAML 1.1 form and their near misses.
        samples += ["0", "-0", "+0", "00", "08", "0_", "0b", "0b1", "0b2", "-0b1_0", "0o", "0o7", "0o8", "0x", "0xfF_", "0xg", "+0x1",
                    "1_000", "1:30", "1:3", "1:60", "1:5_", "-1:30:00", "0:30", "1:30.5", "1:30.", "1:30:", "1::30", "190:20:30.15",
                    ".5", "._", ".", "+.5", "-.inf", ".inf", "+.Inf", ".nan", "-.nan", ".NaN", ".nAn", "1e3", "1E+3", "1e", "1.e5",
                    "1.5e-3", ".5e3", ".5e+3", ".5E-3", "1.2.3", "+", "-", "+-1", "1__", "6.8523015e+5", "685.230_15e+03",
                    "685_230.15", "-1_", "1:30e5", "0.", "-0.5_"]
        // `$` before a final line terminator, of every kind, after text of every rule.
        let terminators = ["\n", "\r", "\r\n", "\u{0B}", "\u{0C}", "\u{85}", "\u{2028}", "\u{2029}", "\n\n", "\r\r", "\n\r"]
        for base in ["", "true", "12", "1.5", "<<", "~", "2026-02-09", "=", "x", "0x1F", "1:30"] {
            for terminator in terminators {
                samples.append(base + terminator)
                samples.append(terminator + base)
            }
        }
        // Random text over the rules' characters.
        let alphabet = Array("0123456789_-+.:eEbBoOxXabfFtTzZ <=~\t\ninfINFnaNAul")
        var random = SeededGenerator(seed: 7)
        for _ in 0..<20_000 {
            let length = Int(random.next() % 14)
            samples.append(String((0..<length).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] }))
        }
        for _ in 0..<5_000 {
            // Shapes close to numbers and times: digits with one or two punctuation marks.
            let digits = String((0..<Int(1 + random.next() % 8)).map { _ in Character(String(random.next() % 10)) })
            let mark = [":", ".", "e", "_", "-", ":", "T", " "][Int(random.next() % 8)]
            let more = String((0..<Int(random.next() % 4)).map { _ in Character(String(random.next() % 10)) })
            samples.append(digits + mark + more)
            samples.append("2026-0\(random.next() % 10)-\(random.next() % 40)T\(random.next() % 30):\(random.next() % 70):\(random.next() % 70)\(mark)\(more)")
        }
        var disagreements: [String] = []
        for sample in samples where FrontMatterYAML.plainTag(sample) != Self.resolverTag(sample) {
            disagreements.append(sample)
        }
        #expect(disagreements.isEmpty, "\(disagreements.prefix(20).map { "\($0.debugDescription): ours \(FrontMatterYAML.plainTag($0)), Yams \(Self.resolverTag($0))" })")
        #expect(samples.count > 30_000)
    }

    /// A table of answers, so that a rule Yams and this file both got wrong still shows.
    @Test(arguments: [
        ("yes", Yams.Tag.Name.bool), ("OFF", .bool), ("Off ", .str), ("true\n", .bool),
        ("0", .int), ("-0b101", .int), ("0o17", .int), ("017", .int), ("0x1F", .int), ("1_000", .int), ("1:30", .int), ("1:60", .str),
        ("08", .float), ("1.5", .float), ("1e3", .float), (".5", .float), ("-.inf", .float), (".NaN", .float), ("1:30.5", .float),
        ("1e", .str), ("1:", .str), ("+.5", .str), ("0b", .str), ("0x", .str),
        ("<<", .merge), ("~", .null), ("", .null), ("\n", .null), ("\u{2028}", .null), ("Null", .null), ("nil", .str),
        ("2026-02-09", .timestamp), ("2026-2-9", .str), ("2026-2-9 1:02:03", .timestamp), ("2026-02-09T14:30:00.000Z", .timestamp),
        ("2026-02-09T14:30:00+1:30", .timestamp), ("2026-02-09T14:30:00 +01", .timestamp), ("2026-02-09T14:30", .str),
        ("=", .value), ("==", .str), ("Dr. Sato", .str), ("0123456789", .float),
    ])
    func knownAnswers(text: String, tag: Yams.Tag.Name) {
        #expect(FrontMatterYAML.plainTag(text) == tag, "\(text.debugDescription)")
    }
}

/// Produces JSON shapes and strings chosen to trip YAML: look-alikes of numbers, bools,
/// nulls and dates, indicators, quotes, escapes, line breaks of every kind, control and
/// non-BMP characters, long lines, odd keys.
struct MetadataGenerator {
    var random: SeededGenerator

    static let lookAlikes: [String] = [
        "", " ", "0123456789", "1234567890", "true", "false", "True", "yes", "no", "NO", "on", "off", "y", "n",
        "null", "Null", "~", "1e3", "1.50", "-0", "0x1F", "0o17", "1_000", "+1", ".inf", "-.inf", ".nan", "1:30",
        "2026-02-09T14:30:00.000Z", "2026-02-09", "2026-02-09 14:30:00", " leading space", "trailing space ",
        "a: b", "#x", "x #y", "- item", "? q", ": c", "---", "...", "--- x", "<<", "=", "!tag", "&anchor", "*alias",
        "%directive", "@at", "`tick", "|", ">", "'", "\"", "'quoted'", "\"dq\"", "[a, b]", "{a: b}", ",", "a,b",
        "multi\nline", "multi\nline\n", "trailing\n\n", "\n", "\n\nleading breaks", " \n ", "tab\there", "cr\rhere",
        "crlf\r\nhere", "nel\u{85}here", "ls\u{2028}ps\u{2029}", "nul\u{0}byte", "bell\u{7}", "del\u{7f}",
        "c1\u{80}\u{9f}", "bom\u{feff}", "nonchar\u{fffe}\u{ffff}", "astral\u{10ffff}", "Amélie", "e\u{301}",
        "陈美玲 (Mei-Ling Chen)", "背中のにきび", "🥜", "👩‍⚕️ doctor", "\\", "\\U0001F600", "C:\\path\\n",
        "line one\n  indented\n\ttabbed\n", "  \n", "x\n ", String(repeating: "long words ", count: 30),
        String(repeating: "k", count: 200),
    ]

    static let pieces: [String] = [
        "a", "Z", "0", "7", " ", "  ", "\t", "\n", "\r", "\r\n", "-", "---", ":", ": ", "#", " #", "'", "\"", "\\",
        "{", "}", "[", "]", ",", "&", "*", "!", "|", ">", "%", "@", "`", "?", "é", "e\u{301}", "Ł", "陈", "🥜",
        "\u{0}", "\u{1b}", "\u{7f}", "\u{85}", "\u{a0}", "\u{2028}", "\u{feff}", "true", "null", "1", ".",
        "2026-02-09", "<<", "~", "=",
    ]

    mutating func chance(_ percent: Int) -> Bool {
        Int.random(in: 0..<100, using: &random) < percent
    }

    mutating func string() -> String {
        if chance(40) { return Self.lookAlikes.randomElement(using: &random)! }
        let count = Int.random(in: 0...8, using: &random)
        return (0..<count).map { _ in Self.pieces.randomElement(using: &random)! }.joined()
    }

    mutating func number() -> String {
        var text = chance(30) ? "-" : ""
        if chance(20) {
            text += "0"
        } else {
            text += String(Int.random(in: 1...9, using: &random))
            for _ in 0..<Int.random(in: 0...20, using: &random) { text += String(Int.random(in: 0...9, using: &random)) }
        }
        if chance(40) {
            text += "."
            for _ in 0..<Int.random(in: 1...5, using: &random) { text += String(Int.random(in: 0...9, using: &random)) }
        }
        if chance(25) {
            text += chance(50) ? "e" : "E"
            text += ["", "+", "-"].randomElement(using: &random)!
            for _ in 0..<Int.random(in: 1...3, using: &random) { text += String(Int.random(in: 0...9, using: &random)) }
        }
        return text
    }

    mutating func value(depth: Int) -> JSONValue {
        let containers = depth < 3
        switch Int.random(in: 0..<(containers ? 10 : 7), using: &random) {
        case 0: return .null
        case 1: return .bool(chance(50))
        case 2: return .number(number())
        case 3, 4, 5, 6: return .string(string())
        case 7: return .array((0..<Int.random(in: 0...5, using: &random)).map { _ in value(depth: depth + 1) })
        default: return .object(object(depth: depth + 1))
        }
    }

    mutating func object(depth: Int) -> JSONObject {
        var object = JSONObject()
        var used: [String] = []
        for _ in 0..<Int.random(in: 0...6, using: &random) {
            let key = chance(30) ? ["type", "created", "updated", "npi", "tags", "1", "", "é", "a b"].randomElement(using: &random)! : string()
            // Keys Yams cannot tell apart are the documented limit (canonically
            // equivalent, or equal but for a leading U+FEFF); keep them out.
            let comparable = key.unicodeScalars.first == "\u{FEFF}" ? String(key.unicodeScalars.dropFirst()) : key
            if used.contains(where: { $0 == comparable }) { continue }
            used.append(comparable)
            object[key] = value(depth: depth)
        }
        return object
    }

    mutating func markdownValue() -> String {
        let parts = [
            "", "# Title\n", "---\n", "---\r\n", "title: inner\n", "\r\n", "\n", "text", "Pénicilline — urticaire",
            "🙂", "---", "...\n", "\u{0}", "\u{feff}", "  indented\n", "| a | b |\n", "- [ ] task\n",
        ]
        let count = Int.random(in: 0...6, using: &random)
        return (0..<count).map { _ in parts.randomElement(using: &random)! }.joined()
    }
}
