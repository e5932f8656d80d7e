import ArgumentParser
import BinderServer
import Foundation
import Logging

struct ServeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run a binder server (the Limbo Health protocol: Nostr login, listing, git Smart HTTP) on your own machine.",
        discussion: """
        Repositories are kept as DIR/<repoId>.git, created by their owner's first push (a push that \
        brings a branch; ids are lowercase letters, digits, '-', '_' and '.'). Tokens are HS256 JWTs \
        signed with a secret kept in DIR/.binder-serve (--rotate-secret revokes them all) or read from \
        --token-secret-file. Bodies are \
        read only after the token is checked, within limits counted after decompression; each user \
        has a quota of repositories and bytes; logins are rate-limited per address; slow or idle \
        connections are closed. Past --connections-per-address, a request waits up to --queue-wait \
        seconds, then is answered 503 with Retry-After. Serve over https with --tls-cert and \
        --tls-key (SIGHUP reloads them), or by putting a TLS proxy in front (give it with \
        --trusted-proxy, so that limits count each client, not the proxy); \
        clients refuse plain http except on loopback. Listening beyond loopback needs --public-url: \
        logins signed for another server are refused. GET /healthz answers while the process runs, \
        /readyz while its storage is usable, /metrics (Prometheus) with --metrics-token-file's token. \
        SIGTERM stops accepting and lets requests in progress finish (--shutdown-grace). \
        A repository's owner deletes it with DELETE /api/mgit/repos/<repoId>; its id then answers \
        410 (deleted by its owner) and is never created again; DIR/.binder-serve/deleted keeps \
        only the owner's public key and the time. \
        With --database-url-file (and the same --token-secret-file for each), every replica keeps \
        everything in one PostgreSQL database instead (repositories and their git objects, \
        logins, sessions, rate counters) and serves git itself, with no git process: run as \
        many as you like behind a proxy (docs/DEPLOY.md). --migrate-from and --migrate-to copy \
        a folder server into the database and back.
        """)

    @Option(help: "The folder holding the repositories (created if missing). With a database, only this replica's pack cache is kept there (DIR/.binder-serve/cache) unless --cache says.")
    var repos: String?
    @Option(help: ArgumentHelp("With a database: where this replica caches the packs it serves (it may be lost; replicas on one machine may share it). Default: DIR/.binder-serve/cache with --repos, else binder-serve-cache in the temporary folder.",
                               valueName: "DIR"))
    var cache: String?
    @Option(help: "Address and port to listen on.")
    var listen: String = "127.0.0.1:8417"
    @Option(name: .customLong("public-url"),
            help: "The URL clients reach this server at: logins must be signed for it, QR payloads name it. Required unless --listen is loopback.")
    var publicURL: String?
    @Option(name: .customLong("token-lifetime"), help: "Seconds a login token stays valid.")
    var tokenLifetime: Int64 = 86_400
    @Flag(name: .customLong("rotate-secret"), help: "Make a new token-signing secret, revoking every token issued so far.")
    var rotateSecret = false
    @Option(name: .customLong("token-secret-file"),
            help: ArgumentHelp("Sign tokens with the secret in FILE (at least 32 bytes, private to its owner; e.g. openssl rand -hex 32), not DIR/.binder-serve's: give every replica the same file.",
                               valueName: "FILE"))
    var tokenSecretFile: String?
    /// The database URL's file (issue 42). The URL never comes from argv: this file, else
    /// BINDER_DATABASE_URL; a password missing from it is read from PostgreSQL's password file
    /// (PGPASSFILE or ~/.pgpass).
    @Option(name: .customLong("database-url-file"),
            help: ArgumentHelp("Keep everything in PostgreSQL (repositories, git objects, logins, sessions, rate counters), so that replicas share it: the postgres://USER@HOST/DB URL is read from FILE (else from BINDER_DATABASE_URL; the password from the URL, PGPASSFILE or ~/.pgpass). Needs --token-secret-file.",
                               valueName: "FILE"))
    var databaseURLFile: String?
    @Option(name: .customLong("migrate-from"),
            help: ArgumentHelp("Copy the folder server DIR (stopped) into the database, check every copy (objects counted, git fsck), then exit. Run again after a cut: what is there already is left.",
                               valueName: "DIR"))
    var migrateFrom: String?
    @Option(name: .customLong("migrate-to"),
            help: ArgumentHelp("The way back: copy the database's repositories into a folder server DIR, checked the same way, then exit.",
                               valueName: "DIR"))
    var migrateTo: String?
    @Option(name: .customLong("max-repos-per-user"), help: "Repositories one user may own.")
    var maxReposPerUser: Int = 100
    @Option(name: .customLong("max-bytes-per-user"), help: "Bytes one user's repositories may take on disk.")
    var maxBytesPerUser: Int64 = 1 << 30
    @Option(name: .customLong("max-push-bytes"), help: "Largest push (bytes, after decompression).")
    var maxPushBytes: Int = 512 << 20
    @Option(name: .customLong("logins-per-minute"), help: "Login challenges (and verifies) per minute from one address.")
    var loginsPerMinute: Int = 30
    @Option(name: .customLong("connections-per-address"), help: "Connections one address may hold open at once (behind a --trusted-proxy: requests in progress per client).")
    var connectionsPerAddress: Int = 32
    @Option(name: .customLong("header-timeout"), help: "Seconds a connection may take to send a request's headers (or stay idle).")
    var headerTimeout: Int = 10
    @Option(name: .customLong("body-timeout"),
            help: "Seconds a request body may go without a byte arriving; past the first such span it must also average 1 KiB/s.")
    var bodyTimeout: Int = 15
    @Option(name: .customLong("queue-wait"),
            help: "Seconds a request past --connections-per-address may wait for its turn (as many again may wait) before a 503.")
    var queueWait: Int = 5
    @Option(name: .customLong("trusted-proxy"), parsing: .upToNextOption,
            help: ArgumentHelp("Proxies (IPv4/IPv6 addresses or networks) whose --forwarded-header names the client: the rightmost address in it that is not a trusted proxy is the one limits count. Repeatable.",
                               valueName: "CIDR"))
    var trustedProxies: [String] = []
    @Option(name: .customLong("forwarded-header"),
            help: ArgumentHelp("The header your trusted proxies write the client's address in: x-forwarded-for or forwarded (RFC 7239). The other one is ignored.",
                               valueName: "NAME"))
    var forwardedHeader: String = ForwardedHeader.xForwardedFor.rawValue
    @Option(name: .customLong("metrics-token-file"),
            help: ArgumentHelp("Serve GET /metrics (Prometheus text) to requests bearing the token in FILE (at least 16 characters); without it, /metrics is not served.",
                               valueName: "FILE"))
    var metricsTokenFile: String?
    @Option(name: .customLong("shutdown-grace"),
            help: "After SIGTERM or SIGINT: seconds requests in progress may take to finish (nothing new is accepted); then the process exits.")
    var shutdownGrace: Int = 30
    @Option(name: .customLong("tls-cert"),
            help: ArgumentHelp("Serve https with this PEM certificate chain (with --tls-key); SIGHUP reads both files again for new connections.",
                               valueName: "FILE"))
    var tlsCert: String?
    @Option(name: .customLong("tls-key"), help: ArgumentHelp("The PEM private key of --tls-cert.", valueName: "FILE"))
    var tlsKey: String?
    @Option(name: .customLong("log-format"), help: ArgumentHelp("text, or json: one JSON object per line.", valueName: "FORMAT"))
    var logFormat: String = "text"
    /// Testing aid: this fraction of git requests fails with 503.
    @Option(name: .customLong("fault-rate"), help: .hidden)
    var faultRate: Double = 0
    /// Who answers git Smart HTTP: `git` (a git process per request) or `binder` (binder's own
    /// engine, issue 42; hidden until the database store serves through it).
    @Option(name: .customLong("git-engine"), help: .hidden)
    var gitEngine: String = "git"

    func run() throws {
        for (name, value) in [("--max-repos-per-user", Int64(maxReposPerUser)), ("--max-bytes-per-user", maxBytesPerUser),
                              ("--max-push-bytes", Int64(maxPushBytes)), ("--logins-per-minute", Int64(loginsPerMinute)),
                              ("--connections-per-address", Int64(connectionsPerAddress)), ("--header-timeout", Int64(headerTimeout)),
                              ("--body-timeout", Int64(bodyTimeout))] where value < 1 {
            throw CommandFailure("\(name) must be at least 1")
        }
        for (name, value) in [("--queue-wait", queueWait), ("--shutdown-grace", shutdownGrace)] where value < 0 {
            throw CommandFailure("\(name) must not be negative")
        }
        guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]),
              (0...65535).contains(port) else {
            throw CommandFailure("--listen: '\(listen)' is not HOST:PORT")
        }
        var parsedHost = String(listen[..<colon])
        if parsedHost.hasPrefix("[") && parsedHost.hasSuffix("]") { parsedHost = String(parsedHost.dropFirst().dropLast()) }
        let host = parsedHost
        let database: PostgresLocation?
        do { database = try PostgresLocation.configured(urlFile: databaseURLFile, environment: ProcessInfo.processInfo.environment) } catch {
            throw CommandFailure("\(error)")
        }
        if migrateFrom != nil || migrateTo != nil {
            try migrate(database)
            return
        }
        guard let folder = repos ?? database.map({ _ in cache ?? FileManager.default.temporaryDirectory.path + "/binder-serve-cache" }) else {
            throw CommandFailure("give --repos DIR (or a database: --database-url-file FILE or BINDER_DATABASE_URL)")
        }
        let root = URL(fileURLWithPath: folder).standardizedFileURL.path
        let cacheFolder = database == nil ? nil : cache.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
            ?? (repos == nil ? root : root + "/.binder-serve/cache")
        // What the server stores (ciphertext, but also names, sizes and the owners' keys) is
        // for this account alone: everything it creates is 0700/0600, and so is the folder.
        umask(0o077)
        try? FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        if chmod(root, 0o700) != 0 && errno != ENOENT { throw CommandFailure("--repos \(root): cannot make it private: \(String(cString: strerror(errno)))") }
        // Read once: the git processes the server spawns get a copy of the environment.
        unsetenv("BINDER_DATABASE_URL")
        var logger: Logger
        switch logFormat {
        case "text": logger = Logger(label: "binder.serve") { label in StreamLogHandler.standardError(label: label) }
        case "json": logger = Logger(label: "binder.serve") { label in JSONLogHandler(label: label) }
        default: throw CommandFailure("--log-format: '\(logFormat)' is neither text nor json")
        }
        logger.logLevel = .info
        var networks: [IPNetwork] = []
        for text in trustedProxies {
            guard let network = IPNetwork(text) else {
                throw CommandFailure("--trusted-proxy: '\(text)' is not an IPv4 or IPv6 address or network (e.g. 10.0.0.0/8, fd00::/8)")
            }
            networks.append(network)
        }
        guard let header = ForwardedHeader(rawValue: forwardedHeader.lowercased()) else {
            throw CommandFailure("--forwarded-header: '\(forwardedHeader)' is neither x-forwarded-for nor forwarded")
        }
        guard gitEngine == "git" || gitEngine == "binder" else { throw CommandFailure("--git-engine: '\(gitEngine)' is neither git nor binder") }
        guard (tlsCert == nil) == (tlsKey == nil) else { throw CommandFailure("--tls-cert and --tls-key go together") }
        let tls: TLSCertificates?
        do {
            tls = try tlsCert.map { cert throws(ServeSetupError) in try TLSCertificates(certificateFile: cert, keyFile: tlsKey ?? "") }
        } catch { throw CommandFailure("--tls-cert/--tls-key \(error)") }
        let metricsToken: SecureToken?
        do { metricsToken = try metricsTokenFile.map { file throws(ServeSetupError) in try SecureToken(file: file) } } catch {
            throw CommandFailure("--metrics-token-file \(error)")
        }
        let server: BinderServer
        do {
            let limits = ServeLimits(repositoriesPerUser: maxReposPerUser, bytesPerUser: maxBytesPerUser, pushBytes: maxPushBytes,
                                     loginsPerMinute: loginsPerMinute)
            let connections = ConnectionLimits(perAddress: connectionsPerAddress, queueWait: .seconds(queueWait),
                                               headerTimeout: .seconds(headerTimeout), bodyWindow: .seconds(bodyTimeout),
                                               clientAddress: ClientAddressRule(trusting: networks, header: header))
            var options = BinderServer.Options(repositories: root, host: host, port: port, tokenLifetime: tokenLifetime,
                                               rotateSecret: rotateSecret, publicURL: publicURL, faultRate: faultRate,
                                               limits: limits, connections: connections, tokenSecretFile: tokenSecretFile,
                                               database: database, metricsToken: metricsToken,
                                               shutdownGrace: .seconds(shutdownGrace), tls: tls)
            options.servesGitItself = gitEngine == "binder"
            options.cache = cacheFolder
            server = try BinderServer(options: options, logger: logger)
        } catch { throw CommandFailure("\(error)") }
        do {
            try server.run { bound in
                printOut("Serving \(database.map { "\($0)" } ?? root) on \(tls == nil ? "http" : "https")://\(host.contains(":") ? "[\(host)]" : host):\(bound)")
            }
        } catch { throw CommandFailure("\(error)") }
    }

    /// `--migrate-from` / `--migrate-to`: the copy, its report, no server.
    private func migrate(_ database: PostgresLocation?) throws {
        guard let database else { throw CommandFailure("--migrate-from and --migrate-to need the database: --database-url-file FILE or BINDER_DATABASE_URL") }
        guard (migrateFrom == nil) != (migrateTo == nil) else { throw CommandFailure("give --migrate-from or --migrate-to, not both") }
        umask(0o077)
        var logger = Logger(label: "binder.serve.migrate") { label in StreamLogHandler.standardError(label: label) }
        logger.logLevel = .warning
        do {
            let report: StoreMigration.Report
            if let migrateFrom {
                report = try StoreMigration.fromFolder(URL(fileURLWithPath: migrateFrom).standardizedFileURL.path, into: database, logger: logger)
            } else {
                report = try StoreMigration.toFolder(URL(fileURLWithPath: migrateTo ?? "").standardizedFileURL.path, from: database, logger: logger)
            }
            printOut("Migrated: \(report)")
        } catch { throw CommandFailure("\(error)") }
    }
}
