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

extension GitRepository {
    /// Reads commit `id`.
    public func commit(_ id: ObjectID) throws(GitError) -> CommitInfo {
        try locked { () throws(GitError) in
            try Self.info(of: try lookupCommitLocked(id), id: id)
        }
    }

    /// The first-parent history of `branch`, newest first, at most `limit`
    /// commits; empty when the branch does not exist.
    public func log(branch: String = "main", limit: Int = Int.max) throws(GitError) -> [CommitInfo] {
        try locked { () throws(GitError) in
            try logLocked(from: try tipLocked(branch: branch), limit: limit)
        }
    }

    /// The first-parent history starting at `start` (included), newest first.
    public func log(from start: ObjectID, limit: Int = Int.max) throws(GitError) -> [CommitInfo] {
        try locked { () throws(GitError) in
            try logLocked(from: start, limit: limit)
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
    ///   call `syncWorkTreeToHead()`.
    /// - `mergedParents` (a merge commit) follow `parent` as further parents.
    ///
    /// Returns the new commit's id.
    public func commitChanges(onto parent: ObjectID?, changes: [TreeChange], message: String,
                              author: Signature, branch: String = "main",
                              mergedParents: [ObjectID] = [], blobs: [[UInt8]] = []) throws(GitError) -> ObjectID {
        let message = try Self.commitMessage(message)
        return try locked { () throws(GitError) in
            // Cheap early check, so that a stale caller writes nothing.
            try checkTipLocked(branch: branch, is: parent)
            // A save or a merge into folders that exist is spliced (which also keeps a crafted
            // folder's other entries as they are); the rest goes through libgit2.
            var spliced: ObjectID? = nil
            if let parent {
                spliced = try splicedCommitLocked(onto: parent, mergedParents: mergedParents, changes: changes, message: message,
                                                  author: author, blobs: blobs)
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
            try moveBranchLocked(branch, from: parent, to: newID, message: message, author: author)
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
        let current = try tipLocked(branch: branch)
        guard current == expected else {
            throw GitError.branchMoved(branch: branch, expected: expected, actual: current)
        }
    }

    /// Moves `branch` from `parent` (nil: creates it) to `commit`, compare-and-swap under git's
    /// ref lock, fsynced; the reflog of a non-bare repository names the author. Lock held.
    private func moveBranchLocked(_ branch: String, from parent: ObjectID?, to commit: ObjectID, message: String,
                                  author: Signature) throws(GitError) {
        let refName = Self.refName(branch)
        try check(git_repository_set_ident(repo.pointer, author.name, author.email), "set reflog identity")
        let summary = String(message.prefix { $0 != "\n" })
        let reflogMessage = (parent == nil ? "commit (initial): " : "commit: ") + summary
        var commitOid = commit.oid
        var reference: OpaquePointer?
        let rc: Int32
        if let parent {
            var expected = parent.oid
            rc = git_reference_create_matching(&reference, repo.pointer, refName, &commitOid, 1, &expected, reflogMessage)
        } else {
            rc = git_reference_create(&reference, repo.pointer, refName, &commitOid, 0, reflogMessage)
        }
        if let reference { _ = ReferenceHandle(reference) }
        if rc == GIT_EMODIFIED.rawValue || rc == GIT_EEXISTS.rawValue || rc == GIT_ENOTFOUND.rawValue {
            let actual = try? tipLocked(branch: branch)
            throw GitError.branchMoved(branch: branch, expected: parent, actual: actual ?? nil)
        }
        try check(rc, "update \(refName)")
    }

    /// The id `bytes` get as a blob (nothing is written).
    public static func blobID(of bytes: [UInt8]) throws(GitError) -> ObjectID {
        try objectID(of: bytes, type: GIT_OBJECT_BLOB, "hash blob")
    }

    /// The id git gives `bytes` as an object of `type`: the SHA-1 of "<type> <size>\0" and the
    /// content, by OpenSSL (the CPU's SHA extensions). libgit2's own SHA-1 detects collision
    /// attacks and is several times slower: a third of a save in a folder of 100,000 records,
    /// whose tree is 7 MB (docs/BENCHMARKS.md). The bytes hashed here are objects binder is
    /// writing (ciphertext it made, trees and commits it builds); what comes from elsewhere is
    /// hashed where it enters, by libgit2 (the indexer of a fetched pack).
    static func objectID(of bytes: [UInt8], type: git_object_t, _ operation: String) throws(GitError) -> ObjectID {
        let name: String
        switch type {
        case GIT_OBJECT_BLOB: name = "blob"
        case GIT_OBJECT_TREE: name = "tree"
        case GIT_OBJECT_COMMIT: name = "commit"
        case GIT_OBJECT_TAG: name = "tag"
        default: throw GitError.failed(operation: operation, code: .invalid, message: "not an object type")
        }
        var hash = SHA1Stream()
        Array("\(name) \(bytes.count)\0".utf8).withUnsafeBytes { hash.update($0) }
        bytes.withUnsafeBytes { hash.update($0) }
        guard let id = hash.finish().withUnsafeBytes({ ObjectID(bytes: $0) }) else {
            throw GitError.failed(operation: operation, code: .other(-1), message: "no digest")
        }
        return id
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
                git_blob_create_from_buffer(&oid, repo.pointer, buffer.baseAddress, count)
            }
            try check(rc, "write blob")
            written.append(ObjectID(&oid))
        }

        let parentCommit = try parent.map { id throws(GitError) in try lookupCommitLocked(id) }
        var baseTree: TreeHandle? = nil
        if let parentCommit {
            var pointer: OpaquePointer?
            try check(git_commit_tree(&pointer, parentCommit.pointer), "read tree of commit \(parent!)")
            baseTree = TreeHandle(pointer!)
        }
        let treeID = try applyChangesLocked(changes, to: baseTree)
        let tree = try lookupTreeLocked(treeID)
        written.append(treeID)
        for folder in Set(changes.flatMap { Self.ancestors(of: $0.path) }) {
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
        let merged = try mergedParents.map { id throws(GitError) in try lookupCommitLocked(id) }
        var parents: [OpaquePointer?] = (parentCommit.map { [$0.pointer] } ?? []) + merged.map(\.pointer)
        let rc = parents.withUnsafeMutableBufferPointer { buffer in
            git_commit_create(&commitOid, repo.pointer, nil, signature.pointer, signature.pointer,
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
        try check(git_repository_set_odb(repo.pointer, staging.odb.pointer), "stage objects in memory")
        defer {
            // Back to the database on disk, and the staged objects dropped (they are in the
            // pack, or the commit failed).
            _ = git_repository_set_odb(repo.pointer, odb.pointer)
            _ = git_mempack_reset(staging.memory)
        }
        let (result, candidates) = try body()

        var builderPointer: OpaquePointer?
        try check(git_packbuilder_new(&builderPointer, repo.pointer), "start a pack")
        let builder = PackBuilderHandle(builderPointer!)
        _ = git_packbuilder_set_threads(builder.pointer, 1)
        var inserted = Set<ObjectID>()
        for id in candidates where inserted.insert(id).inserted {
            var oid = id.oid
            // On disk already (an unchanged folder, a blob saved before): not again.
            // (Known packs only: a pack another process wrote just now may get a copy.)
            if git_odb_exists_ext(odb.pointer, &oid, GIT_ODB_LOOKUP_NO_REFRESH.rawValue) == 1 { continue }
            try check(git_packbuilder_insert(builder.pointer, &oid, nil), "add \(id) to the pack")
        }
        GitError.clearLast()
        if git_packbuilder_object_count(builder.pointer) > 0 {
            try check(git_packbuilder_write(builder.pointer, gitDirectory + "/objects/pack", 0, nil, nil), "write pack")
            // Both databases find the new pack without waiting for a lookup to miss.
            _ = git_odb_refresh(odb.pointer)
            _ = git_odb_refresh(staging.odb.pointer)
        }
        return result
    }

    /// The staging database `inOnePackLocked` writes into, made at the first commit.
    private func stagingLocked() throws(GitError) -> CommitStaging {
        if let staging = commitStaging { return staging }
        let staging = try CommitStaging(objects: gitDirectory + "/objects")
        commitStaging = staging
        return staging
    }

    // MARK: - Lock held

    func lookupCommitLocked(_ id: ObjectID) throws(GitError) -> CommitHandle {
        var oid = id.oid
        var pointer: OpaquePointer?
        try check(git_commit_lookup(&pointer, repo.pointer, &oid), "read commit \(id)")
        return CommitHandle(pointer!)
    }

    private func logLocked(from start: ObjectID?, limit: Int) throws(GitError) -> [CommitInfo] {
        var result: [CommitInfo] = []
        var next = start
        while let id = next, result.count < limit {
            let info = try Self.info(of: try lookupCommitLocked(id), id: id)
            result.append(info)
            next = info.parents.first
        }
        return result
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
}
