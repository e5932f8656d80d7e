internal import CGit2
import Foundation

/// What a repack did.
public struct RepackResult: Sendable, Equatable {
    /// Objects in the new pack (0: nothing reachable, no pack written).
    public var objects: Int
    /// Loose objects removed because the new pack holds them.
    public var looseRemoved: Int
    /// Older packs removed because the new pack holds all their objects.
    public var packsRemoved: Int
}

/// Packs and loose objects a fold rolls into one pack (`GitPacks.foldPlan`).
public struct FoldPlan: Sendable, Equatable {
    /// The packs' index files.
    public var packs: [String]
    var loose: [ObjectID]
    public var isEmpty: Bool { packs.isEmpty && loose.isEmpty }
}

/// The repository's packs: a full repack, geometric folds of the small packs a commit each
/// leaves, and what both need to list, count, open and remove packs. `GitRepository.packs`.
public struct GitPacks: Sendable {
    /// The repository whose handle this owner uses, under its lock.
    let repository: GitRepository

    /// Packs every object reachable from the references (and HEAD) into one new pack, then
    /// removes the loose objects and older packs that pack holds.
    ///
    /// Saves write one small pack each (`commitChanges`), folded now and then (`foldPacks`);
    /// other writers (merges, `binder new`) write loose objects. A full
    /// repack stores everything delta-compressed in two files (ten thousand saves as loose
    /// objects left 486 MB for 126 MB of content).
    ///
    /// Crash safety: the pack and its index are written under temporary names, fsynced and
    /// renamed into place (libgit2's indexer, with fsync on) before anything is removed, and
    /// only objects the new pack holds are removed: a kill at any point leaves every object
    /// readable (at worst twice). Objects written while this runs (newer than the references
    /// it read) stay loose for the next repack; unreachable loose objects are left alone.
    ///
    /// Holds this instance's lock throughout: a process that must keep saving meanwhile runs
    /// it on a second instance (`GitRepository.open`) of the same repository, as `Committer` does.
    public func repack() throws(GitError) -> RepackResult {
        try repository.locked { () throws(GitError) in
            let packDirectory = repository.gitDirectory + "/objects/pack"
            let before = Self.packIndexes(in: packDirectory)

            var builderPointer: OpaquePointer?
            try check(git_packbuilder_new(&builderPointer, repository.repo.pointer), "start a pack")
            let builder = PackBuilderHandle(builderPointer!)
            _ = git_packbuilder_set_threads(builder.pointer, 1)
            guard let order = try reachableInPackOrderLocked() else {
                return RepackResult(objects: 0, looseRemoved: 0, packsRemoved: 0)
            }
            try order.insert(into: builder)
            let objects = git_packbuilder_object_count(builder.pointer)
            guard objects > 0 else { return RepackResult(objects: 0, looseRemoved: 0, packsRemoved: 0) }
            let newIndex = try Self.write(builder, into: packDirectory)

            // Nothing below is needed for correctness: it only removes copies.
            let packed = try Self.onePackDatabase(newIndex)
            let looseRemoved = Self.removeLoose(in: repository.gitDirectory + "/objects", heldBy: packed)
            var packsRemoved = 0
            for index in before where index != newIndex {
                if Self.allObjects(of: index, areIn: packed) {
                    Self.removePack(index)
                    packsRemoved += 1
                }
            }
            // Later lookups of this instance find the moved objects in the new pack.
            _ = git_odb_refresh(repository.odb.pointer)
            return RepackResult(objects: Int(objects), looseRemoved: looseRemoved, packsRemoved: packsRemoved)
        }
    }

    /// Folds packs geometrically (as `git repack --geometric=2`): the smallest packs, and the
    /// loose objects, are rolled up (into one new pack, and one more for loose objects: `fold`)
    /// until every pack left holds at least twice the objects of all smaller ones together.
    /// Each commit writes a small pack (`commitChanges`) and calls for a fold now and then, so
    /// the repository keeps a number of packs logarithmic in its size, and each object is
    /// rewritten a logarithmic number of times, where folding only small packs and repacking
    /// everything every thousand commits fell behind a fast writer (1,599 packs after 10,000
    /// saves; docs/BENCHMARKS.md).
    ///
    /// Crash safety is `repack`'s: the new packs are durable before anything is removed, and a
    /// pack or loose object is removed only when the new packs hold it (a pack a commit is
    /// writing now is either not listed yet or whole: its index is renamed in last). Unlike
    /// `repack` it does not walk history, so unreachable objects stay (they are rare: a save
    /// that lost a race). Holds this instance's lock throughout.
    public func foldPacks() throws(GitError) -> RepackResult {
        try fold(foldPlan())
    }

