import BinderGit

/// What the sync engine needs from a mounted view: to hear of local commits (to push them
/// soon), to add its lines to `.binder/status`, and to show commits that arrived from
/// elsewhere (a pull or a merge) without a remount.
extension BinderView {
    /// `onCommit` runs after each commit this view makes (with the write lock held: it must
    /// only signal); `status` returns extra `key: value` lines for `.binder/status`.
    public func setSyncHooks(onCommit: (@Sendable (ObjectID) -> Void)?, status: (@Sendable () -> String)?) {
        hooks.withLock { $0.onCommit = onCommit; $0.status = status }
    }

    /// `handler` is told the view paths whose names, attributes or contents a commit from
    /// elsewhere changed (see `adoptArrived`).
    public func setStaleHandler(_ handler: (@Sendable ([String]) -> Void)?) {
        hooks.withLock { $0.onStale = handler }
    }

    /// Shows `commit`, which moved the branch from elsewhere (sync), and returns the view paths
    /// whose names, attributes or contents changed, their folders included, so that the kernel
    /// can be told to forget what it cached of them. Only listings of the git folders that
    /// changed are rebuilt; paths the kernel never saw (folders not listed yet) are not returned.
    @discardableResult
    public func adoptArrived(commit: ObjectID) throws -> [String] {
        try writeLock.withLock { _ in try adoptArrivedLocked(commit: commit) }
    }

    /// `writeLock` held.
    @discardableResult
    func adoptArrivedLocked(commit: ObjectID) throws -> [String] {
        let old = snapshot
        guard old.commit != commit else { return [] }
        let new = try Snapshot.load(repository, commit: commit)
        var changed: [TreeChange] = []
        for folder in Set(old.gitFolders.keys).union(new.gitFolders.keys) {
            let before = old.gitFolders[folder] ?? [], after = new.gitFolders[folder] ?? []
            if before == after { continue }
            let beforeByPath = Dictionary(before.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
            let afterByPath = Dictionary(after.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
            for path in Set(beforeByPath.keys).union(afterByPath.keys) where beforeByPath[path] != afterByPath[path] {
                changed.append(.delete(path: path))
            }
            if old.gitFolders[folder] == nil || new.gitFolders[folder] == nil { changed.append(.delete(path: folder)) }
        }
        let oldListings = state.withLock { $0.listings }
        adopt(new, changes: changed)
        let kept = state.withLock { Set($0.listings.keys) }

        var stale: [String] = []
        for (folder, oldListing) in oldListings where !kept.contains(folder) {
            let newNodes = (try? listing(folder))?.nodes
            var folderChanged = newNodes == nil
            for name in Set(oldListing.nodes.keys).union(newNodes?.keys ?? [:].keys) {
                let a = oldListing.nodes[name], b = newNodes?[name]
                if a?.source != b?.source || a?.size != b?.size || a?.modified != b?.modified {
                    stale.append(folder.isEmpty ? name : folder + "/" + name)
                    folderChanged = true
                }
            }
            if folderChanged { stale.append(folder) }
        }
        logger.info("showing a commit from elsewhere", metadata: ["commit": "\(commit)", "stale_paths": "\(stale.count)"])
        if !stale.isEmpty { hooks.withLock { $0 }.onStale?(stale) }
        return stale
    }
}
