import Foundation
import Synchronization

/// A private PostgreSQL cluster for this test process: `initdb` in a temporary folder (as the
/// `postgres` user when we are root, since initdb refuses root), started with `pg_ctl` on a
/// free loopback port, stopped and deleted at exit. Logins over TCP need the password
/// (scram-sha-256), so the tests go through the same authentication as a deployment; the
/// socket folder trusts local users, for `createdb`. Each test takes a database of its own
/// (`database()`), so tests run in parallel without seeing each other's rows.
///
/// Needs Debian's `postgresql` (scripts/setup installs it); without it the tests that ask
/// for a cluster fail with the reason. A target of its own so that the server's tests and the
/// command line's (replicas spawned as processes) share one cluster's code.
public final class PostgresCluster: Sendable {
    public let folder: String
    public let port: Int
    public let password: String
    public let user = "binder_test"
    private let binaries: String
    private let asPostgres: Bool
    private let databases = Mutex(0)

    /// The process's cluster, started at first use.
    public static func shared() throws -> PostgresCluster { try started.get() }

    private static let started: Result<PostgresCluster, any Error> = Result { try own() }

    /// A cluster of the caller's own (stopped at exit too), for a test that restarts it: the
    /// shared one serves tests running in parallel.
    public static func own() throws -> PostgresCluster {
        let cluster = try PostgresCluster()
        stopAtExit.withLock { clusters in
            if clusters.isEmpty { atexit { PostgresCluster.stopAtExit.withLock { $0.forEach { $0.stop() } } } }
            clusters.append(cluster)
        }
        return cluster
    }
    private static let stopAtExit = Mutex<[PostgresCluster]>([])

    public enum Failure: Error, CustomStringConvertible {
        case noPostgres
        case command([String], Int32, String)
        public var description: String {
            switch self {
            case .noPostgres: return "no initdb in /usr/lib/postgresql/*/bin: install Debian's postgresql (scripts/setup --deps-only)"
            case .command(let arguments, let status, let output): return "\(arguments.joined(separator: " ")) exited \(status): \(output)"
            }
        }
    }

    private init() throws {
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        guard let bin = versions.sorted().reversed().map({ "/usr/lib/postgresql/\($0)/bin" })
            .first(where: { FileManager.default.isExecutableFile(atPath: $0 + "/initdb") }) else { throw Failure.noPostgres }
        binaries = bin
        asPostgres = getuid() == 0
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("binder-pg-\(UUID().uuidString.prefix(8))").path
        password = UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        if asPostgres { try Self.run(["/bin/chown", "postgres:postgres", folder]) }
        let passwordFile = folder + "/initial-password"
        guard FileManager.default.createFile(atPath: passwordFile, contents: Data(password.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw Failure.command(["write", passwordFile], errno, "cannot write the initial password")
        }
        if asPostgres { try Self.run(["/bin/chown", "postgres:postgres", passwordFile]) }
        try Self.run(Self.command(asPostgres, bin + "/initdb", "-D", folder + "/data", "-U", user, "--pwfile=" + passwordFile,
                                  "--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--no-sync"))
        try? FileManager.default.removeItem(atPath: passwordFile)
        var lastError: (any Error)?
        for _ in 0..<3 {
            let candidate = try Self.freePort()
            do {
                try Self.run(Self.startCommand(asPostgres, binaries: bin, folder: folder, port: candidate))
                port = candidate
                return
            } catch { lastError = error }
        }
        throw lastError ?? Failure.noPostgres
    }

    private static func startCommand(_ asPostgres: Bool, binaries: String, folder: String, port: Int) -> [String] {
        command(asPostgres, binaries + "/pg_ctl", "start", "-w", "-t", "60", "-D", folder + "/data", "-l", folder + "/server.log",
                "-o", "-c listen_addresses=127.0.0.1 -p \(port) -k \(folder) -c fsync=off -c max_connections=300")
    }

    /// Stops the server at once (as a crash or a failover would: connections cut, no checkpoint),
    /// so that clients meet the outage; `start()` brings it back on the same port.
    public func stopImmediately() throws {
        try Self.run(Self.command(asPostgres, binaries + "/pg_ctl", "stop", "-w", "-m", "immediate", "-D", folder + "/data"))
    }

    public func start() throws {
        try Self.run(Self.startCommand(asPostgres, binaries: binaries, folder: folder, port: port))
    }

    /// A new, empty database: its URL with the password (tests only; binder never takes one in argv).
    public func database() throws -> (name: String, url: String) {
        let name = "test_\(getpid())_" + String(databases.withLock { $0 += 1; return $0 })
        try Self.run(Self.command(asPostgres, binaries + "/createdb", "-h", folder, "-p", "\(port)", "-U", user, name))
        return (name, "postgres://\(user):\(password)@127.0.0.1:\(port)/\(name)?sslmode=disable")
    }

    /// The rows `sql` gives in `database`, one line each, fields split by `|` (psql -At over
    /// the socket folder, which trusts local users: no password in argv): a test reads what a
    /// replica stored.
    public func query(_ database: String, _ sql: String) throws -> String {
        try Self.run(Self.command(asPostgres, binaries + "/psql", "-h", folder, "-p", "\(port)", "-U", user, "-d", database,
                                  "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql))
    }

    public func stop() {
        _ = try? Self.run(Self.command(asPostgres, binaries + "/pg_ctl", "stop", "-m", "immediate", "-D", folder + "/data"))
        try? FileManager.default.removeItem(atPath: folder)
    }

    private static func command(_ asPostgres: Bool, _ arguments: String...) -> [String] {
        asPostgres ? ["/usr/sbin/runuser", "-u", "postgres", "--"] + arguments : arguments
    }

    /// Runs `arguments` to its end (posix_spawn and waitpid). Not Foundation's `Process`: it
    /// learns of the exit through a descriptor the child inherits, and the server `pg_ctl start`
    /// leaves running inherits it too, so the wait would never end.
    @discardableResult
    private static func run(_ arguments: [String]) throws -> String {
        let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent("binder-pg-output-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        let pid = try spawn(arguments, output: outputPath)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let text = String(decoding: FileManager.default.contents(atPath: outputPath) ?? Data(), as: UTF8.self)
        guard status == 0 else { throw Failure.command(arguments, status, text) }
        return text
    }

    /// Starts `arguments` (stdin /dev/null, stdout and stderr into `output`); the caller waits for it.
    public static func spawn(_ arguments: [String], output: String) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, arguments[0], &actions, nil, argv, environ)
        guard spawned == 0 else { throw Failure.command(arguments, spawned, "cannot start") }
        return pid
    }

    /// The port a `binder serve` spawned with `output` as its log says it listens on, once it
    /// does (at most a minute: a first start migrates the schema); nil if it never says.
    public static func servingPort(log output: String) async throws -> Int? {
        for _ in 0..<600 {
            let text = String(decoding: FileManager.default.contents(atPath: output) ?? Data(), as: UTF8.self)
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("Serving ") }), let colon = line.lastIndex(of: ":"),
               let port = Int(line[line.index(after: colon)...]) {
                return port
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        return nil
    }

    /// A port nothing listens on now (bound to 0, read, closed).
    private static func freePort() throws -> Int {
        let socketFD = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socketFD) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socketFD, $0, length) == 0 && getsockname(socketFD, $0, &length) == 0 }
        }
        guard bound else { throw Failure.command(["bind"], errno, "cannot find a free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// A new empty folder under the temporary directory, for one test (the caller removes it).
public func makeTemporaryFolder(_ prefix: String) throws -> String {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    return folder
}
