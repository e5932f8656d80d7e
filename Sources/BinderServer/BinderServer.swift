import BinderCrypto
import Dispatch
import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

/// `binder serve`: the mgit-api protocol over HTTP/1.1 on Hummingbird. Routing, request
/// decoding and middleware are Hummingbird's; the connection guard (per-address cap, header
/// and body timeouts), body limits counted after decompression, login rate limits and the git
/// Smart HTTP exchange are ours.
public final class BinderServer: Sendable {
    public struct Options: Sendable {
        public var repositories: String
        public var host: String
        public var port: Int
        public var tokenLifetime: Int64
        public var rotateSecret: Bool
        /// The operator's token-signing secret (`--token-secret-file`), shared by every
        /// replica; nil: `<repos>/.binder-serve/jwt-secret`, made at first start.
        public var tokenSecretFile: String?
        /// The database (issue 42): when set, everything is kept there (repositories, refs and
        /// git objects, login challenges, scan sessions, the login rate counters), shared by
        /// every replica; `tokenSecretFile` is then required and `repositories` is not read.
        public var database: PostgresLocation?
        /// With `database`: this replica's cache of the packs (it may be lost; replicas on one
        /// machine may share it); nil: `<repositories>/.binder-serve/cache`.
        public var cache: String?
        /// The URL clients reach the server at: put in QR payloads, and the server every login
        /// event must name (NIP-42's `relay` tag). Required unless `host` is a loopback address.
        public var publicURL: String?
        public var faultRate: Double
        public var limits: ServeLimits
        public var connections: ConnectionLimits
        /// Connections open at once in all; past it the server stops accepting until one closes.
        public var maxConnections: Int
        /// `/metrics` answers only with this bearer token (`--metrics-token-file`); nil: not served.
        public var metricsToken: SecureToken?
        /// After SIGTERM or SIGINT: how long requests in progress may take to finish (no new
        /// connection is accepted meanwhile); past it they are cut and the process exits.
        public var shutdownGrace: Duration
        /// Native TLS (`--tls-cert`, `--tls-key`), reloaded on SIGHUP; nil: plain HTTP.
        public var tls: TLSCertificates?
        /// git Smart HTTP answered by binder's own engine rather than git processes
        /// (`--git-engine binder`, hidden while issue 42 is under way).
        public var servesGitItself = false

        public init(repositories: String, host: String = "127.0.0.1", port: Int = 8417, tokenLifetime: Int64 = 86_400,
                    rotateSecret: Bool = false, publicURL: String? = nil, faultRate: Double = 0,
                    limits: ServeLimits = ServeLimits(), connections: ConnectionLimits = ConnectionLimits(),
                    maxConnections: Int = 4096, tokenSecretFile: String? = nil, database: PostgresLocation? = nil,
                    metricsToken: SecureToken? = nil, shutdownGrace: Duration = .seconds(30), tls: TLSCertificates? = nil) {
            self.repositories = repositories
            self.host = host
            self.port = port
            self.tokenLifetime = tokenLifetime
            self.rotateSecret = rotateSecret
            self.tokenSecretFile = tokenSecretFile
            self.database = database
            self.publicURL = publicURL
            self.faultRate = faultRate
            self.limits = limits
            self.connections = connections
            self.maxConnections = maxConnections
            self.metricsToken = metricsToken
            self.shutdownGrace = shutdownGrace
            self.tls = tls
        }
    }

    private let options: Options
    let routes: Routes
    private let logger: Logger
    let metrics = ServeMetrics()
    private let readiness: Readiness
    /// The database store when `Options.database` is set (its pool's use goes to /metrics).
    private let database: PostgresStorage?

    public init(options: Options, logger: Logger) throws {
        self.options = options
        self.logger = logger
        // Reachable from elsewhere, the server must know its own URL to refuse a login signed
        // for another server; the request's Host cannot say (a relaying server writes it).
        guard options.publicURL != nil || Self.isLoopback(options.host) else {
            throw ServerError.publicURLRequired(host: options.host)
        }
        // A replica must not make a secret of its own: tokens it signed would fail at the others.
        guard options.database == nil || options.tokenSecretFile != nil else { throw ServerError.databaseNeedsSecretFile }
        let secret = try Self.tokenSecret(options)
        let storage: ServerStorage
        let checks: [@Sendable () async -> String?]
        var opened: PostgresStorage?
        if let location = options.database {
            let database = try Self.openDatabase(location, logger: logger)
            opened = database
            let cache = options.cache ?? RepositoryStore(root: options.repositories).serverFolder + "/cache"
            storage = try ServerStorage.database(database, cacheFolder: cache, limits: options.limits)
            checks = [Readiness.folderWritable(cache), Readiness.database(database)]
        } else {
            storage = try ServerStorage.folder(root: options.repositories, limits: options.limits,
                                               servesGitItself: options.servesGitItself)
            checks = [Readiness.folderWritable(options.repositories)]
        }
        routes = Routes(environment: ServeEnvironment(storage: storage, tokens: TokenAuthority(secret: secret, lifetime: options.tokenLifetime),
                                                      limits: options.limits, logger: logger, publicURL: options.publicURL),
                        faultRate: options.faultRate)
        readiness = Readiness(checks: checks)
        database = opened
    }

