/// Why the view cannot answer; the FUSE bridge maps each case to an errno.
public enum ViewError: Error, Sendable, Equatable, CustomStringConvertible {
    case notFound(String)
    case notDirectory(String)
    case isDirectory(String)
    /// Stored data that cannot be decrypted or parsed (EIO, with the reason logged).
    case corrupt(path: String, reason: String)
    /// The git store failed (EIO).
    case storage(String)
    case badHandle

    public var description: String {
        switch self {
        case .notFound(let p): return "\(p): no such file or folder"
        case .notDirectory(let p): return "\(p): not a folder"
        case .isDirectory(let p): return "\(p): is a folder"
        case .corrupt(let p, let why): return "\(p): \(why)"
        case .storage(let why): return "git: \(why)"
        case .badHandle: return "unknown file handle"
        }
    }
}