    /// What `fold` is to roll into one pack: `foldPacks`'s choice among the packs not in
    /// `claimed` (those another fold is rolling now: two folds at once never pick the same
    /// pack, so a long fold of the large packs does not hold back the small ones).
    /// At most `maxPacks` packs are rolled at once, the smallest: packs that piled up (short
    /// mounts that each ended before their fold came due) are folded in steps that each end
    /// in bounded time, so that a mount that does not last long still makes progress.
    public func foldPlan(skipping claimed: Set<String> = [], maxPacks: Int = Int.max) -> FoldPlan {
        let packDirectory = repository.gitDirectory + "/objects/pack"
        let packs = Self.packIndexes(in: packDirectory).filter { !claimed.contains($0) }.compactMap { index -> (index: String, objects: Int)? in
            guard !FileManager.default.fileExists(atPath: String(index.dropLast(4)) + ".keep"),
                  let objects = Self.objectCount(ofIndex: index) else { return nil }
            return (index, objects)
        }.sorted { $0.objects < $1.objects }
        let loose = Self.looseObjectIDs(in: repository.gitDirectory + "/objects")
        let rolled = min(Self.geometricRollUp(packs.map(\.objects), extra: loose.count), max(2, maxPacks))
        guard rolled >= 2 || !loose.isEmpty else { return FoldPlan(packs: [], loose: []) }
        return FoldPlan(packs: packs.prefix(rolled).map(\.index), loose: loose)
    }

    /// Rolls the plan's packs and loose objects into new packs (see `foldPacks`): the packs'
    /// objects written by `FoldCopy` into one (blobs, commits and deltas copied as they are,
    /// trees as deltas against a newer version of their folder, found without a search), the
    /// loose objects, if any, through libgit2's pack builder into another.
    public func fold(_ plan: FoldPlan) throws(GitError) -> RepackResult {
        guard !plan.isEmpty else { return RepackResult(objects: 0, looseRemoved: 0, packsRemoved: 0) }
        return try repository.locked { () throws(GitError) in
            let packDirectory = repository.gitDirectory + "/objects/pack"
            var builderPointer: OpaquePointer?
            try check(git_packbuilder_new(&builderPointer, repository.repo.pointer), "start a pack")
            let builder = PackBuilderHandle(builderPointer!)
            _ = git_packbuilder_set_threads(builder.pointer, 1)
            var order = PackOrder()
            // Loose objects are the newest (merges, `binder new`); one removed meanwhile (packed
            // by the other fold, or pruned) is left out.
            for id in plan.loose {
                var oid = id.oid
                guard git_odb_exists(repository.odb.pointer, &oid) == 1 else { continue }
                try addLocked(id, from: repository.odb, to: &order)
            }
            // Newest first: a folder's newest tree is the one kept whole (`TreeBases`).
            var copy = FoldCopy()
            var folded: [String] = []
            for index in Self.newestFirst(plan.packs) {
                // A pack `FoldCopy` cannot read as such goes through the builder whole; one that
                // cannot be opened at all (removed meanwhile) is left alone.
                if !FoldCopy.take(index: index, into: &copy) {
                    guard let pack = try? Self.onePackDatabase(index), let ids = Self.objectIDs(in: pack) else { continue }
                    for id in ids { try addLocked(id, from: pack, to: &order) }
                }
                folded.append(index)
            }
            try order.insert(into: builder)
            let built = git_packbuilder_object_count(builder.pointer)
            // The copy's pack first, under a temporary name (a damaged source stops the fold
            // before the builder's work); in place right after the builder's, so that no other
            // fold picks one of this fold's packs in between and removes it from under it.
            let preparedCopy = copy.isEmpty ? nil : try copy.prepare(in: packDirectory) { id throws(GitError) in
                try repository.objects.treeContentLocked(id)
            }
            var newIndexes: [String] = []
            do throws(GitError) {
                if built > 0 { newIndexes.append(try Self.write(builder, into: packDirectory)) }
                if let preparedCopy { newIndexes.append(try preparedCopy.install(in: packDirectory)) }
            } catch {
                preparedCopy?.discard()
                throw error
            }
            guard !newIndexes.isEmpty else { return RepackResult(objects: 0, looseRemoved: 0, packsRemoved: 0) }
            let packed = try Self.packsDatabase(newIndexes)
            var packsRemoved = 0
            for index in folded where !newIndexes.contains(index) && Self.allObjects(of: index, areIn: packed) {
                Self.removePack(index)
                packsRemoved += 1
            }
            let looseRemoved = plan.loose.isEmpty ? 0 : Self.removeLoose(in: repository.gitDirectory + "/objects", heldBy: packed)
            _ = git_odb_refresh(repository.odb.pointer)
            return RepackResult(objects: Int(built) + copy.count, looseRemoved: looseRemoved, packsRemoved: packsRemoved)
        }
    }

