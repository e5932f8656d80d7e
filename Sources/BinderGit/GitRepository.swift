internal import CGit2
import Foundation
import Synchronization

/// A git repository (bare or with a work tree): the libgit2 handle, the lock that guards it,
/// and the owners that do the repository's jobs over it, each a small view a reader can take
/// in alone:
///
/// - `objects` (`GitObjects`): the object database: blobs read and written, ids, lookups;
/// - `trees` (`GitTrees`): trees read as listings read them;
/// - `commits` (`GitCommits`): commits read, and written as one pack each;
/// - `history` (`GitHistory`): logs, walks, versions of a path, removals, ahead/behind;
/// - `refs` (`GitRefs`): branch tips and refs moved by compare-and-swap;
/// - `remotes` (`GitRemotes`) and `config` (`GitConfig`): Smart HTTP fetch and push, `.git/config`;
/// - `packs` (`GitPacks`): repacking and geometric folds;
/// - `checkout` (`GitCheckout`): the work tree of a non-bare repository.
///
/// Why owners over one handle rather than repositories of their own: libgit2 objects of one
/// repository must not be used from two threads at once, and a commit, a listing and a fold
/// all use the same `git_repository` and object database. So there is one handle and one
/// lock, here, and every owner is a struct holding only this repository: made on each use
/// (no state, no second lock, no copy), it takes `locked { }` for its public calls and calls
/// the other owners' `…Locked` helpers inside it. What the lock guards across calls lives here
/// too, so that one file shows all of it.
///
/// Thread safety: `lock` guards `repo`, `odb`, `commitStaging`, `recentTrees`, `lastCount`,
/// `splicedCommitCount`, `branchUpdateCount` and every libgit2 object derived from them (trees, commits, blobs,
/// references, signatures): each is created, used and freed inside one `locked { }` call, and
/// only Swift values leave it. `isBare`, `gitDirectory` and `workTree` are immutable after
/// init. Hence `@unchecked Sendable`.
///
/// Fetch and push over Smart HTTP (`remotes`) run under the same lock, so a transfer holds it
/// for its whole length: a process that must keep answering while one runs (the mount) opens
/// a second instance for the network.
public final class GitRepository: @unchecked Sendable {
    /// Guards `repo`, `odb`, the fields below that say so, and all libgit2 objects derived from them.
    private let lock = NSLock()
    /// The libgit2 repository. Use only inside `locked { }`.
    let repo: RepositoryHandle
    /// The repository's object database. Use only inside `locked { }`; replaced there when
    /// packs were removed (`forgetRemovedPacksLocked`).
    private(set) var odb: OdbHandle
    /// The value of `packRemovals` this instance's object database has seen. Guarded by `lock`.
    private var packRemovalsSeen = GitRepository.packRemovals.load(ordering: .acquiring)

    /// How many times this process removed packs (a fold or repack rolled them into a new
    /// one). libgit2 adds the packs it finds to an object database but never drops one whose
    /// files were removed: each instance would keep every pack ever folded open and mapped,
    /// and search them all on every lookup (after importing 10,000 records: 11,500 open files
    /// of removed packs, 11,800 mappings, and saves 4x slower). An instance that has not seen
    /// the latest removal opens its object database afresh before its next use.
    static let packRemovals = Atomic<Int>(0)
    /// Frees the object databases `forgetRemovedPacksLocked` replaced, one at a time, away from
    /// `lock` and from the thread that replaced them (`waitForReplacedDatabases`).
    private static let replacedDatabases = DispatchQueue(label: "binder.git.replaced-databases", qos: .utility)
    /// Where commits stage their objects before packing them; made at the first commit.
    /// Use only inside `locked { }`.
    var commitStaging: CommitStaging?
    /// The trees the last spliced commit wrote, by id, as bytes: the next save splices into
    /// them without reading them back (`splicedCommitLocked`). Use only inside `locked { }`.
    var recentTrees: [ObjectID: [UInt8]] = [:]
    /// The files the spliced path's packs are written to, made ahead (`SparePackFiles`), from
    /// this instance's first spliced commit on. Use only inside `locked { }`.
    var sparePackFiles: SparePackFiles?
    /// Whether `commitChanges` may take the spliced path (tests turn it off to compare with
    /// the general one). Set before use, not while other threads commit.
    var splicedCommitsEnabled = true
    /// The last count `aheadBehind` made. Use only inside `locked { }`.
    var lastCount: CommitCount?
    /// How many commits took the spliced path (for tests). Use only inside `locked { }`.
    var splicedCommitCount = 0
    /// How many branch moves went through `BranchUpdate`, not libgit2 (for tests). Use only
    /// inside `locked { }`.
    var branchUpdateCount = 0
    /// The most bytes a blob read here (`GitObjects.readBlob`, `blob`) may have, unless the
    /// caller asks for fewer: its size is read from its header first, and a larger blob is
    /// refused unread. A blob of a gigabyte of zeros is a few megabytes in git; read whole, it
    /// took the mount's daemon to 2.9 GB (an attacker who can push to the binder's server can
    /// write one). The mount sets it from its attachment limit (`GitObjects.limitBlobs`).
    let maximumBlobBytes = Atomic<Int>(Int.max)

