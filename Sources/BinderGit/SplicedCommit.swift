internal import CGit2
import Foundation

/// The save path's commit: files written into folders that exist, on top of a parent.
///
/// Git's trees are flat, so each save writes its folder's whole tree object (152 KB for a
/// folder of 2,400 records). libgit2 does that by loading the folder into a tree builder,
/// sorting and writing it, then deflating it into the pack and inflating it again to index
/// it: all of which grew with the folder (docs/BENCHMARKS.md, "Issue 13: saves"). Here the
/// new tree is the parent's tree bytes with the changed entries spliced in (one scan for the
/// place, one copy), hashed once (`objectID(of:type:)`), and the commit's objects are written by
/// `PackWriter` (stored, not compressed; no indexer pass). The bytes are exactly what libgit2
/// would write for the same changes (`SplicedCommitTests` compares ids with the general path).
///
/// Deletions that leave their folder holding something are spliced the same way (the entry's
/// bytes cut out), and so are merges' commits.
///
/// A folder another program made (entries out of git's order or repeated, an empty name, a
/// folder mode on a blob: `RawTree.isRegular` says no) is spliced too, and only there do its
/// bytes differ from libgit2's: libgit2 would sort it, drop one of two entries of a name, or
/// refuse to read it at all, where the splice keeps every entry it does not change byte for
/// byte. Its entries are then searched to the end for the name (the first of a name is the
/// one the view shows, and the one replaced).
///
/// Anything else (new folders, a deletion that empties its folder, a file replacing a folder,
/// names git might refuse, the first commit) returns nil and takes the general path
/// (`inOnePackLocked`).
extension GitCommits {
    /// A file written (`blob`) or deleted (nil) by a save: its folder (git path, "" for the
    /// top) and name.
    private typealias SplicedWrite = (folder: String, name: String, blob: ObjectID?)
    /// An object's id and its bytes.
    private typealias ObjectBytes = (id: ObjectID, bytes: [UInt8])
    /// A folder's tree: its id, its bytes, and whether they are in git's order and spelling
    /// (`RawTree.isRegular`).
    private typealias FolderBytes = (id: ObjectID, bytes: [UInt8], isRegular: Bool)

    /// Commits `changes` onto `parent` (and `mergedParents`, a merge) without moving the branch;
    /// returns the new commit's id once its pack is durable, or nil when the changes are not
    /// for this path (nothing was written then). `beforePack` is given the commit's id once it
    /// is known, before the pack is written (the branch's lock file is written then, to be
    /// flushed beside the pack: `BranchUpdate`). Lock held.
    func splicedCommitLocked(onto parent: ObjectID, mergedParents: [ObjectID] = [], changes: [TreeChange], message: String,
                             author: Signature, blobs: [[UInt8]],
                             beforePack: (ObjectID) throws(GitError) -> Void = { _ in }) throws(GitError) -> ObjectID? {
        guard repository.splicedCommitsEnabled, let (writes, folders) = try Self.splicedWrites(changes),
              let stored = try storedBlobs(blobs, for: writes),
              var original = try parentTreesLocked(parent, folders: folders),
              case let parentTrees = Set(original.values.map(\.id)),
              let written = try Self.splicedTrees(&original, writes: writes, folders: folders),
              let root = written[""] else { return nil }
        let commitBytes = try commitObject(tree: root.id, parents: [parent] + mergedParents, message: message, author: author)
        let commitID = try GitObjects.objectID(of: commitBytes, type: GIT_OBJECT_COMMIT, "hash commit")
        try beforePack(commitID)
        try writeSplicedPackLocked(blobs: stored, trees: written, parentTrees: parentTrees, commit: (commitID, commitBytes))
        repository.splicedCommitCount += 1
        return commitID
    }

