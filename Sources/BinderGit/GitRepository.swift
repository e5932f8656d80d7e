internal import CGit2
import Foundation
import Synchronization

/// A git repository (bare or with a work tree), read straight from its object
/// database and written commit by commit.
///
/// Thread safety: libgit2 objects of one repository must not be used from two
/// threads at once. `lock` guards `repo`, `odb`, `commitStaging`, `recentTrees` and every libgit2 object
/// derived from them (trees, commits, blobs, references, signatures): each is
/// created, used and freed inside one `locked { }` call, and only Swift values
/// leave it. `isBare`, `gitDirectory` and `workTree` are immutable after init.
/// Hence `@unchecked Sendable`.
///
/// Fetch and push over Smart HTTP (Remote.swift) run under the same lock, so a
/// transfer holds it for its whole length: a process that must keep answering
/// while one runs (the mount) opens a second instance for the network.
public final class GitRepository: @unchecked Sendable {
    /// Guards `repo`, `odb`, `commitStaging` and all libgit2 objects derived from them.
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
    /// Whether `commitChanges` may take the spliced path (tests turn it off to compare with
    /// the general one). Set before use, not while other threads commit.
    var splicedCommitsEnabled = true
    /// The last count `aheadBehind` made. Use only inside `locked { }`.
    var lastCount: CommitCount?
    /// How many commits took the spliced path (for tests). Use only inside `locked { }`.
    var splicedCommitCount = 0

    /// True for a bare repository (no work tree).
    public let isBare: Bool
    /// The git directory (`…/repo.git` or `…/worktree/.git`), without a trailing slash.
    public let gitDirectory: String
    /// The work tree of a non-bare repository, without a trailing slash; nil when bare.
    public let workTree: String?

    private init(_ repo: RepositoryHandle) throws(GitError) {
        var odbPointer: OpaquePointer?
        try check(git_repository_odb(&odbPointer, repo.pointer), "open object database")
        self.repo = repo
        self.odb = OdbHandle(odbPointer!)
        self.isBare = git_repository_is_bare(repo.pointer) == 1
        self.gitDirectory = Self.trimmedPath(git_repository_path(repo.pointer))
        self.workTree = git_repository_workdir(repo.pointer).map { Self.trimmedPath($0) }
    }