    /// Every object reachable from the references and HEAD, in pack order: the commits as a
    /// history walk meets them, then each commit's trees not seen before (folders before their
    /// contents), then the blobs. Nil when there is nothing to walk from. Lock held.
    private func reachableInPackOrderLocked() throws(GitError) -> PackOrder? {
        let commits = try repository.history.walkLocked("walk history to pack") { walk in
            var pushed = false
            if git_revwalk_push_glob(walk, "refs") == 0 { pushed = true }
            if git_revwalk_push_head(walk) == 0 { pushed = true }
            GitError.clearLast()
            return pushed
        }
        guard let commits else { return nil }
        var order = PackOrder()
        var roots: [ObjectID] = []
        for id in commits {
            let commit = try repository.objects.lookupCommitLocked(id)
            order.addCommit(id, time: git_commit_time(commit.pointer))
            roots.append(ObjectID(git_commit_tree_id(commit.pointer)))
        }
        var seen = Set<ObjectID>()
        var blobs: [(ObjectID, String)] = []
        for root in roots where seen.insert(root).inserted {
            order.addTree(root)
            var pending: [(tree: ObjectID, path: String)] = [(root, "")]
            while let (treeID, path) = pending.popLast() {
                // Read as a listing reads it: a crafted folder (an empty name, a tree that does
                // not parse) must not stop the repack, and what it names is packed with the rest.
                guard let folder = try repository.trees.folderLocked(treeID) else { continue }
                for index in 0..<folder.count {
                    guard let (name, mode, id) = folder.entry(index) else { continue }
                    let entryPath = path + name.text
                    switch TreeEntry.Kind(mode: mode) {
                    case .tree where seen.insert(id).inserted:
                        if repository.objects.isTreeObjectLocked(id) {
                            order.addTree(id, name: entryPath)
                            pending.append((id, entryPath + "/"))
                        } else if repository.objects.objectExistsLocked(id) {
                            blobs.append((id, entryPath))  // a folder's mode on another object: kept as it is
                        }
                    case .blob where seen.insert(id).inserted, .link where seen.insert(id).inserted:
                        if repository.objects.objectExistsLocked(id) { blobs.append((id, entryPath)) }
                    default:
                        continue  // seen already, or a submodule's commit (not in this repository)
                    }
                }
            }
        }
        for (id, path) in blobs { order.addOther(id, name: path) }
        return order
    }

    /// `id` of `database` added to `order` by its type (a commit with its time). Lock held.
    private func addLocked(_ id: ObjectID, from database: OdbHandle, to order: inout PackOrder) throws(GitError) {
        var oid = id.oid
        var size = 0
        var type = GIT_OBJECT_INVALID
        // A delta whose base the pack does not hold is read through the whole repository.
        if git_odb_read_header(&size, &type, database.pointer, &oid) != 0 {
            try check(git_odb_read_header(&size, &type, repository.odb.pointer, &oid), "read \(id)")
        }
        switch type {
        case GIT_OBJECT_COMMIT: order.addCommit(id, time: git_commit_time(try repository.objects.lookupCommitLocked(id).pointer))
        case GIT_OBJECT_TREE: order.addTree(id)
        default: order.addOther(id)
        }
    }