    /// True for a bare repository (no work tree).
    public let isBare: Bool
    /// The git directory (`…/repo.git` or `…/worktree/.git`), without a trailing slash.
    public let gitDirectory: String
    /// The work tree of a non-bare repository, without a trailing slash; nil when bare.
    public let workTree: String?

    /// Whether this instance reads packs of its own rather than those every instance of the
    /// process shares (`openForWalk`). Immutable after init.
    let ownsPacks: Bool
    /// How many object databases with packs of its own this instance opened (`ownsPacks`): a
    /// new one must name its packs otherwise than the one it replaces, which is still open
    /// while it is made (libgit2 would hand it the same packs, caches and all), so the names
    /// alternate between `objects/.` and `objects/./.`. Guarded by `lock`.
    private var ownDatabasesOpened = 1

    private init(_ repo: RepositoryHandle, ownPacks: Bool = false) throws(GitError) {
        let gitDirectory = Self.trimmedPath(git_repository_path(repo.pointer))
        if ownPacks {
            // Given before anything asks for the repository's database (libgit2 makes its
            // default one, with the shared packs, at the first such request).
            let own = try Self.databaseWithOwnPacks(gitDirectory: gitDirectory, spelling: 0)
            try check(git_repository_set_odb(repo.pointer, own.pointer), "open object database")
        }
        var odbPointer: OpaquePointer?
        try check(git_repository_odb(&odbPointer, repo.pointer), "open object database")
        self.repo = repo
        self.odb = OdbHandle(odbPointer!)
        self.ownsPacks = ownPacks
        self.isBare = git_repository_is_bare(repo.pointer) == 1
        self.gitDirectory = gitDirectory
        self.workTree = git_repository_workdir(repo.pointer).map { Self.trimmedPath($0) }
    }

    deinit {
        // Its thread holds the spares, not this instance: stopped here, or it would run on.
        sparePackFiles?.close()
    }

    /// Opens the repository at `path`: a bare repository's directory, a `.git`
    /// directory, or a work tree. Parent directories are not searched.
    public static func open(path: String) throws(GitError) -> GitRepository {
        try GitRepository(handle(path: path))
    }

    /// The libgit2 repository at `path`, parent directories not searched.
    private static func handle(path: String) throws(GitError) -> RepositoryHandle {
        _ = LibGit2.ready
        GitError.clearLast()
        var pointer: OpaquePointer?
        try check(git_repository_open_ext(&pointer, path, GIT_REPOSITORY_OPEN_NO_SEARCH.rawValue, nil),
                  "open repository '\(path)'")
        return RepositoryHandle(pointer!)
    }

    /// Opens the repository at `path` for one walk over its history, with packs of its own.
    /// libgit2 shares an open pack between all the instances of a process, by its file's
    /// name, and with it the pack's cache of delta bases (up to 16 MiB a pack), freed only
    /// when no instance has the pack open any more. A walk over every commit's trees on a
    /// second instance (`.binder/deleted`, a record's versions) so filled the caches of the
    /// packs the view's own instance keeps open: 35 MiB more in the mount's daemon at 10,000
    /// records and 15,000 commits, for as long as it ran (docs/BENCHMARKS.md). This instance
    /// names its packs `objects/./pack/…`, the same files under a name no other instance
    /// uses, so its caches go with it.
    public static func openForWalk(path: String) throws(GitError) -> GitRepository {
        try GitRepository(handle(path: path), ownPacks: true)
    }

