// The line between binder's own git Smart HTTP server (the engine: pkt-lines, negotiation,
// packs built and indexed by libgit2, git's checks on incoming objects) and a store that keeps
// a repository's objects and refs (the PostgreSQL store; a folder of bare repositories for the
// engine's own tests). The engine never knows where objects live; a store never parses the
// protocol. Issue 42: "Git Smart HTTP served from the database, without spawning git".

/// A ref as a store holds it: a full name (`refs/heads/main`) and a 40-hex object id.
struct StoredRef: Sendable, Equatable {
    let name: String
    let target: String
}

/// One ref command of a push as the client sent it; nil for git's zero id (`old` nil: create
/// the ref; `new` nil: delete it).
struct RefCommand: Sendable, Equatable {
    let ref: String
    let old: String?
    let new: String?
}

/// A pushed pack after the engine indexed it, completed it (a thin pack's bases appended, so it
/// stands alone) and checked every object in it as `receive.fsckObjects` would: a `.pack` and
/// its `.idx` in the push's quarantine folder, named by the pack's checksum as git names them.
/// The engine removes the quarantine folder after `GitObjectHome.store` returns: a store that
/// keeps the files moves or copies them before returning.
struct ReceivedPack: Sendable {
    let packPath: String
    let indexPath: String
    /// The pack's trailing SHA-1 (40 hex), which names the pair (`pack-<checksum>.pack`).
    let checksum: String
    let objects: Int
    /// The `.pack` file's size.
    let bytes: Int64
}

/// What became of one command of a push: applied, or refused with the reason git's
/// `report-status` carries (`ng <ref> <reason>`), e.g. "non-fast-forward".
enum RefOutcome: Sendable, Equatable {
    case applied
    case refused(String)
}

/// One repository as the engine sees it. The engine calls, per request: `refs()` first, then
/// `objectRepository()`; for a push, then `store` once. Everything it writes goes through
/// `store`.
protocol GitObjectHome: Sendable {
    /// The refs now. Only names under `refs/`; HEAD is the engine's (it advertises
    /// `refs/heads/main` as HEAD when that branch exists).
    func refs() async throws(StorageError) -> [StoredRef]
    /// The path of a bare git repository libgit2 can open that holds at least every object the
    /// refs returned by the last `refs()` reach (for the database store: the replica's cache of
    /// the repository's packs, brought up to date before returning; a cache it may lose). The
    /// engine reads objects from it, completes thin packs against it, and never writes to it.
    func objectRepository() async throws(StorageError) -> String
    /// A folder on the same file system as `objectRepository()` where the engine makes (and
    /// removes) each push's quarantine folder.
    var quarantine: String { get }
    /// Stores `pack` (nil when the push brought no object) and applies `commands`, all or
    /// nothing, in one transaction with the pack: each ref only if it is still at its command's
    /// `old` (compare-and-swap against every other request, whichever replica runs it). When a
    /// ref moved meanwhile nothing is stored and every command is refused (the moved ones with
    /// "non-fast-forward", the others with "atomic push failed"), as a lost race in git. The
    /// engine has checked before calling that each `new` is stored or in `pack`, reaches only
    /// objects that are, and fast-forwards its `old`; deletions it refuses itself.
    /// Throws for the store's own refusals (`.storageQuotaUsedUp`, `.idTaken`, `.gone`,
    /// `.repositoryQuota`) and failures (`.backend`): then nothing is stored.
    func store(_ pack: ReceivedPack?, commands: [RefCommand]) async throws(StorageError) -> [RefOutcome]
}
