internal import CGit2

/// One committed version of a file: the commit that made it and the blob it holds.
public struct PathVersion: Sendable, Hashable {
    public let commit: ObjectID
    /// The committer's time (seconds since the epoch): when the version was saved.
    public let seconds: Int64
    public let blob: ObjectID
}

/// A file a commit removed that the tip no longer has, with its last content.
public struct DeletedFile: Sendable, Hashable {
    public let path: String
    /// The content it had just before it was removed.
    public let lastBlob: ObjectID
    /// The commit that removed it, and when.
    public let deletedIn: ObjectID
    public let seconds: Int64
}

/// The history of a branch and of single files in it: every commit reachable from a tip (merges'
/// other parents too, newest first), the versions of one path, the files removed since.
extension GitRepository {
    /// Every commit reachable from `tip`, newest first (by commit time, parents after children),
    /// at most `limit`.
    public func history(from tip: ObjectID, limit: Int = Int.max) throws(GitError) -> [CommitInfo] {
        try locked { () throws(GitError) in
            var result: [CommitInfo] = []
            for id in try walkLocked(from: tip) {
                guard result.count < limit else { break }
                result.append(try Self.info(of: try lookupCommitLocked(id), id: id))
            }
            return result
        }
    }

    /// The versions of the file at `path` reachable from `tip`, newest first: each commit whose
    /// blob at `path` differs from the blob of every parent (a merge that took one side's
    /// version adds none; a merge that made a new one does), as `git log -- path` lists them.
    public func versions(of path: String, from tip: ObjectID) throws(GitError) -> [PathVersion] {
        _ = try Self.components(of: path)
        return try locked { () throws(GitError) in
            var blobs: [ObjectID: ObjectID?] = [:]
            func blob(_ commit: ObjectID) throws(GitError) -> ObjectID? {
                if let known = blobs[commit] { return known }
                let found = try blobLocked(at: path, commit: commit)
                blobs[commit] = found
                return found
            }
            var versions: [PathVersion] = []
            for id in try walkLocked(from: tip) {
                guard let current = try blob(id) else { continue }
                let commit = try lookupCommitLocked(id)
                let parents = (0..<git_commit_parentcount(commit.pointer)).map { ObjectID(git_commit_parent_id(commit.pointer, $0)) }
                var isNew = true
                for parent in parents where try blob(parent) == current { isNew = false }
                if isNew {
                    versions.append(PathVersion(commit: id, seconds: git_commit_time(commit.pointer), blob: current))
                }
            }
            return versions
        }
    }

    /// The files (blobs) some commit reachable from `tip` removed and `tip` does not hold, each
    /// with the content it had when last removed, newest removal first.
    public func deletedFiles(from tip: ObjectID) throws(GitError) -> [DeletedFile] {
        try locked { () throws(GitError) in
            let tipTree = try commitTreeLocked(tip)
            var found: [String: DeletedFile] = [:]
            var order: [String] = []
            for id in try walkLocked(from: tip) {
                let commit = try lookupCommitLocked(id)
                let tree = try commitTreeLocked(id)
                for index in 0..<git_commit_parentcount(commit.pointer) {
                    let parentTree = try commitTreeLocked(ObjectID(git_commit_parent_id(commit.pointer, index)))
                    for (path, blob) in try removedLocked(from: parentTree, to: tree) where found[path] == nil {
                        guard try entryIDLocked(in: tipTree, path: path) == nil else { continue }
                        found[path] = DeletedFile(path: path, lastBlob: blob, deletedIn: id, seconds: git_commit_time(commit.pointer))
                        order.append(path)
                    }
                }
            }
            return order.compactMap { found[$0] }
        }
    }

    /// Commit ids from `tip`, newest first. Lock held.
    private func walkLocked(from tip: ObjectID) throws(GitError) -> [ObjectID] {
        var pointer: OpaquePointer?
        try check(git_revwalk_new(&pointer, repo.pointer), "start history walk")
        let walk = RevwalkHandle(pointer!)
        try check(git_revwalk_sorting(walk.pointer, GIT_SORT_TOPOLOGICAL.rawValue | GIT_SORT_TIME.rawValue), "sort history walk")
        var start = tip.oid
        try check(git_revwalk_push(walk.pointer, &start), "walk history from \(tip)")
        var ids: [ObjectID] = []
        var oid = git_oid()
        while true {
            let rc = git_revwalk_next(&oid, walk.pointer)
            if rc == GIT_ITEROVER.rawValue { break }
            try check(rc, "walk history from \(tip)")
            ids.append(ObjectID(&oid))
        }
        return ids
    }

    /// The blob at `path` in `commit` (nil: none there, or not a file). Lock held.
    private func blobLocked(at path: String, commit: ObjectID) throws(GitError) -> ObjectID? {
        try entryIDLocked(in: try commitTreeLocked(commit), path: path, blobsOnly: true)
    }

    private func entryIDLocked(in tree: TreeHandle, path: String, blobsOnly: Bool = false) throws(GitError) -> ObjectID? {
        var pointer: OpaquePointer?
        let rc = git_tree_entry_bypath(&pointer, tree.pointer, path)
        if rc == GIT_ENOTFOUND.rawValue { return nil }
        try check(rc, "look up '\(path)'")
        let entry = TreeEntryHandle(pointer!)
        if blobsOnly && git_tree_entry_type(entry.pointer) != GIT_OBJECT_BLOB { return nil }
        return ObjectID(git_tree_entry_id(entry.pointer))
    }

    /// Files in `old` that `new` lacks, with their blob in `old`. Folders with the same id on
    /// both sides are not entered: a commit costs what it changed, not the size of the tree.
    /// Lock held.
    private func removedLocked(from old: TreeHandle, to new: TreeHandle?, prefix: String = "") throws(GitError) -> [(String, ObjectID)] {
        var removed: [(String, ObjectID)] = []
        for index in 0..<git_tree_entrycount(old.pointer) {
            guard let entry = git_tree_entry_byindex(old.pointer, index), let rawName = git_tree_entry_name(entry) else { continue }
            let name = String(cString: rawName)
            let id = ObjectID(git_tree_entry_id(entry))
            let isTree = git_tree_entry_type(entry) == GIT_OBJECT_TREE
            let counterpart = new.flatMap { git_tree_entry_byname($0.pointer, rawName) }
            if let counterpart, ObjectID(git_tree_entry_id(counterpart)) == id { continue }
            let newIsTree = counterpart.map { git_tree_entry_type($0) == GIT_OBJECT_TREE } ?? false
            if isTree {
                let newTree = newIsTree ? try counterpart.map { (c) throws(GitError) in try lookupTreeLocked(ObjectID(git_tree_entry_id(c))) } : nil
                removed += try removedLocked(from: try lookupTreeLocked(id), to: newTree, prefix: prefix + name + "/")
            } else if counterpart == nil || newIsTree {
                removed.append((prefix + name, id))
            }
        }
        return removed
    }
}
