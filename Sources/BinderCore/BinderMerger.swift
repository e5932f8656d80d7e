import BinderCrypto
import BinderFormat
import BinderGit

/// A file both sides changed in a way that did not merge, and which version was kept in place.
/// The other version is not lost: it is the file as of `lostCommit`, a parent of the merge
/// commit, and, for records, the visible conflict copy `copy`.
public struct MergeConflict: Sendable, Equatable, Codable {
    public enum Side: String, Sendable, Codable { case local, remote }

    /// The git path (`visits/2026-01-01-checkup.json`); names are not health data in this
    /// format (the server sees them too), values are never recorded.
    public let path: String
    public let winner: Side
    /// The commit whose version of `path` lost; reachable in history.
    public let lostCommit: String
    /// Why the winner won, in words without health data.
    public let reason: String
    /// When the merge was made (seconds since the epoch).
    public let mergedAt: Int64
    /// The git path of the sibling that holds the other version (`X (conflict 2026-06-01
    /// 1430).json`), a record of its own; nil when the other version is only in history.
    public var copy: String? = nil
}

/// What merging a fetched commit into the local branch did.
public enum MergeOutcome: Sendable, Equatable {
    /// Nothing to do: the local branch already contains the remote commit.
    case upToDate
    /// The local branch moved forward to the remote commit.
    case fastForward(to: ObjectID, changedPaths: [String])
    /// A merge commit joins both histories.
    case merged(commit: ObjectID, changedPaths: [String], conflicts: [MergeConflict])

    /// The git paths whose content changed on the local branch.
    public var changedPaths: [String] {
        switch self {
        case .upToDate: return []
        case .fastForward(_, let paths), .merged(_, let paths, _): return paths
        }
    }

    public var conflicts: [MergeConflict] {
        if case .merged(_, _, let conflicts) = self { return conflicts }
        return []
    }
}

public enum MergeError: Error, CustomStringConvertible {
    /// The two histories share no commit: not two copies of one binder.
    case unrelatedHistories
    /// One side has a file where the other has a folder.
    case fileFolderClash(String)

    public var description: String {
        switch self {
        case .unrelatedHistories:
            return "the server's copy and this binder have unrelated histories (not the same binder)"
        case .fileFolderClash(let path):
            return "cannot merge: '\(path)' is a file on one side and a folder on the other"
        }
    }
}

/// Three-way merge of two copies of one binder, against their common ancestor.
///
/// A file changed on one side takes that side's version. A record both sides edited is merged
/// (`DocumentMerge`: metadata keys changed on one side only, bodies line by line); when the
/// edits overlap, the version with the later `metadata.updated` stays in place and the other
/// becomes a visible sibling record, `X (conflict YYYY-MM-DD HHMM).json`, whose
/// `metadata.conflict_of` names `X.json` (an attachment's sidecar likewise, without a
/// record). An edit always beats a deletion. The merge commit has both tips as parents.
public enum BinderMerger {
    public static let message = "Merge changes from another device"

    /// Merges `remote` into `branch`, whose tip must still be `local` (a compare-and-swap:
    /// throws `GitError.branchMoved` if a local commit landed meanwhile; merge again).
    public static func merge(repository: GitRepository, key: NIP44.ConversationKey, local: ObjectID?,
                             remote: ObjectID, author: Signature, branch: String = "main",
                             now: Int64) throws -> MergeOutcome {
        guard let local else {
            try repository.refs.setReference("refs/heads/" + branch, to: remote, expected: nil, message: "sync: initial")
            return .fastForward(to: remote, changedPaths: try files(repository, remote).keys.sorted())
        }
        if local == remote { return .upToDate }
        guard let base = try repository.history.mergeBase(local, remote) else { throw MergeError.unrelatedHistories }
        if base == remote { return .upToDate }
        if base == local {
            try repository.refs.setReference("refs/heads/" + branch, to: remote, expected: local, message: "sync: fast-forward")
            return .fastForward(to: remote, changedPaths: try changedPaths(repository, from: local, to: remote))
        }
        var merge = try TreeMerge(repository: repository, key: key, base: base, local: local, remote: remote, now: now)
        try merge.run()
        try checkShape(merge.result)
        let changes = changeList(from: merge.localFiles, to: merge.result)
        let commit = try repository.commits.commitChanges(onto: local, changes: changes, message: message, author: author,
                                                  branch: branch, mergedParents: [remote])
        return .merged(commit: commit, changedPaths: changes.map(\.path), conflicts: merge.conflicts)
    }

    /// What turns the local tree into `result`: deletions first (a file may give way to a
    /// folder of the same name), then writes, each by path.
    static func changeList(from localFiles: [String: FileVersion], to result: [String: FileVersion]) -> [TreeChange] {
        let deletions = localFiles.keys.filter { result[$0] == nil }.sorted().map { TreeChange.delete(path: $0) }
        let writes = result.filter { localFiles[$0.key] != $0.value }.sorted { $0.key < $1.key }
            .map { TreeChange.write(path: $0.key, blob: $0.value.blob) }
        return deletions + writes
    }

    /// The git paths whose blobs differ between two commits.
    public static func changedPaths(_ repository: GitRepository, from old: ObjectID?, to new: ObjectID?) throws -> [String] {
        let before = try old.map { try files(repository, $0) } ?? [:]
        let after = try new.map { try files(repository, $0) } ?? [:]
        return Set(before.keys).union(after.keys).filter { before[$0] != after[$0] }.sorted()
    }

    /// A file's blob and mode (a mode change is a change).
    struct FileVersion: Hashable {
        let blob: ObjectID
        let mode: UInt32
    }

    /// A folder that cannot be read, and an entry with an empty name (a crafted tree's), are no
    /// files to merge: the local one stays as it is, one from the other side stays in its commit.
    static func files(_ repository: GitRepository, _ commit: ObjectID) throws -> [String: FileVersion] {
        var files: [String: FileVersion] = [:]
        for entry in try repository.trees.listTree(commit: commit) where entry.kind != .tree && entry.kind != .unreadable && !entry.name.isEmpty {
            files[entry.path] = FileVersion(blob: entry.id, mode: entry.mode)
        }
        return files
    }

    private static func checkShape(_ files: [String: FileVersion]) throws {
        for path in files.keys {
            for folder in PathBytes.ancestors(of: path) where !folder.isEmpty {
                if files[folder] != nil { throw MergeError.fileFolderClash(folder) }
            }
        }
    }
}
