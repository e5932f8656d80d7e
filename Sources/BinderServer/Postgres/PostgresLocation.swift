import Foundation
import PostgresNIO

/// Where the database is and how to log in, from a `postgres://` URL that never comes from
/// argv (a command line is visible to every user of the machine, in `ps`): from the
/// environment (`BINDER_DATABASE_URL`), from a file (`--database-url-file`), and when the URL
/// carries no password, the password from PostgreSQL's password file (`PGPASSFILE`, else
/// `~/.pgpass`), as libpq reads it.
///
/// URL: `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require]`, or
/// `postgres://USER@/DATABASE?host=/run/postgresql` for a socket folder (libpq's form).
public struct PostgresLocation: Sendable {
    public enum TLSMode: String, Sendable {
        case disable, prefer, require
    }

    public enum Endpoint: Sendable, Equatable {
        case tcp(host: String, port: Int)
        /// A socket folder: the socket is `<folder>/.s.PGSQL.<port>`.
        case socket(folder: String, port: Int)
    }

    public let endpoint: Endpoint
    public let user: String
    public let database: String
    public let tls: TLSMode
    /// Kept out of `description` and every error.
    let password: String?

    /// Why a database URL or password file was refused; never holds a password.
    public enum Problem: Error, Equatable, CustomStringConvertible {
        case notAPostgresURL
        case missing(field: String)
        case badPort(String)
        case badSSLMode(String)
        case unreadable(path: String, errno: Int32)
        /// The password file may be read by others: libpq ignores such a file, we refuse it.
        case passwordFileNotPrivate(path: String)

        public var description: String {
            switch self {
            case .notAPostgresURL: return "the database URL must start with postgres:// or postgresql://"
            case .missing(let field): return "the database URL has no \(field)"
            case .badPort(let port): return "the database URL's port '\(port)' is not a port number"
            case .badSSLMode(let mode): return "the database URL's sslmode '\(mode)' is not disable, prefer or require"
            case .unreadable(let path, let code): return "cannot read \(path): \(String(cString: strerror(code)))"
            case .passwordFileNotPrivate(let path):
                return "\(path) may be read by group or others: make it private (chmod 600 \(path))"
            }
        }
    }

    /// Parses `url`; a password missing from it is looked up in `passwordFile` (when given).
    public init(url: String, passwordFile: String? = nil) throws(Problem) {
        guard url.hasPrefix("postgres://") || url.hasPrefix("postgresql://"), let components = URLComponents(string: url) else {
            throw .notAPostgresURL
        }
        guard let user = components.user, !user.isEmpty else { throw .missing(field: "user") }
        let database = String(components.path.drop { $0 == "/" })
        guard !database.isEmpty, !database.contains("/") else { throw .missing(field: "database") }
        let query = Dictionary(components.queryItems?.map { ($0.name, $0.value ?? "") } ?? [], uniquingKeysWith: { $1 })
        var port = 5432
        if let given = components.port {
            guard (1...65535).contains(given) else { throw .badPort("\(given)") }
            port = given
        }
        if let folder = query["host"], folder.hasPrefix("/") {
            endpoint = .socket(folder: folder, port: port)
        } else if let host = components.host, !host.isEmpty {
            endpoint = .tcp(host: host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host, port: port)
        } else {
            throw .missing(field: "host")
        }
        let mode = query["sslmode"] ?? "prefer"
        guard let tls = TLSMode(rawValue: mode) else { throw .badSSLMode(mode) }
        self.user = user
        self.database = database
        self.tls = endpoint.isSocket ? .disable : tls
        if let given = components.password {
            password = given
        } else if let passwordFile {
            password = try PostgresPasswordFile(path: passwordFile).password(for: endpoint, database: database, user: user)
        } else {
            password = nil
        }
    }

    /// The URL from `BINDER_DATABASE_URL` or, when `urlFile` is given, from that file (first
    /// line; the file wins); nil when neither is set. The password file is `PGPASSFILE`, else
    /// `~/.pgpass` when it exists.
    public static func configured(urlFile: String?, environment: [String: String]) throws(Problem) -> PostgresLocation? {
        let url: String
        if let urlFile {
            guard let data = FileManager.default.contents(atPath: urlFile) else { throw .unreadable(path: urlFile, errno: ENOENT) }
            url = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        } else if let fromEnvironment = environment["BINDER_DATABASE_URL"], !fromEnvironment.isEmpty {
            url = fromEnvironment
        } else {
            return nil
        }
        var passwordFile = environment["PGPASSFILE"]
        if passwordFile == nil, let home = environment["HOME"], FileManager.default.fileExists(atPath: home + "/.pgpass") {
            passwordFile = home + "/.pgpass"
        }
        return try PostgresLocation(url: url.trimmingCharacters(in: .whitespaces), passwordFile: passwordFile)
    }

    var clientConfiguration: PostgresClient.Configuration {
        switch endpoint {
        case .tcp(let host, let port):
            let tlsConfiguration: PostgresClient.Configuration.TLS
            switch tls {
            case .disable: tlsConfiguration = .disable
            case .prefer: tlsConfiguration = .prefer(.makeClientConfiguration())
            case .require: tlsConfiguration = .require(.makeClientConfiguration())
            }
            return .init(host: host, port: port, username: user, password: password, database: database, tls: tlsConfiguration)
        case .socket(let folder, let port):
            return .init(unixSocketPath: folder + "/.s.PGSQL.\(port)", username: user, password: password, database: database)
        }
    }
}

extension PostgresLocation.Endpoint {
    var isSocket: Bool {
        if case .socket = self { return true }
        return false
    }
}

extension PostgresLocation: CustomStringConvertible {
    /// The URL without its password.
    public var description: String {
        switch endpoint {
        case .tcp(let host, let port): return "postgres://\(user)@\(host.contains(":") ? "[\(host)]" : host):\(port)/\(database)"
        case .socket(let folder, let port): return "postgres://\(user)@:\(port)/\(database)?host=\(folder)"
        }
    }
}

/// PostgreSQL's password file (`~/.pgpass`): lines `host:port:database:user:password`, `*`
/// matching anything, `\:` and `\\` escaped, `#` comments; the first matching line wins. A
/// socket connection matches the host `localhost` (libpq's rule).
struct PostgresPasswordFile {
    let lines: [[String]]

    init(path: String) throws(PostgresLocation.Problem) {
        var status = stat()
        guard stat(path, &status) == 0 else { throw .unreadable(path: path, errno: errno) }
        guard status.st_mode & 0o077 == 0 else { throw .passwordFileNotPrivate(path: path) }
        guard let data = FileManager.default.contents(atPath: path) else { throw .unreadable(path: path, errno: EACCES) }
        lines = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).compactMap { line in
            guard !line.hasPrefix("#") else { return nil }
            let fields = Self.fields(of: line)
            return fields.count == 5 ? fields : nil
        }
    }

    /// The line's fields, split at unescaped colons, escapes removed.
    static func fields(of line: Substring) -> [String] {
        var fields: [String] = [], current = "", escaped = false
        for character in line {
            if escaped {
                current.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == ":" {
                fields.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        fields.append(current)
        return fields
    }

    func password(for endpoint: PostgresLocation.Endpoint, database: String, user: String) -> String? {
        let host: String, port: Int
        switch endpoint {
        case .tcp(let name, let number): (host, port) = (name, number)
        case .socket(_, let number): (host, port) = ("localhost", number)
        }
        let wanted = [host, "\(port)", database, user]
        return lines.first { line in zip(line.prefix(4), wanted).allSatisfy { $0 == "*" || $0 == $1 } }?[4]
    }
}