    /// The writes and deletions of `changes` and the folders on their paths ("" included); nil
    /// unless each path comes once, none inside another changed path, every name plain.
    private static func splicedWrites(_ changes: [TreeChange]) throws(GitError) -> (writes: [SplicedWrite], folders: Set<String>)? {
        var writes: [SplicedWrite] = []
        var paths = Set<String>()
        for change in changes {
            guard paths.insert(change.path).inserted else { return nil }
            let components = try GitTrees.components(of: change.path)
            guard components.allSatisfy(isPlainName), let name = components.last else { return nil }
            let blob: ObjectID? = if case .write(_, let blob) = change { blob } else { nil }
            writes.append((components.dropLast().joined(separator: "/"), String(name), blob))
        }
        let folders = Set([""] + writes.flatMap { GitTrees.ancestors(of: $0.folder.isEmpty ? "" : $0.folder + "/x") })
        guard paths.isDisjoint(with: folders) else { return nil }
        return (writes, folders)
    }

    /// The blobs stored with the commit, by id; nil when a written blob is neither among them
    /// nor in the repository (the general path reports it).
    private func storedBlobs(_ blobs: [[UInt8]], for writes: [SplicedWrite]) throws(GitError) -> [ObjectID: [UInt8]]? {
        var stored: [ObjectID: [UInt8]] = [:]
        for bytes in blobs { stored[try GitObjects.blobID(of: bytes)] = bytes }
        for write in writes {
            guard let blob = write.blob, stored[blob] == nil else { continue }
            var oid = blob.oid
            guard git_odb_exists(repository.odb.pointer, &oid) == 1 else { return nil }
        }
        return stored
    }

    /// The parent's trees of `folders`, read top down; nil when one does not exist as a folder.
    private func parentTreesLocked(_ parent: ObjectID, folders: Set<String>) throws(GitError) -> [String: FolderBytes]? {
        let parentCommit = try repository.objects.lookupCommitLocked(parent)
        let rootID = ObjectID(git_commit_tree_id(parentCommit.pointer))
        guard let root = try treeBytesLocked(rootID) else { return nil }
        var original: [String: FolderBytes] = ["": (rootID, root.bytes, root.isRegular)]
        for folder in folders.sorted(by: { Self.depth($0) < Self.depth($1) }) where !folder.isEmpty {
            let (above, name) = PathBytes.split(folder)
            guard let container = original[above],
                  let entry = RawTree.find(Array(name.utf8), isTree: true, in: container.bytes, sorted: container.isRegular), entry.exists,
                  let id = entry.id, let tree = try treeBytesLocked(id) else { return nil }
            original[folder] = (id, tree.bytes, tree.isRegular)
        }
        return original
    }

    /// The new trees, bottom up: each folder's files spliced into its bytes (or cut out), then
    /// its changed subfolders; nil when a write would replace a folder (the general path
    /// refuses it) or a deletion empties a folder (the general path removes it).
    /// Each folder's bytes are taken out of `original` and spliced in place: held nowhere
    /// else (`treeBytesLocked` hands the kept trees over), a 7 MB tree is not copied into a
    /// fresh allocation (its pages faulted in and zeroed) on every save.
    private static func splicedTrees(_ original: inout [String: FolderBytes], writes: [SplicedWrite],
                                     folders: Set<String>) throws(GitError) -> [String: FolderBytes]? {
        var written: [String: FolderBytes] = [:]
        for folder in folders.sorted(by: { depth($0) > depth($1) }) {
            guard let (_, kept, sorted) = original.removeValue(forKey: folder) else { return nil }
            var bytes = kept
            for write in writes where write.folder == folder {
                let name = Array(write.name.utf8)
                guard let blob = write.blob else {
                    // A file, else a folder, of that name; deleting what is not there changes nothing.
                    guard let file = RawTree.find(name, isTree: false, in: bytes, sorted: sorted),
                          let folder = RawTree.find(name, isTree: true, in: bytes, sorted: sorted) else { return nil }
                    let place = file.exists ? file : folder
                    if place.exists { bytes.removeSubrange(place.range) }
                    continue
                }
                if let tree = RawTree.find(name, isTree: true, in: bytes, sorted: sorted), tree.exists { return nil }
                guard RawTree.upsert(name, mode: "100644", id: blob, isTree: false, in: &bytes, sorted: sorted) else { return nil }
            }
            for (child, tree) in written where !child.isEmpty && PathBytes.split(child).parent == folder {
                guard RawTree.upsert(Array(PathBytes.split(child).name.utf8), mode: "40000", id: tree.id, isTree: true, in: &bytes,
                                     sorted: sorted) else { return nil }
            }
            if bytes.isEmpty { return nil }
            written[folder] = (try GitObjects.objectID(of: bytes, type: GIT_OBJECT_TREE, "hash tree"), bytes, sorted)
        }
        return written
    }

