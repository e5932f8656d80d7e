import Dispatch
import Foundation
import Logging
import PostgresNIO
import Synchronization

/// `binder serve --migrate-from DIR` (a folder server's repositories copied into the database)
/// and `--migrate-to DIR` (the way back), run while no server uses the folder. Each repository
/// is copied whole: its owner, its refs, and one pack of everything they reach (libgit2's pack
/// builder, as compaction builds it); then read back through the other side and checked:
/// the objects the refs reach counted on both sides (`git rev-list --count --objects`) and
/// `git fsck` on the copy. Tombstones (ids their owners deleted) are copied too. Idempotent: a
/// repository whose refs are already the same on the other side is left alone, so a cut
/// migration is run again.
public enum StoreMigration {
    public struct Report: Sendable, CustomStringConvertible {
        public var copied: [String] = []
        /// Already there with the same refs.
        public var unchanged: [String] = []
        public var tombstones = 0
        /// Objects the copied repositories' refs reach, counted on both sides.
        public var objects = 0

        public var description: String {
            "\(copied.count) repositories copied (\(objects) objects, counted and fsck'd on both sides), "
                + "\(unchanged.count) already there, \(tombstones) tombstones"
        }
    }

    public enum Failure: Error, CustomStringConvertible {
        case repository(id: String, reason: String)
        case setup(String)

        public var description: String {
            switch self {
            case .repository(let id, let reason): return "repository \(id): \(reason)"
            case .setup(let reason): return reason
            }
        }
    }

    /// Copies the folder server at `root` into the database at `location`.
    public static func fromFolder(_ root: String, into location: PostgresLocation, logger: Logger) throws -> Report {
        try blocking(location, logger: logger) { storage, side in try await side.copyIn(from: root, storage: storage) }
    }

    /// Copies the database at `location` into a folder server at `root` (made if missing).
    public static func toFolder(_ root: String, from location: PostgresLocation, logger: Logger) throws -> Report {
        try blocking(location, logger: logger) { storage, side in try await side.copyOut(to: root, storage: storage) }
    }

    /// Opens the database, runs `body` with a scratch folder's tools, closes it; from a
    /// synchronous command.
    private static func blocking(_ location: PostgresLocation, logger: Logger,
                                 _ body: @escaping @Sendable (PostgresStorage, MigrationTools) async throws -> Report) throws -> Report {
        let outcome = Mutex<Result<Report, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            let result: Result<Report, any Error>
            do {
                let storage = try await PostgresStorage.start(location, logger: logger)
                let scratch = FileManager.default.temporaryDirectory.path + "/binder-migrate-\(UUID().uuidString)"
                do {
                    let tools = try MigrationTools(scratch: scratch, storage: storage)
                    result = .success(try await body(storage, tools))
                } catch { result = .failure(error) }
                try? FileManager.default.removeItem(atPath: scratch)
                await storage.shutdown()
            } catch { result = .failure(error) }
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        return try (outcome.withLock { $0 } ?? .failure(Failure.setup("no answer"))).get()
    }
}

/// What both directions use: git (for counting and fsck), a pack cache in a scratch folder.
struct MigrationTools: Sendable {
    let git: GitBackend
    let cache: PostgresPackCache

    init(scratch: String, storage: PostgresStorage) throws {
        cache = PostgresPackCache(folder: scratch, storage: storage)
        try cache.prepare()
        git = GitBackend(spool: cache.spool, slots: ProcessSlots(2), timeout: .seconds(3600))
    }

    /// `git ARGUMENTS` in the bare repository at `path`: its stdout, or the failure naming `id`.
    func run(_ arguments: [String], in path: String, for id: String) async throws -> String {
        let output = try await git.command(arguments, repository: path)
        guard output.status == 0 else {
            throw StoreMigration.Failure.repository(id: id, reason: "git \(arguments.first ?? ""): \(output.errors)")
        }
        try output.stdout.rewind()
        return String(decoding: try output.stdout.read(upTo: 64 << 20), as: UTF8.self)
    }

    /// The refs of the bare repository at `path`, sorted by name.
    func folderRefs(_ path: String, for id: String) async throws -> [(String, String)] {
        try await run(["for-each-ref", "--format=%(refname) %(objectname)", "refs/"], in: path, for: id)
            .split(separator: "\n").compactMap { line in
                let fields = line.split(separator: " ")
                return fields.count == 2 ? (String(fields[0]), String(fields[1])) : nil
            }.sorted { $0.0 < $1.0 }
    }

