@testable import BinderServer
import BinderCrypto
import BinderTestPostgres
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// A token secret file for a replica (64 hex digits, private): `binder serve` with a database
/// requires one.
func writeTokenSecret(in folder: String) throws -> String {
    let path = folder + "/token-secret"
    let secret = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    guard FileManager.default.createFile(atPath: path, contents: Data(secret.utf8), attributes: [.posixPermissions: 0o600]) else {
        throw CocoaError(.fileWriteUnknown)
    }
    return path
}

/// The whole path through real processes: a folder server's repositories copied into
/// PostgreSQL (`binder serve --migrate-from`, twice: the second copies nothing), served from the
/// database by `binder serve` with no folder (stock git clones the same commits and pushes,
/// a push creates a repository), then copied back (`--migrate-to`) with what was pushed.
@Suite struct PostgresMigrationTests {
    static let binary = ProcessInfo.processInfo.environment["BINDER_BIN"]

    /// Runs `arguments` to its end with `environment` added: (status, stdout + stderr).
    @discardableResult
    static func run(_ arguments: [String], in directory: String? = nil, environment: [String: String] = [:]) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    static func git(_ arguments: [String], in directory: String? = nil, token: String? = nil) throws -> String {
        // The token reaches git through its environment's config, not argv.
        let environment = token.map { ["GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "http.extraHeader",
                                       "GIT_CONFIG_VALUE_0": "Authorization: Bearer " + $0, "GIT_TERMINAL_PROMPT": "0"] } ?? [:]
        let (status, output) = try run(["/usr/bin/git", "-c", "user.name=T", "-c", "user.email=t@example.invalid"] + arguments,
                                       in: directory, environment: environment)
        guard status == 0 else { throw GitCommandFailure(message: "git \(arguments.joined(separator: " ")): \(output)") }
        return output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A token for `key` from the server at `base`.
    static func login(_ base: String, key: SecretKey) async throws -> String {
        func post(_ path: String, _ body: Data) async throws -> [String: Any] {
            var request = URLRequest(url: URL(string: base + path)!)
            request.httpMethod = "POST"
            request.httpBody = body
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            let (data, _) = try await URLSession.shared.data(for: request)
            return try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
        }
        let challenge = try #require(try await post("/api/auth/nostr/challenge", Data("{}".utf8))["challenge"] as? String)
        let event = NostrEvent.authentication(challenge: challenge, secretKey: key, createdAt: Int64(Date().timeIntervalSince1970))
        let body = try Login.verifyBody(event, challenge: challenge)
        return try #require(try await post("/api/auth/nostr/verify", Data(body.readableBytesView))["token"] as? String)
    }

    /// A replica that would make a token secret of its own signs tokens no other replica takes.
    @Test func aReplicaOnADatabaseDoesNotStartWithoutTheTokenSecretFile() throws {
        let folder = try makeTemporaryFolder("pgsecret")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let location = try PostgresLocation(url: "postgres://binder@127.0.0.1:9/binder?sslmode=disable")
        #expect {
            _ = try BinderServer(options: .init(repositories: folder, port: 0, database: location), logger: PostgresStorageTests.logger)
        } throws: { error in
            if case .databaseNeedsSecretFile = error as? ServerError { return true }
            return false
        }
        #expect(!FileManager.default.fileExists(atPath: folder + "/.binder-serve/jwt-secret"))
    }