    /// Opens the repository at `path`: a bare repository's directory, a `.git`
    /// directory, or a work tree. Parent directories are not searched.
    public static func open(path: String) throws(GitError) -> GitRepository {
        _ = LibGit2.ready
        GitError.clearLast()
        var pointer: OpaquePointer?
        try check(git_repository_open_ext(&pointer, path, GIT_REPOSITORY_OPEN_NO_SEARCH.rawValue, nil),
                  "open repository '\(path)'")
        return try GitRepository(RepositoryHandle(pointer!))
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
        var fresh: OpaquePointer?
        guard git_repository_open_ext(&fresh, gitDirectory, GIT_REPOSITORY_OPEN_NO_SEARCH.rawValue, nil) == 0, let fresh else { return }
        var odbPointer: OpaquePointer?
        let opened = git_repository_odb(&odbPointer, fresh) == 0
        // Freed first: freeing a repository disowns its database, which `set_odb` below then
        // gives to this one.
        git_repository_free(fresh)
        guard opened, let odbPointer else { return }
        let replacement = OdbHandle(odbPointer)
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

    /// Returns once every object database replaced so far is freed (its removed packs closed
    /// and unmapped).
    public static func waitForReplacedDatabases() { replacedDatabases.sync {} }

    // MARK: - References

    /// The commit `refs/heads/<name>` points at; nil when the branch does not
    /// exist (an empty repository, or an unborn branch).
    public func branchTip(_ name: String = "main") throws(GitError) -> ObjectID? {
        try locked { () throws(GitError) in try tipLocked(branch: name) }
    }

    /// Lock held.
    func tipLocked(branch: String) throws(GitError) -> ObjectID? {
        var oid = git_oid()
        let rc = git_reference_name_to_id(&oid, repo.pointer, Self.refName(branch))
        if rc == GIT_ENOTFOUND.rawValue { return nil }
        try check(rc, "read branch '\(branch)'")
        return ObjectID(&oid)
    }

    static func refName(_ branch: String) -> String { "refs/heads/" + branch }

    // MARK: - Objects

    /// Whether the object database holds `id` (any type).
    public func objectExists(_ id: ObjectID) -> Bool {
        // Cannot fail: a lookup answers yes or no.
        (try? locked { () throws(GitError) in
            var oid = id.oid
            return git_odb_exists(odb.pointer, &oid) == 1
        }) ?? false
    }

    /// The size in bytes of blob `id`, read from the object header (loose
    /// objects inflate only their header; packed deltas resolve only sizes).
    public func blobSize(_ id: ObjectID) throws(GitError) -> Int {
        try locked { () throws(GitError) in
            var oid = id.oid
            var size = 0
            var type = GIT_OBJECT_INVALID
            try check(git_odb_read_header(&size, &type, odb.pointer, &oid), "read size of blob \(id)")
            guard type == GIT_OBJECT_BLOB else {
                throw GitError.failed(operation: "read size of blob \(id)", code: .notFound,
                                      message: "object is a \(Self.typeName(type)), not a blob")
            }
            return size
        }
    }

    /// From now on, this process hashes every object it reads and refuses one whose content
    /// does not match its id (a serving process does not: see `LibGit2.ready`).
    public static func hashObjectsOnRead() { LibGit2.hashObjectsOnRead() }

    /// The most bytes a blob read here (`readBlob`, `blob`) may have, unless the caller asks
    /// for fewer: its size is read from its header first, and a larger blob is refused unread.
    /// A blob of a gigabyte of zeros is a few megabytes in git; read whole, it took the mount's
    /// daemon to 2.9 GB (an attacker who can push to the binder's server can write one). The
    /// mount sets it from its attachment limit (`limitBlobs`).
    private let maximumBlobBytes = Atomic<Int>(Int.max)

    public func limitBlobs(to bytes: Int) { maximumBlobBytes.store(bytes, ordering: .relaxed) }

    /// The content of blob `id`, refused when over `maxSize` bytes (or the repository's limit).
    public func readBlob(_ id: ObjectID, maxSize: Int = .max) throws(GitError) -> [UInt8] {
        try blob(id, maxSize: maxSize).withUnsafeBytes { [UInt8]($0) }
    }

    /// Blob `id` as libgit2 read it, for reading after the lock is let go without a copy.
    public func blob(_ id: ObjectID, maxSize: Int = .max) throws(GitError) -> StoredBlob {
        let limit = min(maxSize, maximumBlobBytes.load(ordering: .relaxed))
        return try locked { () throws(GitError) in
            if limit < .max {
                var oid = id.oid
                var size = 0
                var type = GIT_OBJECT_INVALID
                try check(git_odb_read_header(&size, &type, odb.pointer, &oid), "read blob \(id)")
                guard size <= limit else {
                    throw GitError.failed(operation: "read blob \(id)", code: .invalid,
                                          message: "\(size) bytes, more than the \(limit) a file may have here")
                }
            }
            return StoredBlob(try lookupBlobLocked(id))
        }
    }

    /// Stores `bytes` as a blob (fsynced) and returns its id. Storing content
    /// that already exists is a no-op returning the same id.
    public func writeBlob(_ bytes: [UInt8]) throws(GitError) -> ObjectID {
        try locked { () throws(GitError) in
            var oid = git_oid()
            let count = bytes.count
            // libgit2 wants a non-NULL buffer even for length 0.
            let rc = (count == 0 ? [0] : bytes).withUnsafeBytes { buffer in
                git_blob_create_from_buffer(&oid, repo.pointer, buffer.baseAddress, count)
            }
            try check(rc, "write blob")
            return ObjectID(&oid)
        }
    }

    /// Lock held.
    func lookupBlobLocked(_ id: ObjectID) throws(GitError) -> BlobHandle {
        var oid = id.oid
        var pointer: OpaquePointer?
        try check(git_blob_lookup(&pointer, repo.pointer, &oid), "read blob \(id)")
        return BlobHandle(pointer!)
    }

    static func typeName(_ type: git_object_t) -> String {
        git_object_type2string(type).map { String(cString: $0) } ?? "object"
    }

    // MARK: - Work tree

    /// For a non-bare repository: makes the index and the work tree match
    /// HEAD (a forced checkout: tracked files are rewritten or removed,
    /// untracked files are left alone), so that `git status` stays clean after
    /// `commitChanges`. No-op for a bare repository or an unborn HEAD.
    /// `paths` limits the checkout to what a commit changed (pathspecs: a folder covers what is
    /// under it); nil checks out everything.
    ///
    /// A symbolic link in the work tree where HEAD has a file or folder is removed first (see
    /// `removeLinksInTheWay`): nothing in a repository can make the checkout write or delete
    /// outside the work tree. libgit2 itself refuses paths with `..` or `.git` components.
    public func syncWorkTreeToHead(paths: [String]? = nil) throws(GitError) {
        guard !isBare, let workTree else { return }
        if let head = try headCommit() {
            try removeLinksInTheWay(workTree: workTree, commit: head, paths: paths)
        }
        try locked { () throws(GitError) in
            var options = git_checkout_options()
            try check(git_checkout_options_init(&options, UInt32(GIT_CHECKOUT_OPTIONS_VERSION)),
                      "init checkout options")
            options.checkout_strategy = GIT_CHECKOUT_FORCE.rawValue
            var cStrings: [UnsafeMutablePointer<CChar>?] = (paths ?? []).map { strdup($0) }
            defer { cStrings.forEach { free($0) } }
            let rc = cStrings.withUnsafeMutableBufferPointer { buffer -> Int32 in
                if paths != nil {
                    options.paths = git_strarray(strings: buffer.baseAddress, count: buffer.count)
                }
                return git_checkout_head(repo.pointer, &options)
            }
            if rc == GIT_EUNBORNBRANCH.rawValue { return }
            try check(rc, "check out HEAD into '\(workTree)'")
        }
    }

    /// The commit HEAD points at; nil when HEAD is unborn.
    private func headCommit() throws(GitError) -> ObjectID? {
        try locked { () throws(GitError) -> ObjectID? in
            var oid = git_oid()
            let rc = git_reference_name_to_id(&oid, repo.pointer, "HEAD")
            if rc == GIT_ENOTFOUND.rawValue || rc == GIT_EUNBORNBRANCH.rawValue { return nil }
            try check(rc, "resolve HEAD")
            return ObjectID(&oid)
        }
    }

    /// A checkout writes and deletes through the work tree as it finds it: a symbolic link
    /// where `commit` has a file or a folder (left by an earlier tree that had a link there,
    /// checked out by binder or by stock git) would lead it outside the work tree: writing
    /// `link` writes the file it points at, deleting `link/x.json` deletes a file in the folder
    /// it points at. Such links are removed first, the link itself and never what it points
    /// at, as git does. The paths to be checked out, their folders and what is below them (all
    /// of `commit` for nil) are looked at, shallow first; a path with an unsafe component
    /// (`..`, `.git`) is left alone (the checkout refuses it).
    private func removeLinksInTheWay(workTree: String, commit: ObjectID, paths: [String]?) throws(GitError) {
        var checked = Set<String>()
        func add(_ entry: TreeEntry) {
            if entry.kind == .tree || entry.kind == .blob { checked.insert(entry.path) }
        }
        if let paths {
            for path in paths {
                checked.formUnion(Self.ancestors(of: path))
                guard let entry = (try? entry(at: path, commit: commit)) ?? nil else { continue }
                add(entry)
                if entry.kind == .tree, let below = (try? listFolder(commit: commit, path: path, recursive: true)) ?? nil {
                    below.forEach(add)
                }
            }
        } else {
            try listTree(commit: commit).forEach(add)
        }
        for path in checked.sorted(by: { $0.utf8.count < $1.utf8.count }) {
            guard let parts = try? Self.components(of: path),
                  !parts.contains(where: { $0.lowercased() == ".git" }) else { continue }
            let full = workTree + "/" + path
            var info = stat()
            guard lstat(full, &info) == 0, info.st_mode & S_IFMT == S_IFLNK else { continue }
            // A link that stays would be written through: then no checkout at all.
            if unlink(full) != 0 {
                let code = errno
                guard code == ENOENT else {
                    throw .failed(operation: "remove the symbolic link '\(path)' before checking out",
                                  code: .other(-code), message: String(cString: strerror(code)))
                }
            }
        }
    }

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

/// A blob's content in libgit2's own buffer (inflated from its pack), held by this owner once the
/// repository's lock is let go: a 3 MB attachment is then decrypted from the one copy of its
/// ciphertext, not from a second one taken under the lock.
///
/// Reading and freeing the blob without the lock is safe because nothing else refers to it:
/// libgit2 caches no blob (`LibGit2.ready` pins the blob cache limit at 0), so the blob and
/// its buffer belong to this handle alone, and its buffer is not tied to the pack it came from
/// (which a fold may remove meanwhile). Not Sendable: it is read where it was looked up.
public final class StoredBlob {
    private let handle: BlobHandle

    init(_ handle: BlobHandle) { self.handle = handle }

    /// The content's length in bytes.
    public var count: Int { Int(git_blob_rawsize(handle.pointer)) }

    /// Runs `body` over the content (empty for an empty blob); the bytes live as long as `self`.
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        let size = count
        guard size > 0, let content = git_blob_rawcontent(handle.pointer) else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return try withExtendedLifetime(handle) { () throws(E) -> R in try body(UnsafeRawBufferPointer(start: content, count: size)) }
    }
}
