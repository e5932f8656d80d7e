internal import CGit2
import Foundation

/// One entry of a recursive tree listing.
public struct TreeEntry: Sendable, Hashable {
    /// What a tree entry points at (from its file mode).
    public enum Kind: Sendable, Hashable {
        /// A file (mode 100644 or 100755).
        case blob
        /// A folder (mode 040000).
        case tree
        /// A symbolic link (mode 120000); the blob holds the target.
        case link
        /// A submodule commit ("gitlink", mode 160000); the id is not in this repository.
        case submodule

        init(mode: UInt32) {
            switch mode & 0o170000 {
            case 0o040000: self = .tree
            case 0o120000: self = .link
            case 0o160000: self = .submodule
            default: self = .blob
            }
        }
    }

    /// Path from the root, components separated by `/` (no leading `/`).
    /// Names that are not valid UTF-8 are decoded with replacement characters.
    public let path: String
    public let id: ObjectID
    public let kind: Kind
    /// The git file mode, e.g. 0o100644, 0o100755, 0o040000, 0o120000, 0o160000.
    public let mode: UInt32
    /// False when the entry's own name (in a crafted tree) is not valid UTF-8 or holds '/':
    /// `path` then has U+FFFD in their place, and names neither this entry nor anything that
    /// could be written back.
    public let nameIsExact: Bool

    /// Where the last component starts, in UTF-8 bytes: `name` is asked for in every
    /// comparison of a folder's sort, and searching for the last '/' each time was a third of
    /// a listing's build (docs/BENCHMARKS.md, "Issue 13: saves"). Follows from `path`.
    @usableFromInline let nameOffset: Int

    public init(path: String, id: ObjectID, kind: Kind, mode: UInt32, nameIsExact: Bool = true) {
        self.path = path
        self.id = id
        self.kind = kind
        self.mode = mode
        self.nameIsExact = nameIsExact
        // Bytes, not Characters: a search by Character walks grapheme clusters, and this runs
        // for every entry of a listed tree (100,000 at mount in the largest benchmark).
        nameOffset = path.utf8.lastIndex(of: UInt8(ascii: "/")).map { path.utf8.distance(from: path.utf8.startIndex, to: $0) + 1 } ?? 0
    }

    /// An entry of the folder whose path ends in '/' is `prefix` ("" at the root).
    init(prefix: String, name: String, id: ObjectID, kind: Kind, mode: UInt32, nameIsExact: Bool) {
        path = prefix + name
        self.id = id
        self.kind = kind
        self.mode = mode
        self.nameIsExact = nameIsExact
        nameOffset = prefix.utf8.count
    }

    /// Calls `body` with the last path component's UTF-8 bytes, in place: no `Substring` is
    /// made (a snapshot checks every entry's name at mount: 100,000 of them in one folder).
    /// Inlinable, so that callers get it specialized rather than generic at run time.
    @inlinable
    public func withNameBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        if let result = try path.utf8.withContiguousStorageIfAvailable({ try body(UnsafeBufferPointer(rebasing: $0[nameOffset...])) }) {
            return result
        }
        return try Array(path.utf8[path.utf8.index(path.utf8.startIndex, offsetBy: nameOffset)...]).withUnsafeBufferPointer(body)
    }

    /// The last path component.
    public var name: Substring {
        path[path.utf8.index(path.utf8.startIndex, offsetBy: nameOffset)...]
    }

    /// The path of the folder holding the entry ("" at the root).
    public var folder: Substring {
        nameOffset == 0 ? path[path.startIndex..<path.startIndex] : path[..<path.utf8.index(path.utf8.startIndex, offsetBy: nameOffset - 1)]
    }
}

/// One change applied by `GitRepository.commitChanges`.
public enum TreeChange: Sendable, Hashable {
    /// Adds or replaces the file at `path` (mode 100644) with `blob`, creating
    /// intermediate folders. Replacing a folder with a file, or writing below a
    /// file, fails (delete first, in the same change list).
    case write(path: String, blob: ObjectID)
    /// Removes the file, link or whole folder at `path`; folders left empty
    /// are removed too. Deleting a path that does not exist is a no-op.
    case delete(path: String)

    public var path: String {
        switch self {
        case .write(let path, _), .delete(let path): return path
        }
    }
}

