import BinderGit

/// A commit made beside the view by the mount's own process (`binder import` through the
/// mount): serialised with the view's saves, so that none is lost and the view shows it at once.
extension BinderView {
    /// Runs `commit` with the write lock held, so that no save of this view is planned or
    /// committed meanwhile: it is given the branch's tip and commits on top of it (a
    /// compare-and-swap of `main`), or returns nil when it has nothing to store. The commit is
    /// shown at once (the kernel is told to forget what it cached of the paths it changed) and
    /// announced to sync as the view's own commits are.
    @discardableResult
    public func commitBeside(_ commit: (_ tip: ObjectID?) throws -> ObjectID?) throws -> ObjectID? {
        let committer = writer.committer
        return try committer.writeLock.withLock { _ throws -> ObjectID? in
            let tip = try committer.repository.refs.branchTip(committer.branch)
            guard let id = try commit(tip) else { return nil }
            try committer.adoptArrivedLocked(commit: id)
            committer.hooks.withLock { $0 }.onCommit?(id)
            return id
        }
    }
}
