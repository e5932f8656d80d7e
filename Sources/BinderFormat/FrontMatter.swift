/// Why a markdown file's front matter cannot be read. Descriptions carry line numbers
/// and YAML's generic messages only, never file content, so they are safe to log.
public enum FrontMatterError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file is not valid UTF-8 (`offset` is the first bad byte).
    case invalidUTF8(offset: Int)
    /// The file starts with `---` but no later line is `---`.
    case unterminated
    /// The block is not YAML, not a mapping, or uses something JSON cannot hold.
    /// `line` is the line in the whole file (the opening `---` is line 1).
    case invalidYAML(line: Int?, problem: String)

    public var description: String {
        switch self {
        case let .invalidUTF8(offset):
            return "file is not valid UTF-8 (byte \(offset))"
        case .unterminated:
            return "front matter opened by '---' on line 1 is not closed by a line '---'"
        case let .invalidYAML(line?, problem):
            return "front matter, line \(line): \(problem)"
        case let .invalidYAML(nil, problem):
            return "front matter: \(problem)"
        }
    }
}

/// A document as a markdown file: `---\n<metadata as YAML>---\n<value>`.
///
/// The guarantee the mount depends on: `parse(render(m, v))` gives back `m` and `v`
/// exactly, for metadata of any JSON shape. Strings stay strings whatever they look
/// like (`"0123456789"`, `"true"`, dates), numbers keep their literal text, key order
/// is kept. See `FrontMatterYAML` for how YAML is written and read.
public enum FrontMatter {
    /// The file for a document: the YAML block, then `value` byte for byte.
    public static func render(metadata: JSONObject, value: String) -> String {
        "---\n" + yaml(for: metadata) + "---\n" + value
    }

    /// `render(metadata:value:)` of a document.
    public static func render(_ document: MedicalDocument) -> String {
        render(metadata: document.metadata, value: document.value)
    }

    /// The YAML block for `metadata`, ending with a newline (`{}\n` when empty).
    public static func yaml(for metadata: JSONObject) -> String {
        FrontMatterYAML.render(metadata)
    }

    /// Splits a markdown file into metadata and value.
    ///
    /// - A file starting with a line `---` (`---\n` or `---\r\n`) has front matter: the
    ///   lines up to the next line that is exactly `---` (a trailing `\r` allowed) are a
    ///   YAML mapping (an empty block is an empty mapping), and everything after that
    ///   line's newline is `value`, byte for byte, even if it starts with its own `---`
    ///   block. If no closing line exists the file is rejected (`.unterminated`) rather
    ///   than guessed at: most likely the user broke the block, and storing the YAML as
    ///   text would hide the mistake.
    /// - Any other file is all `value`; `metadata` is nil.
    ///
    /// A UTF-8 byte order mark is not skipped: a file that starts with one has no front
    /// matter.
    public static func parse(_ bytes: [UInt8]) throws(FrontMatterError) -> (metadata: JSONObject?, value: String) {
        if let offset = UTF8Validation.firstInvalidOffset(in: bytes) {
            throw .invalidUTF8(offset: offset)
        }
        guard let bodyStart = openingLineLength(bytes) else {
            return (nil, String(decoding: bytes, as: UTF8.self))
        }
        var lineStart = bodyStart
        while lineStart < bytes.count {
            let lineEnd = bytes[lineStart...].firstIndex(of: newline) ?? bytes.count
            if isDelimiter(bytes[lineStart..<lineEnd]) {
                let yaml = String(decoding: bytes[bodyStart..<lineStart], as: UTF8.self)
                let value = String(decoding: bytes[min(lineEnd + 1, bytes.count)...], as: UTF8.self)
                // The YAML block's first line is the file's line 2.
                let metadata = try FrontMatterYAML.parse(yaml, lineOffset: 1)
                return (metadata, value)
            }
            lineStart = lineEnd + 1
        }
        throw .unterminated
    }

    private static let newline = UInt8(ascii: "\n")
    private static let dash = UInt8(ascii: "-")

    private static func openingLineLength(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4, bytes[0] == dash, bytes[1] == dash, bytes[2] == dash else { return nil }
        if bytes[3] == newline { return 4 }
        if bytes[3] == UInt8(ascii: "\r"), bytes.count >= 5, bytes[4] == newline { return 5 }
        return nil
    }

    private static func isDelimiter(_ line: ArraySlice<UInt8>) -> Bool {
        let content = line.last == UInt8(ascii: "\r") ? line.dropLast() : line
        return content.count == 3 && content.allSatisfy { $0 == dash }
    }
}
