internal import CGit2
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
                              mergedParents: [ObjectID] = []) throws(GitError) -> ObjectID {
        let refName = Self.refName(branch)
        var message = message
        if !message.hasSuffix("\n") { message += "\n" }
        if message.utf8.contains(0) {
            throw GitError.failed(operation: "commit", code: .invalid, message: "message contains NUL")
        }

        return try locked { () throws(GitError) in
            // Cheap early check, so that a stale caller writes nothing.
            let current = try tipLocked(branch: branch)
            guard current == parent else {
                throw GitError.branchMoved(branch: branch, expected: parent, actual: current)
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
            let newID = ObjectID(&commitOid)

            // The reflog (non-bare repositories) records the author, not "unknown".
            try check(git_repository_set_ident(repo.pointer, author.name, author.email), "set reflog identity")
            let summary = String(message.prefix { $0 != "\n" })
            let reflogMessage = (parent == nil ? "commit (initial): " : "commit: ") + summary

            var reference: OpaquePointer?
            let refRC: Int32
            if let parent {
                var expected = parent.oid
                refRC = git_reference_create_matching(&reference, repo.pointer, refName, &commitOid,
                                                      1, &expected, reflogMessage)
            } else {
                refRC = git_reference_create(&reference, repo.pointer, refName, &commitOid, 0, reflogMessage)
            }
            if let reference { _ = ReferenceHandle(reference) }
            if refRC == GIT_EMODIFIED.rawValue || refRC == GIT_EEXISTS.rawValue || refRC == GIT_ENOTFOUND.rawValue {
                let actual = try? tipLocked(branch: branch)
                throw GitError.branchMoved(branch: branch, expected: parent, actual: actual ?? nil)
            }
            try check(refRC, "update \(refName)")
            return newID
        }
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
