import BinderGit

/// One commit of `main` as the view sees it: its time and the entries of every git folder.
/// Immutable; the view swaps in a new one after each commit (its own, or one that arrived).
struct Snapshot: Sendable {
    let commit: ObjectID?
    /// The mtime of folders and of files without a date of their own.
    let commitTime: Timestamp
    /// Entries of every git folder, by folder path ("" is the root).
    let gitFolders: [String: [TreeEntry]]
    /// Folders that a commit cannot patch in place (`patchedFolders`), because libgit2 may
    /// write them back otherwise than they are (crafted trees): entries out of git's strict
    /// order or repeated, names that are not exact or not valid in a tree, modes git would
    /// normalise. A commit into them reads them back from git.
    let irregularFolders: Set<String>

    static func load(_ repository: GitRepository, commit: ObjectID?) throws -> Snapshot {
        guard let commit else { return Snapshot(commit: nil, commitTime: Timestamp(seconds: 0), gitFolders: ["": []], irregularFolders: []) }
        let info = try repository.commit(commit)
        var folders: [String: [TreeEntry]] = ["": []]
        for entry in try repository.listTree(commit: commit) {
            folders[String(entry.folder), default: []].append(entry)
            if entry.kind == .tree, folders[entry.path] == nil { folders[entry.path] = [] }
        }
        let irregular = Set(folders.filter { !isRegular($0.value) }.keys)
        return Snapshot(commit: commit, commitTime: Timestamp(seconds: info.committer.seconds), gitFolders: folders,
                        irregularFolders: irregular)
    }

