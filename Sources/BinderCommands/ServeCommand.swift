import ArgumentParser
import BinderServer
import Foundation
import Logging

struct ServeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run a binder server (the Limbo Health protocol: Nostr login, listing, git Smart HTTP) on your own machine.",
        discussion: """
        Repositories are kept as DIR/<repoId>.git, owned by whoever pushed first. Tokens are HS256 \
        JWTs signed with a secret kept in DIR/.binder-serve (--rotate-secret revokes them all). \
        Serve over https by putting a TLS proxy in front; clients refuse plain http except on loopback.
        """)

    @Option(help: "The folder holding the repositories (created if missing).")
    var repos: String
    @Option(help: "Address and port to listen on.")
    var listen: String = "127.0.0.1:8417"
    @Option(name: .customLong("public-url"), help: "The URL clients reach this server at (used in QR payloads).")
    var publicURL: String?
    @Option(name: .customLong("token-lifetime"), help: "Seconds a login token stays valid.")
    var tokenLifetime: Int64 = 86_400
    @Flag(name: .customLong("rotate-secret"), help: "Make a new token-signing secret, revoking every token issued so far.")
    var rotateSecret = false
    /// Testing aid: this fraction of git requests fails with 503.
    @Option(name: .customLong("fault-rate"), help: .hidden)
    var faultRate: Double = 0

    func run() throws {
        guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]),
              (0...65535).contains(port) else {
            throw CommandFailure("--listen: '\(listen)' is not HOST:PORT")
        }
        var host = String(listen[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let root = URL(fileURLWithPath: repos).standardizedFileURL.path
        var logger = Logger(label: "binder.serve") { label in StreamLogHandler.standardError(label: label) }
        logger.logLevel = .info
        let server: BinderServer
        do {
            server = try BinderServer(options: .init(repositories: root, host: host, port: port, tokenLifetime: tokenLifetime,
                                                     rotateSecret: rotateSecret, publicURL: publicURL, faultRate: faultRate),
                                      logger: logger)
        } catch { throw CommandFailure("\(error)") }
        do {
            try server.run { bound in
                printOut("Serving \(root) on http://\(host.contains(":") ? "[\(host)]" : host):\(bound)")
            }
        } catch { throw CommandFailure("\(error)") }
    }
}
