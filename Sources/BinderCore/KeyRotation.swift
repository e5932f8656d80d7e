import BinderCrypto
import BinderGit
import Foundation

/// The engine of a key rotation (issue 44; docs/DESIGN.md, "Key rotation (engine)"): a
/// binder's whole history copied into a new repository, every document and `.meta.json`
/// decrypted with the old key and encrypted with the new, every sidecar sealed again under a
/// new data key wrapped to the new key; the same commits (parents, trees' shapes, paths, modes,
/// messages, authors, committers and their times) over new objects. Each distinct blob is
/// re-encrypted once (a map from old blob to new), trees and commits are rebuilt bottom-up,
/// oldest commit first. Other files (not `*.json`, not `*.enc`) are not under the key: they
/// are copied as they are, unless the old key opens them (then they are refused).
///
/// The old repository is only read. Progress is kept in the new one (`RotationJournal`,
/// object ids only): a run killed at any point is continued by the next. The new repository's
/// `main` is set only after every blob of the map was decrypted with the new key to the old
/// plaintext and found closed to the old key, and every commit's tree compared with its
/// original's (`KeyRotation+Verify.swift`). `binder key rotate` (BinderCommands) runs it for each binder.
public struct KeyRotation {
    public enum Failure: Error, Equatable, CustomStringConvertible {
        case emptyBinder
        /// The destination exists and is neither empty nor a rotation's.
        case destinationInUse(String)
        /// A document or sidecar the old key does not open.
        case unreadable(path: String, commit: ObjectID, reason: String)
        /// An entry a rotation cannot carry over as it is (crafted, or outside the format).
        case unsafeEntry(path: String, commit: ObjectID, reason: String)
        /// The new history is not what the old one holds.
        case verificationFailed(path: String, reason: String)
        case progressFile(path: String, errno: Int32)
        case git(GitError)
        /// Tests: the failure injected after `KeyRotation.interruptAfterSteps` steps.
        case interrupted(afterSteps: Int)

        public var description: String {
            switch self {
            case .emptyBinder: return "the binder has no commit to rotate"
            case .destinationInUse(let path): return "\(path) exists and is not a key rotation in progress"
            case .unreadable(let path, let commit, let reason): return "\(path) (commit \(commit)): the old key does not open it: \(reason)"
            case .unsafeEntry(let path, let commit, let reason): return "\(path) (commit \(commit)): \(reason)"
            case .verificationFailed(let path, let reason): return "verification of the rotated binder failed at \(path): \(reason)"
            case .progressFile(let path, let errno): return "\(path): \(String(cString: strerror(errno)))"
            case .git(let error): return "\(error)"
            case .interrupted(let steps): return "interrupted after \(steps) steps"
            }
        }
    }

    /// What a run did.
    public struct Report: Sendable, Equatable {
        /// The new repository's `main`.
        public let tip: ObjectID
        /// Commits in the history.
        public let commits: Int
        /// Commits written by this run (the rest by an earlier one).
        public let commitsWritten: Int
        /// Documents and sidecars re-encrypted by this run.
        public let blobsReencrypted: Int
        /// Other files copied as they are by this run.
        public let blobsCopied: Int
        /// Whether an earlier run's progress was found.
        public let resumed: Bool
    }

    public let source: LocalBinder
    public let destinationPath: String
    let oldKey: NIP44.ConversationKey
    let newKey: NIP44.ConversationKey
    /// Tests: throw `.interrupted` once this run has re-encrypted this many blobs and written
    /// commits (together), as a kill would stop it (the journal's unsynced lines are lost).
    var interruptAfterSteps: Int? = nil
    /// Past this many bytes of a commit's new blobs, they are written as a pack of their own
    /// before the commit ends (a commit of many attachments is not held whole in memory).
    var batchBytes = 64 << 20