    /// The snapshot of `commit`, made from this one by re-reading only the folders `changes`
    /// touched (and their ancestors, whose entries name new trees): a save costs what it
    /// changed, not the size of the binder. `commit` must be this snapshot's commit plus
    /// `changes`.
    func advanced(to commit: ObjectID, changes: [TreeChange], repository: GitRepository) throws -> Snapshot {
        let info = try repository.commit(commit)
        if let folders = try patchedFolders(commit: commit, changes: changes, repository: repository) {
            return Snapshot(commit: commit, commitTime: Timestamp(seconds: info.committer.seconds), gitFolders: folders,
                            irregularFolders: irregularFolders)
        }
        var folders = gitFolders
        var reread = Set<String>()
        func removeFolder(_ path: String) {
            folders.removeValue(forKey: path)
            for key in folders.keys where PathBytes.isInside(key, folder: path) { folders.removeValue(forKey: key) }
        }
        func loadFolder(_ path: String, recursive: Bool) throws {
            guard let entries = try repository.listFolder(commit: commit, path: path, recursive: recursive) else {
                return removeFolder(path)
            }
            if recursive {
                removeFolder(path)
                folders[path] = []
                reread.insert(path)
                for entry in entries {
                    let parent = String(entry.folder)
                    reread.insert(parent)
                    folders[parent, default: []].append(entry)
                    if entry.kind == .tree, folders[entry.path] == nil { folders[entry.path] = [] }
                }
                return
            }
            folders[path] = entries
            reread.insert(path)
            // A folder that appeared (the first file written into it) is read whole.
            for entry in entries where entry.kind == .tree && folders[entry.path] == nil {
                try loadFolder(entry.path, recursive: true)
            }
        }
        var ancestors = Set<String>()
        for change in changes {
            ancestors.formUnion(PathBytes.ancestors(of: change.path))
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
        var irregular = irregularFolders.filter { folders[$0] != nil && !reread.contains($0) }
        for path in reread where !(folders[path].map(Self.isRegular) ?? true) { irregular.insert(path) }
        return Snapshot(commit: commit, commitTime: Timestamp(seconds: info.committer.seconds), gitFolders: folders,
                        irregularFolders: irregular)
    }

    /// Whether libgit2 writes `entries` back as they are: strictly in git's order, exact and
    /// valid names, canonical modes (see `irregularFolders`).
    static func isRegular(_ entries: [TreeEntry]) -> Bool {
        var previous: TreeEntry? = nil
        for entry in entries {
            guard entry.nameIsExact, isPlainName(entry.name),
                  [0o100644, 0o100755, 0o040000, 0o120000, 0o160000].contains(entry.mode) else { return false }
            if let previous, !gitOrderPrecedes(previous, entry) { return false }
            previous = entry
        }
        return true
    }

    /// git's order of a folder's entries: by name, bytewise, a folder's name read with a '/'
    /// after it. Compared in place, without making the keys (this runs for every entry of
    /// every folder a snapshot loads).
    static func gitOrderPrecedes(_ a: TreeEntry, _ b: TreeEntry) -> Bool {
        let slash = UInt8(ascii: "/")
        var left = a.name.utf8.makeIterator(), right = b.name.utf8.makeIterator()
        var leftSlash = a.kind == .tree, rightSlash = b.kind == .tree
        while true {
            var x = left.next(), y = right.next()
            if x == nil, leftSlash { x = slash; leftSlash = false }
            if y == nil, rightSlash { y = slash; rightSlash = false }
            switch (x, y) {
            case (nil, nil): return false
            case (nil, _): return true
            case (_, nil): return false
            case let (x?, y?): if x != y { return x < y }
            }
        }
    }

    /// A name any tree may hold: not empty, `.`, `..` or `.git`, without '/' or NUL.
    static func isPlainName(_ name: Substring) -> Bool {
        let slash = UInt8(ascii: "/")
        // One pass over the bytes in place (the generic `contains` of a view is several times slower).
        let plainBytes = name.utf8.withContiguousStorageIfAvailable { !$0.contains { $0 == 0 || $0 == slash } }
            ?? !name.utf8.contains { $0 == 0 || $0 == slash }
        return plainBytes && !name.isEmpty && name != "." && name != ".." && !(name.utf8.count == 4 && name.lowercased() == ".git")
    }

    /// The folders of `commit` made by patching this snapshot's entries in place, when
    /// `changes` only write files into folders that exist (a save, a new record): each file's
    /// entry is put in its place, the ids of the folders above it are looked up, and no folder
    /// is read again (a read of the folder cost its size: a save must not). Nil otherwise.
    private func patchedFolders(commit: ObjectID, changes: [TreeChange], repository: GitRepository) throws -> [String: [TreeEntry]]? {
        var folders = gitFolders
        var subfolders = Set<String>()
        for change in changes {
            guard case .write(let path, let blob) = change else { return nil }
            let (parent, name) = ViewPath.split(path)
            guard folders[parent] != nil, folders[path] == nil, !irregularFolders.contains(parent),
                  Self.isPlainName(name[...]) else { return nil }
            let entry = TreeEntry(path: path, id: blob, kind: .blob, mode: 0o100644)
            guard Self.put(entry, into: &folders[parent, default: []]) else { return nil }
            var child = parent
            for ancestor in ViewPath.ancestors(of: parent) {
                subfolders.insert(child)
                child = ancestor
            }
        }
        for folder in subfolders {
            guard !irregularFolders.contains(ViewPath.split(folder).parent), let entry = try repository.entry(at: folder, commit: commit), entry.kind == .tree,
                  Self.put(entry, into: &folders[ViewPath.split(folder).parent, default: []], replacingOnly: true) else { return nil }
        }
        return folders
    }

    /// Puts `entry` into `entries` (a folder's, in git's order) in its place, replacing the
    /// entry of its name; false when that entry is of the other kind, or when `replacingOnly`
    /// and there is none. Keeps what git says of the name
    /// (`nameIsExact`) and a folder's mode.
    static func put(_ entry: TreeEntry, into entries: inout [TreeEntry], replacingOnly: Bool = false) -> Bool {
        var low = 0, high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if gitOrderPrecedes(entries[middle], entry) { low = middle + 1 } else { high = middle }
        }
        if low < entries.count, !gitOrderPrecedes(entry, entries[low]) {  // neither precedes: the same key
            let old = entries[low]
            guard (old.kind == .tree) == (entry.kind == .tree) else { return false }
            entries[low] = TreeEntry(path: entry.path, id: entry.id, kind: entry.kind, mode: entry.kind == .tree ? old.mode : entry.mode,
                                     nameIsExact: old.nameIsExact)
            return true
        }
        // (A folder of a new file's name sits elsewhere in git's order: the caller rules it out.)
        guard !replacingOnly else { return false }
        entries.insert(entry, at: low)
        return true
    }

    /// The blob at git path `path`, if any.
    func entry(at path: String) -> TreeEntry? {
        return gitFolders[PathBytes.split(path).parent]?.first { $0.path == path }
    }
}
