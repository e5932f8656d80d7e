import BinderCrypto
import BinderGit

/// A device that took the new key after another device rotated and moved the binder (issue
/// 44; docs/DESIGN.md, "Key rotation", "Another device"): its own rotated copy meets the moved
/// one. Both devices re-encrypted the same old history to the same new key, each into new
/// objects (NIP-44 and the sidecars' data keys are random): the same commits in shape (parents,
/// messages, authors, committers and their times, paths and modes), other ids.
///
/// The join pairs this device's commits with the moved copy's, oldest first: a commit pairs
/// when its parents paired, its message and both signatures are equal, and its tree has the
/// same paths and modes, with blobs that pair one to one with the pairs made so far and open
/// with the key to the same bytes. The commits left unpaired (made here, never synced) are
/// written again on top of their paired parents, each file this device did not change taking
/// the moved copy's blob, so that the sync's three-way merge sees only what this
/// device changed. Nothing is re-encrypted and nothing is lost: every unpaired commit is carried
/// with its own tree's content, message and times.
public enum RotatedHistoryJoin {
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// Not two copies of one binder: not even the first commit pairs.
        case unrelated
        case git(GitError)

        public var description: String {
            switch self {
            case .unrelated: return "the two copies share no history"
            case .git(let error): return "\(error)"
            }
        }
    }

    public struct Outcome: Sendable, Equatable {
        /// The new local tip: a descendant of (or the same as) a commit of the moved copy.
        public let tip: ObjectID
        /// Commits paired with the moved copy's.
        public let paired: Int
        /// Commits made here and written again on top of the moved copy.
        public let carried: Int
    }

    /// What makes two rotated copies of one commit the same commit.
    private struct Shape: Hashable {
        let message: String
        let author: Signature
        let committer: Signature
        let parents: [ObjectID]
    }

    /// Joins the history at `local` onto the moved copy's at `moved` (both in `repository`) and
    /// points the branch `main` at the result, only if it still points at `local`.
    public static func join(repository: GitRepository, key: NIP44.ConversationKey, local: ObjectID,
                            moved: ObjectID) throws(Failure) -> Outcome {
        let localCommits = try git { () throws(GitError) in try HistoryRewriter.oldestFirst(repository, tip: local) }
        let movedCommits = try git { () throws(GitError) in try repository.history.commits(from: moved) }
        var movedByShape: [Shape: [CommitInfo]] = [:]
        for commit in movedCommits {
            movedByShape[Shape(message: commit.message, author: commit.author, committer: commit.committer, parents: commit.parents),
                         default: []].append(commit)
        }
        var pairing = Pairing(repository: repository, key: key)
        var carried: [ObjectID: ObjectID] = [:]
        for commit in localCommits {
            let parents = commit.parents.compactMap { pairing.commits[$0] }
            if parents.count == commit.parents.count {
                let shape = Shape(message: commit.message, author: commit.author, committer: commit.committer, parents: parents)
                var paired = false
                for candidate in movedByShape[shape] ?? [] where !paired { paired = try pairing.pair(commit, candidate) }
                if paired { continue }
            }
            guard !pairing.commits.isEmpty else { throw .unrelated }
            let tree = try pairing.carry(tree: commit.tree, path: "")
            let newParents = commit.parents.map { carried[$0] ?? pairing.commits[$0] ?? $0 }
            carried[commit.id] = try git { () throws(GitError) in
                try repository.commits.writeCommit(tree: tree, parents: newParents, author: commit.author,
                                                   committer: commit.committer, message: commit.message)
            }
        }
        guard let tip = carried[local] ?? pairing.commits[local] else { throw .unrelated }
        try git { () throws(GitError) in
            try repository.refs.setReference("refs/heads/main", to: tip, expected: local,
                                             message: "binder sync: joined the copy moved to the new key")
        }
        return Outcome(tip: tip, paired: pairing.commits.count, carried: carried.count)
    }

    /// Whether `other` (a local repository, say another binder here) could be a copy of the
    /// binder in `repository`: their first commits alike in message and signatures. Cheap
    /// (no object is fetched), so that only such candidates are fetched from a server.
    public static func mayJoin(_ repository: GitRepository, _ other: GitRepository) -> Bool {
        func roots(_ repository: GitRepository) -> Set<Shape> {
            guard let tip = try? repository.refs.branchTip(), let commits = try? repository.history.commits(from: tip) else { return [] }
            return Set(commits.filter(\.parents.isEmpty).map { Shape(message: $0.message, author: $0.author, committer: $0.committer, parents: []) })
        }
        return !roots(repository).isDisjoint(with: roots(other))
    }

    static func git<T>(_ body: () throws(GitError) -> T) throws(Failure) -> T {
        do { return try body() } catch { throw .git(error) }
    }
}

