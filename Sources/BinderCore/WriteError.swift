import SystemPackage

/// Why a change through the view was refused. Each case carries its errno (`errno`), which the
/// FUSE bridge returns as it is; `description` is the plain reason for the log and
/// `binder status` (paths and reasons, never content). Nothing stored is changed when one is
/// thrown.
public enum WriteError: Error, Sendable, Equatable, CustomStringConvertible {
    case notFound(String)
    case exists(String)
    case notEmpty(String)
    case isDirectory(String)
    case notDirectory(String)
    /// Raw files (undecryptable, unparsable, not binder's) and binder's own status files.
    case readOnly(String)
    /// What a share held when a doctor opened it (`WriteMode.onlyNewRecords`): EROFS.
    case shared(String)
    /// Any change on a read-only view (a `--read-only` mount), and in `.binder/`: EROFS.
    case readOnlyFileSystem(String)
    /// A change the binder format does not allow (deleting `patient-info`, a folder named
    /// `.git`, …).
    case notPermitted(path: String, reason: String)
    /// A name component over 255 bytes.
    case nameTooLong(String)
    /// The content cannot be stored: front matter that does not parse, a name that cannot be
    /// a file name, text that is not UTF-8.
    case invalid(path: String, reason: String)
    /// Over a limit: a document's 65,535 bytes (NIP-44), or the attachment size limit.
    case tooLarge(path: String, bytes: Int, limit: Int)
    /// Reading what is stored failed (corrupt data under a record being changed).
    case corrupt(path: String, reason: String)
    /// git could not store the change; `code` is the system's reason (ENOSPC, EDQUOT, EROFS,
    /// EIO…), taken from the failing call.
    case storage(path: String, reason: String, code: Errno)

    /// What `errno` the caller of the file operation gets.
    public var errno: Errno {
        switch self {
        case .notFound: return .noSuchFileOrDirectory
        case .exists: return .fileExists
        case .notEmpty: return .directoryNotEmpty
        case .isDirectory: return .isDirectory
        case .notDirectory: return .notDirectory
        case .readOnly: return .permissionDenied
        case .shared, .readOnlyFileSystem: return .readOnlyFileSystem
        case .notPermitted: return .notPermitted
        case .nameTooLong: return .fileNameTooLong
        case .invalid: return .invalidArgument
        case .tooLarge: return .fileTooLarge
        case .corrupt: return .ioError
        case .storage(_, _, let code): return code
        }
    }

    /// Whether the log must say it (refusals of content and failures), beyond the errno the
    /// caller sees: the ones a person needs the reason for.
    public var needsReason: Bool {
        switch self {
        case .notPermitted, .invalid, .tooLarge, .corrupt, .storage: return true
        default: return false
        }
    }

    public var description: String {
        switch self {
        case .notFound(let p): return "\(p): no such file or folder"
        case .exists(let p): return "\(p): already exists"
        case .notEmpty(let p): return "\(p): folder is not empty"
        case .isDirectory(let p): return "\(p): is a folder"
        case .notDirectory(let p): return "\(p): not a folder"
        case .readOnly(let p): return "\(p): read-only (shown as stored; see binder verify)"
        case .shared(let p): return "\(p): shared with you read-only (add a new .md note instead)"
        case .readOnlyFileSystem(let p): return "\(p): read-only file system"
        case .notPermitted(let p, let why): return "\(p): \(why)"
        case .nameTooLong(let p): return "\(p): a name is over 255 bytes"
        case .invalid(let p, let why): return "\(p): \(why)"
        case .tooLarge(let p, let n, let limit): return "\(p): \(Self.grouped(n)) bytes; the limit is \(Self.grouped(limit))"
        case .corrupt(let p, let why): return "\(p): stored record cannot be read: \(why)"
        case .storage(let p, let why, _): return "\(p): not stored: \(why)"
        }
    }

    /// 70112 -> "70,112".
    static func grouped(_ n: Int) -> String {
        let digits = String(n.magnitude)
        var out = ""
        for (i, c) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return (n < 0 ? "-" : "") + out
    }
}
