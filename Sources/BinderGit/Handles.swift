internal import CGit2

// One owning class per libgit2 resource type: each wraps exactly one pointer
// and frees it in deinit. None of these is Sendable: they are created, used
// and released only while GitRepository's lock is held (see GitRepository),
// but for a blob handed out in a `StoredBlob` (see there why that is safe).

/// Process-wide libgit2 setup, done once, lazily and thread-safely (a Swift
/// `static let` initialiser runs exactly once). libgit2 is never shut down.
enum LibGit2 {
    static let ready: Void = {
        precondition(MemoryLayout<git_oid>.size == ObjectID.byteCount, "libgit2 built with a non-SHA-1 git_oid")
        let rc = git_libgit2_init()
        precondition(rc > 0, "git_libgit2_init failed (\(rc))")
        // Objects, refs and the index are fsynced (with their directories)
        // before they are renamed into place: a returned commit is on disk.
        precondition(binder_git_enable_fsync(1) == 0, "GIT_OPT_ENABLE_FSYNC_GITDIR failed")
        precondition(binder_git_enable_strict_object_creation(1) == 0, "GIT_OPT_ENABLE_STRICT_OBJECT_CREATION failed")
        // Objects are not hashed again on every read, as git reads them: an object's id was
        // computed from its content when it entered the repository (our writes; a fetched
        // pack's index is built from the pack's content), zlib checks each object's stream,
        // a document's content is authenticated by NIP-44's MAC, and `binder verify` and
        // `git fsck` hash everything. Hashing on read was two thirds of a cold history walk
        // (a folder's 170 KB tree hashed anew for each commit; docs/BENCHMARKS.md).
        precondition(binder_git_enable_strict_hash_verification(0) == 0, "GIT_OPT_ENABLE_STRICT_HASH_VERIFICATION failed")
        // Packs are read through mapped windows; with the defaults every page read once
        // stays mapped, so a mount that read a 126 MB pack held it all as resident memory.
        precondition(binder_git_set_pack_windows(packWindowSize, packMappedLimit) == 0, "GIT_OPT_SET_MWINDOW_* failed")
        precondition(binder_git_set_cache_max_size(objectCacheLimit) == 0, "GIT_OPT_SET_CACHE_MAX_SIZE failed")
        // No blob is cached (libgit2's default, pinned here): `StoredBlob` relies on it.
        precondition(binder_git_set_blob_cache_limit(0) == 0, "GIT_OPT_SET_CACHE_OBJECT_LIMIT failed")
    }()

    /// Hash each object again when it is read (process-wide), for a process that checks a
    /// repository (`binder verify`) rather than serving it.
    static func hashObjectsOnRead() {
        _ = ready
        precondition(binder_git_enable_strict_hash_verification(1) == 0, "GIT_OPT_ENABLE_STRICT_HASH_VERIFICATION failed")
    }

    /// One mapped window of a pack (libgit2's unit of mapping).
    static let packWindowSize = 1 << 20
    /// At most this much of all packs mapped at once (issue 13: memory flat at any size). Each
    /// mapped page counts as the daemon's memory; at 16 MiB a mount that had read everything
    /// held 14 MB of pack. At 4 MiB (2 MiB windows), then at 2 MiB (1 MiB windows), cold
    /// `tar`, `grep -r` and `cp -r`, a history walk and saves took the same time as before,
    /// and the packs' resident pages after a `tar` of the 10,000 entries went 8.0 → 5.4 MiB,
    /// most of the rest their indexes, which libgit2 maps whole (docs/BENCHMARKS.md).
    static let packMappedLimit = 2 << 20
    /// At most this much of parsed commits and trees kept by libgit2 (its count: the objects'
    /// own sizes). With the default, 256 MiB, counting a binder's 38,000 commits for its status
    /// left 16 MiB of them in the daemon for good. At 4 MiB the parsed objects took 11 MiB of
    /// the daemon's heap after 10,000 saves (heaptrack: a parsed commit or tree is about three
    /// times its size), a quarter of it; a save reads back only the commit and trees it wrote.
    static let objectCacheLimit = 1 << 20
}

/// Owns a `git_repository *`.
final class RepositoryHandle {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { git_repository_free(pointer) }
}

/// Owns a `git_odb *` (a counted reference to the repository's object database).
final class OdbHandle {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { git_odb_free(pointer) }
}

/// Owns a `git_odb_object *` (an object's raw bytes as read from the database).
final class OdbObjectHandle {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { git_odb_object_free(pointer) }
}

/// Owns a `git_tree *`.
final class TreeHandle {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { git_tree_free(pointer) }
}

/// Owns a `git_tree_entry *` returned by `git_tree_entry_bypath` (entries
/// borrowed from a tree with `git_tree_entry_byindex` are not owned).
final class TreeEntryHandle {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { git_tree_entry_free(pointer) }
}

/// Owns a `git_commit *`.
final class CommitHandle {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { git_commit_free(pointer) }
}

/// Owns a `git_blob *`.
final class BlobHandle {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { git_blob_free(pointer) }
}

/// Owns a `git_reference *`.
final class ReferenceHandle {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { git_reference_free(pointer) }
}

/// Owns a `git_signature *`.
final class SignatureHandle {
    let pointer: UnsafeMutablePointer<git_signature>
    init(_ pointer: UnsafeMutablePointer<git_signature>) { self.pointer = pointer }
    deinit { git_signature_free(pointer) }
}

/// Owns a `git_remote *`.
final class RemoteHandle {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { git_remote_free(pointer) }
}

/// Owns a `git_packbuilder *`.
final class PackBuilderHandle {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { git_packbuilder_free(pointer) }
}

/// Owns a `git_revwalk *`.
final class RevwalkHandle {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { git_revwalk_free(pointer) }
}

/// Where a commit's objects are written before they reach disk as one pack (see
/// `GitCommits.inOnePackLocked`): an object database whose one writable backend is
/// libgit2's in-memory `mempack`, reading everything else from the repository's objects
/// folder, added as an alternate (libgit2 never writes to an alternate). Owns `odb`; the
/// backend `memory` belongs to `odb` and is freed with it.
final class CommitStaging {
    let odb: OdbHandle
    let memory: OpaquePointer

    init(objects: String) throws(GitError) {
        var odbPointer: OpaquePointer?
        try check(git_odb_new(&odbPointer), "stage objects in memory")
        odb = OdbHandle(odbPointer!)
        var backend: OpaquePointer?
        try check(git_mempack_new(&backend), "stage objects in memory")
        // Above the alternate's priority: writes and lookups try memory first. (Adding fails
        // only when out of memory; the backend then leaks, as in `onePackDatabase`.)
        try check(git_odb_add_backend(odb.pointer, backend, 1_000), "stage objects in memory")
        memory = backend!
        try check(git_odb_add_disk_alternate(odb.pointer, objects), "read objects from '\(objects)'")
    }
}
