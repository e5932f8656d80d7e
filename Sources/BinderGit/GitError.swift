internal import CGit2
import Glibc

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

    /// A libgit2 call failed. `posixErrno` is the OS error of the system call
    /// that made it fail (libgit2's `GIT_ERROR_OS` class: a full disk is
    /// `ENOSPC`, a read-only file system `EROFS`), nil for git-level failures.
    case failed(operation: String, code: Code, message: String, posixErrno: Int32? = nil)

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
        if case .failed(_, let code, _, _) = self { return code }
        return nil
    }

    /// The OS errno (`ENOSPC`, `EDQUOT`, `EROFS`, `EACCES`, `EIO`, …) of the
    /// system call that made a libgit2 call fail; nil when the failure was not
    /// the operating system's (a missing object, a bad reference, a moved branch).
    public var posixErrno: Int32? {
        if case .failed(_, _, _, let posixErrno) = self { return posixErrno }
        return nil
    }

    /// True for "no such object / reference / path / repository".
    public var isNotFound: Bool { code == .notFound }

    /// True when the error is caused by a concurrent writer (the branch moved,
    /// or its ref is locked): re-reading the tip and retrying may succeed.
    public var isConcurrentUpdate: Bool {
        switch self {
        case .branchMoved: return true
        case .failed(_, let code, _, _): return code == .locked || code == .modified
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
        case .failed(let operation, _, let message, _):
            return "git: \(operation) failed: \(message)"
        }
    }

    /// Builds the error for a failed libgit2 call (`rc < 0`), reading
    /// libgit2's thread-local last error. Must be called on the thread that
    /// made the call, right after it (all calls happen under the repository
    /// lock, which clears errno and libgit2's last error first, so neither is
    /// left over from an earlier call).
    static func libgit2(_ rc: Int32, _ operation: String) -> GitError {
        let osError = errno
        var message = "libgit2 error \(rc)"
        var posixErrno: Int32?
        if let last = git_error_last(), last.pointee.klass != Int32(GIT_ERROR_NONE.rawValue) {
            if let text = last.pointee.message {
                let string = String(cString: text)
                if !string.isEmpty { message = string }
            }
            if last.pointee.klass == Int32(GIT_ERROR_OS.rawValue) {
                posixErrno = errnoOfOSMessage(message) ?? (osError != 0 ? osError : nil)
            }
        } else if storageErrnos.contains(osError) {
            // Some paths (a loose object's write hitting a full disk) fail without setting an
            // error: the failed system call's errno is all there is.
            posixErrno = osError
        }
        return .failed(operation: operation, code: Code(libgit2: rc), message: message, posixErrno: posixErrno)
    }

    /// Errnos that only a failing storage system call gives (never a lookup's normal ENOENT).
    static let storageErrnos: Set<Int32> = [ENOSPC, EDQUOT, EROFS, EIO, EFBIG]

    /// libgit2 writes a `GIT_ERROR_OS` error as "<what>: <strerror(errno)>" and then sets errno
    /// to 0 (its errors.c), so the errno survives only in that text. It is recovered by inverting
    /// `strerror` over the system's own table (same process, same locale: the very words
    /// libgit2 wrote), an exact match of the whole suffix, never a guess from a phrase.
    static func errnoOfOSMessage(_ message: String) -> Int32? {
        var best: (code: Int32, length: Int)?
        for code in Int32(1)...Int32(200) {
            guard let text = strerror(code).map({ String(cString: $0) }), !text.hasPrefix("Unknown error") else { continue }
            if message.hasSuffix(": " + text), text.count > (best?.length ?? 0) { best = (code, text.count) }
        }
        return best?.code
    }

    /// Lock held, before a libgit2 call: what `libgit2(_:_:)` reads afterwards is then this
    /// call's own.
    static func clearLast() {
        errno = 0
        git_error_clear()
    }
}

/// Throws a `GitError` when a libgit2 call returned a negative code.
@inline(__always)
func check(_ rc: Int32, _ operation: @autoclosure () -> String) throws(GitError) {
    if rc < 0 { throw GitError.libgit2(rc, operation()) }
}
