import BinderGit

/// The checks a binder's objects get before git reads them as a binder (`binder mount`,
/// `binder verify`): a loose object cut short (a crash while it was written) would have
/// libgit2 inflate it forever (`LooseObjects`), and `verify` hashes every object it reads.
/// (Git's lock files and unfinished packs are BinderSystem's `GitLockFiles` and
/// `GitTemporaryPacks`: they are files, not objects.)
public enum RepositoryCare {
    /// The damaged loose objects (paths under `objects/`, sorted), left where they are.
    public static func damagedObjects(gitDirectory: String) -> [String] { LooseObjects.damaged(gitDirectory: gitDirectory) }

    /// Moves the damaged loose objects to `binder/damaged-objects/` (kept, not deleted); a file
    /// that needs one then reads as an error instead of hanging. The caller holds the binder's
    /// writer lock. Their paths under `objects/`.
    public static func moveDamagedObjectsAside(gitDirectory: String) -> [String] {
        LooseObjects.moveDamagedAside(gitDirectory: gitDirectory)
    }

    /// From now on this process hashes every object it reads and refuses one whose content does
    /// not match its id: for a process that checks a binder (`binder verify`), not one serving it.
    public static func hashObjectsOnRead() { GitObjects.hashObjectsOnRead() }
}
