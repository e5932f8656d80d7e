import Logging
import PostgresNIO

/// The database store's schema, versioned in the code: each migration is applied once, in
/// order, at start (`PostgresSchema.migrate`), recorded in `binder_schema_migrations`. A
/// migration is never edited once released; a change is a new one at the end.
///
/// Tables (docs/DESIGN.md, "The server", has the reasons):
/// - `binder_owners`, `binder_repositories` (owner, bytes for the quota, when it last changed,
///   when its last scan session ends), `binder_refs` (one row per ref; the compare-and-swap is
///   one `UPDATE … WHERE target = old`, a creation one `INSERT … ON CONFLICT DO NOTHING`);
/// - `binder_packs` and `binder_pack_chunks`: git objects as the packs arrived, each with the
///   index libgit2's indexer wrote, the pack's bytes in chunks of at most 1 MiB
///   (`PostgresObjectHome`; compacted by `PostgresCompaction`);
/// - `binder_challenges`, `binder_scan_sessions` (by the token's SHA-256), `binder_rate_counters`
///   (a fixed window per counter and address), `binder_sweeps` (when a periodic job last ran,
///   so that one replica runs it);
/// - (2) `binder_tombstones`: the ids their owners deleted, with the owner's key and the time.
enum PostgresSchema {
    struct Migration: Sendable {
        let version: Int
        let statements: [String]
    }

    /// Every migration, in order. Versions start at 1 and increase by one.
    static let migrations: [Migration] = [
        Migration(version: 1, statements: [
            """
            CREATE TABLE binder_owners (
                pubkey text PRIMARY KEY,
                created_at timestamptz NOT NULL DEFAULT now())
            """,
            """
            CREATE TABLE binder_repositories (
                id text PRIMARY KEY,
                owner text NOT NULL REFERENCES binder_owners (pubkey),
                bytes bigint NOT NULL DEFAULT 0 CHECK (bytes >= 0),
                created_at timestamptz NOT NULL DEFAULT now(),
                modified_at timestamptz NOT NULL DEFAULT now(),
                share_ends bigint)
            """,
            "CREATE INDEX binder_repositories_by_owner ON binder_repositories (owner, id)",
            """
            CREATE TABLE binder_refs (
                repository text NOT NULL REFERENCES binder_repositories (id) ON DELETE CASCADE,
                name text NOT NULL,
                target text NOT NULL,
                PRIMARY KEY (repository, name))
            """,
            """
            CREATE TABLE binder_packs (
                repository text NOT NULL REFERENCES binder_repositories (id) ON DELETE CASCADE,
                checksum text NOT NULL,
                objects integer NOT NULL CHECK (objects >= 0),
                pack_bytes bigint NOT NULL CHECK (pack_bytes >= 0),
                pack_index bytea NOT NULL,
                received_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (repository, checksum))
            """,
            """
            CREATE TABLE binder_pack_chunks (
                repository text NOT NULL,
                checksum text NOT NULL,
                seq integer NOT NULL CHECK (seq >= 0),
                data bytea NOT NULL CHECK (length(data) <= 1048576),
                PRIMARY KEY (repository, checksum, seq),
                FOREIGN KEY (repository, checksum) REFERENCES binder_packs (repository, checksum) ON DELETE CASCADE)
            """,
            """
            CREATE TABLE binder_challenges (
                challenge text PRIMARY KEY,
                address text NOT NULL,
                expires_at bigint NOT NULL)
            """,
            "CREATE INDEX binder_challenges_by_address ON binder_challenges (address, expires_at)",
            "CREATE INDEX binder_challenges_by_expiry ON binder_challenges (expires_at)",
            """
            CREATE TABLE binder_scan_sessions (
                token_digest text PRIMARY KEY,
                repository text NOT NULL,
                owner text NOT NULL,
                expires_at bigint NOT NULL)
            """,
            "CREATE INDEX binder_scan_sessions_by_repository ON binder_scan_sessions (repository)",
            "CREATE INDEX binder_scan_sessions_by_expiry ON binder_scan_sessions (expires_at)",
            """
            CREATE TABLE binder_rate_counters (
                counter text NOT NULL,
                address text NOT NULL,
                window_start bigint NOT NULL,
                taken integer NOT NULL,
                PRIMARY KEY (counter, address))
            """,
            """
            CREATE TABLE binder_sweeps (
                name text PRIMARY KEY,
                last_run double precision NOT NULL)
            """,
        ]),
        // Repositories their owners deleted: the id answers 410 to its owner and is never
        // created again (`RepositoryStorage.delete`); only the owner's key and the time.
        Migration(version: 2, statements: [
            """
            CREATE TABLE binder_tombstones (
                id text PRIMARY KEY,
                owner text NOT NULL,
                deleted_at bigint NOT NULL)
            """,
        ]),
    ]

    /// The advisory lock key that serialises migrations among replicas (any fixed bigint;
    /// "binder" in ASCII).
    static let migrationLock: Int64 = 0x62_69_6e_64_65_72

    /// Applies the migrations this database lacks, in one transaction under a transaction-level
    /// advisory lock: a second replica starting at the same moment waits for the first, then
    /// finds everything applied. Returns the versions this call applied.
    static func migrate(_ client: PostgresClient, logger: Logger) async throws -> [Int] {
        try await client.withTransaction(logger: logger) { connection in
            try await connection.exec("SELECT pg_advisory_xact_lock(\(migrationLock))", logger: logger)
            try await connection.exec("""
                CREATE TABLE IF NOT EXISTS binder_schema_migrations (
                    version integer PRIMARY KEY,
                    applied_at timestamptz NOT NULL DEFAULT now())
                """, logger: logger)
            var applied = Set<Int>()
            for try await version in try await connection.query("SELECT version FROM binder_schema_migrations",
                                                                 logger: logger).decode(Int.self) {
                applied.insert(version)
            }
            guard applied.allSatisfy({ version in migrations.contains { $0.version == version } }) else {
                throw PostgresStorageError.schemaTooNew(applied.max() ?? 0)
            }
            var done: [Int] = []
            for migration in migrations where !applied.contains(migration.version) {
                for statement in migration.statements {
                    try await connection.exec(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.exec("INSERT INTO binder_schema_migrations (version) VALUES (\(migration.version))",
                                           logger: logger)
                done.append(migration.version)
            }
            return done
        }
    }

    /// True when every migration this code knows is applied (a replica's readiness).
    static func isCurrent(_ client: PostgresClient, logger: Logger) async throws -> Bool {
        let rows = try await client.query("SELECT count(*) FROM binder_schema_migrations WHERE version <= \(migrations.count)",
                                          logger: logger)
        for try await count in rows.decode(Int.self) { return count == migrations.count }
        return false
    }
}
