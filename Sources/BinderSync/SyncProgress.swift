import BinderGit

extension SyncEngine {
    /// How far a fetch or push has come (objects and bytes), as the engine reports it to a
    /// progress line: the commands name it here, not in git.
    public typealias Progress = TransferProgress
}