    /// A rotation of `source`'s `main` from `oldKey` to `newKey` into a new bare repository at
    /// `destination` (made when missing; continued when it holds a rotation's progress).
    public init(source: LocalBinder, oldKey: NIP44.ConversationKey, newKey: NIP44.ConversationKey, destination: String) {
        self.source = source
        self.oldKey = oldKey
        self.newKey = newKey
        self.destinationPath = destination
    }

    /// Rewrites, verifies, then sets the new repository's `main` and packs its objects; a
    /// destination already verified at the same history answers at once.
    public func run() throws(Failure) -> Report {
        let old = source.repository
        guard let tip = try Self.git({ () throws(GitError) in try old.refs.branchTip() }) else { throw .emptyBinder }
        let destination = try openDestination()
        let journal = try RotationJournal(repository: destination)
        let resumed = !journal.commits.isEmpty || !journal.blobs.isEmpty
        let rewriter = HistoryRewriter(old: old, new: destination, journal: journal, oldKey: oldKey, newKey: newKey,
                                       interruptAfterSteps: interruptAfterSteps, batchBytes: batchBytes)
        let commits = try rewriter.commitsOldestFirst(tip: tip)
        if let verified = journal.verifiedTip, journal.commits[tip] == verified,
           try Self.git({ () throws(GitError) in try destination.refs.branchTip() }) == verified {
            return Report(tip: verified, commits: commits.count, commitsWritten: 0, blobsReencrypted: 0, blobsCopied: 0,
                          resumed: true)
        }
        for commit in commits { try rewriter.rewrite(commit) }
        guard let newTip = journal.commits[tip] else { throw .verificationFailed(path: "/", reason: "the tip was not rewritten") }
        try rewriter.verify(commits)
        try Self.git { () throws(GitError) in
            try destination.refs.setReference("refs/heads/main", to: newTip, expected: nil, force: true,
                                              message: "binder key rotation")
            // The loose objects the rewrite wrote, one pack (kill-safe: GitPacks.repack).
            _ = try destination.packs.repack()
        }
        try journal.recordVerified(newTip)
        return Report(tip: newTip, commits: commits.count, commitsWritten: rewriter.commitsWritten,
                      blobsReencrypted: rewriter.blobsReencrypted, blobsCopied: rewriter.blobsCopied, resumed: resumed)
    }

    /// The destination: made when missing; an existing one must hold a rotation's journal, or
    /// be a repository without `main` (made by a run killed before its journal was).
    private func openDestination() throws(Failure) -> GitRepository {
        guard FileManager.default.fileExists(atPath: destinationPath) else {
            return try Self.git { () throws(GitError) in try GitRepository.create(path: destinationPath, bare: true) }
        }
        guard let repository = try? GitRepository.open(path: destinationPath) else { throw .destinationInUse(destinationPath) }
        if RotationJournal.exists(inGitDirectory: repository.gitDirectory) { return repository }
        guard try Self.git({ () throws(GitError) in try repository.refs.branchTip() }) == nil else {
            throw .destinationInUse(destinationPath)
        }
        return repository
    }
}

extension KeyRotation {
    /// Runs a git call, its error typed as the rotation's.
    static func git<T>(_ body: () throws(GitError) -> T) throws(Failure) -> T {
        do { return try body() } catch { throw .git(error) }
    }
}

extension KeyRotation {
    /// Whether the repository whose git directory is `gitDirectory` is a rotation's copy (it
    /// holds the progress file, until `binder key rotate` removes it at its end).
    public static func isRotationCopy(gitDirectory: String) -> Bool {
        RotationJournal.exists(inGitDirectory: gitDirectory)
    }

    /// Removes the progress file of a rotated repository (at the end of `binder key rotate`).
    public static func removeProgress(gitDirectory: String) throws(Failure) {
        let path = RotationJournal.path(inGitDirectory: gitDirectory)
        guard unlink(path) == 0 || errno == ENOENT else { throw .progressFile(path: path, errno: errno) }
    }

    #if DEBUG
    /// Tests of the command (debug builds only): `interruptAfterSteps` from outside the module.
    public mutating func interrupt(afterSteps steps: Int?) { interruptAfterSteps = steps }
    #endif
}
