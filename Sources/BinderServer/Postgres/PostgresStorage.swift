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
        /// Longest an operation waits for a connection of the pool (the database down or
        /// restarting, or every connection busy): then it fails `StorageError.unavailable`
        /// (503 with `Retry-After`). postgres-nio's pool alone keeps a request waiting while it
        /// retries to connect, 68 s measured before its circuit breaker trips.
        var acquireTimeout: Duration = .seconds(3)

        init(statementTimeout: Duration = .seconds(30), maximumConnections: Int = 16, startTimeout: Duration = .seconds(60),
             acquireTimeout: Duration = .seconds(3)) {
            self.statementTimeout = statementTimeout
            self.maximumConnections = maximumConnections
            self.startTimeout = startTimeout
            self.acquireTimeout = acquireTimeout
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
    let acquireTimeout: Duration

    private init(client: PostgresClient, pool: Task<Void, Never>, logger: Logger, appliedMigrations: [Int], maximumConnections: Int,
                 acquireTimeout: Duration) {
        self.client = client
        self.pool = pool
        self.logger = logger
        self.appliedMigrations = appliedMigrations
        self.maximumConnections = maximumConnections
        self.acquireTimeout = acquireTimeout
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
        configuration.options.connectTimeout = limits.acquireTimeout
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
                                   maximumConnections: configuration.options.maximumConnections,
                                   acquireTimeout: limits.acquireTimeout)
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

    /// Runs `body`, turning any failure into `StorageError.backend(operation:)`, or
    /// `.unavailable` when the database cannot be reached (`awaitConnection`).
    func perform<Result: Sendable>(_ operation: String,
                                   _ body: (PostgresClient) async throws -> Result) async throws(StorageError) -> Result {
        operationsInFlight.add(1, ordering: .relaxed)
        defer { operationsInFlight.subtract(1, ordering: .relaxed) }
        try await awaitConnection(operation)
        do { return try await body(client) } catch let error as StorageError { throw error } catch {
            throw Self.failure(operation, error)
        }
    }

    /// Waits at most `acquireTimeout` for a connection of the pool (one lease, no statement,
    /// handed back at once: the operation then takes the idle connection), so that a request
    /// during an outage is answered 503 in seconds instead of waiting while the pool retries.
    private func awaitConnection(_ operation: String) async throws(StorageError) {
        let client = self.client
        let timeout = acquireTimeout
        let leased: Result<Void, any Error>? = await withTaskGroup(of: Result<Void, any Error>?.self) { group in
            group.addTask {
                do { try await client.withConnection { _ in }; return .success(()) } catch { return .failure(error) }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            return await group.next() ?? nil
        }
        switch leased {
        case .success: return
        case .failure(let error):
            // The lease alone failed (the pool's circuit breaker open, the pool closed): no statement ran.
            throw .unavailable(operation: operation, detail: Self.detail(of: error))
        case nil: throw .unavailable(operation: operation, detail: "no database connection within \(timeout)")
        }
    }

    /// `.unavailable` for what says the database cannot be reached now (the connection was
    /// closed or could not be made, the server is shutting down or starting:
    /// SQLSTATE classes 08 and 57P), `.backend` for the rest. By type and code, never by message.
    static func failure(_ operation: String, _ error: any Error) -> StorageError {
        var cause = error
        if let transaction = error as? PostgresTransactionError,
           let inner = transaction.closureError ?? transaction.commitError ?? transaction.beginError {
            cause = inner
        }
        let unreachable: Bool
        if let error = cause as? PSQLError {
            let state = error.serverInfo?[.sqlState] ?? ""
            unreachable = [.connectionError, .serverClosedConnection, .clientClosedConnection, .poolClosed].contains(error.code)
                || state.hasPrefix("08") || state.hasPrefix("57P")
        } else {
            unreachable = false
        }
        return unreachable ? .unavailable(operation: operation, detail: detail(of: error))
            : .backend(operation: operation, detail: detail(of: error))
    }

    /// Runs `body` in one transaction (committed when it returns, rolled back when it throws).
    func transaction<Result: Sendable>(_ operation: String,
                                       _ body: (PostgresConnection) async throws -> Result) async throws(StorageError) -> Result {
        operationsInFlight.add(1, ordering: .relaxed)
        defer { operationsInFlight.subtract(1, ordering: .relaxed) }
        try await awaitConnection(operation)
        do {
            return try await client.withTransaction(logger: logger) { connection in try await body(connection) }
        } catch let error as PostgresTransactionError {
            if let inner = error.closureError as? StorageError { throw inner }
            throw Self.failure(operation, error)
        } catch {
            throw Self.failure(operation, error)
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
