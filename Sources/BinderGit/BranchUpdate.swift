internal import CGit2
import Glibc

/// A branch moved as git moves one, in two steps so that its slow part runs beside the
/// commit's pack. `begin` takes git's ref lock (`refs/heads/<branch>.lock`, created
/// exclusively: the lock command-line git and libgit2 take), checks that the branch still
/// points at the parent (the compare-and-swap), writes the new id into the lock file and
/// starts its fsync on a thread of its own (`BackgroundFsync`). The caller writes and installs
/// its pack meanwhile. `finish` waits for that fsync, renames the lock file over the ref and
/// fsyncs the ref's folder. libgit2's `git_reference_create_matching` did the same steps
/// after the pack was durable, so a save waited for the lock file's flush after the pack's
/// (docs/BENCHMARKS.md, "Saves: the ref's fsync beside the pack's").
///
/// The order on disk stays git's: the ref names the new commit only once the pack and its
/// folder are durable (`finish` is called after the pack's install). Dropped without
/// `finish` (the pack failed), the lock file is removed and the branch is as it was; a kill
/// leaves the lock file, which the next mount removes (`GitLockFiles`).
///
/// Only for a bare repository whose config does not ask for reflogs (`begin` returns nil for the
/// others): there libgit2 moves the branch and writes the reflog (`GitCommits.moveBranchLocked`).
/// libgit2 writes none in a bare repository otherwise, even into a reflog file already there.
/// Used by one thread, under the repository's lock.
final class BranchUpdate {
    private let lockPath: String
    private let refPath: String
    private let folder: String
    /// The lock file, open until `finish` or `deinit`.
    private let fd: Int32
    private let lockSync: BackgroundFsync
    private var finished = false

    private init(lockPath: String, refPath: String, folder: String, fd: Int32) {
        self.lockPath = lockPath
        self.refPath = refPath
        self.folder = folder
        self.fd = fd
        lockSync = BackgroundFsync(fd)
    }

    /// Takes `branch`'s lock and writes `commit` into it, if this repository's branch may be
    /// moved this way; nil when libgit2 must move it (see the type). Throws `.branchMoved` when
    /// the branch no longer points at `parent`, a `.locked` error when another writer holds the
    /// lock, and the system call's error otherwise; the lock is not left behind then.
    static func begin(_ repository: GitRepository, branch: String, from parent: ObjectID,
                      to commit: ObjectID) throws(GitError) -> BranchUpdate? {
        let refName = GitRefs.refName(branch)
        guard repository.isBare, !logsAllRefUpdates(repository) else { return nil }
        let refPath = repository.gitDirectory + "/" + refName
        let lockPath = refPath + ".lock"
        let fd = open(lockPath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
        guard fd >= 0 else {
            let code = errno
            // The ref's folder not there yet (a new branch in a folder of its own): libgit2 makes it.
            if code == ENOENT { return nil }
            if code == EEXIST {
                throw GitError.failed(operation: "lock \(refName)", code: .locked,
                                      message: "'\(lockPath)' exists: another writer is moving the branch")
            }
            throw PackWriter.failure("create '\(lockPath)'", code: code)
        }
        var written = false
        defer { if !written { close(fd); unlink(lockPath) } }
        // The compare-and-swap, under the lock: git's other writers take it too.
        let current = try repository.refs.tipLocked(branch: branch)
        guard current == parent else { throw GitError.branchMoved(branch: branch, expected: parent, actual: current) }
        let line = Array((commit.hex + "\n").utf8)
        guard line.withUnsafeBytes({ PackWriter.writeAll($0, to: fd) }) else {
            throw PackWriter.failure("write '\(lockPath)'")
        }
        written = true
        return BranchUpdate(lockPath: lockPath, refPath: refPath, folder: refPath.lastIndex(of: "/").map { String(refPath[..<$0]) } ?? ".", fd: fd)
    }

    /// Whether `core.logAllRefUpdates` asks libgit2 for reflogs (unset: not in a bare
    /// repository). Read from the config each time: a few microseconds against a save's
    /// milliseconds, and a `git config` run meanwhile is heeded. An unreadable config says yes
    /// (libgit2 moves the branch then, as it always did).
    private static func logsAllRefUpdates(_ repository: GitRepository) -> Bool {
        var config: OpaquePointer?
        guard git_repository_config_snapshot(&config, repository.repo.pointer) == 0 else {
            GitError.clearLast()
            return true
        }
        defer { git_config_free(config) }
        var buffer = git_buf()
        defer { git_buf_dispose(&buffer) }
        let rc = git_config_get_string_buf(&buffer, config, "core.logAllRefUpdates")
        GitError.clearLast()
        if rc == GIT_ENOTFOUND.rawValue { return false }
        guard rc == 0, let value = buffer.ptr else { return true }
        return !["false", "no", "off", "0"].contains(String(cString: value).lowercased())
    }

    /// Moves the branch: the lock file durable, renamed over the ref, the folder fsynced. On
    /// return the branch names the commit on disk. Called once, after the commit's pack is
    /// durable.
    func finish() throws(GitError) {
        finished = true
        let synced = lockSync.wait()
        let closed = close(fd) == 0 ? Int32(0) : errno
        guard synced == 0, closed == 0 else {
            unlink(lockPath)
            throw PackWriter.failure("fsync '\(lockPath)'", code: synced != 0 ? synced : closed)
        }
        guard rename(lockPath, refPath) == 0 else {
            let error = PackWriter.failure("rename '\(lockPath)' over the branch")
            unlink(lockPath)
            throw error
        }
        try PackWriter.syncDirectory(folder)
    }

    deinit {
        guard !finished else { return }
        // The commit failed before the branch moved: the lock released, the branch unchanged.
        _ = lockSync.wait()
        close(fd)
        unlink(lockPath)
    }
}
