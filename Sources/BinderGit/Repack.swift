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

extension GitRepository {
    /// Packs every object reachable from the references (and HEAD) into one new pack, then
    /// removes the loose objects and older packs that pack holds.
    ///
    /// Saves write one small pack each (`commitChanges`), folded now and then
    /// (`foldSmallPacks`); other writers (merges, `binder new`) write loose objects. A full
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
        try locked { () throws(GitError) in
            let packDirectory = gitDirectory + "/objects/pack"
            let before = Self.packIndexes(in: packDirectory)

            var builderPointer: OpaquePointer?
            try check(git_packbuilder_new(&builderPointer, repo.pointer), "start a pack")
            let builder = PackBuilderHandle(builderPointer!)
            _ = git_packbuilder_set_threads(builder.pointer, 1)
            var walkPointer: OpaquePointer?
            try check(git_revwalk_new(&walkPointer, repo.pointer), "walk history to pack")
            let walk = RevwalkHandle(walkPointer!)
            var pushed = false
            if git_revwalk_push_glob(walk.pointer, "refs") == 0 { pushed = true }
            if git_revwalk_push_head(walk.pointer) == 0 { pushed = true }
            guard pushed else { return RepackResult(objects: 0, looseRemoved: 0, packsRemoved: 0) }
            GitError.clearLast()
            try check(git_packbuilder_insert_walk(builder.pointer, walk.pointer), "collect objects to pack")
            let objects = git_packbuilder_object_count(builder.pointer)
            guard objects > 0 else { return RepackResult(objects: 0, looseRemoved: 0, packsRemoved: 0) }
            try check(git_packbuilder_write(builder.pointer, packDirectory, 0, nil, nil), "write pack")
            guard let namePointer = git_packbuilder_name(builder.pointer) else {
                throw GitError.failed(operation: "write pack", code: .other(-1), message: "the new pack has no name")
            }
            let newIndex = packDirectory + "/pack-" + String(cString: namePointer) + ".idx"

            // Nothing below is needed for correctness: it only removes copies.
            let packed = try Self.onePackDatabase(newIndex)
            let looseRemoved = Self.removeLoose(in: gitDirectory + "/objects", heldBy: packed)
            var packsRemoved = 0
            for index in before where index != newIndex {
                if Self.allObjects(of: index, areIn: packed) {
                    Self.removePack(index)
                    packsRemoved += 1
                }
            }
            // Later lookups of this instance find the moved objects in the new pack.
            _ = git_odb_refresh(odb.pointer)
            return RepackResult(objects: Int(objects), looseRemoved: looseRemoved, packsRemoved: packsRemoved)
        }
    }

    /// Folds the small packs (each commit writes one: `commitChanges`) into one pack, then
    /// removes those the new pack holds entirely. Cheaper than `repack` (it reads only the
    /// small packs, not the history), it keeps the number of packs low between full repacks:
    /// every pack costs a lookup that misses, a file descriptor and two mappings.
    ///
    /// Crash safety is `repack`'s: the new pack is durable before anything is removed, and a
    /// pack is removed only when the new one holds all its objects (a pack a commit is writing
    /// now is either not listed yet or whole). Holds this instance's lock throughout.
    public func foldSmallPacks() throws(GitError) -> RepackResult {
        try locked { () throws(GitError) in
            let packDirectory = gitDirectory + "/objects/pack"
            let small = Self.packIndexes(in: packDirectory).filter { index in
                var info = stat()
                let stem = String(index.dropLast(4))
                return stat(stem + ".pack", &info) == 0 && Int(info.st_size) < Self.smallPackBytes
                    && !FileManager.default.fileExists(atPath: stem + ".keep")
            }
            guard small.count >= 2 else { return RepackResult(objects: 0, looseRemoved: 0, packsRemoved: 0) }

            var builderPointer: OpaquePointer?
            try check(git_packbuilder_new(&builderPointer, repo.pointer), "start a pack")
            let builder = PackBuilderHandle(builderPointer!)
            _ = git_packbuilder_set_threads(builder.pointer, 1)
            var folded: [String] = []
            for index in small {
                // A pack that cannot be opened (its `.pack` not renamed in yet) is left alone.
                guard let pack = try? Self.onePackDatabase(index), let ids = Self.objectIDs(in: pack) else { continue }
                for id in ids {
                    var oid = id.oid
                    try check(git_packbuilder_insert(builder.pointer, &oid, nil), "add \(id) to the pack")
                }
                folded.append(index)
            }
            let objects = git_packbuilder_object_count(builder.pointer)
            guard folded.count >= 2, objects > 0 else { return RepackResult(objects: 0, looseRemoved: 0, packsRemoved: 0) }
            try check(git_packbuilder_write(builder.pointer, packDirectory, 0, nil, nil), "write pack")
            guard let namePointer = git_packbuilder_name(builder.pointer) else {
                throw GitError.failed(operation: "write pack", code: .other(-1), message: "the new pack has no name")
            }
            let newIndex = packDirectory + "/pack-" + String(cString: namePointer) + ".idx"
            let packed = try Self.onePackDatabase(newIndex)
            var packsRemoved = 0
            for index in folded where index != newIndex && Self.allObjects(of: index, areIn: packed) {
                Self.removePack(index)
                packsRemoved += 1
            }
            _ = git_odb_refresh(odb.pointer)
            return RepackResult(objects: Int(objects), looseRemoved: 0, packsRemoved: packsRemoved)
        }
    }

    /// Packs under this size are folded by `foldSmallPacks`: a save's pack is its record and
    /// the trees on its path (30 KB in a folder of 1,000 records), a fold of 32 of them about
    /// a megabyte. A full repack's pack is larger and is not read again by every fold.
    static let smallPackBytes = 1 << 20

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
        Self.packIndexes(in: gitDirectory + "/objects/pack").count
    }

    /// The `pack-*.idx` files in `directory`, as paths.
    static func packIndexes(in directory: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasPrefix("pack-") && $0.hasSuffix(".idx") }.sorted().map { directory + "/" + $0 }
    }

    /// An object database reading only the pack whose index is `index`.
    static func onePackDatabase(_ index: String) throws(GitError) -> OdbHandle {
        var odbPointer: OpaquePointer?
        try check(git_odb_new(&odbPointer), "open a pack")
        let odb = OdbHandle(odbPointer!)
        var backend: OpaquePointer?
        try check(git_odb_backend_one_pack(&backend, index), "open pack '\(index)'")
        // On success the database owns the backend and frees it with itself. (It fails only
        // when out of memory; the backend then leaks, as libgit2 gives no public way to free it.)
        try check(git_odb_add_backend(odb.pointer, backend, 1), "open pack '\(index)'")
        return odb
    }

    /// Removes each loose object (`objects/xx/yyyy…`) that `packed` holds; returns how many.
    static func removeLoose(in objects: String, heldBy packed: OdbHandle) -> Int {
        let fileManager = FileManager.default
        var removed = 0
        for directory in (try? fileManager.contentsOfDirectory(atPath: objects)) ?? []
        where directory.count == 2 && directory.allSatisfy(\.isHexDigit) {
            let path = objects + "/" + directory
            for name in (try? fileManager.contentsOfDirectory(atPath: path)) ?? []
            where name.count == 38 && name.allSatisfy(\.isHexDigit) {
                var oid = git_oid()
                guard git_oid_fromstr(&oid, directory + name) == 0, git_odb_exists(packed.pointer, &oid) == 1 else { continue }
                if unlink(path + "/" + name) == 0 { removed += 1 }
            }
            _ = rmdir(path)  // only when empty
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
    }
}