    /// Writes what the repository lacks of the commit's objects (a blob saved before, a folder
    /// left as its parent had it: not again) as one durable pack, and keeps the new trees for
    /// the next save. A folder's tree is written unless it is the parent's (`parentTrees`),
    /// without asking the object database: its id is new unless this very folder was
    /// committed before (a write putting back a blob it held then), and then the pack holds a
    /// second copy, which git reads as well and a fold keeps once. Asking cost a search of
    /// every pack's index and a stat of the loose object for each folder of every save
    /// (docs/BENCHMARKS.md, "Saves: the pack's fsync beside its index's").
    private func writeSplicedPackLocked(blobs: [ObjectID: [UInt8]], trees: [String: FolderBytes], parentTrees: Set<ObjectID>,
                                        commit: ObjectBytes) throws(GitError) {
        var objects: [PackObject] = []
        for (id, bytes) in blobs {
            var oid = id.oid
            if git_odb_exists_ext(repository.odb.pointer, &oid, GIT_ODB_LOOKUP_NO_REFRESH.rawValue) == 1 { continue }
            objects.append(PackObject(id: id, kind: .blob, content: bytes))
        }
        // Two folders changed to the same bytes are one object: in a pack once.
        var treesWritten = parentTrees
        for (_, tree) in trees where treesWritten.insert(tree.id).inserted {
            objects.append(PackObject(id: tree.id, kind: .tree, content: tree.bytes))
        }
        GitError.clearLast()
        objects.append(PackObject(id: commit.id, kind: .commit, content: commit.bytes))
        let packFolder = repository.gitDirectory + "/objects/pack"
        if repository.sparePackFiles == nil { repository.sparePackFiles = SparePackFiles(directory: packFolder) }
        _ = try PackWriter.write(objects, into: packFolder, spares: repository.sparePackFiles)
        // Both databases find the new pack without waiting for a lookup to miss.
        _ = git_odb_refresh(repository.odb.pointer)
        if let staging = repository.commitStaging { _ = git_odb_refresh(staging.odb.pointer) }
        // The next save starts from these trees: kept, so that it need not read them back
        // (regular ones: a crafted one is looked at again).
        repository.recentTrees = Dictionary(trees.values.filter(\.isRegular).map { ($0.id, $0.bytes) }, uniquingKeysWith: { a, _ in a })
    }

    /// A commit object's bytes as libgit2's `git_commit_create` writes them (the signature
    /// checked and trimmed by `git_signature_new`, as there).
    private func commitObject(tree: ObjectID, parents: [ObjectID], message: String, author: Signature) throws(GitError) -> [UInt8] {
        let line = try GitCommits.signatureLine(author)
        let text = "tree " + tree.hex + "\n" + parents.map { "parent " + $0.hex + "\n" }.joined() + "author " + line + "committer " + line + "\n" + message
        return Array(text.utf8)
    }

