import BinderGit
import Foundation

/// A binder on this machine: its repository at a path, opened or made. The commands hold
/// binders through this, not through git (issue 45): they open and create here, and pass
/// `repository` on to the core's owners (BinderView, BinderHistory, StagingCopy, SyncTarget…)
/// as an opaque handle, named `LocalBinder.Repository` when a signature must name it.
public struct LocalBinder: Sendable {
    /// The handle the core's owners take.
    public typealias Repository = GitRepository
    /// A commit's id, as a share's records keep it (hex) and a fetch answers it.
    public typealias CommitID = ObjectID
    /// Who a commit is by.
    public typealias Author = Signature

    public let repository: Repository
    /// The path it was opened at (a bare repository, or a work tree holding `.git`).
    public let path: String

    /// The binder at `path`; throws when it is not a git repository.
    public static func open(path: String) throws -> LocalBinder {
        LocalBinder(repository: try GitRepository.open(path: path), path: path)
    }

    /// A new, empty, bare repository at `path` (the layout `binder create` and `binder clone`
    /// make, and the share's staging copies).
    public static func create(path: String) throws -> LocalBinder {
        LocalBinder(repository: try GitRepository.create(path: path, bare: true), path: path)
    }

    /// The git directory: where the writer lock, the sync record and the mount's control live.
    public var gitDirectory: String { repository.gitDirectory }
}
