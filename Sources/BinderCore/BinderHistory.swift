import BinderGit
import Foundation

/// What `binder log`, `list` and `status` read of a binder's history: its commits, newest
/// first, one record's versions, and the paths its tip holds. Structural only (times, commit
/// ids, the apps' structural messages, git paths): nothing is decrypted and no key is needed.
public struct BinderHistory {
    /// One commit as `binder log` shows it.
    public struct Entry: Sendable, Equatable {
        /// The committer's time: when the change was saved.
        public let seconds: Int64
        /// The commit's id in hex.
        public let commit: String
        /// The first line of its message.
        public let message: String
    }

    /// Why the history could not be read: the git failure, in words.
    public struct ReadError: Error, CustomStringConvertible {
        public let description: String
    }

    private let repository: GitRepository

    public init(_ repository: GitRepository) { self.repository = repository }

    /// Whether the branch has a commit at all.
    public func hasCommits() throws(ReadError) -> Bool { try tip() != nil }

    /// Every commit reachable from the branch's tip, newest first.
    public func entries() throws(ReadError) -> [Entry] {
        guard let tip = try tip() else { return [] }
        do {
            return try repository.history.commits(from: tip).map { Entry(seconds: $0.committer.seconds, commit: $0.id.hex, message: $0.summary) }
        } catch { throw ReadError(description: "\(error)") }
    }

    /// The commits that changed the document at `gitPath` (as `git log -- path` lists them),
    /// newest first; empty when no commit held it.
    public func versions(of gitPath: String) throws(ReadError) -> [Entry] {
        guard let tip = try tip() else { return [] }
        do {
            return try repository.history.versions(of: gitPath, from: tip).map { version throws(GitError) in
                Entry(seconds: version.seconds, commit: version.commit.hex, message: try repository.commits.commit(version.commit).summary)
            }
        } catch { throw ReadError(description: "\(error)") }
    }

    /// When the branch's newest commit was made; nil without one (or when it cannot be read).
    public func lastCommitTime() -> Date? {
        guard let tip = try? tip() else { return nil }
        return (try? repository.commits.commit(tip))?.committer.time
    }

    /// Every git path the tip holds (folders and files); empty without a tip.
    public func tipPaths() -> [String] {
        guard let tip = try? tip() else { return [] }
        return (try? repository.trees.listTree(commit: tip).map(\.path)) ?? []
    }

    private func tip() throws(ReadError) -> ObjectID? {
        do { return try repository.refs.branchTip() } catch { throw ReadError(description: "\(error)") }
    }
}
