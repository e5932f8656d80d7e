import BinderGit

/// One commit of `main` as the view sees it: its time and the entries of every git folder.
/// Immutable; the view swaps in a new one after each commit (its own, or one that arrived).
struct Snapshot: Sendable {
    let commit: ObjectID?
    /// The mtime of folders and of files without a date of their own.
    let commitTime: Timestamp
    /// Entries of every git folder, by folder path ("" is the root).
    let gitFolders: [String: [TreeEntry]]

    static func load(_ repository: GitRepository, commit: ObjectID?) throws -> Snapshot {
        guard let commit else { return Snapshot(commit: nil, commitTime: Timestamp(seconds: 0), gitFolders: ["": []]) }
        let info = try repository.commit(commit)
        var folders: [String: [TreeEntry]] = ["": []]
        for entry in try repository.listTree(commit: commit) {
            let parent = entry.path.lastIndex(of: "/").map { String(entry.path[..<$0]) } ?? ""
            folders[parent, default: []].append(entry)
            if entry.kind == .tree, folders[entry.path] == nil { folders[entry.path] = [] }
        }
        return Snapshot(commit: commit, commitTime: Timestamp(seconds: info.committer.seconds), gitFolders: folders)
    }

    /// The blob at git path `path`, if any.
    func entry(at path: String) -> TreeEntry? {
        let parent = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? ""
        return gitFolders[parent]?.first { $0.path == path }
    }
}