    /// An object database of the repository at `gitDirectory` as libgit2's default one is
    /// (its packs first, then its loose objects), whose packs no other instance shares (see
    /// `openForWalk`). The database owns both backends once added. (Adding fails only when out
    /// of memory; the backend then leaks, as in `GitPacks.packsDatabase`.)
    private static func databaseWithOwnPacks(gitDirectory: String, spelling: Int) throws(GitError) -> OdbHandle {
        var odbPointer: OpaquePointer?
        try check(git_odb_new(&odbPointer), "open object database")
        let odb = OdbHandle(odbPointer!)
        var packs: OpaquePointer?
        try check(git_odb_backend_pack(&packs, gitDirectory + (spelling % 2 == 0 ? "/objects/." : "/objects/./.")), "open packs")
        // libgit2's own priorities: packs (2) are searched before loose objects (1).
        try check(git_odb_add_backend(odb.pointer, packs, 2), "open packs")
        var loose: OpaquePointer?
        try check(git_odb_backend_loose(&loose, gitDirectory + "/objects", -1, 0, 0, 0), "open loose objects")
        try check(git_odb_add_backend(odb.pointer, loose, 1), "open loose objects")
        return odb
    }

    /// Creates a new, empty repository at `path` (creating missing folders),
    /// with HEAD pointing at the unborn `refs/heads/<initialBranch>`. For a
    /// non-bare repository `path` is the work tree. Fails with `.exists` if a
    /// repository is already there.
    public static func create(path: String, bare: Bool, initialBranch: String = "main") throws(GitError) -> GitRepository {
        _ = LibGit2.ready
        GitError.clearLast()
        var options = git_repository_init_options()
        try check(git_repository_init_options_init(&options, UInt32(GIT_REPOSITORY_INIT_OPTIONS_VERSION)),
                  "init repository options")
        options.flags = GIT_REPOSITORY_INIT_MKPATH.rawValue | GIT_REPOSITORY_INIT_NO_REINIT.rawValue
        if bare { options.flags |= GIT_REPOSITORY_INIT_BARE.rawValue }
        var pointer: OpaquePointer?
        let rc = initialBranch.withCString { head in
            options.initial_head = head
            return git_repository_init_ext(&pointer, path, &options)
        }
        try check(rc, "create repository '\(path)'")
        return try GitRepository(RepositoryHandle(pointer!))
    }

    /// Runs `body` holding the lock; libgit2 objects made inside are freed
    /// before it returns (they are locals of `body`).
    func locked<T>(_ body: () throws(GitError) -> T) throws(GitError) -> T {
        lock.lock()
        defer { lock.unlock() }
        forgetRemovedPacksLocked()
        GitError.clearLast()
        return try body()
    }

    /// Lets go of the packs removed since this instance's last use now, rather than at its
    /// next: their files stop holding disk space while the instance is idle.
    public func releaseRemovedPacks() {
        lock.lock()
        defer { lock.unlock() }
        forgetRemovedPacksLocked()
    }

    /// When packs were removed since this instance's object database was opened, replaces it
    /// with a fresh one (the repository's own, as `open` makes it), which knows only the packs
    /// there are now; the old one, and with it the removed packs' files and mappings, is
    /// freed on `replacedDatabases`. The commit staging database reads through to disk the
    /// same way and is made again when next needed. Should opening fail (out of file
    /// descriptors), the old database stays in use (it still reads every object: removed packs
    /// stay open) and the next call tries again.
    private func forgetRemovedPacksLocked() {
        let removals = Self.packRemovals.load(ordering: .acquiring)
        guard removals != packRemovalsSeen else { return }
        guard let replacement = ownsPacks ? nextDatabaseWithOwnPacksLocked() : sharedDatabase() else { return }
        guard git_repository_set_odb(repo.pointer, replacement.pointer) == 0 else { return }
        // Freeing the old databases unmaps the packs removed and empties their object caches:
        // 4-10 ms after a fold at 10,000 records, which the save that came first waited for
        // under the lock. Nothing else holds them; they are freed on a queue.
        let replaced = ReplacedDatabases(odb, commitStaging)
        odb = replacement
        commitStaging = nil
        packRemovalsSeen = removals
        Self.replacedDatabases.async { replaced.free() }
    }

