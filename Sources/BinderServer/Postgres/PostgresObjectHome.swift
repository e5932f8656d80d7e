import Foundation
import Logging
import PostgresNIO
import Synchronization

/// One repository's objects and refs in the database, as the git engine sees them
/// (`GitObjectHome`): refs from `binder_refs`, objects read from this replica's cache of the
/// repository's packs (`PostgresPackCache`), and a push stored in one transaction:
///
/// 1. for a push-to-create, the repository's row (`.idTaken` when another creation won,
///    `.gone` when its owner deleted the id);
/// 2. the pack's row with its index, and its bytes in chunks of at most 1 MiB read from the
///    file one at a time (a 60 MB push never sits in memory);
/// 3. the owner's row locked (a push by the same owner through another replica waits here,
///    not while a pack streams in), the owner's repositories counted for a creation
///    (`.repositoryQuota`), the owner's bytes counted again with the pack's
///    (`.storageQuotaUsedUp`): refused, nothing is kept;
/// 4. each ref's compare-and-swap, in name order (two pushes never lock two refs in opposite
///    orders): one that moved meanwhile rolls everything back, and every command is refused;
/// 5. commit; then the pack is moved from the quarantine into this replica's cache.
///
/// A push cut anywhere before 5 leaves nothing: PostgreSQL rolls the transaction back (a
/// replica killed mid-push closes its connection, which does the same).
final class PostgresObjectHome: GitObjectHome {
    /// Set for a push-to-create: who will own the repository and how many they may have.
    struct Creation: Sendable {
        let owner: String
        let repositoryLimit: Int
    }

    let id: String
    let storage: PostgresStorage
    let cache: PostgresPackCache
    let creation: Creation?
    let bytesPerUser: Int64
    /// Told of each push that stored a pack (nil: no compaction, as in tests).
    let compaction: PostgresCompaction?
    /// Whether a `store` of this home created the repository (push-to-create); guarded by its mutex.
    private let madeRepository = Mutex(false)

    init(id: String, storage: PostgresStorage, cache: PostgresPackCache, creation: Creation? = nil, bytesPerUser: Int64 = .max,
         compaction: PostgresCompaction? = nil) {
        self.id = id
        self.storage = storage
        self.cache = cache
        self.creation = creation
        self.bytesPerUser = bytesPerUser
        self.compaction = compaction
    }

    /// True once `store` created the repository.
    var created: Bool { madeRepository.withLock { $0 } }

    var quarantine: String { cache.quarantine }

    func refs() async throws(StorageError) -> [StoredRef] {
        let id = id, logger = storage.logger
        return try await storage.perform("cannot read the refs") { client in
            var refs: [StoredRef] = []
            for try await (name, target) in try await client.query("""
                SELECT name, target FROM binder_refs WHERE repository = \(id) ORDER BY name
                """, logger: logger).decode((String, String).self) {
                refs.append(StoredRef(name: name, target: target))
            }
            return refs
        }
    }

    func objectRepository() async throws(StorageError) -> String {
        try await cache.update(id)
    }

    func store(_ pack: ReceivedPack?, commands: [RefCommand]) async throws(StorageError) -> [RefOutcome] {
        for command in commands {
            guard FolderRepository.isRefName(command.ref), command.old.map(FolderRepository.isObjectID) ?? true,
                  command.new.map(FolderRepository.isObjectID) ?? true, command.old != nil || command.new != nil else {
                throw .badRefUpdate(ref: command.ref)
            }
        }
        var index: Data?
        if let pack {
            guard FolderRepository.isObjectID(pack.checksum) else { throw .backend(operation: "cannot store the pack", detail: "bad checksum") }
            do { index = try Data(contentsOf: URL(fileURLWithPath: pack.indexPath)) } catch {
                throw .backend(operation: "cannot store the pack", detail: "\(error)")
            }
        }
        if creation != nil {
            guard pack != nil, !commands.isEmpty,
                  commands.allSatisfy({ $0.old == nil && $0.new != nil && $0.ref.hasPrefix("refs/heads/") }) else {
                throw .notACreatingPush
            }
        }
        let id = id, creation = creation, bytesPerUser = bytesPerUser, logger = storage.logger
        let ordered = commands.sorted { $0.ref < $1.ref }
        do {
            try await storage.transaction("cannot store the push") { connection in
                let owner: String
                if let creation {
                    // The row first (the pack's rows refer to it), the owner's count once the
                    // pack is in, under the owner's lock (below): the lock is not held while
                    // the pack streams in, so the owner's other pushes do not wait on it.
                    try await connection.exec("INSERT INTO binder_owners (pubkey) VALUES (\(creation.owner)) ON CONFLICT DO NOTHING",
                                              logger: logger)
                    var inserted = false
                    for try await _ in try await connection.query("""
                        INSERT INTO binder_repositories (id, owner) VALUES (\(id), \(creation.owner)) ON CONFLICT DO NOTHING RETURNING 1
                        """, logger: logger).decode(Int.self) {
                        inserted = true
                    }
                    guard inserted else { throw StorageError.idTaken(id) }
                    // Read after the row is in: a deletion that committed meanwhile is seen here.
                    if let tombstone = try await PostgresTombstones.find(id, on: connection, logger: logger) {
                        throw StorageError.gone(id: id, tombstone: tombstone)
                    }
                    owner = creation.owner
                } else {
                    guard let found = try await Self.owner(of: id, on: connection, logger: logger) else {
                        if let tombstone = try await PostgresTombstones.find(id, on: connection, logger: logger) {
                            throw StorageError.gone(id: id, tombstone: tombstone)
                        }
                        throw StorageError.backend(operation: "cannot store the push", detail: "the repository was removed")
                    }
                    owner = found
                }
                var added: Int64 = 0
                if let pack, let index {
                    added = try await Self.insert(pack, index: index, into: id, on: connection, logger: logger)
                }
                try await PostgresRepositories.lockOwner(owner, on: connection, logger: logger)
                if let creation {
                    // Counts this one (our own row) and those committed by the owner's earlier creations.
                    var owned = 0
                    for try await count in try await connection.query("SELECT count(*) FROM binder_repositories WHERE owner = \(owner)",
                                                                      logger: logger).decode(Int.self) {
                        owned = count
                    }
                    guard owned <= creation.repositoryLimit else { throw StorageError.repositoryQuota(limit: creation.repositoryLimit) }
                }
                if added > 0 {
                    var used: Int64 = 0
                    for try await sum in try await connection.query("""
                        SELECT COALESCE(sum(bytes), 0)::bigint FROM binder_repositories WHERE owner = \(owner)
                        """, logger: logger).decode(Int64.self) {
                        used = sum
                    }
                    guard used <= bytesPerUser - added else { throw StorageError.storageQuotaUsedUp }
                }
                for command in ordered {
                    guard try await Self.swap(command, in: id, on: connection, logger: logger) else {
                        throw StorageError.refConflict(ref: command.ref, expected: command.old, found: nil)
                    }
                }
                try await connection.exec("""
                    UPDATE binder_repositories SET bytes = bytes + \(added), modified_at = now() WHERE id = \(id)
                    """, logger: logger)
            }
        } catch .refConflict {
            // Rolled back: say which refs moved (as git's lost race does) from where they are now.
            let now = Dictionary(try await refs().map { ($0.name, $0.target) }, uniquingKeysWith: { first, _ in first })
            return commands.map { command in
                now[command.ref] == command.old ? .refused("atomic push failed") : .refused("non-fast-forward")
            }
        }
        if creation != nil { madeRepository.withLock { $0 = true } }
        if let pack {
            cache.adopt(pack, into: id)
            compaction?.compactIfDue(id)
        }
        return commands.map { _ in .applied }
    }

