import BinderGit

/// A commit made beside the view by the mount's own process (`binder import` through the
/// mount): serialised with the view's saves, so that none is lost and the view shows it at once.
extension BinderView {
    /// Runs `commit` with the write lock held, so that no save of this view is planned or
    /// committed meanwhile: it is given the branch's tip and commits on top of it (a
    /// compare-and-swap of `main`), or returns nil when it has nothing to store. The commit is
    /// shown at once (the kernel is told to forget what it cached of the paths it changed),
    /// followed in a work tree as saves are, and announced to sync as the view's own commits are.
    @discardableResult
    public func commitBeside(_ commit: (_ tip: ObjectID?) throws -> ObjectID?) throws -> ObjectID? {
        let committer = writer.committer
        return try committer.writeLock.withLock { _ throws -> ObjectID? in
            let tip = try committer.repository.refs.branchTip(committer.branch)
            guard let id = try commit(tip) else { return nil }
            let before = committer.listings.snapshot
            try committer.adoptArrivedLocked(commit: id)
            followInWorkTree(from: before, to: committer.listings.snapshot)
            committer.hooks.withLock { $0 }.onCommit?(id)
            return id
        }
    }

    /// On a repository with a work tree (ciphertext), checks out the git folders that changed
    /// between two snapshots (all of it past a few hundred), so that `git status` stays clean.
    /// A failure loses nothing: the commit is made.
    private func followInWorkTree(from before: Snapshot, to after: Snapshot) {
        let repository = writer.committer.repository
        guard !repository.isBare else { return }
        let folders = Set(before.gitFolders.keys).union(after.gitFolders.keys).filter { before.gitFolders[$0] != after.gitFolders[$0] }
        do { try repository.checkout.syncWorkTreeToHead(paths: folders.count > 256 || folders.contains("") ? nil : Array(folders)) } catch {
            writer.committer.logger.warning("work tree not updated: \(error)")
        }
    }
}