    /// For an instance with packs of its own (`openForWalk`): replaces its object database
    /// with a fresh one and frees the old, and with it the delta bases its packs cached. libgit2
    /// bounds that cache at 16 MiB a pack, not in all: one walk over 14,000 commits of a binder
    /// of 10,000 records held 19 MiB of it at its end, freed with the walker but counted in the
    /// daemon's peak. A walk calls this every `GitHistory.commitsPerCacheDrop` commits. Lock
    /// held; nothing for an instance whose packs are shared (others may be using them).
    func dropPackCachesLocked() {
        guard ownsPacks, let fresh = nextDatabaseWithOwnPacksLocked(),
              git_repository_set_odb(repo.pointer, fresh.pointer) == 0 else { return }
        // Freed here, not on `replacedDatabases`: no other instance reads these packs.
        odb = fresh
        commitStaging = nil
    }

    /// A new object database with packs of its own, named otherwise than the one in use (see
    /// `ownDatabasesOpened`); nil when it cannot be opened now. Lock held.
    private func nextDatabaseWithOwnPacksLocked() -> OdbHandle? {
        guard let fresh = try? Self.databaseWithOwnPacks(gitDirectory: gitDirectory, spelling: ownDatabasesOpened) else { return nil }
        ownDatabasesOpened += 1
        return fresh
    }

    /// A fresh object database of this repository as `open` makes it (the process's shared
    /// packs); nil when it cannot be opened now.
    private func sharedDatabase() -> OdbHandle? {
        var fresh: OpaquePointer?
        guard git_repository_open_ext(&fresh, gitDirectory, GIT_REPOSITORY_OPEN_NO_SEARCH.rawValue, nil) == 0, let fresh else { return nil }
        var odbPointer: OpaquePointer?
        let opened = git_repository_odb(&odbPointer, fresh) == 0
        // Freed first: freeing a repository disowns its database, which `set_odb` then gives
        // to this one.
        git_repository_free(fresh)
        guard opened, let odbPointer else { return nil }
        return OdbHandle(odbPointer)
    }

    /// Returns once every object database replaced so far is freed (its removed packs closed
    /// and unmapped).
    public static func waitForReplacedDatabases() { replacedDatabases.sync {} }

    // MARK: - Owners (views over this handle; see the type's comment)

    /// Blobs read and written, object ids, and the lookups the other owners share.
    public var objects: GitObjects { GitObjects(repository: self) }
    /// Trees read as listings read them.
    public var trees: GitTrees { GitTrees(repository: self) }
    /// Commits read, and written as one pack each.
    public var commits: GitCommits { GitCommits(repository: self) }
    /// Logs, walks, versions of a path, removals, merge bases, ahead/behind counts.
    public var history: GitHistory { GitHistory(repository: self) }
    /// Branch tips and refs.
    public var refs: GitRefs { GitRefs(repository: self) }
    /// Fetch and push over Smart HTTP.
    public var remotes: GitRemotes { GitRemotes(repository: self) }
    /// The repository's own config file.
    public var config: GitConfig { GitConfig(repository: self) }
    /// Repacks and folds.
    public var packs: GitPacks { GitPacks(repository: self) }
    /// The work tree of a non-bare repository.
    public var checkout: GitCheckout { GitCheckout(repository: self) }

    private static func trimmedPath(_ cString: UnsafePointer<CChar>) -> String {
        var path = String(cString: cString)
        while path.count > 1, path.hasSuffix("/") { path.removeLast() }
        return path
    }
}

/// An object database and commit staging replaced after packs were removed, on their way to
/// `replacedDatabases`: `free()` drops them on that queue's thread, whichever thread lets go of
/// this holder last. Reached only by `forgetRemovedPacksLocked` (which no longer uses them) and
/// the queue, hence `@unchecked Sendable`.
private final class ReplacedDatabases: @unchecked Sendable {
    private var held: (OdbHandle, CommitStaging?)?
    init(_ odb: OdbHandle, _ staging: CommitStaging?) { held = (odb, staging) }
    func free() { held = nil }
}
