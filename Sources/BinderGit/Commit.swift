internal import CGit2
internal import BinderCrypto
import Foundation

/// Who made a commit, and when (git keeps whole seconds and a UTC offset).
public struct Signature: Sendable, Hashable {
    public var name: String
    public var email: String
    /// Seconds since 1970-01-01 UTC.
    public var seconds: Int64
    /// Offset from UTC in minutes (0 by default: no locale is revealed).
    public var timeZoneOffsetMinutes: Int

    /// `time` is truncated to whole seconds.
    public init(name: String, email: String, time: Date = Date(), timeZoneOffsetMinutes: Int = 0) {
        self.init(name: name, email: email,
                  seconds: Int64(time.timeIntervalSince1970.rounded(.down)),
                  timeZoneOffsetMinutes: timeZoneOffsetMinutes)
    }

    public init(name: String, email: String, seconds: Int64, timeZoneOffsetMinutes: Int = 0) {
        self.name = name
        self.email = email
        self.seconds = seconds
        self.timeZoneOffsetMinutes = timeZoneOffsetMinutes
    }

    public var time: Date { Date(timeIntervalSince1970: TimeInterval(seconds)) }

    init(_ signature: UnsafePointer<git_signature>) {
        self.init(name: String(cString: signature.pointee.name),
                  email: String(cString: signature.pointee.email),
                  seconds: signature.pointee.when.time,
                  timeZoneOffsetMinutes: Int(signature.pointee.when.offset))
    }
}

/// A commit as read from the repository.
public struct CommitInfo: Sendable, Hashable {
    public let id: ObjectID
    /// The root tree.
    public let tree: ObjectID
    /// Parent commits, first parent first (empty for a root commit).
    public let parents: [ObjectID]
    public let author: Signature
    public let committer: Signature
    /// The full message, as stored (normally ending with a newline).
    public let message: String

    /// The first line of the message.
    public var summary: String {
        String(message.prefix { $0 != "\n" })
    }

    /// The author time.
    public var time: Date { author.time }
}
/// Commits read and written: `commitChanges` stores a save's objects as one pack and moves
/// the branch by compare-and-swap (spliced trees for saves into folders that exist:
/// SplicedCommit.swift; libgit2's tree updates otherwise). `GitRepository.commits`.
public struct GitCommits: Sendable {
    /// The repository whose handle this owner uses, under its lock.
    let repository: GitRepository

    /// Reads commit `id`.
    public func commit(_ id: ObjectID) throws(GitError) -> CommitInfo {
        try repository.locked { () throws(GitError) in
            try Self.info(of: try repository.objects.lookupCommitLocked(id), id: id)
        }
    }

    /// Commits `changes` on top of `parent` and moves `refs/heads/<branch>`
    /// from `parent` to the new commit, atomically.
    ///
    /// - `parent` is the commit the caller's view is based on: nil for the
    ///   first commit of an empty repository (the branch must not exist yet).
    /// - The changes apply in order to `parent`'s tree (or the empty tree).
    /// - `blobs` are contents stored with the commit (ids from `blobID(of:)`,
    ///   named by `changes`); blobs already in the repository may be named too.
    /// - The commit's new objects (those blobs, the trees on the changed paths,
    ///   the commit) are written as one pack, fsynced once with its index and
    ///   folder, before the branch moves: not one loose file and fsync each.
    ///   Files written into or deleted from folders that exist (a save, a merge)
    ///   take the spliced path (`splicedCommitLocked`: trees spliced as bytes,
    ///   the pack written by `PackWriter`); the rest libgit2's tree updates and
    ///   pack builder.
    ///   A kill before the branch moves leaves at most an unreferenced pack.
    /// - The branch update is a compare-and-swap under git's ref lock (the same
    ///   lock command-line git uses): if the branch no longer points at
    ///   `parent`, this throws `GitError.branchMoved` and the branch is not
    ///   changed. A ref locked by a concurrent writer throws code `.locked`.
    /// - On return the objects and the ref are fsynced to disk.
    /// - The committer is the author. A missing final newline is added to
    ///   `message`. The work tree of a non-bare repository is not touched:
    ///   call `checkout.syncWorkTreeToHead()`.
    /// - `mergedParents` (a merge commit) follow `parent` as further parents.
    ///
    /// Returns the new commit's id.
    public func commitChanges(onto parent: ObjectID?, changes: [TreeChange], message: String,
                              author: Signature, branch: String = "main",
                              mergedParents: [ObjectID] = [], blobs: [[UInt8]] = []) throws(GitError) -> ObjectID {
        let message = try Self.commitMessage(message)
        return try repository.locked { () throws(GitError) in
            // Cheap early check, so that a stale caller writes nothing.
            try checkTipLocked(branch: branch, is: parent)
            // A save or a merge into folders that exist is spliced (which also keeps a crafted
            // folder's other entries as they are); the rest goes through libgit2.
            var spliced: ObjectID? = nil
            // The branch's lock file, written and flushed beside the spliced pack (nil: libgit2
            // moves the branch once the pack is durable).
            var branchUpdate: BranchUpdate? = nil
            if let parent {
                spliced = try splicedCommitLocked(onto: parent, mergedParents: mergedParents, changes: changes, message: message,
                                                  author: author, blobs: blobs) { commitID throws(GitError) in
                    branchUpdate = try BranchUpdate.begin(repository, branch: branch, from: parent, to: commitID)
                }
            }
            let newID: ObjectID
            if let spliced {
                newID = spliced
            } else {
                newID = try inOnePackLocked { () throws(GitError) -> (ObjectID, [ObjectID]) in
                    try createCommitLocked(onto: parent, changes: changes, message: message, author: author,
                                           mergedParents: mergedParents, blobs: blobs)
                }
            }
            if let branchUpdate {
                try branchUpdate.finish()
                repository.branchUpdateCount += 1
            } else {
                try moveBranchLocked(branch, from: parent, to: newID, message: message, author: author)
            }
            return newID
        }
    }