    @Test(.enabled(if: binary != nil, "needs BINDER_BIN (the built binder)"))
    func aFolderServerMovesIntoTheDatabaseIsServedFromItAndComesBack() async throws {
        let cluster = try PostgresCluster.shared()
        let database = try cluster.database()
        let folder = try makeTemporaryFolder("pgmigrate")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let urlFile = folder + "/database-url"
        #expect(FileManager.default.createFile(atPath: urlFile, contents: Data(database.url.utf8), attributes: [.posixPermissions: 0o600]))
        let key = try SecretKey.generate()
        let owner = key.publicKey.hex

        // A folder server as binder serve --repos leaves it: one repository, one tombstone.
        let repos = folder + "/repos", work = folder + "/work"
        try FileManager.default.createDirectory(atPath: repos + "/.binder-serve/deleted", withIntermediateDirectories: true)
        try Data("\(owner) 1700000000\n".utf8).write(to: URL(fileURLWithPath: repos + "/.binder-serve/deleted/old"))
        try Self.git(["init", "-q", "--bare", "-b", "main", repos + "/notes.git"])
        try Data((owner + "\n").utf8).write(to: URL(fileURLWithPath: repos + "/notes.git/binder-owner"))
        try Self.git(["init", "-q", "-b", "main", work])
        for n in 0..<3 {
            try Data("entry \(n)\n".utf8).write(to: URL(fileURLWithPath: work + "/entry-\(n).json"))
            try Self.git(["add", "-A"], in: work)
            try Self.git(["commit", "-q", "-m", "entry \(n)"], in: work)
        }
        try Self.git(["push", "-q", repos + "/notes.git", "main"], in: work)
        let original = try Self.git(["rev-parse", "main"], in: work)

        let migrate = [Self.binary!, "serve", "--database-url-file", urlFile]
        let first = try Self.run(migrate + ["--migrate-from", repos])
        #expect(first.0 == 0 && first.1.contains("1 repositories copied") && first.1.contains("1 tombstones"), "\(first.1)")
        let again = try Self.run(migrate + ["--migrate-from", repos])
        #expect(again.0 == 0 && again.1.contains("0 repositories copied") && again.1.contains("1 already there"), "\(again.1)")

        // Served from the database alone: no --repos.
        let log = folder + "/serve.log"
        let pid = try PostgresCluster.spawn(migrate + ["--token-secret-file", try writeTokenSecret(in: folder), "--cache", folder + "/cache",
                                                       "--listen", "127.0.0.1:0"], output: log)
        defer {
            kill(pid, SIGTERM)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
        let port = try #require(try await PostgresCluster.servingPort(log: log),
                                "\(String(decoding: FileManager.default.contents(atPath: log) ?? Data(), as: UTF8.self))")
        let base = "http://127.0.0.1:\(port)"
        let token = try await Self.login(base, key: key)
        let clone = folder + "/clone"
        try Self.git(["clone", "-q", base + "/api/mgit/repos/notes", clone], token: token)
        #expect(try Self.git(["rev-parse", "main"], in: clone) == original)
        try Self.git(["fsck", "--strict", "--no-progress"], in: clone)
        // Refused as a deleted id, not created again.
        #expect(throws: GitCommandFailure.self) { try Self.git(["push", "-q", base + "/api/mgit/repos/old", "main"], in: clone, token: token) }

        try Data("entry 3\n".utf8).write(to: URL(fileURLWithPath: clone + "/entry-3.json"))
        try Self.git(["add", "-A"], in: clone)
        try Self.git(["commit", "-q", "-m", "entry 3"], in: clone)
        try Self.git(["push", "-q", "origin", "main"], in: clone, token: token)
        try Self.git(["push", "-q", base + "/api/mgit/repos/fresh", "main"], in: clone, token: token)
        let pushed = try Self.git(["rev-parse", "main"], in: clone)

        // And back into a folder server.
        let back = folder + "/back"
        let out = try Self.run(migrate + ["--migrate-to", back])
        #expect(out.0 == 0 && out.1.contains("2 repositories copied"), "\(out.1)")
        for id in ["notes", "fresh"] {
            #expect(try Self.git(["--git-dir=" + back + "/\(id).git", "rev-parse", "main"]) == pushed)
            #expect(try String(contentsOfFile: back + "/\(id).git/binder-owner", encoding: .utf8) == owner + "\n")
        }
        #expect(FileManager.default.fileExists(atPath: back + "/.binder-serve/deleted/old"))
        let log2 = String(decoding: FileManager.default.contents(atPath: log) ?? Data(), as: UTF8.self)
        #expect(!log2.contains(cluster.password))
    }
}