extension GitRepository {
    /// Every entry reachable from the root tree of `commit`, folders included,
    /// in git's order (pre-order: a folder comes right before its contents),
    /// like `git ls-tree -r -t`.
    public func listTree(commit: ObjectID) throws(GitError) -> [TreeEntry] {
        try locked { () throws(GitError) in
            let root = try commitTreeLocked(commit)
            return try listLocked(root)
        }
    }

    /// Every folder of `commit`'s tree with its own entries, by path ("" is the root; a folder
    /// with no entries has none), each in git's order: `listTree(commit:)` grouped by folder,
    /// made without a list of everything first (a snapshot at mount: 100,000 entries in one
    /// folder). Folders whose paths are equal as strings (a crafted tree's twins) share one
    /// key, their entries one after the other.
    public func listFolders(commit: ObjectID) throws(GitError) -> [String: [TreeEntry]] {
        try locked { () throws(GitError) in
            var paths = [""], entries: [[TreeEntry]] = [[]]
            try walkLocked(try commitTreeLocked(commit)) { entry, folder in
                entries[folder].append(entry)
                if entry.kind == .tree {
                    paths.append(entry.path)
                    entries.append([])
                }
            }
            var folders: [String: [TreeEntry]] = Dictionary(minimumCapacity: paths.count)
            for (path, own) in zip(paths, entries) {
                if folders[path] == nil { folders[path] = own } else { folders[path]?.append(contentsOf: own) }
            }
            return folders
        }
    }

    /// Every entry reachable from tree `tree` (see `listTree(commit:)`).
    public func listTree(tree: ObjectID) throws(GitError) -> [TreeEntry] {
        try locked { () throws(GitError) in
            try listLocked(try lookupTreeLocked(tree))
        }
    }

    /// The entry at `path` in `commit`'s tree; nil when there is none.
    public func entry(at path: String, commit: ObjectID) throws(GitError) -> TreeEntry? {
        _ = try Self.components(of: path)
        return try locked { () throws(GitError) in
            let root = try commitTreeLocked(commit)
            var pointer: OpaquePointer?
            let rc = git_tree_entry_bypath(&pointer, root.pointer, path)
            if rc == GIT_ENOTFOUND.rawValue { return nil }
            try check(rc, "look up '\(path)' in \(commit)")
            let entry = TreeEntryHandle(pointer!)
            let mode = git_tree_entry_filemode_raw(entry.pointer).rawValue
            return TreeEntry(path: path, id: ObjectID(git_tree_entry_id(entry.pointer)),
                             kind: TreeEntry.Kind(mode: mode), mode: mode)
        }
    }

    /// The entries of folder `path` ("" is the root) in `commit`'s tree and everything
    /// below it, with full paths, in the order of `listTree(commit:)`; nil when `path` is not
    /// a folder there. `recursive: false` gives the folder's own entries only.
    public func listFolder(commit: ObjectID, path: String, recursive: Bool) throws(GitError) -> [TreeEntry]? {
        if !path.isEmpty { _ = try Self.components(of: path) }
        return try locked { () throws(GitError) -> [TreeEntry]? in
            let root = try commitTreeLocked(commit)
            var folder = root
            if !path.isEmpty {
                var pointer: OpaquePointer?
                let rc = git_tree_entry_bypath(&pointer, root.pointer, path)
                if rc == GIT_ENOTFOUND.rawValue { return nil }
                try check(rc, "look up '\(path)' in \(commit)")
                let entry = TreeEntryHandle(pointer!)
                guard git_tree_entry_type(entry.pointer) == GIT_OBJECT_TREE else { return nil }
                folder = try lookupTreeLocked(ObjectID(git_tree_entry_id(entry.pointer)))
            }
            let prefix = path.isEmpty ? "" : path + "/"
            if recursive {
                return try listLocked(folder).map { TreeEntry(path: prefix + $0.path, id: $0.id, kind: $0.kind, mode: $0.mode) }
            }
            return (0..<git_tree_entrycount(folder.pointer)).map { index in
                let entry = git_tree_entry_byindex(folder.pointer, index)!
                let mode = git_tree_entry_filemode_raw(entry).rawValue
                let name = Self.entryName(entry)
                return TreeEntry(path: prefix + name.text, id: ObjectID(git_tree_entry_id(entry)),
                                 kind: TreeEntry.Kind(mode: mode), mode: mode, nameIsExact: name.isExact)
            }
        }
    }