    /// `message` as stored: ending with a newline, and without NUL (which git cannot store).
    private static func commitMessage(_ message: String) throws(GitError) -> String {
        if message.utf8.contains(0) {
            throw GitError.failed(operation: "commit", code: .invalid, message: "message contains NUL")
        }
        return message.hasSuffix("\n") ? message : message + "\n"
    }

    /// Throws `branchMoved` unless `branch` points at `expected` (nil: does not exist). Lock held.
    private func checkTipLocked(branch: String, is expected: ObjectID?) throws(GitError) {
        let current = try repository.refs.tipLocked(branch: branch)
        guard current == expected else {
            throw GitError.branchMoved(branch: branch, expected: expected, actual: current)
        }
    }

    /// Moves `branch` from `parent` (nil: creates it) to `commit`, compare-and-swap under git's
    /// ref lock, fsynced; the reflog of a non-bare repository names the author. Lock held.
    private func moveBranchLocked(_ branch: String, from parent: ObjectID?, to commit: ObjectID, message: String,
                                  author: Signature) throws(GitError) {
        let refName = GitRefs.refName(branch)
        try check(git_repository_set_ident(repository.repo.pointer, author.name, author.email), "set reflog identity")
        let summary = String(message.prefix { $0 != "\n" })
        let reflogMessage = (parent == nil ? "commit (initial): " : "commit: ") + summary
        var commitOid = commit.oid
        var reference: OpaquePointer?
        let rc: Int32
        if let parent {
            var expected = parent.oid
            rc = git_reference_create_matching(&reference, repository.repo.pointer, refName, &commitOid, 1, &expected, reflogMessage)
        } else {
            rc = git_reference_create(&reference, repository.repo.pointer, refName, &commitOid, 0, reflogMessage)
        }
        if let reference { _ = ReferenceHandle(reference) }
        if rc == GIT_EMODIFIED.rawValue || rc == GIT_EEXISTS.rawValue || rc == GIT_ENOTFOUND.rawValue {
            let actual = try? repository.refs.tipLocked(branch: branch)
            throw GitError.branchMoved(branch: branch, expected: parent, actual: actual ?? nil)
        }
        try check(rc, "update \(refName)")
    }

