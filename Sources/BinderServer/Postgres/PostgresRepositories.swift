import Foundation
import Logging
import PostgresNIO

/// Repositories, their owners and refs in the database: the part of `RepositoryStorage` and
/// `StoredRepository` that needs no git object. The packs and a push's transaction are
/// `PostgresObjectHome`'s; `PostgresRepositoryStorage` puts both behind the storage protocols.
///
/// A ref's compare-and-swap is one statement: `UPDATE … WHERE target = expected` (or, to
/// create, `INSERT … ON CONFLICT DO NOTHING`); the row count says who won, and a loser reads
/// where the ref is now to report it (`StorageError.refConflict`).
struct PostgresRepositories {
    let storage: PostgresStorage

    /// Records the repository `id` owned by `owner`: `.idTaken` when it exists already,
    /// `.repositoryQuota` when `owner` has `repositoryLimit` already. The count is taken with
    /// the owner's row locked, so of two creations racing through two replicas only those
    /// within the quota pass (the push's transaction calls the same steps, `createRow`).
    func create(_ id: String, owner: String, repositoryLimit: Int = .max) async throws(StorageError) {
        guard RepositoryID.isValid(id) else { throw .backend(operation: "cannot create the repository", detail: "invalid id") }
        let logger = storage.logger
        try await storage.transaction("cannot create the repository") { connection in
            try await Self.createRow(id, owner: owner, repositoryLimit: repositoryLimit, on: connection, logger: logger)
        }
    }

    /// `create`'s steps inside the caller's transaction.
    static func createRow(_ id: String, owner: String, repositoryLimit: Int, on connection: PostgresConnection,
                          logger: Logger) async throws {
        try await lockOwner(owner, on: connection, logger: logger)
        var owned = 0
        for try await count in try await connection.query("SELECT count(*) FROM binder_repositories WHERE owner = \(owner)",
                                                          logger: logger).decode(Int.self) {
            owned = count
        }
        guard owned < repositoryLimit else { throw StorageError.repositoryQuota(limit: repositoryLimit) }
        var rows = 0
        for try await _ in try await connection.query("""
            INSERT INTO binder_repositories (id, owner) VALUES (\(id), \(owner)) ON CONFLICT DO NOTHING RETURNING 1
            """, logger: logger).decode(Int.self) {
            rows += 1
        }
        guard rows == 1 else { throw StorageError.idTaken(id) }
    }

    /// Makes `owner`'s row if missing and locks it until the transaction ends: the quota checks
    /// of one owner's pushes take turns, whichever replica runs them. `FOR NO KEY UPDATE`, not
    /// `FOR UPDATE`: a push-to-create has inserted its repository row before it gets here,
    /// whose foreign key holds a key-share lock on the owner's row; `FOR UPDATE` would wait for
    /// every other creation's key-share lock while they wait for ours (a deadlock, seen with 60
    /// first pushes of one owner at once).
    static func lockOwner(_ owner: String, on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.exec("INSERT INTO binder_owners (pubkey) VALUES (\(owner)) ON CONFLICT DO NOTHING", logger: logger)
        try await connection.exec("SELECT 1 FROM binder_owners WHERE pubkey = \(owner) FOR NO KEY UPDATE", logger: logger)
    }

    /// Counts `bytes` more against `repository`'s owner: `.storageQuotaUsedUp` (and nothing
    /// counted) when the owner's repositories would take more than `byteLimit`. Checked with
    /// the owner's row locked, as a push's objects will be inside its transaction.
    func addBytes(_ bytes: Int64, to repository: String, byteLimit: Int64) async throws(StorageError) {
        let logger = storage.logger
        try await storage.transaction("cannot count the repository's bytes") { connection in
            var owner: String?
            for try await found in try await connection.query("SELECT owner FROM binder_repositories WHERE id = \(repository)",
                                                              logger: logger).decode(String.self) {
                owner = found
            }
            guard let owner else { throw StorageError.backend(operation: "cannot count the repository's bytes", detail: "no such repository") }
            try await Self.lockOwner(owner, on: connection, logger: logger)
            var used: Int64 = 0
            for try await sum in try await connection.query("""
                SELECT COALESCE(sum(bytes), 0)::bigint FROM binder_repositories WHERE owner = \(owner)
                """, logger: logger).decode(Int64.self) {
                used = sum
            }
            guard used <= byteLimit - bytes else { throw StorageError.storageQuotaUsedUp }
            try await connection.exec("""
                UPDATE binder_repositories SET bytes = bytes + \(bytes), modified_at = now() WHERE id = \(repository)
                """, logger: logger)
        }
    }

    /// The owner of `id`; nil when there is no such repository.
    func owner(of id: String) async throws(StorageError) -> String? {
        let logger = storage.logger
        return try await storage.perform("cannot read the repository") { client in
            try await client.rows("SELECT owner FROM binder_repositories WHERE id = \(id)", as: String.self, logger: logger).first
        }
    }