    /// A tree entry's name as text. libgit2 reads names as stored; one that is not UTF-8 or
    /// holds '/' (a crafted tree) gets U+FFFD in their place, so that its path stays in its
    /// folder, and says so.
    private static func entryName(_ entry: OpaquePointer) -> (text: String, isExact: Bool) {
        guard let raw = git_tree_entry_name(entry) else { return ("", false) }
        let text = String(validatingCString: raw)
        let name = text ?? String(cString: raw)
        if name.utf8.contains(UInt8(ascii: "/")) { return (name.replacingOccurrences(of: "/", with: "\u{FFFD}"), false) }
        return (name, text != nil)
    }

    // MARK: - Lock held

    func lookupTreeLocked(_ id: ObjectID) throws(GitError) -> TreeHandle {
        var oid = id.oid
        var pointer: OpaquePointer?
        try check(git_tree_lookup(&pointer, repo.pointer, &oid), "read tree \(id)")
        return TreeHandle(pointer!)
    }

    func commitTreeLocked(_ commit: ObjectID) throws(GitError) -> TreeHandle {
        let handle = try lookupCommitLocked(commit)
        var pointer: OpaquePointer?
        try check(git_commit_tree(&pointer, handle.pointer), "read tree of commit \(commit)")
        return TreeHandle(pointer!)
    }

    /// Every entry below `root`, in pre-order (see `listTree(commit:)`).
    private func listLocked(_ root: TreeHandle) throws(GitError) -> [TreeEntry] {
        var result: [TreeEntry] = []
        result.reserveCapacity(git_tree_entrycount(root.pointer))
        try walkLocked(root) { entry, _ in result.append(entry) }
        return result
    }

    /// Iterative pre-order walk (no recursion, so no stack depth limit). `visit` gets each entry
    /// and the number of the folder holding it: 0 for the root, and each folder the number of
    /// folder entries visited up to and including its own (its entry is visited before its
    /// contents: the first folder met is 1, the next 2…).
    private func walkLocked(_ root: TreeHandle, _ visit: (TreeEntry, _ folder: Int) -> Void) throws(GitError) {
        struct Frame {
            let tree: TreeHandle
            let prefix: String  // "" for the root, else "dir/sub/"
            let folder: Int
            let count: Int
            var next: Int
        }
        var folders = 0
        var stack = [Frame(tree: root, prefix: "", folder: 0, count: git_tree_entrycount(root.pointer), next: 0)]
        while !stack.isEmpty {
            let top = stack.count - 1
            guard stack[top].next < stack[top].count else {
                stack.removeLast()
                continue
            }
            let tree = stack[top].tree
            let index = stack[top].next
            stack[top].next += 1
            // Borrowed from `tree`, which the frame keeps alive.
            guard let entry = git_tree_entry_byindex(tree.pointer, index) else {
                preconditionFailure("git_tree_entry_byindex(\(index)) out of range")
            }
            let name = Self.entryName(entry)
            let mode = git_tree_entry_filemode_raw(entry).rawValue
            let kind = TreeEntry.Kind(mode: mode)
            let id = ObjectID(git_tree_entry_id(entry))
            let listed = TreeEntry(prefix: stack[top].prefix, name: name.text, id: id, kind: kind, mode: mode, nameIsExact: name.isExact)
            visit(listed, stack[top].folder)
            if kind == .tree {
                folders += 1
                let subtree = try lookupTreeLocked(id)
                stack.append(Frame(tree: subtree, prefix: listed.path + "/", folder: folders,
                                   count: git_tree_entrycount(subtree.pointer), next: 0))
            }
        }
    }