    /// Writes the blobs, trees and commit (into the staging database: see `inOnePackLocked`);
    /// returns the commit and every object that may be new (the blobs, the root tree and the
    /// trees of the changed paths' folders: `git_tree_create_updated` rewrites only those).
    private func createCommitLocked(onto parent: ObjectID?, changes: [TreeChange], message: String, author: Signature,
                                    mergedParents: [ObjectID], blobs: [[UInt8]]) throws(GitError) -> (ObjectID, [ObjectID]) {
        var written: [ObjectID] = []
        for bytes in blobs {
            var oid = git_oid()
            let count = bytes.count
            // libgit2 wants a non-NULL buffer even for length 0.
            let rc = (count == 0 ? [0] : bytes).withUnsafeBytes { buffer in
                git_blob_create_from_buffer(&oid, repository.repo.pointer, buffer.baseAddress, count)
            }
            try check(rc, "write blob")
            written.append(ObjectID(&oid))
        }

        let parentCommit = try parent.map { id throws(GitError) in try repository.objects.lookupCommitLocked(id) }
        var baseTree: TreeHandle? = nil
        if let parentCommit {
            var pointer: OpaquePointer?
            try check(git_commit_tree(&pointer, parentCommit.pointer), "read tree of commit \(parent!)")
            baseTree = TreeHandle(pointer!)
        }
        let treeID = try applyChangesLocked(changes, to: baseTree)
        let tree = try repository.objects.lookupTreeLocked(treeID)
        written.append(treeID)
        for folder in Set(changes.flatMap { GitTrees.ancestors(of: $0.path) }) {
            var pointer: OpaquePointer?
            guard git_tree_entry_bypath(&pointer, tree.pointer, folder) == 0, let pointer else { continue }
            let entry = TreeEntryHandle(pointer)
            if git_tree_entry_type(entry.pointer) == GIT_OBJECT_TREE { written.append(ObjectID(git_tree_entry_id(entry.pointer))) }
        }
        GitError.clearLast()

        var signaturePointer: UnsafeMutablePointer<git_signature>?
        try check(git_signature_new(&signaturePointer, author.name, author.email,
                                    author.seconds, Int32(author.timeZoneOffsetMinutes)),
                  "make signature for '\(author.name) <\(author.email)>'")
        let signature = SignatureHandle(signaturePointer!)

        var commitOid = git_oid()
        let merged = try mergedParents.map { id throws(GitError) in try repository.objects.lookupCommitLocked(id) }
        var parents: [OpaquePointer?] = (parentCommit.map { [$0.pointer] } ?? []) + merged.map(\.pointer)
        let rc = parents.withUnsafeMutableBufferPointer { buffer in
            git_commit_create(&commitOid, repository.repo.pointer, nil, signature.pointer, signature.pointer,
                              nil, message, tree.pointer, buffer.count, buffer.baseAddress)
        }
        withExtendedLifetime((parentCommit, merged)) {}
        try check(rc, "write commit")
        let commitID = ObjectID(&commitOid)
        written.append(commitID)
        return (commitID, written)
    }

    /// Runs `body` with the repository writing objects into memory (libgit2's `mempack`,
    /// reading the rest from disk), then writes those of `body`'s objects that are not on disk
    /// yet as one pack: libgit2's pack builder and indexer write the pack and its index under
    /// temporary names, fsync both, rename them into `objects/pack` and fsync the folder
    /// (fsync is on: `LibGit2.ready`). One pack and three fsyncs per commit, where loose
    /// objects cost a file and an fsync each (and left 486 MB after 10,000 saves). The pack is
    /// complete in itself (no deltas against objects outside it), so stock git reads it.
    /// Returns `body`'s first value.
    private func inOnePackLocked(_ body: () throws(GitError) -> (ObjectID, [ObjectID])) throws(GitError) -> ObjectID {
        let staging = try stagingLocked()
        try check(git_repository_set_odb(repository.repo.pointer, staging.odb.pointer), "stage objects in memory")
        defer {
            // Back to the database on disk, and the staged objects dropped (they are in the
            // pack, or the commit failed).
            _ = git_repository_set_odb(repository.repo.pointer, repository.odb.pointer)
            _ = git_mempack_reset(staging.memory)
        }
        let (result, candidates) = try body()

        var builderPointer: OpaquePointer?
        try check(git_packbuilder_new(&builderPointer, repository.repo.pointer), "start a pack")
        let builder = PackBuilderHandle(builderPointer!)
        _ = git_packbuilder_set_threads(builder.pointer, 1)
        var inserted = Set<ObjectID>()
        for id in candidates where inserted.insert(id).inserted {
            var oid = id.oid
            // On disk already (an unchanged folder, a blob saved before): not again.
            // (Known packs only: a pack another process wrote just now may get a copy.)
            if git_odb_exists_ext(repository.odb.pointer, &oid, GIT_ODB_LOOKUP_NO_REFRESH.rawValue) == 1 { continue }
            try check(git_packbuilder_insert(builder.pointer, &oid, nil), "add \(id) to the pack")
        }
        GitError.clearLast()
        if git_packbuilder_object_count(builder.pointer) > 0 {
            try check(git_packbuilder_write(builder.pointer, repository.gitDirectory + "/objects/pack", 0, nil, nil), "write pack")
            // Both databases find the new pack without waiting for a lookup to miss.
            _ = git_odb_refresh(repository.odb.pointer)
            _ = git_odb_refresh(staging.odb.pointer)
        }
        return result
    }

    /// The staging database `inOnePackLocked` writes into, made at the first commit.
    private func stagingLocked() throws(GitError) -> CommitStaging {
        if let staging = repository.commitStaging { return staging }
        let staging = try CommitStaging(objects: repository.gitDirectory + "/objects")
        repository.commitStaging = staging
        return staging
    }

