/// Why a change through the view was refused; the FUSE bridge maps each case to an errno and
/// logs the reason. Nothing stored is changed when one is thrown.
public enum WriteError: Error, Sendable, Equatable, CustomStringConvertible {
    case notFound(String)
    case exists(String)
    case notEmpty(String)
    case isDirectory(String)
    case notDirectory(String)
    /// Raw files (undecryptable, unparsable, not binder's) and binder's own status files.
    case readOnly(String)
    /// The content cannot be stored: front matter that does not parse, a name that cannot be
    /// a file name, text that is not UTF-8.
    case invalid(path: String, reason: String)
    /// A document over NIP-44's 65,535-byte limit.
    case tooLarge(path: String, bytes: Int)
    /// Reading what is stored failed (corrupt data under a record being changed).
    case corrupt(path: String, reason: String)
    /// git could not store the change.
    case storage(String)

    public var description: String {
        switch self {
        case .notFound(let p): return "\(p): no such file or folder"
        case .exists(let p): return "\(p): already exists"
        case .notEmpty(let p): return "\(p): folder is not empty"
        case .isDirectory(let p): return "\(p): is a folder"
        case .notDirectory(let p): return "\(p): not a folder"
        case .readOnly(let p): return "\(p): read-only (shown as stored; see binder verify)"
        case .invalid(let p, let why): return "\(p): \(why)"
        case .tooLarge(let p, let n): return "\(p): \(n) bytes of JSON is over NIP-44's 65,535-byte limit"
        case .corrupt(let p, let why): return "\(p): stored record cannot be read: \(why)"
        case .storage(let why): return "git: \(why)"
        }
    }
}
