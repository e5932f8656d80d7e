import BinderCrypto
import BinderFormat
import BinderGit

/// A file both sides changed, and which version was kept. The other version is not lost: it
/// is the file as of `lostCommit`, a parent of the merge commit.
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

/// Three-way, file-level merge of two copies of one binder, as the apps do it.
///
/// Files changed on one side only take that side's version. When both sides changed a file,
/// the version whose decrypted `metadata.updated` is later wins (the later tip commit breaks
/// ties, and decides for attachments, which carry no date); an edit always beats a deletion.
/// The merge commit has both tips as parents, so the losing version stays in history.
public enum BinderMerger {
    public static let message = "Merge changes from another device"

    /// Merges `remote` into `branch`, whose tip must still be `local` (a compare-and-swap:
    /// throws `GitError.branchMoved` if a local commit landed meanwhile; merge again).
    public static func merge(repository: GitRepository, key: NIP44.ConversationKey, local: ObjectID?,
                             remote: ObjectID, author: Signature, branch: String = "main",
                             now: Int64) throws -> MergeOutcome {
        guard let local else {
            try repository.setReference("refs/heads/" + branch, to: remote, expected: nil, message: "sync: initial")
            return .fastForward(to: remote, changedPaths: try files(repository, remote).keys.sorted())
        }
        if local == remote { return .upToDate }
        guard let base = try repository.mergeBase(local, remote) else { throw MergeError.unrelatedHistories }
        if base == remote { return .upToDate }
        if base == local {
            try repository.setReference("refs/heads/" + branch, to: remote, expected: local, message: "sync: fast-forward")
            return .fastForward(to: remote, changedPaths: try changedPaths(repository, from: local, to: remote))
        }

        let baseFiles = try files(repository, base)
        let localFiles = try files(repository, local)
        let remoteFiles = try files(repository, remote)
        let localTime = try repository.commit(local).committer.seconds
        let remoteTime = try repository.commit(remote).committer.seconds

        var result = localFiles
        var conflicts: [MergeConflict] = []
        for path in Set(localFiles.keys).union(remoteFiles.keys).sorted() {
            let b = baseFiles[path], l = localFiles[path], r = remoteFiles[path]
            if l == r || r == b { continue }            // same on both sides, or only local changed
            if l == b { result[path] = r; continue }    // only the remote changed
            // Both changed, differently.
            let winner: MergeConflict.Side
            let reason: String
            switch (l, r) {
            case (nil, _):
                winner = .remote; reason = "deleted here, edited on the other device: the edit is kept"
            case (_, nil):
                winner = .local; reason = "edited here, deleted on the other device: the edit is kept"
            case (let l?, let r?):
                let lu = updated(repository, l, path: path, key: key)
                let ru = updated(repository, r, path: path, key: key)
                if let lu, let ru, lu != ru {
                    winner = lu > ru ? .local : .remote
                    reason = "both edited: the later metadata.updated wins"
                } else {
                    winner = remoteTime > localTime ? .remote : .local
                    reason = lu == nil || ru == nil ? "both edited: the later commit wins (no date inside)"
                        : "both edited at the same time: the later commit wins"
                }
            }
            result[path] = winner == .local ? l : r
            conflicts.append(MergeConflict(path: path, winner: winner, lostCommit: (winner == .local ? remote : local).hex,
                                           reason: reason, mergedAt: now))
        }
        try checkShape(result)

        var changes: [TreeChange] = []
        for (path, _) in localFiles where result[path] == nil { changes.append(.delete(path: path)) }
        for (path, id) in result where localFiles[path] != id { changes.append(.write(path: path, blob: id.blob)) }
        changes.sort { a, b in
            // Deletions first (a file may give way to a folder of the same name).
            if case .delete = a, case .write = b { return true }
            if case .write = a, case .delete = b { return false }
            return a.path < b.path
        }
        let commit = try repository.commitChanges(onto: local, changes: changes, message: message, author: author,
                                                  branch: branch, mergedParents: [remote])
        return .merged(commit: commit, changedPaths: changes.map(\.path), conflicts: conflicts)
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

    static func files(_ repository: GitRepository, _ commit: ObjectID) throws -> [String: FileVersion] {
        var files: [String: FileVersion] = [:]
        for entry in try repository.listTree(commit: commit) where entry.kind != .tree {
            files[entry.path] = FileVersion(blob: entry.id, mode: entry.mode)
        }
        return files
    }

    /// `metadata.updated` of a stored document; nil for anything else or what cannot be read.
    private static func updated(_ repository: GitRepository, _ version: FileVersion, path: String,
                                key: NIP44.ConversationKey) -> Timestamp? {
        guard path.hasSuffix(".json"),
              let stored = try? repository.readBlob(version.blob),
              let document = try? BinderReader.readDocument(stored, key: key, gitPath: path),
              let text = document.updated, let parsed = Timestamps.parse(text) else { return nil }
        return Timestamp(seconds: parsed.seconds, nanoseconds: parsed.nanoseconds)
    }

    private static func checkShape(_ files: [String: FileVersion]) throws {
        for path in files.keys {
            var prefix = Substring(path)
            while let slash = prefix.lastIndex(of: "/") {
                prefix = prefix[..<slash]
                if files[String(prefix)] != nil { throw MergeError.fileFolderClash(String(prefix)) }
            }
        }
    }
}