    static func info(of commit: CommitHandle, id: ObjectID) throws(GitError) -> CommitInfo {
        let pointer = commit.pointer
        let parents = (0..<git_commit_parentcount(pointer)).map { index in
            ObjectID(git_commit_parent_id(pointer, index))
        }
        return CommitInfo(
            id: id,
            tree: ObjectID(git_commit_tree_id(pointer)),
            parents: parents,
            author: Signature(git_commit_author(pointer)),
            committer: Signature(git_commit_committer(pointer)),
            message: git_commit_message(pointer).map { String(cString: $0) } ?? "")
    }

    // MARK: - Tree updates (the general path)

    /// Applies `changes` in order to `base` (nil: the empty tree), writes the
    /// new trees and returns the new root tree's id.
    ///
    /// `git_tree_create_updated` sorts its updates and reads folders from the
    /// baseline, so one call cannot express "delete `a`, then write `a/b`" or
    /// two changes of one path. The changes are therefore split into batches
    /// in which no path equals or contains another; batches are applied one
    /// after the other (usually there is exactly one).
    func applyChangesLocked(_ changes: [TreeChange], to base: TreeHandle?) throws(GitError) -> ObjectID {
        for change in changes { _ = try GitTrees.components(of: change.path) }
        var tree = base
        var treeID: ObjectID? = nil
        for batch in Self.batches(changes) {
            // Deleting what is not there is a no-op (libgit2 would fail).
            let effective = batch.filter { change in
                guard case .delete(let path) = change else { return true }
                guard let tree else { return false }
                var pointer: OpaquePointer?
                guard git_tree_entry_bypath(&pointer, tree.pointer, path) == 0 else { return false }
                _ = TreeEntryHandle(pointer!)
                return true
            }
            if effective.isEmpty { continue }
            let id = try createUpdatedLocked(base: tree, effective)
            tree = try repository.objects.lookupTreeLocked(id)
            treeID = id
        }
        if let treeID { return treeID }
        if let base { return ObjectID(git_tree_id(base.pointer)) }
        return try createUpdatedLocked(base: nil, [])  // the empty tree
    }

    private func createUpdatedLocked(base: TreeHandle?, _ changes: [TreeChange]) throws(GitError) -> ObjectID {
        // C copies of the paths, alive until the call returns.
        var paths: [UnsafeMutablePointer<CChar>] = []
        paths.reserveCapacity(changes.count)
        defer { for path in paths { free(path) } }
        var updates: [git_tree_update] = []
        updates.reserveCapacity(changes.count)
        for change in changes {
            guard let path = strdup(change.path) else {
                throw .failed(operation: "copy the path '\(change.path)'", code: .other(-1), message: "out of memory", posixErrno: ENOMEM)
            }
            paths.append(path)
            var update = git_tree_update()
            update.path = UnsafePointer(path)
            switch change {
            case .write(_, let blob):
                update.action = GIT_TREE_UPDATE_UPSERT
                update.id = blob.oid
                update.filemode = GIT_FILEMODE_BLOB
            case .delete:
                update.action = GIT_TREE_UPDATE_REMOVE
            }
            updates.append(update)
        }
        var oid = git_oid()
        let rc = updates.withUnsafeBufferPointer { buffer in
            git_tree_create_updated(&oid, repository.repo.pointer, base?.pointer, buffer.count, buffer.baseAddress)
        }
        try check(rc, "update tree")
        return ObjectID(&oid)
    }

    /// Splits `changes` into batches where no path equals or is an ancestor
    /// of another. A repeated write of one path, or a delete after a write of
    /// the same path, replaces the earlier change in place (same result).
    static func batches(_ changes: [TreeChange]) -> [[TreeChange]] {
        var batches: [[TreeChange]] = []
        var current: [TreeChange] = []
        var indexOfPath: [String: Int] = [:]
        var ancestors: Set<String> = []  // proper ancestors of paths in `current`
        for change in changes {
            let path = change.path
            if let index = indexOfPath[path] {
                if case .write = current[index] {
                    current[index] = change
                    continue
                }
            }
            let own = GitTrees.ancestors(of: path)
            let conflict = indexOfPath[path] != nil || ancestors.contains(path)
                || own.contains { indexOfPath[$0] != nil }
            if conflict {
                batches.append(current)
                current = []
                indexOfPath = [:]
                ancestors = []
            }
            indexOfPath[path] = current.count
            current.append(change)
            ancestors.formUnion(own)
        }
        if !current.isEmpty { batches.append(current) }
        return batches
    }
}
