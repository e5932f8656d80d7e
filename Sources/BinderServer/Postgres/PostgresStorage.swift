import Logging
import Synchronization
import PostgresNIO

/// Why the database store did not start.
enum PostgresStorageError: Error, CustomStringConvertible {
    /// The database holds migrations newer than this binder knows (a newer replica migrated it).
    case schemaTooNew(Int)
    /// The server could not be reached, refused us, or the migration failed: `detail` is the
    /// server's message (never a password).
    case unavailable(detail: String)

    var description: String {
        switch self {
        case .schemaTooNew(let version):
            return "the database's schema is at version \(version), newer than this binder knows "
                + "(\(PostgresSchema.migrations.count)): upgrade binder on this replica"
        case .unavailable(let detail): return "the database could not be opened: \(detail)"
        }
    }
}

/// The server's state in PostgreSQL (issue 42): a pool of connections (postgres-nio's
/// `PostgresClient`) that every replica opens to the same database. Each query is bounded:
/// the connections are opened with `statement_timeout` (and `lock_timeout`,
/// `idle_in_transaction_session_timeout`), so a stuck query or a replica that died inside a
/// transaction holds nothing for long. The schema is migrated at start (`PostgresSchema`).
///
/// The stores over it: `PostgresChallenges`, `PostgresScanSessions`, `PostgresRateCounters`,
/// `PostgresRepositoryStorage` (repositories, owners, refs: `PostgresRepositories`; git objects:
/// `PostgresObjectHome`, `PostgresPackCache`, `PostgresCompaction`).
final class PostgresStorage: Sendable {
    struct Limits: Sendable {
        /// Longest any statement may run.
        var statementTimeout: Duration = .seconds(30)
        /// Connections this replica opens at most.
        var maximumConnections: Int = 16
        /// Longest the start (first connection and migration) may take.
        var startTimeout: Duration = .seconds(60)

        init(statementTimeout: Duration = .seconds(30), maximumConnections: Int = 16, startTimeout: Duration = .seconds(60)) {
            self.statementTimeout = statementTimeout
            self.maximumConnections = maximumConnections
            self.startTimeout = startTimeout
        }
    }

    let client: PostgresClient
    let logger: Logger
    /// The pool's own task (`PostgresClient.run`), cancelled by `shutdown`.
    private let pool: Task<Void, Never>
    /// The migrations this start applied; empty when the database was already current.
    let appliedMigrations: [Int]
    /// The pool's use, for /metrics: operations (`perform`, `transaction`) running now, each
    /// holding or waiting for one of at most `maximumConnections` connections.
    let operationsInFlight = Atomic<Int>(0)
    let maximumConnections: Int

    private init(client: PostgresClient, pool: Task<Void, Never>, logger: Logger, appliedMigrations: [Int], maximumConnections: Int) {
        self.client = client
        self.pool = pool
        self.logger = logger
        self.appliedMigrations = appliedMigrations
        self.maximumConnections = maximumConnections
    }

    /// Opens the pool to `location` and migrates the schema (under an advisory lock, so
    /// replicas may start together). Throws `PostgresStorageError`.
    static func start(_ location: PostgresLocation, limits: Limits = Limits(), logger: Logger) async throws -> PostgresStorage {
        var configuration = location.clientConfiguration
        let milliseconds = limits.statementTimeout.components.seconds * 1000
            + limits.statementTimeout.components.attoseconds / 1_000_000_000_000_000
        configuration.options.additionalStartupParameters = [
            ("statement_timeout", "\(milliseconds)"),
            ("lock_timeout", "\(milliseconds)"),
            ("idle_in_transaction_session_timeout", "\(milliseconds * 2)"),
            ("application_name", "binder serve"),
        ]
        configuration.options.maximumConnections = max(2, limits.maximumConnections)
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        let pool = Task { await client.run() }
        do {
            // The pool retries a refused connection (a wrong password too) for ever: bounded here.
            let applied = try await withThrowingTaskGroup(of: [Int]?.self) { group in
                group.addTask { try await PostgresSchema.migrate(client, logger: logger) }
                group.addTask {
                    try await Task.sleep(for: limits.startTimeout)
                    return nil
                }
                defer { group.cancelAll() }
                guard let first = try await group.next(), let applied = first else {
                    throw PostgresStorageError.unavailable(detail: "no connection within \(limits.startTimeout) "
                                                           + "(is the server running, are the URL and the password right?)")
                }
                return applied
            }
            if !applied.isEmpty { logger.info("database migrated", metadata: ["versions": "\(applied)"]) }
            return PostgresStorage(client: client, pool: pool, logger: logger, appliedMigrations: applied,
                                   maximumConnections: configuration.options.maximumConnections)
        } catch {
            pool.cancel()
            await pool.value
            if let error = error as? PostgresStorageError { throw error }
            if let error = (error as? PostgresTransactionError)?.closureError as? PostgresStorageError { throw error }
            throw PostgresStorageError.unavailable(detail: Self.detail(of: error))
        }
    }

