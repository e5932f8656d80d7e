import SystemPackage

/// Why the view cannot answer a read. Each case carries its errno; corrupt data and storage
/// failures are logged (once, where they happen) and reach the caller as EIO.
public enum ViewError: Error, Sendable, Equatable, CustomStringConvertible {
    case notFound(String)
    case notDirectory(String)
    case isDirectory(String)
    /// A name over 255 bytes: no file can have it.
    case nameTooLong(String)
    /// Stored data that cannot be decrypted or parsed (EIO, with the reason logged).
    case corrupt(path: String, reason: String)
    /// The git store failed.
    case storage(path: String, reason: String, code: Errno)
    case badHandle

    public var errno: Errno {
        switch self {
        case .notFound: return .noSuchFileOrDirectory
        case .notDirectory: return .notDirectory
        case .isDirectory: return .isDirectory
        case .nameTooLong: return .fileNameTooLong
        case .corrupt: return .ioError
        case .storage(_, _, let code): return code
        case .badHandle: return .badFileDescriptor
        }
    }

    public var description: String {
        switch self {
        case .notFound(let p): return "\(p): no such file or folder"
        case .notDirectory(let p): return "\(p): not a folder"
        case .isDirectory(let p): return "\(p): is a folder"
        case .nameTooLong(let p): return "\(p): a name is over 255 bytes"
        case .corrupt(let p, let why): return "\(p): \(why)"
        case .storage(let p, let why, _): return "\(p): git: \(why)"
        case .badHandle: return "unknown file handle"
        }
    }
}