    static func owner(of id: String, on connection: PostgresConnection, logger: Logger) async throws -> String? {
        for try await owner in try await connection.query("SELECT owner FROM binder_repositories WHERE id = \(id)",
                                                          logger: logger).decode(String.self) {
            return owner
        }
        return nil
    }

    /// The pack's row and chunks; returns the bytes it adds (0 when the same pack is stored already).
    static func insert(_ pack: ReceivedPack, index: Data, into id: String, on connection: PostgresConnection,
                       logger: Logger) async throws -> Int64 {
        var inserted = false
        for try await _ in try await connection.query("""
            INSERT INTO binder_packs (repository, checksum, objects, pack_bytes, pack_index)
            VALUES (\(id), \(pack.checksum), \(pack.objects), \(pack.bytes), \(index))
            ON CONFLICT DO NOTHING RETURNING 1
            """, logger: logger).decode(Int.self) {
            inserted = true
        }
        guard inserted else { return 0 }
        try await PackChunks.write(file: pack.packPath, repository: id, checksum: pack.checksum, on: connection, logger: logger)
        return pack.bytes + Int64(index.count)
    }

    /// One ref command's compare-and-swap: true when the row moved from `old` to `new`.
    static func swap(_ command: RefCommand, in id: String, on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        let query: PostgresQuery
        switch (command.old, command.new) {
        case (nil, let new?):
            query = """
                INSERT INTO binder_refs (repository, name, target) VALUES (\(id), \(command.ref), \(new))
                ON CONFLICT DO NOTHING RETURNING 1
                """
        case (let old?, let new?):
            query = """
                UPDATE binder_refs SET target = \(new) WHERE repository = \(id) AND name = \(command.ref) AND target = \(old)
                RETURNING 1
                """
        case (let old?, nil):
            query = "DELETE FROM binder_refs WHERE repository = \(id) AND name = \(command.ref) AND target = \(old) RETURNING 1"
        case (nil, nil):
            return false
        }
        var rows = 0
        for try await _ in try await connection.query(query, logger: logger).decode(Int.self) { rows += 1 }
        return rows == 1
    }
}

/// A pack's bytes as rows of at most `size` bytes (`binder_pack_chunks`), read from its file one
/// chunk at a time.
enum PackChunks {
    /// 1 MiB: the schema's bound; a row of this size costs one round trip per MiB and keeps
    /// each bytea far below PostgreSQL's 1 GB field limit and TOAST's comfort.
    static let size = 1 << 20

    static func write(file: String, repository: String, checksum: String, on connection: PostgresConnection,
                      logger: Logger) async throws {
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: file))
        defer { try? handle.close() }
        var seq = 0
        while let data = try handle.read(upToCount: size), !data.isEmpty {
            try await connection.exec("""
                INSERT INTO binder_pack_chunks (repository, checksum, seq, data) VALUES (\(repository), \(checksum), \(seq), \(data))
                """, logger: logger)
            seq += 1
        }
    }
}

/// The ids their owners deleted (`binder_tombstones`, migration 2).
enum PostgresTombstones {
    static func find(_ id: String, on connection: PostgresConnection, logger: Logger) async throws -> RepositoryTombstone? {
        for try await (owner, time) in try await connection.query("""
            SELECT owner, deleted_at FROM binder_tombstones WHERE id = \(id)
            """, logger: logger).decode((String, Int64).self) {
            return RepositoryTombstone(owner: owner, deletedAt: time)
        }
        return nil
    }
}
