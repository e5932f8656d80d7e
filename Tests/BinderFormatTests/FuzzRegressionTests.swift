import Foundation
import Testing
@testable import BinderFormat

/// Inputs found by fuzzing (scripts/fuzz) or by reading the decoders for traps, kept as tests:
/// each trapped or gave a wrong answer before its fix.
@Suite struct FuzzRegressionTests {
    /// A file's time set through the mount (`touch -d @-9223372036854775808`) is any Int64:
    /// `days * 86_400` overflowed and trapped, stopping the daemon. Times are clamped to what a
    /// JavaScript Date holds and written as `toISOString()` writes them.
    @Test func extremeFileTimesAreWrittenAsJavaScriptDoes() {
        #expect(Timestamps.string(seconds: .min) == "-271821-04-20T00:00:00.000Z")
        #expect(Timestamps.string(seconds: .max, nanoseconds: .max) == "+275760-09-13T00:00:00.999Z")
        #expect(Timestamps.string(seconds: 0, nanoseconds: -1) == "1970-01-01T00:00:00.000Z")
        #expect(Timestamps.string(seconds: 253_402_300_800) == "+010000-01-01T00:00:00.000Z")
        #expect(Timestamps.string(seconds: -62_167_219_201) == "-000001-12-31T23:59:59.000Z")
        #expect(Timestamps.string(from: Date(timeIntervalSince1970: .infinity)) == "+275760-09-13T00:00:00.000Z")
        #expect(Timestamps.string(from: Date(timeIntervalSince1970: -.infinity)) == "-271821-04-20T00:00:00.000Z")
    }

    /// Extended years written above read back; `-000000` is not a year (as in JavaScript).
    @Test func extendedYearsReadBack() throws {
        for seconds: Int64 in [-Timestamps.maximumSeconds, -62_167_219_201, 253_402_300_800, Timestamps.maximumSeconds] {
            let text = Timestamps.string(seconds: seconds)
            #expect(Timestamps.parse(text)?.seconds == seconds, "\(text)")
        }
        #expect(Timestamps.parse("-000000-01-01T00:00:00.000Z") == nil)
        #expect(Timestamps.parse("+00000-01-01") == nil)
        #expect(Timestamps.parse("+000000-01-01")?.seconds == -62_167_219_200)
    }
}

@Suite struct FrontMatterDepthTests {
    static func file(listDepth: Int) -> [UInt8] {
        Array(("---\nx: " + String(repeating: "[", count: listDepth) + String(repeating: "]", count: listDepth) + "\n---\n").utf8)
    }

    /// Front matter nested 600 levels deep was accepted and saved as document JSON deeper than
    /// the JSON reader takes (512 levels): the saved document could not be read again.
    @Test func metadataDeeperThanADocumentCanHoldIsRefused() throws {
        let deepest = try #require(try FrontMatter.parse(Self.file(listDepth: 510)).metadata)
        let saved = MedicalDocument(value: "", metadata: deepest).serializedBytes()
        #expect(throws: Never.self) { try JSONValue.parse(saved) }
        #expect(throws: FrontMatterError.invalidYAML(line: 2, problem: "lists and mappings nested deeper than 511 levels")) {
            try FrontMatter.parse(Self.file(listDepth: 511))
        }
        #expect(throws: FrontMatterError.self) { try FrontMatter.parse(Self.file(listDepth: 600)) }
    }
}