    /// Checks that the bare repository `copy` holds every object `refs` reach (as many as
    /// `original` does) and passes `git fsck`; returns the count.
    func verify(_ copy: String, against original: String, refs: [(String, String)], for id: String) async throws -> Int {
        let tips = refs.map(\.1)
        guard !tips.isEmpty else { return 0 }
        let count = { (path: String) async throws -> Int in
            Int(try await run(["rev-list", "--count", "--objects"] + tips, in: path, for: id)
                .trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        }
        let expected = try await count(original), found = try await count(copy)
        guard expected == found, expected > 0 else {
            throw StoreMigration.Failure.repository(id: id, reason: "the copy holds \(found) objects, the original \(expected)")
        }
        _ = try await run(["fsck", "--no-dangling", "--no-progress"] + tips, in: copy, for: id)
        return found
    }
}

extension MigrationTools {
    /// The folder server at `root` into the database.
    func copyIn(from root: String, storage: PostgresStorage) async throws -> StoreMigration.Report {
        let store = RepositoryStore(root: root)
        guard FileManager.default.fileExists(atPath: store.serverFolder) else {
            throw StoreMigration.Failure.setup("\(root) is not a binder serve folder (no .binder-serve in it)")
        }
        let logger = storage.logger
        var report = StoreMigration.Report()
        let names = try FileManager.default.contentsOfDirectory(atPath: root).sorted()
        for name in names where name.hasSuffix(".git") {
            let id = String(name.dropLast(4))
            guard RepositoryID.isValid(id), store.exists(id), store.tombstone(id) == nil else { continue }
            guard let owner = store.owner(id) else { throw StoreMigration.Failure.repository(id: id, reason: "no binder-owner file") }
            let path = store.path(id)
            let refs = try await folderRefs(path, for: id)
            let there = try await PostgresObjectHome(id: id, storage: storage, cache: cache).refs().map { ($0.name, $0.target) }
                .sorted { $0.0 < $1.0 }
            if let existing = try await PostgresRepositories(storage: storage).owner(of: id) {
                guard existing == owner else { throw StoreMigration.Failure.repository(id: id, reason: "owned by another key in the database") }
                if there.elementsEqual(refs, by: ==) { report.unchanged.append(id); continue }
            }
            guard let pack = try PostgresCompaction.packOfEverything(in: path, reachableFrom: refs, scratch: cache.quarantine) else {
                throw StoreMigration.Failure.repository(id: id, reason: "a ref that does not name a commit, or no objects")
            }
            defer { try? FileManager.default.removeItem(atPath: pack.folder) }
            let index = try Data(contentsOf: URL(fileURLWithPath: pack.received.indexPath))
            let shareEnds = store.shareEnds(id)
            try await storage.transaction("cannot copy \(id)") { connection in
                try await PostgresRepositories.lockOwner(owner, on: connection, logger: logger)
                try await connection.exec("""
                    INSERT INTO binder_repositories (id, owner, share_ends) VALUES (\(id), \(owner), \(shareEnds)) ON CONFLICT DO NOTHING
                    """, logger: logger)
                let added = try await PostgresObjectHome.insert(pack.received, index: index, into: id, on: connection, logger: logger)
                try await connection.exec("DELETE FROM binder_refs WHERE repository = \(id)", logger: logger)
                for (name, target) in refs {
                    try await connection.exec("INSERT INTO binder_refs (repository, name, target) VALUES (\(id), \(name), \(target))",
                                              logger: logger)
                }
                try await connection.exec("UPDATE binder_repositories SET bytes = bytes + \(added), modified_at = now() WHERE id = \(id)",
                                          logger: logger)
            }
            let copy = try await cache.update(id)
            report.objects += try await verify(copy, against: path, refs: refs, for: id)
            report.copied.append(id)
        }
        let tombstoned = (try? FileManager.default.contentsOfDirectory(atPath: store.tombstoneFolder)) ?? []
        for id in tombstoned where RepositoryID.isValid(id) {
            guard let tombstone = store.tombstone(id) else { continue }
            try await storage.transaction("cannot copy the tombstone of \(id)") { connection in
                try await connection.exec("""
                    INSERT INTO binder_tombstones (id, owner, deleted_at) VALUES (\(id), \(tombstone.owner), \(tombstone.deletedAt))
                    ON CONFLICT DO NOTHING
                    """, logger: logger)
            }
            report.tombstones += 1
        }
        return report
    }

    /// The database into a folder server at `root`: each repository staged, filled with its
    /// packs and refs, checked, then renamed into place (a cut copy leaves only staging).
    func copyOut(to root: String, storage: PostgresStorage) async throws -> StoreMigration.Report {
        let store = RepositoryStore(root: root)
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try store.prepare()
        let logger = storage.logger
        var report = StoreMigration.Report()
        let rows = try await storage.perform("cannot list the repositories") { client in
            try await client.query("SELECT id, owner, share_ends FROM binder_repositories ORDER BY id", logger: logger)
                .decode((String, String, Int64?).self).reduce(into: [(String, String, Int64?)]()) { $0.append($1) }
        }
        for (id, owner, shareEnds) in rows where RepositoryID.isValid(id) {
            let refs = try await PostgresObjectHome(id: id, storage: storage, cache: cache).refs().map { ($0.name, $0.target) }
                .sorted { $0.0 < $1.0 }
            if store.exists(id) {
                guard store.owner(id) == owner, try await folderRefs(store.path(id), for: id).elementsEqual(refs, by: ==) else {
                    throw StoreMigration.Failure.repository(id: id, reason: "\(store.path(id)) exists with other refs or another owner")
                }
                report.unchanged.append(id)
                continue
            }
            let cached = try await cache.update(id)
            let staging = try store.stage(id, owner: owner)
            defer { try? FileManager.default.removeItem(atPath: staging) }
            for name in try FileManager.default.contentsOfDirectory(atPath: cached + "/objects/pack") where name.hasPrefix("pack-") {
                try FileManager.default.copyItem(atPath: cached + "/objects/pack/" + name, toPath: staging + "/objects/pack/" + name)
            }
            for (name, target) in refs { _ = try await run(["update-ref", "--no-deref", name, target], in: staging, for: id) }
            report.objects += try await verify(staging, against: cached, refs: refs, for: id)
            if let shareEnds { store.noteShareEnds(id, at: shareEnds) }
            guard store.publish(staging, as: id) else { throw StoreMigration.Failure.repository(id: id, reason: "cannot move it into place") }
            report.copied.append(id)
        }
        let tombstones = try await storage.perform("cannot list the tombstones") { client in
            try await client.query("SELECT id, owner, deleted_at FROM binder_tombstones ORDER BY id", logger: logger)
                .decode((String, String, Int64).self).reduce(into: [(String, String, Int64)]()) { $0.append($1) }
        }
        for (id, owner, time) in tombstones where RepositoryID.isValid(id) && store.tombstone(id) == nil {
            try store.writeTombstone(id, owner: owner, at: time)
            report.tombstones += 1
        }
        return report
    }
}
