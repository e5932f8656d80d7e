/// The one rule for repository ids, applied where an id enters (the request path) before it
/// names a folder or reaches git: lowercase ASCII letters, digits, `-`, `_` and `.`; first a
/// letter or digit (never `-`, which git would read as an option, nor `.`, a hidden folder);
/// at most 100 bytes; no `..`; not ending in `.git` or `.lock`. Lowercase only, so two ids
/// can never differ by case alone (`ARepo` beside `arepo`), on any filesystem. The id is taken
/// exactly as it appears in the path: a percent-encoded id has a `%` and is refused.
@_spi(Fuzzing)
public enum RepositoryID {
    public static let maxLength = 100

    public static func isValid<S: StringProtocol>(_ id: S) -> Bool {
        let bytes = Array(id.utf8)
        guard let first = bytes.first, bytes.count <= maxLength, isLetterOrDigit(first) else { return false }
        guard bytes.allSatisfy({ isLetterOrDigit($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".") })
        else { return false }
        return !id.contains("..") && !id.hasSuffix(".git") && !id.hasSuffix(".lock")
    }

    private static func isLetterOrDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }
}
