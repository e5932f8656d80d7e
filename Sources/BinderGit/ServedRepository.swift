internal import CGit2
import Foundation

/// A pushed pack libgit2's indexer wrote into a quarantine folder: the `.pack` (completed when
/// it came thin, so it stands alone) and its `.idx`, named by the pack's checksum as git names them.
public struct IndexedPack: Sendable, Equatable {
    public let packPath: String
    public let indexPath: String
    /// The pack's name (40 hex): `pack-<checksum>.pack`.
    public let checksum: String
    public let objects: Int
}

/// A bare repository as binder serve's own git engine reads it (issue 42): packs built for a
/// fetch's wants and haves, pushed packs indexed and checked as git's `receive.fsckObjects`
/// checks them, refs listed, ancestry asked. It never writes to the repository: a pushed pack
/// goes to a quarantine folder, and whoever stores it moves it.
///
/// Thread safety: `lock` guards `repo`, `odb` and every libgit2 object derived from them, each
/// made and freed inside one `locked { }` call; only Swift values leave it. Hence
/// `@unchecked Sendable`. One instance per request: packs included for a push's checks
/// (`include`) stay in this instance only.
public final class ServedRepository: @unchecked Sendable {
    /// Guards `repo`, `odb` and the libgit2 objects derived from them.
    private let lock = NSLock()
    private let repo: RepositoryHandle
    private let odb: OdbHandle
    public let path: String

    /// Reads a pushed pack in chunks of this size: memory stays bounded whatever the pack's size.
    static let chunkSize = 256 << 10

    private init(repo: RepositoryHandle, odb: OdbHandle, path: String) {
        self.repo = repo
        self.odb = odb
        self.path = path
    }

    /// Opens the bare repository at `path` (parent folders not searched).
    public static func open(path: String) throws(GitError) -> ServedRepository {
        _ = LibGit2.ready
        GitError.clearLast()
        var pointer: OpaquePointer?
        try check(git_repository_open_ext(&pointer, path, GIT_REPOSITORY_OPEN_NO_SEARCH.rawValue, nil), "open repository '\(path)'")
        let repo = RepositoryHandle(pointer!)
        ServedPackSettings.apply(to: repo.pointer)
        var odbPointer: OpaquePointer?
        try check(git_repository_odb(&odbPointer, repo.pointer), "open object database")
        return ServedRepository(repo: repo, odb: OdbHandle(odbPointer!), path: path)
    }

    /// What this repository's pack builder reads as `pack.windowMemory` (`ServedPackSettings`).
    var packWindowMemory: Int64? { try? locked { () throws(GitError) in ServedPackSettings.windowMemory(of: repo.pointer) } }

    private func locked<T>(_ body: () throws(GitError) -> T) throws(GitError) -> T {
        lock.lock()
        defer { lock.unlock() }
        GitError.clearLast()
        return try body()
    }

    // MARK: - Refs and objects

    /// Every direct ref under `refs/` with its target (symbolic refs skipped), sorted by name.
    public func references() throws(GitError) -> [(name: String, target: ObjectID)] {
        try locked { () throws(GitError) in
            var iteratorPointer: OpaquePointer?
            try check(git_reference_iterator_glob_new(&iteratorPointer, repo.pointer, "refs/*"), "list refs")
            defer { git_reference_iterator_free(iteratorPointer) }
            var found: [(name: String, target: ObjectID)] = []
            while true {
                var reference: OpaquePointer?
                let rc = git_reference_next(&reference, iteratorPointer)
                if rc == GIT_ITEROVER.rawValue { break }
                try check(rc, "list refs")
                let owned = ReferenceHandle(reference!)
                guard let target = git_reference_target(owned.pointer) else { continue }
                found.append((String(cString: git_reference_name(owned.pointer)), ObjectID(target)))
            }
            return found.sorted { $0.name < $1.name }
        }
    }

    /// The kind of object `id` is, nil when the repository (with the packs `include`d) lacks it.
    public func kind(of id: ObjectID) -> ObjectKind? {
        try? locked { () throws(GitError) in
            var oid = id.oid
            var size = 0
            var type = GIT_OBJECT_INVALID
            guard git_odb_read_header(&size, &type, odb.pointer, &oid) == 0 else { return nil }
            return ObjectKind(type)
        }
    }

    /// True when `descendant` is `ancestor` or has it in its history (a fast-forward from it).
    public func isFastForward(from ancestor: ObjectID, to descendant: ObjectID) -> Bool {
        if ancestor == descendant { return true }
        return (try? locked { () throws(GitError) in
            var commit = descendant.oid, base = ancestor.oid
            return git_graph_descendant_of(repo.pointer, &commit, &base) == 1
        }) ?? false
    }

