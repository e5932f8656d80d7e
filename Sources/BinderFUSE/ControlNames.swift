import BinderCore
import Synchronization

/// The names under `.binder` the kernel may be holding since the commit shown last changed:
/// looked up (a getattr asked), listed (readdirplus hands the kernel every entry with its
/// attributes) or found missing (a negative entry). The kernel keeps a name for
/// `entry_timeout` (60 s) and a missing one for `negative_timeout` (5 s), but what `.binder`
/// shows is worked out of the commit shown: after each change of it, these are what the kernel
/// must be told to drop (`FileSystemContext.shownCommitChanged`), and no more.
final class ControlNames: Sendable {
    /// Names found missing followed at most (a reader may probe any number of names under
    /// `.binder`; the others are bounded by what it shows): past it, a name found missing is
    /// not followed, and its negative entry lasts its 5 s.
    static let missingLimit = 10_000

    struct Known: Sendable {
        /// Paths asked for by getattr (a lookup), followed before the answer; one found missing
        /// moves to `missing`.
        var lookedUp: Set<String> = []
        /// Names listed, by folder (the listing's own strings: no copies).
        var listed: [String: [String]] = [:]
        /// Names answered "no such file", by folder.
        var missing: [String: Set<String>] = [:]
        var missingCount = 0

        var isEmpty: Bool { lookedUp.isEmpty && listed.isEmpty && missing.isEmpty }
    }

    /// Guarded by its own lock; never held while anything else is done.
    private let known = Mutex(Known())

    func lookedUp(_ path: String) { known.withLock { _ = $0.lookedUp.insert(path) } }

    func listed(_ folder: String, names: [String]) { known.withLock { $0.listed[folder] = names } }

    /// A name looked up is missing: followed as such (and no longer as a name looked up, so
    /// that only names `.binder` shows are held there, however many a reader probes).
    func missing(_ path: String) {
        let (folder, name) = ViewPath.split(path)  // FUSE paths are absolute: ("/a/b", "c")
        known.withLock { known in
            known.lookedUp.remove(path)
            guard known.missingCount < Self.missingLimit else { return }
            if known.missing[folder, default: []].insert(name).inserted { known.missingCount += 1 }
        }
    }

    /// Everything followed so far, forgotten here: called once the new commit is shown, so
    /// that a name looked up after this call was answered from it.
    func take() -> Known { known.withLock { known in defer { known = Known() }; return known } }
}
