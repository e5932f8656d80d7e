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
        /// A folder (mode 040000) that cannot be read: its object is missing or is not a tree,
        /// its tree's bytes are not a list of entries, or its name is empty (only a crafted
        /// tree holds one). Listed, never walked into; saves beside it keep it as it is.
        case unreadable

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

    /// Whether git sorts the entry as a folder (its name read with a '/' after it): a folder's,
    /// readable or not.
    public var sortsAsFolder: Bool { kind == .tree || kind == .unreadable }

    /// The path of the folder holding the entry ("" at the root).
    public var folder: Substring {
        nameOffset == 0 ? path[path.startIndex..<path.startIndex] : path[..<path.utf8.index(path.utf8.startIndex, offsetBy: nameOffset - 1)]
    }
}

/// One change applied by `GitCommits.commitChanges`.
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
/// Trees read as listings read them: whole trees, one folder, the entry at a path, each
/// folder read leniently (a crafted entry must not hide a folder's records).
/// `GitRepository.trees`.
public struct GitTrees: Sendable {
    /// The repository whose handle this owner uses, under its lock.
    let repository: GitRepository

    /// Every entry reachable from the root tree of `commit`, folders included,
    /// in git's order (pre-order: a folder comes right before its contents),
    /// like `git ls-tree -r -t`.
    public func listTree(commit: ObjectID) throws(GitError) -> [TreeEntry] {
        try repository.locked { () throws(GitError) in
            try listLocked(try rootFolderLocked(commit))
        }
    }

