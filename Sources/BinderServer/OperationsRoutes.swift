import Foundation
import Hummingbird
import Logging

/// The operator's endpoints: `/healthz` (the process answers), `/readyz` (the storage is
/// reachable: the repositories' folder writable, and with `--database-url-file`, the database
/// answering with every migration applied) and `/metrics` (Prometheus' text), the last only
/// with the bearer token of `--metrics-token-file` (404 without the option): behind a proxy
/// that forwards every path, a scrape endpoint open to the proxy's peer would be open to all.
struct OperationsRoutes: Sendable {
    let readiness: Readiness
    let metrics: ServeMetrics
    /// The scrape token; nil: `/metrics` is not served.
    let metricsToken: SecureToken?
    let logger: Logger
    /// The database store, whose pool's use a scrape reports; nil for the folder store alone.
    let database: PostgresStorage?

    static let paths: Set<String> = ["/healthz", "/readyz", "/metrics"]

    func register(on router: Router<ServeContext>) {
        router.get("/healthz") { _, _ in Self.plain(200, "ok\n") }
        router.get("/readyz") { _, _ in
            // The reason goes to the log only: the probe may be reachable from anywhere.
            if let problem = await readiness.problem() {
                logger.warning("not ready: \(problem)")
                return Self.plain(503, "not ready\n")
            }
            return Self.plain(200, "ready\n")
        }
        router.get("/metrics") { request, _ in
            guard let metricsToken else { throw ServeFailure(404, "not found") }
            let header = request.headers[.authorization] ?? ""
            guard header.lowercased().hasPrefix("bearer "), metricsToken.matches(String(header.dropFirst(7))) else {
                throw ServeFailure(401, "missing or wrong metrics token")
            }
            if let database {
                metrics.observeDatabase(operationsInFlight: database.operationsInFlight.load(ordering: .relaxed),
                                        maximumConnections: database.maximumConnections)
            }
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: metrics.exposition())))
        }
    }

    static func plain(_ code: Int, _ text: String) -> Response {
        var response = Response(status: .init(code: code), headers: [.contentType: "text/plain; charset=utf-8"],
                                body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
        if code == 503 { response.headers[.retryAfter] = "5" }
        return response
    }
}

/// A secret compared in constant time (the metrics token; read from a file, never argv).
public struct SecureToken: Sendable {
    private let bytes: [UInt8]

    /// The file's first line, trimmed; at least 16 characters.
    public init(file: String) throws(ServeSetupError) {
        guard let data = FileManager.default.contents(atPath: file) else { throw .unreadable(file: file, errno: errno) }
        let text = String(decoding: data, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? ""
        let token = text.trimmingCharacters(in: .whitespaces)
        guard token.utf8.count >= 16 else { throw .tooShort(file: file) }
        bytes = Array(token.utf8)
    }

    func matches(_ given: String) -> Bool {
        let given = Array(given.trimmingCharacters(in: .whitespaces).utf8)
        guard given.count == bytes.count else { return false }
        return zip(given, bytes).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}

/// A setup file the server could not use.
public enum ServeSetupError: Error, CustomStringConvertible {
    case unreadable(file: String, errno: Int32)
    case tooShort(file: String)
    /// `--tls-cert`/`--tls-key` could not be used.
    case tls(file: String, detail: String)

    public var description: String {
        switch self {
        case .tls(let file, let detail): return "\(file): cannot serve TLS with it: \(detail)"
        case .unreadable(let file, let errno): return "\(file): cannot read it: \(String(cString: strerror(errno)))"
        case .tooShort(let file): return "\(file): the token must be at least 16 characters (e.g. openssl rand -hex 32)"
        }
    }
}

/// Whether this replica can serve: each check answers nil when fine, else what is wrong
/// (for the operator: no secret, no id). Each check is bounded in time.
struct Readiness: Sendable {
    let checks: [@Sendable () async -> String?]

    func problem() async -> String? {
        for check in checks {
            if let problem = await Self.bounded(.seconds(3), check) { return problem }
        }
        return nil
    }

    private static func bounded(_ limit: Duration, _ check: @escaping @Sendable () async -> String?) async -> String? {
        await withTaskGroup(of: String?.self) { group in
            group.addTask { await check() }
            group.addTask {
                try? await Task.sleep(for: limit)
                return "no answer within \(limit)"
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    /// The repositories' folder takes a new file (made and removed in its `.binder-serve`).
    static func folderWritable(_ folder: String) -> @Sendable () async -> String? {
        {
            let probe = folder + "/.binder-serve/ready-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
            try? FileManager.default.createDirectory(atPath: folder + "/.binder-serve", withIntermediateDirectories: true)
            let fd = open(probe, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
            guard fd >= 0 else { return "the repositories' folder is not writable (errno \(errno))" }
            close(fd)
            unlink(probe)
            return nil
        }
    }

    /// The database answers and has every migration this binder knows applied.
    static func database(_ storage: PostgresStorage) -> @Sendable () async -> String? {
        {
            do {
                return try await PostgresSchema.isCurrent(storage.client, logger: storage.logger) ? nil
                    : "the database's schema is not at this binder's version"
            } catch {
                return "the database does not answer: \(PostgresStorage.detail(of: error))"
            }
        }
    }
}