    /// The token-signing secret: the operator's file, else the one kept in the repositories' folder.
    private static func tokenSecret(_ options: Options) throws -> SecureBytes {
        guard let file = options.tokenSecretFile else {
            return try TokenAuthority.loadSecret(at: RepositoryStore(root: options.repositories).serverFolder + "/jwt-secret",
                                                 rotate: options.rotateSecret)
        }
        guard !options.rotateSecret else { throw ServerError.rotateWithSecretFile }
        do { return try TokenAuthority.readSecret(fromFile: file) } catch { throw ServerError.setup(error.description) }
    }

    /// The database store, opened and migrated before the server listens (init is synchronous).
    private static func openDatabase(_ location: PostgresLocation, logger: Logger) throws -> PostgresStorage {
        let opened = Mutex<Result<PostgresStorage, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            do {
                let storage = try await PostgresStorage.start(location, logger: logger)
                opened.withLock { $0 = .success(storage) }
            } catch { opened.withLock { $0 = .failure(error) } }
            done.signal()
        }
        done.wait()
        do { return try (opened.withLock { $0 } ?? .failure(PostgresStorageError.unavailable(detail: "no answer"))).get() } catch {
            throw ServerError.setup("\(location): \(error)")
        }
    }

    /// Binds and serves until `SIGINT`/`SIGTERM`; `ready` is told the bound port first. On
    /// either signal it stops accepting, lets the requests in progress finish within
    /// `shutdownGrace` (then cancels them) and returns.
    public func run(ready: @escaping @Sendable (Int) -> Void) throws {
        Self.raiseDescriptorLimit()
        let bound = Mutex<Int?>(nil)
        let app = application { port in
            bound.withLock { $0 = port }
            ready(port)
        }
        let notice = ShutdownNotice(logger: logger, grace: options.shutdownGrace)
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: app), .init(service: notice, successTerminationBehavior: .ignore)]
        if let tls = options.tls {
            services.append(.init(service: TLSReloadOnHangup(certificates: tls, logger: logger), successTerminationBehavior: .ignore))
        }
        var configuration = ServiceGroupConfiguration(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        configuration.maximumGracefulShutdownDuration = options.shutdownGrace
        let group = ServiceGroup(configuration: configuration)
        let finished = DispatchSemaphore(value: 0)
        let failure = Mutex<(any Error)?>(nil)
        Task {
            do { try await group.run() } catch { failure.withLock { $0 = error } }
            finished.signal()
        }
        finished.wait()
        if let error = failure.withLock({ $0 }) {
            throw ServerError.setup(bound.withLock { $0 } == nil
                                    ? "cannot listen on \(options.host):\(options.port): \(error)" : "\(error)")
        }
    }

    /// The server as a Hummingbird application (the request log, the routes, the connection
    /// guard); `listening` is told the bound port. `run` serves it; tests drive it in-process.
    func application(listening: @escaping @Sendable (Int) -> Void) -> some ApplicationProtocol {
        let router = Router(context: ServeContext.self)
        router.add(middleware: ClientAddressMiddleware(rule: options.connections.clientAddress))
        router.add(middleware: MetricsRecorder(metrics: metrics))
        router.add(middleware: RequestLog(logger: logger))
        OperationsRoutes(readiness: readiness, metrics: metrics, metricsToken: options.metricsToken, logger: logger,
                         database: database)
            .register(on: router)
        routes.register(on: router)
        let ledger = AddressLedger(), connections = options.connections, metrics = metrics
        let http1 = HTTP1Channel.Configuration(
            additionalChannelHandlers: [ConnectionGuard(limits: connections, ledger: ledger, metrics: metrics)],
            idleTimeout: nil,
            httpDecoderConfiguration: .init(maxHeaderFieldSize: 16 << 10, maxHeaderListSize: 32 << 10, maxHeaderFieldCount: 100))
        let server: HTTPServerBuilder
        if let tls = options.tls {
            server = HTTPServerBuilder { responder in
                ReloadableTLSChannel(base: HTTP1Channel(responder: responder, configuration: http1), certificates: tls)
            }
        } else {
            server = .http1(configuration: http1)
        }
        return Application(
            router: router, server: server,
            configuration: .init(address: .hostname(options.host, port: options.port), serverName: nil, backlog: 1024,
                                 availableConnectionsDelegate: MaximumAvailableConnections(options.maxConnections, logger: logger)),
            onServerRunning: { [routes, host = options.host, scheme = options.tls == nil ? "http" : "https"] channel in
                let port = channel.localAddress?.port ?? 0
                routes.listening(at: scheme + "://" + (host.contains(":") ? "[\(host)]" : host) + ":\(port)")
                listening(port)
            },
            logger: logger)
    }

    /// True for `localhost` and the loopback addresses (127.0.0.0/8, ::1, IPv4-mapped 127/8).
    static func isLoopback(_ host: String) -> Bool {
        if host.lowercased() == "localhost" { return true }
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 { return UInt32(bigEndian: v4.s_addr) >> 24 == 127 }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, host, &v6) == 1 else { return false }
        let bytes = withUnsafeBytes(of: &v6) { Array($0) }
        if bytes[0..<15].allSatisfy({ $0 == 0 }) && bytes[15] == 1 { return true }   // ::1
        return bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff && bytes[12] == 127
    }

    /// 1,000 idle connections need 1,000 descriptors: use the hard limit, not the soft one.
    private static func raiseDescriptorLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
}