/// The pairs found so far: commits and blobs, this device's to the moved copy's.
private struct Pairing {
    let repository: GitRepository
    let key: NIP44.ConversationKey
    private(set) var commits: [ObjectID: ObjectID] = [:]
    /// Blobs both ways, so that a pairing is one to one.
    private var blobs: [ObjectID: ObjectID] = [:]
    private var blobsBack: [ObjectID: ObjectID] = [:]
    /// Trees carried this run.
    private var trees: [ObjectID: ObjectID] = [:]

    init(repository: GitRepository, key: NIP44.ConversationKey) {
        self.repository = repository
        self.key = key
    }

    /// Pairs `local` with `candidate` when their trees have the same paths and modes and
    /// their blobs pair one to one, consistently with the pairs so far; a blob pair not met
    /// before must hold the same content (two devices' commits can share a message, an author
    /// and a second, never their content by chance).
    mutating func pair(_ local: CommitInfo, _ candidate: CommitInfo) throws(RotatedHistoryJoin.Failure) -> Bool {
        let mine = try files(local.id), theirs = try files(candidate.id)
        guard mine.count == theirs.count else { return false }
        var found: [(path: String, mine: ObjectID, theirs: ObjectID)] = []
        for (path, entry) in mine {
            guard let other = theirs[path], other.mode == entry.mode else { return false }
            let known = blobs[entry.id], knownBack = blobsBack[other.id]
            guard known == nil || known == other.id, knownBack == nil || knownBack == entry.id else { return false }
            if known == nil { found.append((path, entry.id, other.id)) }
        }
        for pair in found where pair.mine != pair.theirs {
            guard try sameContent(pair.mine, pair.theirs, path: pair.path) else { return false }
        }
        for pair in found {
            blobs[pair.mine] = pair.theirs
            blobsBack[pair.theirs] = pair.mine
        }
        commits[local.id] = candidate.id
        return true
    }

    private func files(_ commit: ObjectID) throws(RotatedHistoryJoin.Failure) -> [String: TreeEntry] {
        let entries = try RotatedHistoryJoin.git { () throws(GitError) in try repository.trees.listTree(commit: commit) }
        var files: [String: TreeEntry] = [:]
        for entry in entries where entry.kind != .tree { files[entry.path] = entry }
        return files
    }

    /// Tree `id` with every paired blob (its content found equal when paired) replaced by the
    /// moved copy's.
    mutating func carry(tree id: ObjectID, path: String) throws(RotatedHistoryJoin.Failure) -> ObjectID {
        if let done = trees[id] { return done }
        let entries = try RotatedHistoryJoin.git { () throws(GitError) in try repository.trees.folderEntries(tree: id, path: path) }
        var carried: [FolderEntry] = []
        carried.reserveCapacity(entries.count)
        for entry in entries {
            let entryPath = path.isEmpty ? entry.name : path + "/" + entry.name
            var newID = entry.id
            if entry.kind == .tree {
                newID = try carry(tree: entry.id, path: entryPath)
            } else if let paired = blobs[entry.id] {
                newID = paired
            }
            carried.append(FolderEntry(name: entry.name, mode: entry.mode, id: newID))
        }
        let newID = try RotatedHistoryJoin.git { () throws(GitError) in try repository.trees.writeTree(carried) }
        trees[id] = newID
        return newID
    }

    /// Whether two blobs at `path` open with the key to the same bytes (documents and
    /// sidecars, by the name; any other file is the same only by id). One that does not open
    /// is not the same.
    private func sameContent(_ mine: ObjectID, _ theirs: ObjectID, path: String) throws(RotatedHistoryJoin.Failure) -> Bool {
        let name = String(path.split(separator: "/").last ?? "")
        let (first, second) = try RotatedHistoryJoin.git { () throws(GitError) in
            (try repository.objects.readBlob(mine), try repository.objects.readBlob(theirs))
        }
        if BinderNaming.hasDocumentExtension(name) {
            guard let a = try? NIP44.decrypt(payload: first, key: key), let b = try? NIP44.decrypt(payload: second, key: key) else { return false }
            return a.constantTimeEquals(b)
        }
        if BinderNaming.isSidecarName(name) {
            guard let a = try? Sidecar.decrypt(first, key: key), let b = try? Sidecar.decrypt(second, key: key) else { return false }
            return a.constantTimeEquals(b)
        }
        return false
    }
}
