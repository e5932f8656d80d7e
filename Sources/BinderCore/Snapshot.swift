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

    /// The snapshot of `commit`, made from this one by re-reading only the folders `changes`
    /// touched (and their ancestors, whose entries name new trees): a save costs what it
    /// changed, not the size of the binder. `commit` must be this snapshot's commit plus
    /// `changes`.
    func advanced(to commit: ObjectID, changes: [TreeChange], repository: GitRepository) throws -> Snapshot {
        let info = try repository.commit(commit)
        var folders = gitFolders
        func removeFolder(_ path: String) {
            folders.removeValue(forKey: path)
            let prefix = path + "/"
            for key in folders.keys where key.hasPrefix(prefix) { folders.removeValue(forKey: key) }
        }
        func loadFolder(_ path: String, recursive: Bool) throws {
            guard let entries = try repository.listFolder(commit: commit, path: path, recursive: recursive) else {
                return removeFolder(path)
            }
            if recursive {
                removeFolder(path)
                folders[path] = []
                for entry in entries {
                    let parent = entry.path.lastIndex(of: "/").map { String(entry.path[..<$0]) } ?? ""
                    folders[parent, default: []].append(entry)
                    if entry.kind == .tree, folders[entry.path] == nil { folders[entry.path] = [] }
                }
                return
            }
            folders[path] = entries
            // A folder that appeared (the first file written into it) is read whole.
            for entry in entries where entry.kind == .tree && folders[entry.path] == nil {
                try loadFolder(entry.path, recursive: true)
            }
        }
        var ancestors = Set<String>()
        for change in changes {
            var path = change.path
            while let slash = path.lastIndex(of: "/") {
                path = String(path[..<slash])
                ancestors.insert(path)
            }
            ancestors.insert("")
        }
        // Shallow first, so that a folder that disappeared takes its descendants with it.
        for folder in ancestors.sorted(by: { $0.count < $1.count }) {
            try loadFolder(folder, recursive: false)
        }
        // A changed path that was a folder (deleted or replaced as a whole) is read again whole.
        for change in changes where folders[change.path] != nil && !ancestors.contains(change.path) {
            try loadFolder(change.path, recursive: true)
        }
        if folders[""] == nil { folders[""] = [] }
        return Snapshot(commit: commit, commitTime: Timestamp(seconds: info.committer.seconds), gitFolders: folders)
    }

    /// The blob at git path `path`, if any.
    func entry(at path: String) -> TreeEntry? {
        let parent = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? ""
        return gitFolders[parent]?.first { $0.path == path }
    }
}
