import Testing
@testable import BinderFormat

@Suite struct FrontMatterRenderTests {
    @Test func rendersReadableYAMLThatKeepsTypes() {
        let metadata: JSONObject = [
            "type": "visit", "created": "2026-02-09T14:30:00.000Z", "provider": "Dr. Amélie Dubois",
            "npi": "0123456789", "tags": ["annual", "bp"], "displayOrder": 3, "score": .number("1.50"),
            "imported": true, "source": nil, "note": "line one\nline two", "icon": "🥜",
        ]
        let expected = """
            ---
            type: visit
            created: "2026-02-09T14:30:00.000Z"
            provider: Dr. Amélie Dubois
            npi: "0123456789"
            tags: [annual, bp]
            displayOrder: 3
            score: 1.50
            imported: true
            source: null
            note: |-
              line one
              line two
            icon: "🥜"
            ---
            # Visit

            """
        #expect(FrontMatter.render(metadata: metadata, value: "# Visit\n") == expected)
    }

    @Test func emptyMetadataAndEmptyValue() throws {
        #expect(FrontMatter.render(metadata: [:], value: "") == "---\n{}\n---\n")
        let parsed = try FrontMatter.parse("---\n{}\n---\n".bytes)
        #expect(parsed.metadata == [:])
        #expect(parsed.value == "")
    }

    @Test func rendersDocuments() {
        let document = MedicalDocument(value: "body", metadata: ["type": "note"])
        #expect(FrontMatter.render(document) == "---\ntype: note\n---\nbody")
    }

    @Test func longStringsAreNotFolded() throws {
        let long = String(repeating: "lorem ipsum ", count: 50)
        let text = FrontMatter.render(metadata: ["summary": .string(long)], value: "")
        #expect(text.split(separator: "\n").count == 3) // ---, summary, ---
        #expect(try FrontMatter.parse(text.bytes).metadata?["summary"] == .string(long))
    }

    @Test func emojiAreWrittenAsThemselvesAndBackslashesSurvive() throws {
        let metadata: JSONObject = ["a": "🙂 \\U0001F600 \\\\U0001F600 \\", "🥜": ["\\", "👩‍⚕️"]]
        let text = FrontMatter.render(metadata: metadata, value: "")
        #expect(!text.contains("\\U0001F642"))
        #expect(text.contains("🙂"))
        #expect(try FrontMatter.parse(text.bytes).metadata == metadata)
    }
}

@Suite struct FrontMatterParseTests {
    private func metadata(_ yaml: String) throws -> JSONObject? {
        try FrontMatter.parse(("---\n" + yaml + "---\nbody").bytes).metadata
    }

    private func parseError(_ text: String) -> FrontMatterError? {
        do {
            _ = try FrontMatter.parse(text.bytes)
            return nil
        } catch {
            return error
        }
    }

    @Test func humanWrittenYAMLIsReadSensibly() throws {
        let yaml = """
            type: visit
            npi: 0123456789
            created: 2026-02-09T14:30:00Z
            date: 2026-02-09
            tags: [a, b]
            list:
              - one
              - 2
            displayOrder: 3
            ratio: 1.50
            big: 1e3
            octal: 0o17
            hex: 0x1F
            underscored: 1_000
            plus: +1
            infinity: .inf
            imported: true
            flag: False
            answer: yes
            country: NO
            nothing: null
            tilde: ~
            empty:
            quoted: "42"
            single: 'true'
            1: one
            true: yes-key
            null: null-key
            ~: tilde-key
            1.5: float-key
            2026-02-09: date-key
            folded: >
              a
              b
            literal: |
              a
              b
            # a comment
            nested: {x: 1, y: [true, "null"]}
            """
        let parsed = try #require(try metadata(yaml + "\n"))
        let expected: JSONObject = [
            "type": "visit", "npi": "0123456789", "created": "2026-02-09T14:30:00Z", "date": "2026-02-09",
            "tags": ["a", "b"], "list": ["one", 2], "displayOrder": 3, "ratio": .number("1.50"),
            "big": .number("1e3"), "octal": "0o17", "hex": "0x1F", "underscored": "1_000", "plus": "+1",
            "infinity": ".inf", "imported": true, "flag": false, "answer": "yes", "country": "NO",
            "nothing": nil, "tilde": nil, "empty": nil, "quoted": "42", "single": "true",
            "1": "one", "true": "yes-key", "null": "null-key", "~": "tilde-key", "1.5": "float-key",
            "2026-02-09": "date-key", "folded": "a b\n", "literal": "a\nb\n",
            "nested": ["x": 1, "y": [true, "null"]],
        ]
        #expect(parsed == expected)
        #expect(parsed.keys == expected.keys)
    }

    @Test func anchorsAliasesAndMergeKeysAreResolved() throws {
        let yaml = """
            base: &base {provider: Dr. Smith, npi: "1234567890"}
            other: &other {provider: Dr. Who, clinic: TARDIS}
            visit:
              type: visit
              <<: [*base, *other]
              npi: "999"
            copy: *base
            tags: &tags [a, b]
            again: *tags
            "<<": literal key
            """
        let parsed = try #require(try metadata(yaml + "\n"))
        #expect(parsed["visit"] == ["type": "visit", "provider": "Dr. Smith", "clinic": "TARDIS", "npi": "999"])
        #expect(parsed["visit"]?.objectValue?.keys == ["type", "provider", "clinic", "npi"])
        #expect(parsed["copy"] == ["provider": "Dr. Smith", "npi": "1234567890"])
        #expect(parsed["again"] == ["a", "b"])
        #expect(parsed["<<"] == "literal key")
    }

