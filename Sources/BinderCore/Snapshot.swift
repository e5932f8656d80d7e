import BinderGit
import Glibc  // memcmp

/// One commit of `main` as the view sees it: its time and the entries of every git folder.
/// The view swaps in a new one after each commit (its own, or one that arrived), or patches the
/// one it shows in place (`apply`: a save, under the listings' lock).
struct Snapshot: Sendable {
    private(set) var commit: ObjectID?
    /// The mtime of folders and of files without a date of their own.
    private(set) var commitTime: Timestamp
    /// Entries of every git folder, by folder path ("" is the root).
    private(set) var gitFolders: [String: [TreeEntry]]
    /// Folders that a commit cannot patch in place (`patch`), because libgit2 may
    /// write them back otherwise than they are (crafted trees): entries out of git's strict
    /// order or repeated, names that are not exact or not valid in a tree, modes git would
    /// normalise. A commit into them reads them back from git.
    let irregularFolders: Set<String>

    static func load(_ repository: GitRepository, commit: ObjectID?) throws -> Snapshot {
        guard let commit else { return Snapshot(commit: nil, commitTime: Timestamp(seconds: 0), gitFolders: ["": []], irregularFolders: []) }
        let info = try repository.commits.commit(commit)
        let folders = try repository.trees.listFolders(commit: commit)
        var irregular = Set<String>()
        for (path, entries) in folders where !isRegular(entries) { irregular.insert(path) }
        return Snapshot(commit: commit, commitTime: Timestamp(seconds: info.committer.seconds), gitFolders: folders,
                        irregularFolders: irregular)
    }

