import Foundation

/// Why a sync or a server call failed, in words a user can act on. Never carries a token.
public enum SyncError: Error, Sendable, CustomStringConvertible, Equatable {
    /// The server refused the token (401) even after signing a fresh challenge.
    case unauthorized(String)
    /// The server could not be reached (or answered 5xx): the commits stay queued.
    case offline(String)
    /// The server answered, but not as the protocol says.
    case server(status: Int, message: String)
    /// Someone else owns this repository id on the server (403).
    case forbidden(String)
    /// A bad server URL, a binder with no server set, and similar mistakes.
    case configuration(String)
    /// The server refused a push (it kept its history); sync again.
    case rejected(String)
    /// The server's HTTPS certificate is not one a trusted authority signed (nothing was sent).
    case untrusted(String)
    /// The server is busy or limits the rate (429 or 503) and said when to come back
    /// (`Retry-After`, in seconds from when it answered): `RetryPolicy` waits that long.
    case busy(status: Int, message: String, retryAfter: TimeInterval)
    /// The server answered, but with something that is not the protocol (not HTTP, a git
    /// answer libgit2 cannot read, a broken pack): its words, or what was wrong with them.
    /// An answer, not a network failure: not retried, and `error`, never `offline`.
    case garbled(String)
    /// The server answered 410: its owner deleted the repository (binder serve's tombstone;
    /// `binder key rotate` on another device moves a binder to a new id, then deletes the old).
    case gone(String)
    /// This machine could not store what arrived (a full disk): the OS error's words and errno.
    case storage(String, errno: Int32)

    public var description: String {
        switch self {
        case .unauthorized(let why): return "the server refused the login: \(why)"
        case .offline(let why): return "offline: \(why)"
        case .server(let status, let message): return "the server answered \(status): \(message)"
        case .forbidden(let why): return "forbidden: \(why)"
        case .configuration(let why): return why
        case .rejected(let why): return "the server refused the push: \(why)"
        case .untrusted(let why): return "cannot verify the server's certificate (\(why)); nothing was sent"
        case .busy(let status, let message, let wait):
            return "the server answered \(status): \(message) (it asked to wait \(Int(wait.rounded(.up))) s)"
        case .garbled(let why): return "the server's answer is not the protocol: \(why)"
        case .storage(let why, _): return why
        case .gone(let why): return "the server's copy was deleted by its owner: \(why)"
        }
    }

    /// True when retrying later may succeed without anyone doing anything.
    public var isTransient: Bool {
        switch self {
        case .offline, .rejected, .busy: return true
        case .server(let status, _): return status >= 500 || status == 429
        default: return false
        }
    }

    /// True when no answer came at all (the server could not be reached, stopped answering,
    /// or stalled): `offline` in a status; every other failure is an `error`.
    public var isNetworkFailure: Bool {
        if case .offline = self { return true }
        return false
    }

    /// How long the server asked to wait before the next try (`.busy`); nil when it did not say.
    public var retryAfter: TimeInterval? {
        if case .busy(_, _, let wait) = self { return wait }
        return nil
    }
}