    // MARK: - Fetch: a pack of wants minus haves

    /// Writes a pack of everything `wants` reach that `haves` do not, handing its bytes to
    /// `sink` as libgit2 writes them (a chunk at a time; false from `sink` stops it). Haves the
    /// repository lacks are ignored. Returns the number of objects.
    public func writePack(wants: [ObjectID], haves: [ObjectID], into sink: (UnsafeRawBufferPointer) -> Bool) throws(GitError) -> Int {
        try locked { () throws(GitError) in
            var builderPointer: OpaquePointer?
            try check(git_packbuilder_new(&builderPointer, repo.pointer), "start a pack")
            let builder = PackBuilderHandle(builderPointer!)
            _ = git_packbuilder_set_threads(builder.pointer, 1)
            var walkPointer: OpaquePointer?
            try check(git_revwalk_new(&walkPointer, repo.pointer), "walk history")
            let walk = RevwalkHandle(walkPointer!)
            var walked = false
            for want in wants {
                var oid = want.oid
                var size = 0
                var type = GIT_OBJECT_INVALID
                try check(git_odb_read_header(&size, &type, odb.pointer, &oid), "read \(want.hex)")
                if type == GIT_OBJECT_COMMIT {
                    try check(git_revwalk_push(walk.pointer, &oid), "walk from \(want.hex)")
                    walked = true
                } else {
                    // A tag (with all it points at), a tree or a blob.
                    try check(git_packbuilder_insert_recur(builder.pointer, &oid, nil), "pack \(want.hex)")
                }
            }
            for have in haves {
                var oid = have.oid
                var size = 0
                var type = GIT_OBJECT_INVALID
                guard git_odb_read_header(&size, &type, odb.pointer, &oid) == 0, type == GIT_OBJECT_COMMIT else { continue }
                try check(git_revwalk_hide(walk.pointer, &oid), "walk to \(have.hex)")
            }
            if walked { try check(git_packbuilder_insert_walk(builder.pointer, walk.pointer), "pack the history") }
            let rc = withoutActuallyEscaping(sink) { sink in
                let box = PackSinkBox(sink)
                return withExtendedLifetime(box) {
                    git_packbuilder_foreach(builder.pointer, { buffer, size, payload in
                        let box = Unmanaged<PackSinkBox>.fromOpaque(payload!).takeUnretainedValue()
                        return box.sink(UnsafeRawBufferPointer(start: buffer, count: size)) ? 0 : -1
                    }, Unmanaged.passUnretained(box).toOpaque())
                }
            }
            try check(rc, "write the pack")
            return Int(git_packbuilder_object_count(builder.pointer))
        }
    }

    /// The repository's one pack, opened at its start, when it holds every object the commits
    /// `wants` reach: the repository's object database is exactly one `.idx` in `objects/pack`
    /// with its `.pack` (a `.pack` without its index is not read by libgit2: one being renamed
    /// in, or a store's retired one), no loose object, no alternates, and the history of `wants`
    /// walked with that pack alone as the object database (`packHolds`). A fetch of `wants` may
    /// then be answered with the file as it is, as git reuses stored pack data, instead of
    /// libgit2's pack builder searching deltas and inflating and deflating each object again
    /// (binder's blobs are ciphertext: nothing for either to win). Objects in it that `wants` do
    /// not reach are the same repository's, and a client keeps them. Nil otherwise, or when the
    /// file does not start as a pack of version 2 or 3. The file is opened before the walk, so
    /// a pack a store retires meanwhile is still read whole.
    public func soleStoredPack(reaching wants: [ObjectID]) -> FileHandle? {
        let objects = path + "/objects"
        let fm = FileManager.default
        guard !fm.fileExists(atPath: objects + "/info/alternates"),
              let entries = try? fm.contentsOfDirectory(atPath: objects),
              let packNames = try? fm.contentsOfDirectory(atPath: objects + "/pack") else { return nil }
        // Loose objects live in folders named by two hex digits.
        for entry in entries where entry.utf8.count == 2 && entry.utf8.allSatisfy({ isxdigit(Int32($0)) != 0 }) {
            guard let loose = try? fm.contentsOfDirectory(atPath: objects + "/" + entry), loose.isEmpty else { return nil }
        }
        let indexes = packNames.filter { $0.hasPrefix("pack-") && $0.hasSuffix(".idx") }
        guard indexes.count == 1 else { return nil }
        let base = objects + "/pack/" + String(indexes[0].dropLast(4))
        guard let pack = FileHandle(forReadingAtPath: base + ".pack") else { return nil }
        // "PACK", then the version as four bytes, big-endian.
        let header = [UInt8]((try? pack.read(upToCount: 8)) ?? Data())
        guard header.count == 8, header[0..<4] == [UInt8]("PACK".utf8)[...], header[4..<7].allSatisfy({ $0 == 0 }),
              header[7] == 2 || header[7] == 3, (try? pack.seek(toOffset: 0)) != nil,
              Self.packHolds(historyOf: wants, indexPath: base + ".idx") else {
            try? pack.close()
            return nil
        }
        return pack
    }