    /// Every folder of `commit`'s tree with its own entries, by path ("" is the root; a folder
    /// with no entries has none), each in git's order: `listTree(commit:)` grouped by folder,
    /// made without a list of everything first (a snapshot at mount: 100,000 entries in one
    /// folder). Folders whose paths are equal as strings (a crafted tree's twins) share one
    /// key, their entries one after the other.
    public func listFolders(commit: ObjectID) throws(GitError) -> [String: [TreeEntry]] {
        try repository.locked { () throws(GitError) in
            var paths = [""], entries: [[TreeEntry]] = [[]]
            try walkLocked(try rootFolderLocked(commit)) { entry, folder in
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
        try repository.locked { () throws(GitError) in
            guard let folder = try folderLocked(tree) else {
                throw GitError.failed(operation: "read tree \(tree)", code: .invalid, message: "not a readable tree", posixErrno: EIO)
            }
            return try listLocked(folder)
        }
    }

    /// The entry at `path` in `commit`'s tree; nil when there is none.
    public func entry(at path: String, commit: ObjectID) throws(GitError) -> TreeEntry? {
        let components = try Self.components(of: path)
        return try repository.locked { () throws(GitError) -> TreeEntry? in
            let root = try rootFolderLocked(commit)
            if case .parsed(let tree) = root {
                var pointer: OpaquePointer?
                let rc = git_tree_entry_bypath(&pointer, tree.pointer, path)
                if rc == GIT_ENOTFOUND.rawValue { return nil }
                if rc == 0 {
                    let entry = TreeEntryHandle(pointer!)
                    let mode = git_tree_entry_filemode_raw(entry.pointer).rawValue
                    return TreeEntry(path: path, id: ObjectID(git_tree_entry_id(entry.pointer)),
                                     kind: TreeEntry.Kind(mode: mode), mode: mode)
                }
                GitError.clearLast()
            }
            // A folder on the way that libgit2 does not parse: read as `listFolder` reads it.
            guard let found = try lenientEntryLocked(components, in: root) else { return nil }
            return TreeEntry(path: path, id: found.id, kind: TreeEntry.Kind(mode: found.mode), mode: found.mode)
        }
    }

    /// The entries of folder `path` ("" is the root) in `commit`'s tree and everything
    /// below it, with full paths, in the order of `listTree(commit:)`; nil when `path` is not
    /// a folder there, or one that cannot be read (`TreeEntry.Kind.unreadable`).
    /// `recursive: false` gives the folder's own entries only.
    public func listFolder(commit: ObjectID, path: String, recursive: Bool) throws(GitError) -> [TreeEntry]? {
        let components = path.isEmpty ? [] : try Self.components(of: path)
        return try repository.locked { () throws(GitError) -> [TreeEntry]? in
            var folder = try rootFolderLocked(commit)
            if !path.isEmpty {
                guard let found = try lenientEntryLocked(components, in: folder), TreeEntry.Kind(mode: found.mode) == .tree,
                      let read = try folderLocked(found.id) else { return nil }
                folder = read
            }
            let prefix = path.isEmpty ? "" : path + "/"
            if recursive {
                var result: [TreeEntry] = []
                try walkLocked(folder, prefix: prefix) { entry, _ in result.append(entry) }
                return result
            }
            return (0..<folder.count).compactMap { index in
                guard let (name, mode, id) = folder.entry(index) else { return nil }
                return TreeEntry(prefix: prefix, name: name.text, id: id, kind: Self.listedKind(name: name.text, mode: mode),
                                 mode: mode, nameIsExact: name.isExact)
            }
        }
    }

    /// The kind a listing gives an entry: its mode's, but a folder with an empty name is not
    /// one to walk into. (Whether a folder's tree can be read is known once it is read.)
    private static func listedKind(name: String, mode: UInt32) -> TreeEntry.Kind {
        let kind = TreeEntry.Kind(mode: mode)
        return kind == .tree && name.isEmpty ? .unreadable : kind
    }

    /// A tree entry's name as text. libgit2 reads names as stored; one that is not UTF-8 or
    /// holds '/' (a crafted tree) gets U+FFFD in their place, so that its path stays in its
    /// folder, and says so.
    fileprivate static func entryName(_ entry: OpaquePointer) -> (text: String, isExact: Bool) {
        guard let raw = git_tree_entry_name(entry) else { return ("", false) }
        let text = String(validatingCString: raw)
        let name = text ?? String(cString: raw)
        if name.utf8.contains(UInt8(ascii: "/")) { return (name.replacingOccurrences(of: "/", with: "\u{FFFD}"), false) }
        return (name, text != nil)
    }

    /// `entryName` of a name read from a tree's bytes.
    fileprivate static func entryName(_ bytes: UnsafeBufferPointer<UInt8>) -> (text: String, isExact: Bool) {
        let text = String(validating: bytes, as: UTF8.self)
        let name = text ?? String(decoding: bytes, as: UTF8.self)
        if bytes.contains(UInt8(ascii: "/")) { return (name.replacingOccurrences(of: "/", with: "\u{FFFD}"), false) }
        return (name, text != nil)
    }

    // MARK: - Lock held

    /// The folder `id` as a listing reads it; nil when it cannot be read (see `FolderEntries`).
    /// A tree libgit2 refuses (the object is missing or not a tree, or its bytes do not parse)
    /// is read from its bytes, leniently: a crafted entry must not hide the folder's records.
    func folderLocked(_ id: ObjectID) throws(GitError) -> FolderEntries? {
        var oid = id.oid
        var pointer: OpaquePointer?
        if git_tree_lookup(&pointer, repository.repo.pointer, &oid) == 0 { return .parsed(TreeHandle(pointer!)) }
        GitError.clearLast()
        var object: OpaquePointer?
        guard git_odb_read(&object, repository.odb.pointer, &oid) == 0 else {
            GitError.clearLast()
            return nil
        }
        let handle = OdbObjectHandle(object!)
        guard git_odb_object_type(handle.pointer) == GIT_OBJECT_TREE else { return nil }
        let size = git_odb_object_size(handle.pointer)
        guard size > 0, let data = git_odb_object_data(handle.pointer) else { return .raw([]) }
        return FolderEntries.lenient(UnsafeRawBufferPointer(start: data, count: size)).map { .raw($0) }
    }

    /// `commit`'s root folder; throws when it cannot be read at all.
    func rootFolderLocked(_ commit: ObjectID) throws(GitError) -> FolderEntries {
        let handle = try repository.objects.lookupCommitLocked(commit)
        var pointer: OpaquePointer?
        if git_commit_tree(&pointer, handle.pointer) == 0 { return .parsed(TreeHandle(pointer!)) }
        let id = ObjectID(git_commit_tree_id(handle.pointer))
        guard let root = try folderLocked(id) else { return .parsed(try repository.objects.lookupTreeLocked(id)) }  // throws libgit2's error
        return root
    }

    /// The entry at `components` below tree `id` (see `lenientEntryLocked`); nil when there is
    /// none, or the tree cannot be read.
    func entryLocked(_ components: [Substring], inTree id: ObjectID) throws(GitError) -> (mode: UInt32, id: ObjectID)? {
        guard let folder = try folderLocked(id) else { return nil }
        return try lenientEntryLocked(components, in: folder)
    }

    /// The entry at `components` below `folder`, each folder on the way read leniently
    /// (`folderLocked`): in a parsed tree the one libgit2 finds by name, in one read from its
    /// bytes the first of the name (the one the view shows); nil when there is none.
    private func lenientEntryLocked(_ components: [Substring], in folder: FolderEntries) throws(GitError) -> (mode: UInt32, id: ObjectID)? {
        var folder = folder
        for (index, component) in components.enumerated() {
            let found: (mode: UInt32, id: ObjectID)?
            switch folder {
            case .parsed(let tree):
                // Borrowed from `tree`: copied out at once.
                found = git_tree_entry_byname(tree.pointer, String(component)).map { entry in
                    (git_tree_entry_filemode_raw(entry).rawValue, ObjectID(git_tree_entry_id(entry)))
                }
            case .raw(let entries):
                found = entries.first { $0.name.isExact && $0.name.text == component }.map { ($0.mode, $0.id) }
            }
            guard let found else { return nil }
            if index == components.count - 1 { return (found.mode, found.id) }
            guard TreeEntry.Kind(mode: found.mode) == .tree, let next = try folderLocked(found.id) else { return nil }
            folder = next
        }
        return nil
    }

    /// Every entry below `root`, in pre-order (see `listTree(commit:)`).
    private func listLocked(_ root: FolderEntries) throws(GitError) -> [TreeEntry] {
        var result: [TreeEntry] = []
        result.reserveCapacity(root.count)
        try walkLocked(root) { entry, _ in result.append(entry) }
        return result
    }

    /// Iterative pre-order walk (no recursion, so no stack depth limit). `visit` gets each entry
    /// and the number of the folder holding it: 0 for the root, and each folder the number of
    /// folder entries visited up to and including its own (its entry is visited before its
    /// contents: the first folder met is 1, the next 2…). A folder that cannot be read is
    /// visited as `.unreadable` and not walked into.
    private func walkLocked(_ root: FolderEntries, prefix: String = "", _ visit: (TreeEntry, _ folder: Int) -> Void) throws(GitError) {
        struct Frame {
            let folder: FolderEntries
            let prefix: String  // "" for the root, else "dir/sub/"
            let number: Int
            let count: Int
            var next: Int
        }
        var folders = 0
        var stack = [Frame(folder: root, prefix: prefix, number: 0, count: root.count, next: 0)]
        while !stack.isEmpty {
            let top = stack.count - 1
            guard stack[top].next < stack[top].count else {
                stack.removeLast()
                continue
            }
            let index = stack[top].next
            stack[top].next += 1
            guard let (name, mode, id) = stack[top].folder.entry(index) else { continue }
            var kind = Self.listedKind(name: name.text, mode: mode)
            var subfolder: FolderEntries? = nil
            if kind == .tree {
                subfolder = try folderLocked(id)
                if subfolder == nil { kind = .unreadable }
            }
            let listed = TreeEntry(prefix: stack[top].prefix, name: name.text, id: id, kind: kind, mode: mode, nameIsExact: name.isExact)
            visit(listed, stack[top].number)
            if let subfolder {
                folders += 1
                stack.append(Frame(folder: subfolder, prefix: listed.path + "/", number: folders, count: subfolder.count, next: 0))
            }
        }
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


/// A folder's entries as a listing reads them: libgit2's parsed tree, or, for a tree libgit2
/// refuses to parse (an entry with an empty name, which git never writes), the entries read
/// from its bytes by `lenient`.
enum FolderEntries {
    case parsed(TreeHandle)
    case raw([(name: (text: String, isExact: Bool), mode: UInt32, id: ObjectID)])

    var count: Int {
        switch self {
        case .parsed(let tree): git_tree_entrycount(tree.pointer)
        case .raw(let entries): entries.count
        }
    }

    /// Entry `index`: its name as text (see `GitTrees.entryName`), its raw mode and its
    /// id; nil past `count`.
    func entry(_ index: Int) -> (name: (text: String, isExact: Bool), mode: UInt32, id: ObjectID)? {
        switch self {
        case .parsed(let tree):
            // Borrowed from `tree`, which `self` keeps alive.
            guard let entry = git_tree_entry_byindex(tree.pointer, index) else { return nil }
            return (GitTrees.entryName(entry), git_tree_entry_filemode_raw(entry).rawValue, ObjectID(git_tree_entry_id(entry)))
        case .raw(let entries):
            return entries.indices.contains(index) ? entries[index] : nil
        }
    }

    /// The entries of a tree's bytes: "<octal mode> <name>\0<20-byte id>" to the end, names
    /// possibly empty; nil when the bytes are not such a list (a NUL inside a name, say, runs
    /// the entries together).
    static func lenient(_ bytes: UnsafeRawBufferPointer) -> [(name: (text: String, isExact: Bool), mode: UInt32, id: ObjectID)]? {
        var entries: [(name: (text: String, isExact: Bool), mode: UInt32, id: ObjectID)] = []
        var position = 0
        while position < bytes.count {
            // The entry's bounds as the splicing commit reads them (`RawTree`); its mode, 1 to
            // 7 octal digits.
            guard let entry = RawTree.entry(in: bytes, at: position), (1...7).contains(entry.mode.count),
                  let id = ObjectID(bytes: UnsafeRawBufferPointer(rebasing: bytes[entry.id])) else { return nil }
            var mode: UInt32 = 0
            for digit in bytes[entry.mode] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "7")).contains(digit) else { return nil }
                mode = mode << 3 | UInt32(digit - UInt8(ascii: "0"))
            }
            entries.append((GitTrees.entryName(RawTree.name(of: entry, in: bytes)), mode, id))
            position = entry.end
        }
        return entries
    }
}