    /// Pack index paths, the most recently written pack first.
    static func newestFirst(_ indexes: [String]) -> [String] {
        func modified(_ index: String) -> Int64 {
            var info = stat()
            guard stat(String(index.dropLast(4)) + ".pack", &info) == 0 else { return 0 }
            return Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
        }
        return indexes.map { ($0, modified($0)) }.sorted { $0.1 > $1.1 }.map(\.0)
    }

    /// How many of the packs (object counts, smallest first) a geometric fold rolls into one,
    /// with `extra` objects (the loose ones) joining the roll: git's rule with factor 2. From
    /// the largest pack down, find the first pack that holds less than twice the one below it;
    /// it and all smaller ones roll up; then each next larger pack joins while it holds less
    /// than twice what is rolled. 0 when the packs already form the progression.
    static func geometricRollUp(_ counts: [Int], extra: Int = 0) -> Int {
        var split = 0
        if counts.count >= 2 {
            for i in stride(from: counts.count - 1, through: 1, by: -1) where counts[i] < 2 * counts[i - 1] {
                split = i + 1
                break
            }
        }
        var rolled = extra + counts.prefix(split).reduce(0, +)
        guard split > 0 || extra > 0 else { return 0 }
        while split < counts.count, counts[split] < 2 * rolled {
            rolled += counts[split]
            split += 1
        }
        return split
    }

    /// The number of objects a pack index lists: the last entry of its fan-out table, which a
    /// version 2 index puts after its 8-byte header and a version 1 index (stock git still
    /// writes one when asked, `pack.indexVersion`; libgit2 reads it) at its start. Nil when
    /// the file is neither; such a pack is never folded.
    static func objectCount(ofIndex index: String) -> Int? {
        guard let handle = FileHandle(forReadingAtPath: index) else { return nil }
        defer { try? handle.close() }
        guard let read = try? handle.read(upToCount: 8 + 256 * 4), read.count == 8 + 256 * 4 else { return nil }
        let header = [UInt8](read)
        func word(_ at: Int) -> Int { header[at..<at + 4].reduce(0) { $0 << 8 | Int($1) } }
        if header.prefix(8).elementsEqual(PackWriter.indexHeader) { return word(8 + 255 * 4) }
        // A version 1 index has no header: its fan-out, 24 bytes an object (offset and id),
        // then the pack's checksum and its own. The size must match exactly.
        guard !header.prefix(4).elementsEqual(PackWriter.indexHeader.prefix(4)) else { return nil }  // another version
        let count = word(255 * 4)
        guard let size = try? handle.seekToEnd(), size == UInt64(256 * 4 + count * 24 + 40) else { return nil }
        return count
    }

    /// Every loose object's id (`objects/xx/yyyy…`).
    static func looseObjectIDs(in objects: String) -> [ObjectID] {
        let fileManager = FileManager.default
        var ids: [ObjectID] = []
        for directory in (try? fileManager.contentsOfDirectory(atPath: objects)) ?? []
        where directory.count == 2 && directory.allSatisfy(\.isHexDigit) {
            for name in (try? fileManager.contentsOfDirectory(atPath: objects + "/" + directory)) ?? []
            where name.count == 38 && name.allSatisfy(\.isHexDigit) {
                if let id = ObjectID(hex: directory + name) { ids.append(id) }
            }
        }
        return ids
    }

    /// Writes what `builder` holds as a pack in `packDirectory` (fsynced, renamed into place by
    /// libgit2's indexer); returns the new index's path.
    static func write(_ builder: PackBuilderHandle, into packDirectory: String) throws(GitError) -> String {
        try check(git_packbuilder_write(builder.pointer, packDirectory, 0, nil, nil), "write pack")
        guard let namePointer = git_packbuilder_name(builder.pointer) else {
            throw GitError.failed(operation: "write pack", code: .other(-1), message: "the new pack has no name")
        }
        return packDirectory + "/pack-" + String(cString: namePointer) + ".idx"
    }

