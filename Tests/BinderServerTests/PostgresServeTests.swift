@testable import BinderServer
import BinderTestPostgres
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// A real `binder serve` (BINDER_BIN) on the database: the URL and its password come from a
/// file, never argv, and the login challenges it makes are rows any replica can consume.
@Suite struct PostgresServeTests {
    static let binary = ProcessInfo.processInfo.environment["BINDER_BIN"]

    @Test(.enabled(if: binary != nil, "needs BINDER_BIN (the built binder)"))
    func serveReadsTheDatabaseURLFromAFileAndKeepsThePasswordOutOfArgv() async throws {
        let cluster = try PostgresCluster.shared()
        let database = try cluster.database()
        let folder = try makeTemporaryFolder("pgserve")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let urlFile = folder + "/database-url", log = folder + "/serve.log"
        #expect(FileManager.default.createFile(atPath: urlFile, contents: Data(database.url.utf8), attributes: [.posixPermissions: 0o600]))

        let arguments = [Self.binary!, "serve", "--repos", folder + "/repos", "--listen", "127.0.0.1:0", "--database-url-file", urlFile,
                         "--token-secret-file", try writeTokenSecret(in: folder)]
        let pid = try PostgresCluster.spawn(arguments, output: log)
        defer {
            kill(pid, SIGTERM)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
        let port = try await PostgresCluster.servingPort(log: log)
        let bound = try #require(port, "binder serve did not start: \(String(decoding: FileManager.default.contents(atPath: log) ?? Data(), as: UTF8.self))")

        let commandLine = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline"))
        #expect(!String(decoding: commandLine, as: UTF8.self).contains(cluster.password))
        #expect(String(decoding: commandLine, as: UTF8.self).contains("--database-url-file"))

        // A challenge made by this server is a row in the database, consumed once by another replica.
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(bound)/api/auth/nostr/challenge")!)
        request.httpMethod = "POST"
        request.httpBody = Data("{}".utf8)
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        let (body, response) = try await URLSession.shared.data(for: request)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        let challenge = try #require((try JSONSerialization.jsonObject(with: body) as? [String: Any])?["challenge"] as? String)
        try await PostgresStorageTests.withReplicas(1, url: database.url) { replicas async throws in
            let other = PostgresChallenges(storage: replicas[0])
            let now = Int64(Date().timeIntervalSince1970)
            #expect(try await other.consume(challenge, now: now))
            #expect(try await other.consume(challenge, now: now) == false)
        }
        #expect(!(String(decoding: FileManager.default.contents(atPath: log) ?? Data(), as: UTF8.self)).contains(cluster.password))
    }
}