    @Test func aliasExpansionIsCapped() {
        var yaml = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
        for level in 1...8 {
            let previous = "*a\(level - 1)"
            yaml += "a\(level): &a\(level) [\(Array(repeating: previous, count: 10).joined(separator: ", "))]\n"
        }
        guard case let .invalidYAML(_, problem)? = parseError("---\n" + yaml + "---\n") else {
            Issue.record("expected the expansion to be refused")
            return
        }
        #expect(problem.contains("aliases"))
    }

    @Test func compactJSONIsAcceptedAsFrontMatter() throws {
        let metadata: JSONObject = ["type": "visit", "n": .number("1.50"), "npi": "0123", "a": ["x", nil, true], "o": ["k": "v\u{1}"], "e": "🥜"]
        let parsed = try FrontMatter.parse(("---\n" + metadata.serialized() + "\n---\nbody").bytes)
        #expect(parsed.metadata == metadata)
        #expect(parsed.value == "body")
    }

    @Test func withoutFrontMatterEverythingIsValue() throws {
        for text in ["", "# Title\n", "--- \nnot: front matter\n---\n", "\u{FEFF}---\na: 1\n---\n", "----\n", "text\n---\na: 1\n---\n"] {
            let parsed = try FrontMatter.parse(text.bytes)
            #expect(parsed.metadata == nil, "\(text.debugDescription)")
            #expect(parsed.value.bytes == text.bytes)
        }
    }

    @Test func valueMayStartWithItsOwnFrontMatter() throws {
        let value = "---\ntitle: inner\n---\n# Body\n---\nmore"
        let parsed = try FrontMatter.parse(FrontMatter.render(metadata: ["type": "note"], value: value).bytes)
        #expect(parsed.metadata == ["type": "note"])
        #expect(parsed.value == value)
    }

    @Test func crlfFilesAreAccepted() throws {
        let parsed = try FrontMatter.parse("---\r\ntype: visit\r\ntags: [a]\r\n---\r\nline\r\nline\r\n".bytes)
        #expect(parsed.metadata == ["type": "visit", "tags": ["a"]])
        #expect(parsed.value == "line\r\nline\r\n")
        let mixed = try FrontMatter.parse("---\r\ntype: visit\n---\nbody".bytes)
        #expect(mixed.metadata == ["type": "visit"])
        #expect(mixed.value == "body")
    }

    @Test func emptyBlocksAreEmptyMappings() throws {
        #expect(try FrontMatter.parse("---\n---\nbody".bytes).metadata == [:])
        #expect(try FrontMatter.parse("---\n# only a comment\n---\nbody".bytes).metadata == [:])
        #expect(try FrontMatter.parse("---\n~\n---\nbody".bytes).metadata == [:])
        let closedAtEnd = try FrontMatter.parse("---\ntype: x\n---".bytes)
        #expect(closedAtEnd.metadata == ["type": "x"])
        #expect(closedAtEnd.value == "")
    }

    @Test func errorsNameTheLineAndDoNotQuoteContent() {
        #expect(parseError("---\ntype: visit\nbody without end\n") == .unterminated)
        #expect(parseError("---\n") == .unterminated)
        #expect(parseError("---\ntype: visit\n---\u{0}\n") == .unterminated)

        let bad = parseError("---\ntype: visit\nsecret: [unclosed\n---\nbody")
        guard case let .invalidYAML(line, _)? = bad else {
            Issue.record("expected invalidYAML, got \(String(describing: bad))")
            return
        }
        #expect(line == 4)
        #expect(bad?.description.contains("secret") == false)
        #expect(bad?.description.contains("unclosed") == false)

        let indentation = parseError("---\na: 1\n b: 2\n---\n")
        if case let .invalidYAML(line, _)? = indentation { #expect(line == 3) } else { Issue.record("expected invalidYAML") }

        let scalar = parseError("---\njust text\n---\n")
        #expect(scalar?.description == "front matter, line 2: front matter must be a mapping of keys to values")
        if case .invalidYAML? = parseError("---\n- a\n- b\n---\n") {} else { Issue.record("a list is not metadata") }

        let duplicate = parseError("---\na: 1\nb: 2\na: 3\n---\n")
        if case let .invalidYAML(_, problem)? = duplicate { #expect(problem == "duplicate key") } else { Issue.record("expected duplicate") }
        let textualDuplicate = parseError("---\n1: a\n\"1\": b\n---\n")
        #expect(textualDuplicate == .invalidYAML(line: 3, problem: "duplicate key"))

        let complexKey = parseError("---\n? [a, b]\n: c\n---\n")
        if case let .invalidYAML(line, problem)? = complexKey {
            #expect(line == 2)
            #expect(problem.contains("key"))
        } else {
            Issue.record("expected a complex key error")
        }
        #expect(parseError("---\n<<: 3\n---\n") != nil)
        #expect(parseError("---\na: *nowhere\n---\n") != nil)
        #expect(parseError("---\na: \u{1}\n---\n") != nil)
    }

    @Test func invalidUTF8IsRejectedWithItsOffset() {
        do {
            _ = try FrontMatter.parse([0x61, 0x62, 0xFF])
            Issue.record("expected an error")
        } catch {
            #expect(error == .invalidUTF8(offset: 2))
        }
        #expect(throws: FrontMatterError.self) { try FrontMatter.parse(Array("---\na: é\n---\n".utf8) + [0xC3]) }
    }

    @Test func canonicallyEquivalentKeysAreRefusedNotMerged() throws {
        // Known limit (see FrontMatterYAML): Yams compares keys as Swift strings.
        let metadata: JSONObject = ["\u{e9}": 1, "e\u{301}": 2]
        #expect(metadata.count == 2)
        let text = FrontMatter.render(metadata: metadata, value: "")
        #expect(throws: FrontMatterError.self) { try FrontMatter.parse(text.bytes) }
    }
}
