@testable import BinderServer
import BinderTestPostgres
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Logging
import Testing

/// `/readyz` of a real `binder serve` (BINDER_BIN) on the database: ready while the database
/// answers with every migration applied, 503 (with the reason, no secret) when it is not.
@Suite struct PostgresReadinessTests {
    static let binary = ProcessInfo.processInfo.environment["BINDER_BIN"]

    @Test(.enabled(if: binary != nil, "needs BINDER_BIN (the built binder)"))
    func readinessFollowsTheDatabasesSchema() async throws {
        let cluster = try PostgresCluster.shared()
        let database = try cluster.database()
        let folder = try makeTemporaryFolder("pgready")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let urlFile = folder + "/database-url", log = folder + "/serve.log"
        #expect(FileManager.default.createFile(atPath: urlFile, contents: Data(database.url.utf8), attributes: [.posixPermissions: 0o600]))
        let metricsToken = "0123456789abcdef0123456789abcdef"
        #expect(FileManager.default.createFile(atPath: folder + "/metrics-token", contents: Data(metricsToken.utf8)))
        let pid = try PostgresCluster.spawn([Self.binary!, "serve", "--repos", folder + "/repos", "--listen", "127.0.0.1:0",
                                             "--database-url-file", urlFile, "--token-secret-file", try writeTokenSecret(in: folder),
                                             "--metrics-token-file", folder + "/metrics-token"],
                                            output: log)
        defer {
            kill(pid, SIGTERM)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
        let port = try await PostgresCluster.servingPort(log: log)
        let bound = try #require(port)
        func readyz() async throws -> (Int, String) {
            let (body, response) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(bound)/readyz")!)
            return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: body, as: UTF8.self))
        }
        #expect(try await readyz().0 == 200)

        // A scrape reports the pool's use: its size, and nothing in flight between requests.
        var scrape = URLRequest(url: URL(string: "http://127.0.0.1:\(bound)/metrics")!)
        scrape.setValue("Bearer \(metricsToken)", forHTTPHeaderField: "Authorization")
        let metrics = String(decoding: try await URLSession.shared.data(for: scrape).0, as: UTF8.self)
        #expect(metrics.contains("binder_database_connections_maximum 16.0"), "\(metrics)")
        #expect(metrics.contains("binder_database_operations_in_flight 0.0"), "\(metrics)")

        // A schema behind this binder's (a migration's record gone): not ready, saying why;
        // ready again once it is back.
        try await PostgresStorageTests.withReplicas(1, url: database.url) { replicas async throws in
            let logger = Logger(label: "test")
            try await replicas[0].client.exec("DELETE FROM binder_schema_migrations WHERE version = 1", logger: logger)
            let (status, body) = try await readyz()
            #expect(status == 503)
            #expect(body == "not ready\n", "the reason is for the log, not the caller")
            let logged = String(decoding: FileManager.default.contents(atPath: log) ?? Data(), as: UTF8.self)
            #expect(logged.contains("not ready: the database's schema is not at this binder's version"), "\(logged)")
            #expect(!logged.contains(cluster.password))
            try await replicas[0].client.exec("INSERT INTO binder_schema_migrations (version) VALUES (1)", logger: logger)
            #expect(try await readyz().0 == 200)
        }
    }
}