    /// The raw bytes of tree `id`: from the last spliced commit's trees (handed over: the next
    /// save splices them in place, so nothing else may hold them), else read; and whether
    /// libgit2 would write them back byte for byte (`RawTree.isRegular`; the trees kept are).
    /// nil when the object is not a tree, or its bytes are not a list of entries.
    private func treeBytesLocked(_ id: ObjectID) throws(GitError) -> (bytes: [UInt8], isRegular: Bool)? {
        if let bytes = repository.recentTrees.removeValue(forKey: id) { return (bytes, true) }
        var oid = id.oid
        var pointer: OpaquePointer?
        try check(git_odb_read(&pointer, repository.odb.pointer, &oid), "read tree \(id)")
        let object = OdbObjectHandle(pointer!)
        guard git_odb_object_type(object.pointer) == GIT_OBJECT_TREE else { return nil }
        let size = git_odb_object_size(object.pointer)
        guard size > 0, let data = git_odb_object_data(object.pointer) else { return ([], true) }
        let bytes = [UInt8](UnsafeRawBufferPointer(start: data, count: size))
        if RawTree.isRegular(bytes) { return (bytes, true) }
        return ParsedTree(bytes) == nil ? nil : (bytes, false)
    }

    /// A name this path writes without asking libgit2 whether git accepts it: printable, not
    /// starting with "." (".git" and what some file systems fold into it), no "\\", ":" or
    /// "~" (Windows' short names and streams), not ending in "." or " ". Others take the
    /// general path, whose checks (strict object creation) are libgit2's.
    static func isPlainName(_ name: Substring) -> Bool {
        guard let first = name.utf8.first, first != UInt8(ascii: "."),
              let last = name.utf8.last, last != UInt8(ascii: "."), last != UInt8(ascii: " ") else { return false }
        return !name.utf8.contains { $0 < 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: "~") }
    }

    private static func depth(_ folder: String) -> Int {
        folder.isEmpty ? 0 : folder.utf8.reduce(1) { $1 == UInt8(ascii: "/") ? $0 + 1 : $0 }
    }
}

/// A tree object's bytes: entries "<mode> <name>\0<20-byte id>", sorted in git's order (a
/// folder's name compares as if it ended in "/").
enum RawTree {
    /// Where `name` (a folder's when `isTree`) is or would go in `bytes`: the entry's range and
    /// id when it exists, else the offset to insert at. nil when the tree is malformed.
    struct Place {
        var range: Range<Int>
        var id: ObjectID?
        var exists: Bool { id != nil }
    }

    /// `sorted` false (a tree not in git's order): the entries are searched to the end, and
    /// the first one of the name is found; a new one goes where git's order puts it among the
    /// entries before the first that sorts after it.
    static func find(_ name: [UInt8], isTree: Bool, in bytes: [UInt8], sorted: Bool = true) -> Place? {
        bytes.withUnsafeBytes { tree -> Place? in
            name.withUnsafeBufferPointer { name -> Place? in
                var position = 0
                var insertion: Int? = nil
                while position < tree.count {
                    guard let entry = entry(in: tree, at: position) else { return nil }
                    let order = compare(self.name(of: entry, in: tree), entry.isTree, name, isTree)
                    if order == 0 {
                        return Place(range: position..<entry.end, id: ObjectID(bytes: UnsafeRawBufferPointer(rebasing: tree[entry.id])))
                    }
                    if order > 0 {
                        if sorted { return Place(range: position..<position, id: nil) }
                        if insertion == nil { insertion = position }
                    }
                    position = entry.end
                }
                let at = insertion ?? tree.count
                return Place(range: at..<at, id: nil)
            }
        }
    }