    /// The snapshot of `commit`, made from this one by re-reading only the folders `changes`
    /// touched (and their ancestors, whose entries name new trees): a save costs what it
    /// changed, not the size of the binder. `commit` must be this snapshot's commit plus
    /// `changes`.
    func advanced(to commit: ObjectID, changes: [TreeChange], repository: GitRepository) throws -> Snapshot {
        if let patch = try patch(to: commit, changes: changes, repository: repository) {
            var next = self  // (its folders copied as they are patched: this one stays as it is)
            if next.apply(patch) { return next }
        }
        let info = try repository.commits.commit(commit)
        var folders = gitFolders
        var reread = Set<String>()
        func removeFolder(_ path: String) {
            folders.removeValue(forKey: path)
            for key in folders.keys where PathBytes.isInside(key, folder: path) { folders.removeValue(forKey: key) }
        }
        /// False when `path` is not a folder that can be read.
        @discardableResult
        func loadFolder(_ path: String, recursive: Bool) throws -> Bool {
            guard let entries = try repository.trees.listFolder(commit: commit, path: path, recursive: recursive) else {
                removeFolder(path)
                return false
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
                return true
            }
            folders[path] = entries
            reread.insert(path)
            // A folder that appeared (the first file written into it) is read whole; one that
            // cannot be read is listed as such, as a whole load lists it.
            var unreadable = Set<String>()
            for entry in entries where entry.kind == .tree && folders[entry.path] == nil {
                if try !loadFolder(entry.path, recursive: true) { unreadable.insert(entry.path) }
            }
            if !unreadable.isEmpty {
                folders[path] = entries.map { entry in
                    unreadable.contains(entry.path)
                        ? TreeEntry(path: entry.path, id: entry.id, kind: .unreadable, mode: entry.mode, nameIsExact: entry.nameIsExact) : entry
                }
            }
            return true
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
        // Read in place, names as bytes: this runs over every entry a snapshot loads.
        entries.withUnsafeBufferPointer { entries in
            for index in entries.indices {
                guard entries[index].nameIsExact, entries[index].withNameBytes(isPlainName) else { return false }
                switch entries[index].mode {
                case 0o100644, 0o100755, 0o040000, 0o120000, 0o160000: break
                default: return false
                }
                if index > 0, !gitOrderPrecedes(entries[index - 1], entries[index]) { return false }
            }
            return true
        }
    }

    /// git's order of a folder's entries: by name, bytewise, a folder's name read with a '/'
    /// after it. Compared in place, without making the keys (this runs for every entry of
    /// every folder a snapshot loads).
    static func gitOrderPrecedes(_ a: TreeEntry, _ b: TreeEntry) -> Bool {
        let inPlace = a.withNameBytes { left in
            b.withNameBytes { right in gitOrderPrecedes(left, a.sortsAsFolder, right, b.sortsAsFolder) }
        }
        if let inPlace { return inPlace }
        let slash = UInt8(ascii: "/")
        var left = a.name.utf8.makeIterator(), right = b.name.utf8.makeIterator()
        var leftSlash = a.sortsAsFolder, rightSlash = b.sortsAsFolder
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

    /// `gitOrderPrecedes` on the names' bytes: the common length by `memcmp`, then the next
    /// byte of each (a folder's name is read with a '/' after it). Nil when those are equal
    /// too (a name holding '/': only a crafted tree's), for the walk above to decide.
    private static func gitOrderPrecedes(_ left: UnsafeBufferPointer<UInt8>, _ leftIsTree: Bool,
                                         _ right: UnsafeBufferPointer<UInt8>, _ rightIsTree: Bool) -> Bool? {
        let common = min(left.count, right.count)
        if common > 0, let x = left.baseAddress, let y = right.baseAddress {
            let order = memcmp(x, y, common)
            if order != 0 { return order < 0 }
        }
        let slash = UInt8(ascii: "/")
        let nextLeft = left.count > common ? left[common] : (leftIsTree ? slash : nil)
        let nextRight = right.count > common ? right[common] : (rightIsTree ? slash : nil)
        switch (nextLeft, nextRight) {
        case (nil, nil): return false
        case (nil, _): return true
        case (_, nil): return false
        case let (x?, y?): return x == y ? nil : x < y
        }
    }

    /// A name any tree may hold: not empty, `.`, `..` or `.git`, without '/' or NUL.
    static func isPlainName(_ name: Substring) -> Bool {
        name.utf8.withContiguousStorageIfAvailable(isPlainName) ?? Array(name.utf8).withUnsafeBufferPointer(isPlainName)
    }

    /// `isPlainName` of a name's UTF-8 bytes. `.git` in any case: four bytes that lower-case
    /// to it are ASCII (a character of two or more bytes lower-cases to none of its letters).
    static func isPlainName(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        let dot = UInt8(ascii: "."), slash = UInt8(ascii: "/")
        guard !name.isEmpty, !name.contains(where: { $0 == 0 || $0 == slash }) else { return false }
        switch name.count {
        case 1: return name[0] != dot
        case 2: return !(name[0] == dot && name[1] == dot)
        case 4: return !(name[0] == dot && name[1] | 0x20 == UInt8(ascii: "g") && name[2] | 0x20 == UInt8(ascii: "i")
                         && name[3] | 0x20 == UInt8(ascii: "t"))
        default: return true
        }
    }

    /// What taking this snapshot to `commit` puts into its folders, when `changes` only write
    /// files into folders that exist (a save, a new record): each file's entry is put in its
    /// place and the ids of the folders above it are looked up, no folder read again (a read of
    /// the folder cost its size: a save must not). Worked out
    /// without copying a folder: `apply` then puts the entries into the snapshot shown, in
    /// place. In a folder of 100,000 records a copy of its entries (each retaining its path)
    /// was a quarter of a save. Nil when the changes need `advanced`.
    func patch(to commit: ObjectID, changes: [TreeChange], repository: GitRepository) throws -> SnapshotPatch? {
        guard let base = self.commit else { return nil }
        var puts: [SnapshotPatch.Put] = []
        var subfolders = Set<String>()
        for change in changes {
            guard case .write(let path, let blob) = change else { return nil }
            let (parent, name) = ViewPath.split(path)
            guard let entries = gitFolders[parent], gitFolders[path] == nil, !irregularFolders.contains(parent),
                  Self.isPlainName(name[...]) else { return nil }
            let put = SnapshotPatch.Put(folder: parent, entry: TreeEntry(path: path, id: blob, kind: .blob, mode: 0o100644), replacingOnly: false)
            guard Self.place(put.entry, in: entries, replacingOnly: false) != nil else { return nil }
            puts.append(put)
            var child = parent
            for ancestor in ViewPath.ancestors(of: parent) {
                subfolders.insert(child)
                child = ancestor
            }
        }
        for folder in subfolders {
            let parent = ViewPath.split(folder).parent
            guard !irregularFolders.contains(parent), let entries = gitFolders[parent],
                  let entry = try repository.trees.entry(at: folder, commit: commit), entry.kind == .tree,
                  Self.place(entry, in: entries, replacingOnly: true) != nil else { return nil }
            puts.append(SnapshotPatch.Put(folder: parent, entry: entry, replacingOnly: true))
        }
        let info = try repository.commits.commit(commit)
        return SnapshotPatch(base: base, commit: commit, commitTime: Timestamp(seconds: info.committer.seconds), puts: puts)
    }

    /// This snapshot at `patch`'s commit and time with its folders as they are: what patching
    /// listings needs to know of the next snapshot (which folders exist, and the time).
    func atCommit(of patch: SnapshotPatch) -> Snapshot {
        Snapshot(commit: patch.commit, commitTime: patch.commitTime, gitFolders: gitFolders, irregularFolders: irregularFolders)
    }

    /// Puts `patch`'s entries into this snapshot, in place (its folders' arrays are copied only
    /// if something else holds them), and moves it to the patch's commit. False, and nothing
    /// changed, unless this snapshot is the patch's base and every entry has its place.
    mutating func apply(_ patch: SnapshotPatch) -> Bool {
        guard commit == patch.base,
              patch.puts.allSatisfy({ put in gitFolders[put.folder].map { Self.place(put.entry, in: $0, replacingOnly: put.replacingOnly) != nil } ?? false })
        else { return false }
        for put in patch.puts {
            // Checked just above; entries of distinct names do not take each other's places.
            _ = Self.put(put.entry, into: &gitFolders[put.folder, default: []], replacingOnly: put.replacingOnly)
        }
        commit = patch.commit
        commitTime = patch.commitTime
        return true
    }

    /// Puts `entry` into `entries` (a folder's, in git's order) in its place, replacing the
    /// entry of its name; false when that entry is of the other kind, or when `replacingOnly`
    /// and there is none. Keeps what git says of the name
    /// (`nameIsExact`) and a folder's mode.
    static func put(_ entry: TreeEntry, into entries: inout [TreeEntry], replacingOnly: Bool = false) -> Bool {
        guard let (index, replaces) = place(entry, in: entries, replacingOnly: replacingOnly) else { return false }
        if replaces {
            let old = entries[index]
            entries[index] = TreeEntry(path: entry.path, id: entry.id, kind: entry.kind, mode: entry.kind == .tree ? old.mode : entry.mode,
                                       nameIsExact: old.nameIsExact)
        } else {
            entries.insert(entry, at: index)
        }
        return true
    }

    /// Where `put` would put `entry` in `entries`: its index, and whether it replaces the entry
    /// there; nil when it would not put it.
    static func place(_ entry: TreeEntry, in entries: [TreeEntry], replacingOnly: Bool) -> (index: Int, replaces: Bool)? {
        var low = 0, high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if gitOrderPrecedes(entries[middle], entry) { low = middle + 1 } else { high = middle }
        }
        if low < entries.count, !gitOrderPrecedes(entry, entries[low]) {  // neither precedes: the same key
            guard entries[low].sortsAsFolder == entry.sortsAsFolder else { return nil }
            return (low, true)
        }
        // (A folder of a new file's name sits elsewhere in git's order: the caller rules it out.)
        return replacingOnly ? nil : (low, false)
    }

    /// The blob at git path `path`, if any.
    func entry(at path: String) -> TreeEntry? {
        gitFolders[PathBytes.split(path).parent]?.first { $0.path == path }
    }

    /// An id for an entry that is only compared by name (`fileEntry`).
    private static let probeID = ObjectID(bytes: [UInt8](repeating: 0, count: ObjectID.byteCount))!

    /// The file (not folder) entry at git path `path`, found by a binary search of its folder
    /// in git's order (a folder that may be out of order: by a scan); for every save, so not
    /// a walk of a folder of thousands of records.
    func fileEntry(at path: String) -> TreeEntry? {
        let parent = PathBytes.split(path).parent
        guard let entries = gitFolders[parent] else { return nil }
        if irregularFolders.contains(parent) { return entries.first { $0.path == path && $0.kind != .tree } }
        let probe = TreeEntry(path: path, id: Self.probeID, kind: .blob, mode: 0o100644)
        guard let (index, replaces) = Self.place(probe, in: entries, replacingOnly: true), replaces,
              entries[index].kind != .tree else { return nil }
        return entries[index]
    }
}

/// The entries a save's commit puts into the snapshot it was made on (`Snapshot.patch`).
struct SnapshotPatch: Sendable {
    /// An entry and the folder it goes into; `replacingOnly` for a folder's new id.
    struct Put: Sendable {
        let folder: String
        let entry: TreeEntry
        let replacingOnly: Bool
    }
    /// The commit of the snapshot it applies to, and the one it makes.
    let base: ObjectID
    let commit: ObjectID
    let commitTime: Timestamp
    let puts: [Put]
}
