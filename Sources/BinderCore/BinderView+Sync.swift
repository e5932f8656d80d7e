import BinderGit

/// What the sync engine needs from a mounted view: to hear of local commits (to push them
/// soon), to add its lines to `.binder/status`, and to show commits that arrived from
/// elsewhere (a pull or a merge) without a remount.
extension BinderView {
    /// `onCommit` runs after each commit this view makes (with the write lock held: it must
    /// only signal); `status` returns extra `key: value` lines for `.binder/status`.
    public func setSyncHooks(onCommit: (@Sendable (ObjectID) -> Void)?, status: (@Sendable () -> String)?) {
        writer.committer.hooks.withLock { $0.onCommit = onCommit; $0.status = status }
    }

    /// `handler` is told the view paths whose names, attributes or contents a commit from
    /// elsewhere changed (see `adoptArrived`).
    public func setStaleHandler(_ handler: (@Sendable ([String]) -> Void)?) {
        writer.committer.hooks.withLock { $0.onStale = handler }
    }

    /// `handler` is told of every change of the commit shown, once it is shown (a commit of
    /// this view or one from elsewhere), with the write lock held: it must only signal.
    public func setShownCommitHandler(_ handler: (@Sendable () -> Void)?) {
        writer.committer.hooks.withLock { $0.onShown = handler }
    }

    /// Shows `commit`, which moved the branch from elsewhere (sync), and returns the view paths
    /// whose names, attributes or contents changed, their folders included, so that the kernel
    /// can be told to forget what it cached of them.
    @discardableResult
    public func adoptArrived(commit: ObjectID) throws -> [String] {
        try writer.committer.writeLock.withLock { _ in try writer.committer.adoptArrivedLocked(commit: commit) }
    }

    /// Shows the branch's current tip if it moved from elsewhere (a sync, another process),
    /// like `adoptArrived`. The tip is read with the write lock held: a tip read before a save
    /// of this view's own landed would otherwise take the view back to before that save.
    @discardableResult
    public func adoptBranchTip() throws -> [String] {
        let committer = writer.committer
        return try committer.writeLock.withLock { _ in
            guard let tip = try committer.repository.refs.branchTip(), tip != committer.listings.snapshot.commit else { return [] }
            return try committer.adoptArrivedLocked(commit: tip)
        }
    }
}