    /// Whether libgit2 writes `bytes` back as they are when it rewrites the tree: well formed,
    /// each mode in its canonical spelling ("40000", "100644", "100755", "120000", "160000"),
    /// names not empty (libgit2 does not read such a tree) and strictly in git's order
    /// (libgit2's tree builder sorts, and keeps one entry of a repeated name).
    static func isRegular(_ bytes: [UInt8]) -> Bool {
        let modes: Set<[UInt8]> = Set(["40000", "100644", "100755", "120000", "160000"].map { Array($0.utf8) })
        return bytes.withUnsafeBytes { tree -> Bool in
            var position = 0
            var previous: Entry? = nil
            while position < tree.count {
                guard let entry = entry(in: tree, at: position), !entry.name.isEmpty, modes.contains(Array(tree[entry.mode])) else { return false }
                if let previous, compare(tree, previous, tree, entry) >= 0 { return false }
                previous = entry
                position = entry.end
            }
            return true
        }
    }

    /// Puts entry `name` with `mode` and `id` in its place in `bytes`, replacing one of the
    /// same name and kind. False when the tree is malformed.
    static func upsert(_ name: [UInt8], mode: String, id: ObjectID, isTree: Bool, in bytes: inout [UInt8], sorted: Bool = true) -> Bool {
        guard let place = find(name, isTree: isTree, in: bytes, sorted: sorted) else { return false }
        bytes.replaceSubrange(place.range, with: Array(mode.utf8) + [0x20] + name + [0] + id.bytes)
        return true
    }

    /// An entry "<mode> <name>\0<20-byte id>" of a tree's bytes: where its mode and name are,
    /// where it ends, and whether it is a folder (mode "40000": git writes no leading zero).
    struct Entry {
        let mode: Range<Int>
        let name: Range<Int>
        let end: Int
        let isTree: Bool
        var id: Range<Int> { (end - 20)..<end }
    }

    /// The entry starting at `start`; nil when the bytes there are not one (no space, no NUL,
    /// or fewer than 20 bytes of id). The name may be empty (only a crafted tree's).
    static func entry(in tree: UnsafeRawBufferPointer, at start: Int) -> Entry? {
        guard let base = tree.baseAddress, start < tree.count,
              let space = memchr(base + start, 0x20, tree.count - start) else { return nil }
        let nameStart = base.distance(to: UnsafeRawPointer(space)) + 1
        guard nameStart < tree.count, let nul = memchr(base + nameStart, 0, tree.count - nameStart) else { return nil }
        let nameEnd = base.distance(to: UnsafeRawPointer(nul))
        guard nameEnd + 21 <= tree.count else { return nil }
        let isTree = nameStart - start == 6 && tree[start] == UInt8(ascii: "4") && tree[start + 1] == UInt8(ascii: "0")
        return Entry(mode: start..<(nameStart - 1), name: nameStart..<nameEnd, end: nameEnd + 21, isTree: isTree)
    }

    /// `entry`'s name, in `tree`.
    static func name(of entry: Entry, in tree: UnsafeRawBufferPointer) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(rebasing: tree.assumingMemoryBound(to: UInt8.self)[entry.name])
    }

    /// Git's order (`compare` below) of two entries' names.
    static func compare(_ a: UnsafeRawBufferPointer, _ x: Entry, _ b: UnsafeRawBufferPointer, _ y: Entry) -> Int {
        compare(name(of: x, in: a), x.isTree, name(of: y, in: b), y.isTree)
    }

    /// git's `base_name_compare`: bytes first; at the end of the shorter name a folder's name
    /// goes on with "/", a file's ends.
    static func compare(_ a: UnsafeBufferPointer<UInt8>, _ aIsTree: Bool, _ b: UnsafeBufferPointer<UInt8>, _ bIsTree: Bool) -> Int {
        let length = min(a.count, b.count)
        if length > 0 {
            let order = memcmp(a.baseAddress!, b.baseAddress!, length)
            if order != 0 { return Int(order) }
        }
        let x = a.count > length ? Int(a[length]) : (aIsTree ? Int(UInt8(ascii: "/")) : 0)
        let y = b.count > length ? Int(b[length]) : (bIsTree ? Int(UInt8(ascii: "/")) : 0)
        return x - y
    }
}