    /// True when the pack of `indexPath` alone holds every commit, tree and blob the commits
    /// `wants` reach: libgit2 walks them in a repository whose only object database is that pack
    /// (a missing commit or tree fails the walk; each blob is looked up in the pack's index).
    /// Trees are read, blobs are not. A want that is not a commit (a tag, a tree) answers false.
    private static func packHolds(historyOf wants: [ObjectID], indexPath: String) -> Bool {
        var odbPointer: OpaquePointer?
        guard git_odb_new(&odbPointer) == 0 else { return false }
        let odb = OdbHandle(odbPointer!)
        var backend: OpaquePointer?
        // Owned by the database once added (on failure, out of memory, it leaks).
        guard git_odb_backend_one_pack(&backend, indexPath) == 0, git_odb_add_backend(odb.pointer, backend, 1) == 0 else {
            return false
        }
        var repoPointer: OpaquePointer?
        guard git_repository_wrap_odb(&repoPointer, odb.pointer) == 0 else { return false }
        let repo = RepositoryHandle(repoPointer!)
        var walkPointer: OpaquePointer?
        guard git_revwalk_new(&walkPointer, repo.pointer) == 0 else { return false }
        let walk = RevwalkHandle(walkPointer!)
        for want in wants {
            var oid = want.oid
            var size = 0
            var type = GIT_OBJECT_INVALID
            guard git_odb_read_header(&size, &type, odb.pointer, &oid) == 0, type == GIT_OBJECT_COMMIT,
                  git_revwalk_push(walk.pointer, &oid) == 0 else { return false }
        }
        var seenTrees = Set<ObjectID>()
        var commitID = git_oid()
        while true {
            let rc = git_revwalk_next(&commitID, walk.pointer)
            if rc == GIT_ITEROVER.rawValue { return true }
            var commitPointer: OpaquePointer?
            guard rc == 0, git_commit_lookup(&commitPointer, repo.pointer, &commitID) == 0 else { return false }
            let commit = CommitHandle(commitPointer!)
            var pending = [ObjectID(git_commit_tree_id(commit.pointer))]
            while let treeID = pending.popLast() {
                guard seenTrees.insert(treeID).inserted else { continue }
                var oid = treeID.oid
                var treePointer: OpaquePointer?
                guard git_tree_lookup(&treePointer, repo.pointer, &oid) == 0 else { return false }
                let tree = TreeHandle(treePointer!)
                for index in 0..<git_tree_entrycount(tree.pointer) {
                    let entry = git_tree_entry_byindex(tree.pointer, index)
                    switch git_tree_entry_type(entry) {
                    case GIT_OBJECT_TREE: pending.append(ObjectID(git_tree_entry_id(entry)))
                    case GIT_OBJECT_BLOB: guard git_odb_exists(odb.pointer, git_tree_entry_id(entry)) == 1 else { return false }
                    default: continue   // a submodule's commit is not the repository's (git sends none)
                    }
                }
            }
        }
    }

    // MARK: - Push: a pack indexed into quarantine, and checked