/// Tells the log when a shutdown begins and how long requests in progress have.
struct ShutdownNotice: Service {
    let logger: Logger
    let grace: Duration

    func run() async throws {
        do { try await gracefulShutdown() } catch { return }   // cancelled: the server ended otherwise
        logger.info("shutting down: no new connections; requests in progress have \(grace.components.seconds) s to finish")
    }
}

/// Logs each request: method, path (never the query string or headers: a token could be in
/// them), status and time. Errors other than `ServeFailure` become a plain 500.
struct RequestLog: RouterMiddleware {
    typealias Context = ServeContext
    let logger: Logger

    func handle(_ request: Request, context: ServeContext, next: (Request, ServeContext) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        func log(_ status: Int) {
            // Probes come every few seconds: their answers are what they say.
            guard !OperationsRoutes.paths.contains(request.uri.path) || status >= 500 else { return }
            let elapsed = started.duration(to: .now)
            let ms = elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000
            logger.info("\(request.method) \(request.uri.path) \(status)", metadata: ["ms": "\(ms)", "from": "\(context.remoteAddress)"])
        }
        do {
            let response = try await next(request, context)
            log(response.status.code)
            return response
        } catch let failure as ServeFailure {
            log(failure.code)
            throw failure
        } catch let error as StorageError {
            if case .backend = error { logger.error("storage failed", metadata: ["path": "\(request.uri.path)", "error": "\(error)"]) }
            if case .unavailable = error { logger.warning("storage unavailable", metadata: ["path": "\(request.uri.path)", "error": "\(error)"]) }
            let failure = error.failure
            log(failure.code)
            throw failure
        } catch let error as HTTPError {
            // Hummingbird's own refusals (no such endpoint, say), answered like ours.
            log(error.status.code)
            throw ServeFailure(error.status.code, error.status.reasonPhrase.lowercased())
        } catch {
            logger.error("request failed: \(error)")
            log(500)
            throw ServeFailure(500, "internal error")
        }
    }
}

enum ServerError: Error, CustomStringConvertible {
    case setup(String)
    /// `database` without `tokenSecretFile`.
    case databaseNeedsSecretFile
    /// Listening beyond loopback without `Options.publicURL`.
    case publicURLRequired(host: String)
    /// `--rotate-secret` cannot rotate the operator's file.
    case rotateWithSecretFile
    var description: String {
        switch self {
        case .setup(let why): return why
        case .databaseNeedsSecretFile:
            return "with a database, give --token-secret-file (the same file on every replica): a replica must not "
                + "make a token-signing secret of its own, and the secret is never kept in the database"
        case .rotateWithSecretFile:
            return "--rotate-secret makes a new secret in the repositories' folder; with --token-secret-file, "
                + "put a new secret in that file on every replica instead"
        case .publicURLRequired(let host):
            return "--public-url is required when listening on \(host), beyond loopback: give the URL clients reach this "
                + "server at (e.g. https://binder.example.org), so that a login signed for another server is refused"
        }
    }
}