    /// Applies `changes` in order to `base` (nil: the empty tree), writes the
    /// new trees and returns the new root tree's id.
    ///
    /// `git_tree_create_updated` sorts its updates and reads folders from the
    /// baseline, so one call cannot express "delete `a`, then write `a/b`" or
    /// two changes of one path. The changes are therefore split into batches
    /// in which no path equals or contains another; batches are applied one
    /// after the other (usually there is exactly one).
    func applyChangesLocked(_ changes: [TreeChange], to base: TreeHandle?) throws(GitError) -> ObjectID {
        for change in changes { _ = try Self.components(of: change.path) }
        var tree = base
        var treeID: ObjectID? = nil
        for batch in Self.batches(changes) {
            // Deleting what is not there is a no-op (libgit2 would fail).
            let effective = batch.filter { change in
                guard case .delete(let path) = change else { return true }
                guard let tree else { return false }
                var pointer: OpaquePointer?
                guard git_tree_entry_bypath(&pointer, tree.pointer, path) == 0 else { return false }
                _ = TreeEntryHandle(pointer!)
                return true
            }
            if effective.isEmpty { continue }
            let id = try createUpdatedLocked(base: tree, effective)
            tree = try lookupTreeLocked(id)
            treeID = id
        }
        if let treeID { return treeID }
        if let base { return ObjectID(git_tree_id(base.pointer)) }
        return try createUpdatedLocked(base: nil, [])  // the empty tree
    }

    private func createUpdatedLocked(base: TreeHandle?, _ changes: [TreeChange]) throws(GitError) -> ObjectID {
        // C copies of the paths, alive until the call returns.
        var paths: [UnsafeMutablePointer<CChar>] = []
        paths.reserveCapacity(changes.count)
        defer { for path in paths { free(path) } }
        var updates: [git_tree_update] = []
        updates.reserveCapacity(changes.count)
        for change in changes {
            guard let path = strdup(change.path) else { preconditionFailure("out of memory") }
            paths.append(path)
            var update = git_tree_update()
            update.path = UnsafePointer(path)
            switch change {
            case .write(_, let blob):
                update.action = GIT_TREE_UPDATE_UPSERT
                update.id = blob.oid
                update.filemode = GIT_FILEMODE_BLOB
            case .delete:
                update.action = GIT_TREE_UPDATE_REMOVE
            }
            updates.append(update)
        }
        var oid = git_oid()
        let rc = updates.withUnsafeBufferPointer { buffer in
            git_tree_create_updated(&oid, repo.pointer, base?.pointer, buffer.count, buffer.baseAddress)
        }
        try check(rc, "update tree")
        return ObjectID(&oid)
    }

    /// Splits `changes` into batches where no path equals or is an ancestor
    /// of another. A repeated write of one path, or a delete after a write of
    /// the same path, replaces the earlier change in place (same result).
    static func batches(_ changes: [TreeChange]) -> [[TreeChange]] {
        var batches: [[TreeChange]] = []
        var current: [TreeChange] = []
        var indexOfPath: [String: Int] = [:]
        var ancestors: Set<String> = []  // proper ancestors of paths in `current`
        for change in changes {
            let path = change.path
            if let index = indexOfPath[path] {
                if case .write = current[index] {
                    current[index] = change
                    continue
                }
            }
            let own = Self.ancestors(of: path)
            let conflict = indexOfPath[path] != nil || ancestors.contains(path)
                || own.contains { indexOfPath[$0] != nil }
            if conflict {
                batches.append(current)
                current = []
                indexOfPath = [:]
                ancestors = []
            }
            indexOfPath[path] = current.count
            current.append(change)
            ancestors.formUnion(own)
        }
        if !current.isEmpty { batches.append(current) }
        return batches
    }

    /// "a/b/c" -> ["a", "a/b"].
    public static func ancestors(of path: String) -> [String] {
        Array(PathBytes.ancestors(of: path).dropLast().reversed())
    }

    /// Validates a repository-relative path and returns its components.
    static func components(of path: String) throws(GitError) -> [Substring] {
        if path.isEmpty { throw GitError.invalidPath(path, reason: "empty path") }
        if path.utf8.contains(0) { throw GitError.invalidPath(path, reason: "contains NUL") }
        if path.utf8.first == PathBytes.slash { throw GitError.invalidPath(path, reason: "absolute path") }
        let parts = PathBytes.components(path).map { Substring($0) }
        for part in parts {
            if part.isEmpty { throw GitError.invalidPath(path, reason: "empty component") }
            if part == "." || part == ".." { throw GitError.invalidPath(path, reason: "'\(part)' component") }
        }
        return parts
    }
}