    /// Every object id in `database`; nil when it cannot be listed.
    static func objectIDs(in database: OdbHandle) -> [ObjectID]? {
        final class Collected { var ids: [ObjectID] = [] }
        let collected = Collected()
        let rc = withExtendedLifetime(collected) {
            git_odb_foreach(database.pointer, { oid, payload in
                Unmanaged<Collected>.fromOpaque(payload!).takeUnretainedValue().ids.append(ObjectID(oid!))
                return 0
            }, Unmanaged.passUnretained(collected).toOpaque())
        }
        return rc == 0 ? collected.ids : nil
    }

    /// How many packs the repository has (for deciding when to repack, and for tests).
    public func packCount() -> Int {
        Self.packIndexes(in: repository.gitDirectory + "/objects/pack").count
    }

    /// The `pack-*.idx` files in `directory`, as paths.
    static func packIndexes(in directory: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasPrefix("pack-") && $0.hasSuffix(".idx") }.sorted().map { directory + "/" + $0 }
    }

    /// An object database reading only the pack whose index is `index`.
    static func onePackDatabase(_ index: String) throws(GitError) -> OdbHandle {
        try packsDatabase([index])
    }

    /// An object database reading only the packs whose indexes are `indexes`.
    static func packsDatabase(_ indexes: [String]) throws(GitError) -> OdbHandle {
        var odbPointer: OpaquePointer?
        try check(git_odb_new(&odbPointer), "open a pack")
        let odb = OdbHandle(odbPointer!)
        for index in indexes {
            var backend: OpaquePointer?
            try check(git_odb_backend_one_pack(&backend, index), "open pack '\(index)'")
            // On success the database owns the backend and frees it with itself. (It fails only
            // when out of memory; the backend then leaks, as libgit2 gives no public way to free it.)
            try check(git_odb_add_backend(odb.pointer, backend, 1), "open pack '\(index)'")
        }
        return odb
    }

    /// Removes each loose object (`objects/xx/yyyy…`) that `packed` holds; returns how many.
    /// The `objects/xx` folders stay, even when empty: another instance writing a loose object
    /// meanwhile (a merge, `binder new`) makes its folder, then renames the object into it, and
    /// a folder removed in between failed that write (RepackTests.testCommitsDuringRepackStay
    /// caught it). 256 empty folders at most; `git gc` removes them.
    static func removeLoose(in objects: String, heldBy packed: OdbHandle) -> Int {
        var removed = 0
        for id in looseObjectIDs(in: objects) {
            var oid = id.oid
            guard git_odb_exists(packed.pointer, &oid) == 1 else { continue }
            let hex = id.hex
            if unlink(objects + "/" + hex.prefix(2) + "/" + hex.dropFirst(2)) == 0 { removed += 1 }
        }
        return removed
    }

    /// True when every object of the pack indexed by `index` is in `packed`.
    static func allObjects(of index: String, areIn packed: OdbHandle) -> Bool {
        // A pack someone asked to keep stays.
        if FileManager.default.fileExists(atPath: String(index.dropLast(4)) + ".keep") { return false }
        guard let old = try? onePackDatabase(index) else { return false }
        final class Check { let packed: OpaquePointer; var missing = false; init(_ p: OpaquePointer) { packed = p } }
        let check = Check(packed.pointer)
        let rc = withExtendedLifetime(check) {
            git_odb_foreach(old.pointer, { oid, payload in
                let check = Unmanaged<Check>.fromOpaque(payload!).takeUnretainedValue()
                if git_odb_exists(check.packed, oid) != 1 {
                    check.missing = true
                    return 1  // stop
                }
                return 0
            }, Unmanaged.passUnretained(check).toOpaque())
        }
        return (rc == 0 || rc == 1) && !check.missing
    }

    /// Removes a pack: its index first, so that no reader finds a pack without one.
    static func removePack(_ index: String) {
        let stem = String(index.dropLast(4))
        for suffix in [".idx", ".rev", ".bitmap", ".pack"] { unlink(stem + suffix) }
        // Every instance in this process drops the pack before its next use.
        GitRepository.packRemovals.add(1, ordering: .releasing)
    }
}