    /// Indexes the pack `file` holds from its current offset to its end into `folder`, reading
    /// it in bounded chunks; a thin pack's bases are taken from this repository and appended.
    /// libgit2 parses every commit, tree and tag and checks that everything they name is in the
    /// pack or the repository (its `verify`).
    public func indexPack(from file: FileHandle, into folder: String) throws(GitError) -> IndexedPack {
        try locked { () throws(GitError) in
            var options = git_indexer_options()
            try check(git_indexer_options_init(&options, UInt32(GIT_INDEXER_OPTIONS_VERSION)), "index the pack")
            options.verify = 1
            var indexerPointer: OpaquePointer?
            try check(git_indexer_new(&indexerPointer, folder, 0o600, odb.pointer, &options), "index the pack")
            let indexer = IndexerHandle(indexerPointer!)
            var progress = git_indexer_progress()
            while true {
                let chunk: Data
                do { chunk = try file.read(upToCount: Self.chunkSize) ?? Data() } catch {
                    throw GitError.failed(operation: "read the pack", code: .other(-1), message: "\(error)")
                }
                if chunk.isEmpty { break }
                let rc = chunk.withUnsafeBytes { git_indexer_append(indexer.pointer, $0.baseAddress, $0.count, &progress) }
                try check(rc, "index the pack")
            }
            try check(git_indexer_commit(indexer.pointer, &progress), "index the pack")
            let name = String(cString: git_indexer_name(indexer.pointer))
            return IndexedPack(packPath: folder + "/pack-\(name).pack", indexPath: folder + "/pack-\(name).idx",
                               checksum: name, objects: Int(progress.indexed_objects))
        }
    }

    /// Adds `pack` to this instance's object database (not to the repository): the checks of a
    /// push see its objects beside the stored ones.
    public func include(_ pack: IndexedPack) throws(GitError) {
        try locked { () throws(GitError) in
            var backend: OpaquePointer?
            try check(git_odb_backend_one_pack(&backend, pack.indexPath), "open the pushed pack")
            // Owned by the database once added (on failure, out of memory, it leaks).
            try check(git_odb_add_backend(odb.pointer, backend, 3), "open the pushed pack")
        }
    }

    /// Checks each tree of `pack` by git's fsck rules (`TreeEntryRules`); commits and tags were
    /// parsed by the indexer. Throws the first problem found.
    public func checkTrees(of pack: IndexedPack) throws(IncomingObjectRefusal) {
        let outcome: Result<Void, IncomingObjectRefusal>
        do {
            outcome = try locked { () throws(GitError) in
                var packOdbPointer: OpaquePointer?
                try check(git_odb_new(&packOdbPointer), "open the pushed pack")
                let packOdb = OdbHandle(packOdbPointer!)
                var backend: OpaquePointer?
                try check(git_odb_backend_one_pack(&backend, pack.indexPath), "open the pushed pack")
                try check(git_odb_add_backend(packOdb.pointer, backend, 1), "open the pushed pack")
                let ids = IDCollector()
                try check(git_odb_foreach(packOdb.pointer, { oid, payload in
                    Unmanaged<IDCollector>.fromOpaque(payload!).takeUnretainedValue().ids.append(ObjectID(oid!))
                    return 0
                }, Unmanaged.passUnretained(ids).toOpaque()), "list the pushed pack")
                for id in withExtendedLifetime(ids, { ids.ids }) {
                    var oid = id.oid
                    var objectPointer: OpaquePointer?
                    try check(git_odb_read(&objectPointer, packOdb.pointer, &oid), "read \(id.hex)")
                    let object = OdbObjectHandle(objectPointer!)
                    guard git_odb_object_type(object.pointer) == GIT_OBJECT_TREE else { continue }
                    let bytes = [UInt8](UnsafeRawBufferPointer(start: git_odb_object_data(object.pointer),
                                                               count: git_odb_object_size(object.pointer)))
                    if let problem = TreeEntryRules.problem(in: bytes) {
                        return .failure(IncomingObjectRefusal(object: id.hex, problem: problem))
                    }
                }
                return .success(())
            }
        } catch {
            throw IncomingObjectRefusal(object: pack.checksum, problem: .unparsable)
        }
        try outcome.get()
    }
}

/// An object's type, as a fetch or a push's checks need it.
public enum ObjectKind: Sendable, Equatable {
    case commit, tree, blob, tag

    init?(_ type: git_object_t) {
        switch type {
        case GIT_OBJECT_COMMIT: self = .commit
        case GIT_OBJECT_TREE: self = .tree
        case GIT_OBJECT_BLOB: self = .blob
        case GIT_OBJECT_TAG: self = .tag
        default: return nil
        }
    }
}

/// Owns a `git_indexer *`.
final class IndexerHandle {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { git_indexer_free(pointer) }
}

/// The pack builder's sink, passed through libgit2's callback payload.
private final class PackSinkBox {
    let sink: (UnsafeRawBufferPointer) -> Bool
    init(_ sink: @escaping (UnsafeRawBufferPointer) -> Bool) { self.sink = sink }
}

/// The ids `git_odb_foreach` hands out, gathered through its payload.
private final class IDCollector {
    var ids: [ObjectID] = []
}