    /// `owner`'s repository ids, sorted.
    func ids(owner: String) async throws(StorageError) -> [String] {
        let logger = storage.logger
        return try await storage.perform("cannot list repositories") { client in
            try await client.rows("SELECT id FROM binder_repositories WHERE owner = \(owner) ORDER BY id",
                                  as: String.self, logger: logger)
        }
    }

    /// How many repositories `owner` has and the bytes they take, as the quota counts them.
    func usage(owner: String) async throws(StorageError) -> StorageUsage {
        let logger = storage.logger
        return try await storage.perform("cannot read the quota") { client in
            for try await (count, bytes) in try await client.query("""
                SELECT count(*), COALESCE(sum(bytes), 0)::bigint FROM binder_repositories WHERE owner = \(owner)
                """, logger: logger).decode((Int, Int64).self) {
                return StorageUsage(repositories: count, bytes: bytes)
            }
            return StorageUsage(repositories: 0, bytes: 0)
        }
    }

    /// Removes `id` with its refs and packs; false when it was not there.
    func remove(_ id: String) async throws(StorageError) -> Bool {
        let logger = storage.logger
        return try await storage.perform("cannot remove the repository") { client in
            try await !client.rows("DELETE FROM binder_repositories WHERE id = \(id) RETURNING 1", as: Int.self, logger: logger).isEmpty
        }
    }

    /// The `scan-…` staging repositories, with when each last changed.
    func stagingRepositories() async throws(StorageError) -> [(id: String, modified: Date)] {
        let logger = storage.logger
        let pattern = ScanPolicy.prefix + "%"
        return try await storage.perform("cannot list staging repositories") { client in
            var found: [(id: String, modified: Date)] = []
            for try await (id, modified) in try await client.query("""
                SELECT id, modified_at FROM binder_repositories WHERE id LIKE \(pattern) ORDER BY id
                """, logger: logger).decode((String, Date).self) {
                found.append((id, modified))
            }
            return found
        }
    }

    /// Where the full ref `name` of `repository` points; nil when absent.
    func ref(_ name: String, in repository: String) async throws(StorageError) -> String? {
        guard FolderRepository.isRefName(name) else { throw .badRefUpdate(ref: name) }
        let logger = storage.logger
        return try await storage.perform("cannot read \(name)") { client in
            try await client.rows("SELECT target FROM binder_refs WHERE repository = \(repository) AND name = \(name)",
                                  as: String.self, logger: logger).first
        }
    }

    /// Compare-and-swap of `name` in `repository` from `expected` (nil: only if absent) to
    /// `new`; `.refConflict` naming where it is when another update got there first.
    func updateRef(_ name: String, in repository: String, from expected: String?, to new: String) async throws(StorageError) {
        guard FolderRepository.isRefName(name), FolderRepository.isObjectID(new), expected.map(FolderRepository.isObjectID) ?? true else {
            throw .badRefUpdate(ref: name)
        }
        let logger = storage.logger
        let swapped = try await storage.transaction("cannot update \(name)") { connection in
            let query: PostgresQuery
            if let expected {
                query = """
                    UPDATE binder_refs SET target = \(new)
                    WHERE repository = \(repository) AND name = \(name) AND target = \(expected) RETURNING 1
                    """
            } else {
                query = """
                    INSERT INTO binder_refs (repository, name, target) SELECT \(repository), \(name), \(new)
                    WHERE EXISTS (SELECT 1 FROM binder_repositories WHERE id = \(repository))
                    ON CONFLICT DO NOTHING RETURNING 1
                    """
            }
            var rows = 0
            for try await _ in try await connection.query(query, logger: logger).decode(Int.self) { rows += 1 }
            if rows == 1 {
                try await connection.exec("UPDATE binder_repositories SET modified_at = now() WHERE id = \(repository)",
                                           logger: logger)
            }
            return rows == 1
        }
        guard swapped else {
            throw .refConflict(ref: name, expected: expected, found: try await ref(name, in: repository))
        }
    }

    /// When the last scan session opened on `repository` ends; nil if none was.
    func shareEnds(_ repository: String) async throws(StorageError) -> Int64? {
        let logger = storage.logger
        return try await storage.perform("cannot read the share's end") { client in
            for try await end in try await client.query("SELECT share_ends FROM binder_repositories WHERE id = \(repository)",
                                                        logger: logger).decode(Int64?.self) {
                return end
            }
            return nil
        }
    }

    /// Records `time` as when `repository`'s sessions end, if later than what is recorded.
    func noteShareEnds(_ repository: String, at time: Int64) async throws(StorageError) {
        let logger = storage.logger
        try await storage.perform("cannot record the share's end") { client in
            try await client.exec("""
                UPDATE binder_repositories SET share_ends = GREATEST(COALESCE(share_ends, \(time)), \(time)) WHERE id = \(repository)
                """, logger: logger)
        }
    }
}
