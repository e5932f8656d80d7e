internal import CGit2

/// An error from a git operation.
///
/// Failures of libgit2 carry the operation that failed and libgit2's own
/// message (`git_error_last`). Mistakes in how this module itself uses
/// libgit2 are not errors: they trap.
public enum GitError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The compare-and-swap of `refs/heads/<branch>` failed: the branch no
    /// longer points at `expected` (another writer committed first). Nothing
    /// was changed; re-read the tip, redo the change on top of it, retry.
    case branchMoved(branch: String, expected: ObjectID?, actual: ObjectID?)

    /// A path given to `commitChanges` or `entry(at:)` is not a valid
    /// repository path (empty, absolute, `.`/`..`/empty component, NUL).
    case invalidPath(String, reason: String)

    /// A libgit2 call failed.
    case failed(operation: String, code: Code, message: String)

    /// The kind of a libgit2 failure (from its negative return code).
    public enum Code: Sendable, Equatable {
        /// `GIT_ENOTFOUND`: no such object, reference, path or repository.
        case notFound
        /// `GIT_EEXISTS`: the object, reference or repository already exists.
        case exists
        /// `GIT_ELOCKED`: a lock file is held by another writer (for a ref
        /// update: a concurrent commit is in progress; retry).
        case locked
        /// `GIT_EINVALIDSPEC` / `GIT_EINVALID`: a bad reference name or argument.
        case invalid
        /// `GIT_EUNBORNBRANCH`: HEAD points at a branch with no commit yet.
        case unbornBranch
        /// `GIT_EBAREREPO`: the operation needs a work tree.
        case bareRepository
        /// `GIT_EMODIFIED`: a reference or index changed underneath us.
        case modified
        /// `GIT_ECONFLICT`: checkout conflicts prevented the operation.
        case conflict
        /// `GIT_EAUTH`: the server asked for credentials (HTTP 401).
        case authentication
        /// `GIT_ECERTIFICATE`: the server's TLS certificate is not trusted.
        case certificate
        /// Any other libgit2 error code.
        case other(Int32)

        init(libgit2 rc: Int32) {
            switch rc {
            case GIT_ENOTFOUND.rawValue: self = .notFound
            case GIT_EEXISTS.rawValue: self = .exists
            case GIT_ELOCKED.rawValue: self = .locked
            case GIT_EINVALIDSPEC.rawValue, GIT_EINVALID.rawValue: self = .invalid
            case GIT_EUNBORNBRANCH.rawValue: self = .unbornBranch
            case GIT_EBAREREPO.rawValue: self = .bareRepository
            case GIT_EMODIFIED.rawValue: self = .modified
            case GIT_ECONFLICT.rawValue: self = .conflict
            case GIT_EAUTH.rawValue: self = .authentication
            case GIT_ECERTIFICATE.rawValue: self = .certificate
            default: self = .other(rc)
            }
        }
    }

    /// The libgit2 failure kind, if this is a libgit2 failure.
    public var code: Code? {
        if case .failed(_, let code, _) = self { return code }
        return nil
    }

    /// True for "no such object / reference / path / repository".
    public var isNotFound: Bool { code == .notFound }

    /// True when the error is caused by a concurrent writer (the branch moved,
    /// or its ref is locked): re-reading the tip and retrying may succeed.
    public var isConcurrentUpdate: Bool {
        switch self {
        case .branchMoved: return true
        case .failed(_, let code, _): return code == .locked || code == .modified
        case .invalidPath: return false
        }
    }

    public var description: String {
        switch self {
        case .branchMoved(let branch, let expected, let actual):
            return "git: branch '\(branch)' moved (expected \(expected?.description ?? "no commit"), "
                + "found \(actual?.description ?? "no commit")): concurrent writer"
        case .invalidPath(let path, let reason):
            return "git: invalid path '\(path)': \(reason)"
        case .failed(let operation, _, let message):
            return "git: \(operation) failed: \(message)"
        }
    }

    /// Builds the error for a failed libgit2 call (`rc < 0`), reading
    /// libgit2's thread-local last error. Must be called on the thread that
    /// made the call, right after it (all calls happen under the repository
    /// lock, so this holds).
    static func libgit2(_ rc: Int32, _ operation: String) -> GitError {
        var message = "libgit2 error \(rc)"
        if let last = git_error_last(), let text = last.pointee.message {
            let string = String(cString: text)
            if !string.isEmpty { message = string }
        }
        return .failed(operation: operation, code: Code(libgit2: rc), message: message)
    }
}

/// Throws a `GitError` when a libgit2 call returned a negative code.
@inline(__always)
func check(_ rc: Int32, _ operation: @autoclosure () -> String) throws(GitError) {
    if rc < 0 { throw GitError.libgit2(rc, operation()) }
}
