internal import CGit2

/// The repository's references: a branch's tip, any ref read, and a ref moved by
/// compare-and-swap under git's ref lock. `GitRepository.refs`.
public struct GitRefs: Sendable {
    /// The repository whose handle this owner uses, under its lock.
    let repository: GitRepository

    /// The commit `refs/heads/<name>` points at; nil when the branch does not
    /// exist (an empty repository, or an unborn branch).
    public func branchTip(_ name: String = "main") throws(GitError) -> ObjectID? {
        try repository.locked { () throws(GitError) in try tipLocked(branch: name) }
    }

    /// Lock held.
    func tipLocked(branch: String) throws(GitError) -> ObjectID? {
        var oid = git_oid()
        let rc = git_reference_name_to_id(&oid, repository.repo.pointer, Self.refName(branch))
        if rc == GIT_ENOTFOUND.rawValue { return nil }
        try check(rc, "read branch '\(branch)'")
        return ObjectID(&oid)
    }

    static func refName(_ branch: String) -> String { "refs/heads/" + branch }

    /// The remote-tracking ref a fetch of `branch` updates.
    public static func trackingRef(_ branch: String = "main") -> String { "refs/remotes/origin/" + branch }

    /// The commit a full reference name (`refs/…`) points at; nil if there is no such ref.
    public func reference(_ name: String) throws(GitError) -> ObjectID? {
        try repository.locked { () throws(GitError) in
            var oid = git_oid()
            let rc = git_reference_name_to_id(&oid, repository.repo.pointer, name)
            if rc == GIT_ENOTFOUND.rawValue { return nil }
            try check(rc, "read \(name)")
            return ObjectID(&oid)
        }
    }

    /// Removes the full reference `name` (nothing when there is none).
    public func removeReference(_ name: String) throws(GitError) {
        try repository.locked { () throws(GitError) in
            let rc = git_reference_remove(repository.repo.pointer, name)
            if rc == GIT_ENOTFOUND.rawValue { return }
            try check(rc, "remove \(name)")
        }
    }

    /// Points `name` at `target`. Unless `force`, only if it still points at `expected` (nil:
    /// only if it does not exist yet): a compare-and-swap that throws `.branchMoved` when
    /// another writer got there first. The ref is fsynced before this returns.
    public func setReference(_ name: String, to target: ObjectID, expected: ObjectID?, force: Bool = false,
                             message: String) throws(GitError) {
        try repository.locked { () throws(GitError) in
            var newOid = target.oid
            var reference: OpaquePointer?
            let rc: Int32
            if force {
                rc = git_reference_create(&reference, repository.repo.pointer, name, &newOid, 1, message)
            } else if let expected {
                var old = expected.oid
                rc = git_reference_create_matching(&reference, repository.repo.pointer, name, &newOid, 1, &old, message)
            } else {
                rc = git_reference_create(&reference, repository.repo.pointer, name, &newOid, 0, message)
            }
            if let reference { _ = ReferenceHandle(reference) }
            if !force && (rc == GIT_EMODIFIED.rawValue || rc == GIT_EEXISTS.rawValue || rc == GIT_ENOTFOUND.rawValue) {
                var oid = git_oid()
                let actual = git_reference_name_to_id(&oid, repository.repo.pointer, name) == 0 ? ObjectID(&oid) : nil
                throw GitError.branchMoved(branch: name, expected: expected, actual: actual)
            }
            try check(rc, "update \(name)")
        }
    }
}