    /// Closes the pool; the queries in flight fail.
    func shutdown() async {
        pool.cancel()
        await pool.value
    }

    /// Runs `body`, turning any failure into `StorageError.backend(operation:)`.
    func perform<Result: Sendable>(_ operation: String,
                                   _ body: (PostgresClient) async throws -> Result) async throws(StorageError) -> Result {
        operationsInFlight.add(1, ordering: .relaxed)
        defer { operationsInFlight.subtract(1, ordering: .relaxed) }
        do { return try await body(client) } catch let error as StorageError { throw error } catch {
            throw .backend(operation: operation, detail: Self.detail(of: error))
        }
    }

    /// Runs `body` in one transaction (committed when it returns, rolled back when it throws).
    func transaction<Result: Sendable>(_ operation: String,
                                       _ body: (PostgresConnection) async throws -> Result) async throws(StorageError) -> Result {
        operationsInFlight.add(1, ordering: .relaxed)
        defer { operationsInFlight.subtract(1, ordering: .relaxed) }
        do {
            return try await client.withTransaction(logger: logger) { connection in try await body(connection) }
        } catch let error as PostgresTransactionError {
            if let inner = error.closureError as? StorageError { throw inner }
            throw .backend(operation: operation, detail: Self.detail(of: error))
        } catch {
            throw .backend(operation: operation, detail: Self.detail(of: error))
        }
    }

    /// What a log may say of a database error: its code and the server's message and SQLSTATE,
    /// never the query's bound values (a challenge, a digest).
    static func detail(of error: any Error) -> String {
        if let transaction = error as? PostgresTransactionError,
           let inner = transaction.closureError ?? transaction.commitError ?? transaction.beginError {
            return detail(of: inner)
        }
        if let error = error as? PostgresStorageError { return error.description }
        guard let error = error as? PSQLError else { return "\(type(of: error))" }
        var parts = ["\(error.code)"]
        if let state = error.serverInfo?[.sqlState] { parts.append("SQLSTATE \(state)") }
        if let message = error.serverInfo?[.message] { parts.append(message) }
        if let cause = error.underlying { parts.append("\(cause)") }
        return parts.joined(separator: ": ")
    }
}

extension PostgresClient {
    /// Runs `query` to its end, its rows read and dropped: an error the server sends after the
    /// first row (a statement timeout, say) is thrown here, not lost with an unread sequence.
    func exec(_ query: PostgresQuery, logger: Logger) async throws {
        for try await _ in try await self.query(query, logger: logger) {}
    }

    /// The rows of `query` decoded as `Row`, all of them (callers bound the count in SQL).
    func rows<Row: Sendable>(_ query: PostgresQuery, as type: Row.Type, logger: Logger) async throws -> [Row]
        where Row: PostgresDecodable {
        var result: [Row] = []
        for try await row in try await self.query(query, logger: logger).decode(Row.self) { result.append(row) }
        return result
    }
}

extension PostgresConnection {
    /// Runs `query` to its end, its rows read and dropped (see `PostgresClient.exec`).
    func exec(_ query: PostgresQuery, logger: Logger) async throws {
        for try await _ in try await self.query(query, logger: logger) {}
    }
}
