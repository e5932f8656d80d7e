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
        connections are closed. Serve over https by putting a TLS proxy in front; clients refuse plain \
        http except on loopback. Listening beyond loopback needs --public-url: logins signed for \
        another server are refused.
        """)

    @Option(help: "The folder holding the repositories (created if missing).")
    var repos: String
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
    /// The database URL's file (issue 42; hidden until the database store serves git too). The
    /// URL never comes from argv: this file, else BINDER_DATABASE_URL; a password missing from
    /// it is read from PostgreSQL's password file (PGPASSFILE or ~/.pgpass).
    @Option(name: .customLong("database-url-file"), help: .hidden)
    var databaseURLFile: String?
    @Option(name: .customLong("max-repos-per-user"), help: "Repositories one user may own.")
    var maxReposPerUser: Int = 100
    @Option(name: .customLong("max-bytes-per-user"), help: "Bytes one user's repositories may take on disk.")
    var maxBytesPerUser: Int64 = 1 << 30
    @Option(name: .customLong("max-push-bytes"), help: "Largest push (bytes, after decompression).")
    var maxPushBytes: Int = 512 << 20
    @Option(name: .customLong("logins-per-minute"), help: "Login challenges (and verifies) per minute from one address.")
    var loginsPerMinute: Int = 30
    @Option(name: .customLong("connections-per-address"), help: "Connections one address may hold open at once.")
    var connectionsPerAddress: Int = 32
    @Option(name: .customLong("header-timeout"), help: "Seconds a connection may take to send a request's headers (or stay idle).")
    var headerTimeout: Int = 10
    @Option(name: .customLong("body-timeout"),
            help: "Seconds a request body may go without a byte arriving; past the first such span it must also average 1 KiB/s.")
    var bodyTimeout: Int = 15
    /// Testing aid: this fraction of git requests fails with 503.
    @Option(name: .customLong("fault-rate"), help: .hidden)
    var faultRate: Double = 0

    func run() throws {
        for (name, value) in [("--max-repos-per-user", Int64(maxReposPerUser)), ("--max-bytes-per-user", maxBytesPerUser),
                              ("--max-push-bytes", Int64(maxPushBytes)), ("--logins-per-minute", Int64(loginsPerMinute)),
                              ("--connections-per-address", Int64(connectionsPerAddress)), ("--header-timeout", Int64(headerTimeout)),
                              ("--body-timeout", Int64(bodyTimeout))] where value < 1 {
            throw CommandFailure("\(name) must be at least 1")
        }
        guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]),
              (0...65535).contains(port) else {
            throw CommandFailure("--listen: '\(listen)' is not HOST:PORT")
        }
        var parsedHost = String(listen[..<colon])
        if parsedHost.hasPrefix("[") && parsedHost.hasSuffix("]") { parsedHost = String(parsedHost.dropFirst().dropLast()) }
        let host = parsedHost
        let root = URL(fileURLWithPath: repos).standardizedFileURL.path
        // What the server stores (ciphertext, but also names, sizes and the owners' keys) is
        // for this account alone: everything it creates is 0700/0600, and so is the folder.
        umask(0o077)
        try? FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        if chmod(root, 0o700) != 0 && errno != ENOENT { throw CommandFailure("--repos \(root): cannot make it private: \(String(cString: strerror(errno)))") }
        let database: PostgresLocation?
        do { database = try PostgresLocation.configured(urlFile: databaseURLFile, environment: ProcessInfo.processInfo.environment) } catch {
            throw CommandFailure("\(error)")
        }
        // Read once: the git processes the server spawns get a copy of the environment.
        unsetenv("BINDER_DATABASE_URL")
        var logger = Logger(label: "binder.serve") { label in StreamLogHandler.standardError(label: label) }
        logger.logLevel = .info
        let server: BinderServer
        do {
            let limits = ServeLimits(repositoriesPerUser: maxReposPerUser, bytesPerUser: maxBytesPerUser, pushBytes: maxPushBytes,
                                     loginsPerMinute: loginsPerMinute)
            let connections = ConnectionLimits(perAddress: connectionsPerAddress, headerTimeout: .seconds(headerTimeout),
                                               bodyWindow: .seconds(bodyTimeout))
            server = try BinderServer(options: .init(repositories: root, host: host, port: port, tokenLifetime: tokenLifetime,
                                                     rotateSecret: rotateSecret, publicURL: publicURL, faultRate: faultRate,
                                                     limits: limits, connections: connections, tokenSecretFile: tokenSecretFile,
                                                     database: database),
                                      logger: logger)
        } catch { throw CommandFailure("\(error)") }
        do {
            try server.run { bound in
                printOut("Serving \(root) on http://\(host.contains(":") ? "[\(host)]" : host):\(bound)")
            }
        } catch { throw CommandFailure("\(error)") }
    }
}
