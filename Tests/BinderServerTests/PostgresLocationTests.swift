@testable import BinderServer
import BinderTestPostgres
import Foundation
import Logging
import Testing

/// Where the database is and the password to it: URLs, PostgreSQL's password file, and a
/// login with each against the real cluster.
@Suite struct PostgresLocationTests {
    static let urls: [(String, PostgresLocation.Endpoint?, String?)] = [
        ("postgres://binder:pw@db.example.org:6432/binder", .tcp(host: "db.example.org", port: 6432), "pw"),
        ("postgresql://binder@db.example.org/binder?sslmode=require", .tcp(host: "db.example.org", port: 5432), nil),
        ("postgres://binder:p%40ss%3Aword@[::1]:5433/binder", .tcp(host: "::1", port: 5433), "p@ss:word"),
        ("postgres://binder@/binder?host=/run/postgresql", .socket(folder: "/run/postgresql", port: 5432), nil),
        ("mysql://binder:pw@db/binder", nil, nil),
        ("postgres://db.example.org/binder", nil, nil),   // no user
        ("postgres://binder@db.example.org/", nil, nil),   // no database
        ("postgres://binder@db.example.org/binder?sslmode=sometimes", nil, nil),
        ("postgres://binder@/binder", nil, nil),   // no host, no socket folder
    ]

    @Test(arguments: urls)
    func aURLIsReadOrRefused(url: String, endpoint: PostgresLocation.Endpoint?, password: String?) throws {
        guard let endpoint else {
            #expect(throws: PostgresLocation.Problem.self) { try PostgresLocation(url: url) }
            return
        }
        let location = try PostgresLocation(url: url)
        #expect(location.endpoint == endpoint)
        #expect(location.password == password)
        #expect(location.user == "binder" && location.database == "binder")
        if let password { #expect(!location.description.contains(password)) }
    }

    @Test func thePasswordFileIsReadAsLibpqReadsIt() throws {
        let folder = try makeTemporaryFolder("pgpass")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let file = folder + "/pgpass"
        let lines = """
            # comment
            other.example.org:5432:*:binder:not-this
            db.example.org:6432:binder:binder:pass\\:with\\\\escapes
            *:*:*:*:fallback
            """
        #expect(FileManager.default.createFile(atPath: file, contents: Data(lines.utf8), attributes: [.posixPermissions: 0o600]))
        #expect(try PostgresLocation(url: "postgres://binder@db.example.org:6432/binder", passwordFile: file).password
                == "pass:with\\escapes")
        #expect(try PostgresLocation(url: "postgres://binder@db.example.org/binder", passwordFile: file).password == "fallback")
        // A password in the URL wins.
        #expect(try PostgresLocation(url: "postgres://binder:given@other.example.org/x", passwordFile: file).password == "given")
        // Readable by others: refused, not silently ignored.
        chmod(file, 0o644)
        #expect(throws: PostgresLocation.Problem.passwordFileNotPrivate(path: file)) {
            try PostgresLocation(url: "postgres://binder@db.example.org/binder", passwordFile: file)
        }
        #expect(throws: PostgresLocation.Problem.unreadable(path: folder + "/none", errno: ENOENT)) {
            try PostgresLocation(url: "postgres://binder@db.example.org/binder", passwordFile: folder + "/none")
        }
    }

    @Test func theURLComesFromItsFileOrTheEnvironmentAndThePasswordFromPGPASSFILE() async throws {
        let cluster = try PostgresCluster.shared()
        let database = try cluster.database()
        let folder = try makeTemporaryFolder("pgurl")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let passwordFile = folder + "/pgpass", urlFile = folder + "/url"
        #expect(FileManager.default.createFile(atPath: passwordFile, contents: Data("127.0.0.1:\(cluster.port):*:\(cluster.user):\(cluster.password)\n".utf8),
                                               attributes: [.posixPermissions: 0o600]))
        let withoutPassword = "postgres://\(cluster.user)@127.0.0.1:\(cluster.port)/\(database.name)?sslmode=disable"
        #expect(FileManager.default.createFile(atPath: urlFile, contents: Data((withoutPassword + "\n").utf8)))
        #expect(try PostgresLocation.configured(urlFile: nil, environment: [:]) == nil)
        let fromFile = try #require(try PostgresLocation.configured(urlFile: urlFile, environment: ["PGPASSFILE": passwordFile]))
        let fromEnvironment = try #require(try PostgresLocation.configured(
            urlFile: nil, environment: ["BINDER_DATABASE_URL": withoutPassword, "PGPASSFILE": passwordFile]))
        for location in [fromFile, fromEnvironment] {
            #expect(location.password == cluster.password)
            let storage = try await PostgresStorage.start(location, logger: PostgresStorageTests.logger)
            #expect(try await PostgresSchema.isCurrent(storage.client, logger: PostgresStorageTests.logger))
            await storage.shutdown()
        }
        // A wrong password: a bounded, clear failure that does not repeat the password.
        let wrong = try PostgresLocation(url: "postgres://\(cluster.user):wrong-secret@127.0.0.1:\(cluster.port)/\(database.name)?sslmode=disable")
        do {
            _ = try await PostgresStorage.start(wrong, limits: .init(startTimeout: .seconds(3)), logger: PostgresStorageTests.logger)
            Issue.record("a wrong password was accepted")
        } catch {
            #expect(error is PostgresStorageError)
            #expect(!"\(error)".contains("wrong-secret"))
        }
    }
}
