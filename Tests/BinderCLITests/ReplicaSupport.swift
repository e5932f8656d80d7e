import BinderCrypto
import BinderTestPostgres
import Foundation
import XCTest

/// `binder serve` replicas on loopback that share one PostgreSQL database, which holds
/// everything, and one token secret file (issue 42), as a deployment behind a load balancer
/// runs them; each replica has its own pack cache (`--cache`), as on its own machine.
final class ReplicaSet {
    let sandbox: BinderSandbox
    let cluster: PostgresCluster
    let databaseName: String
    let databaseURLFile: String
    let tokenSecretFile: String
    private(set) var replicas: [TestServer] = []

    /// `count` replicas started on `cluster` (the process's shared one unless given), each with
    /// `options` besides the store's.
    init(count: Int = 2, cluster: PostgresCluster? = nil, options: [String] = []) throws {
        sandbox = try BinderSandbox()
        self.cluster = try cluster ?? PostgresCluster.shared()
        let database = try self.cluster.database()
        databaseName = database.name
        databaseURLFile = sandbox.root.appendingPathComponent("database-url").path
        tokenSecretFile = sandbox.root.appendingPathComponent("token-secret").path
        var secret = [UInt8](repeating: 0, count: 32)
        for index in secret.indices { secret[index] = UInt8.random(in: 0...255) }
        for (path, text) in [(databaseURLFile, database.url), (tokenSecretFile, secret.map { String(format: "%02x", $0) }.joined())] {
            guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
                throw CocoaError(.fileWriteUnknown)
            }
        }
        for index in 0..<count {
            let root = sandbox.root.appendingPathComponent("replica-\(index)")
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
            let store = ["--database-url-file", databaseURLFile, "--token-secret-file", tokenSecretFile,
                         "--cache", root.appendingPathComponent("cache").path]
            replicas.append(try TestServer(root: root, options: store + options))
        }
    }

    deinit { replicas.forEach { $0.stop() } }

    /// The rows `sql` gives in the replicas' database.
    func query(_ sql: String) throws -> String { try cluster.query(databaseName, sql) }

    subscript(index: Int) -> TestServer { replicas[index] }

    /// Replica `index % count`: requests spread over the replicas in turn.
    func replica(for index: Int) -> TestServer { replicas[index % replicas.count] }

    /// A fresh key, its token from replica `index` (a file, as git is given it), its public key.
    func user(_ name: String, through index: Int = 0) throws -> ReplicaUser {
        let key = try SecretKey.generate()
        let nsecFile = try sandbox.file("\(name).nsec", String(decoding: try key.nsec().copyBytes(), as: UTF8.self))
        let run = try MgitClient.run(["login", replicas[index].url, nsecFile])
        XCTAssertEqual(run.status, 0, run.stderr)
        let token = run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        return ReplicaUser(nsecFile: nsecFile, tokenFile: try sandbox.file("\(name).token", token), pubkey: key.publicKey.hex)
    }

    /// A work tree with one commit of its own (its name in a small text) on main.
    func workTree(_ name: String) throws -> String {
        try makeWorkTree(sandbox.root.appendingPathComponent(name).path, text: "ciphertext \(name)")
    }

    /// Replicas, a user, and repository `id` pushed into existence through replica 0 from a work tree.
    static func withRepository(_ id: String, cluster: PostgresCluster? = nil) throws
        -> (replicas: ReplicaSet, user: ReplicaUser, work: String) {
        let replicas = try ReplicaSet(cluster: cluster)
        let user = try replicas.user("alice")
        let work = try replicas.workTree(id)
        let pushed = try replicas.push(work, to: id, through: replicas[0], tokenFile: user.tokenFile)
        XCTAssertEqual(pushed.status, 0, pushed.stderr + replicas.logs)
        return (replicas, user, work)
    }

    /// Stock git against `server` with the user's token (never in argv: read from its file by
    /// the shell); GIT_TERMINAL_PROMPT=0, so a refusal fails instead of asking.
    func git(_ arguments: String, in work: String? = nil, tokenFile: String) throws -> BinderRun {
        try shell("git -c http.extraHeader=\"Authorization: Bearer $(cat '\(tokenFile)')\" \(arguments)", in: work,
                  environment: ["GIT_TERMINAL_PROMPT": "0"])
    }

    func url(_ server: TestServer, _ id: String) -> String { "\(server.url)/api/mgit/repos/\(id)" }

    /// `git push` of `branch` in `work` to repository `id` through `server`.
    func push(_ work: String, to id: String, through server: TestServer, tokenFile: String, branch: String = "main") throws -> BinderRun {
        try git("push -q '\(url(server, id))' \(branch)", in: work, tokenFile: tokenFile)
    }

    /// The refs repository `id` advertises through `server` (`git ls-remote`): name to object id.
    func refs(_ id: String, through server: TestServer, tokenFile: String) throws -> [String: String] {
        let run = try git("ls-remote '\(url(server, id))'", tokenFile: tokenFile)
        XCTAssertEqual(run.status, 0, "ls-remote \(id): \(run.stderr)")
        var refs: [String: String] = [:]
        for line in run.stdout.split(separator: "\n") {
            let fields = line.split(separator: "\t")
            if fields.count == 2 { refs[String(fields[1])] = String(fields[0]) }
        }
        return refs
    }

    /// The replicas' logs, for failure messages.
    var logs: String {
        replicas.enumerated().map { "replica \($0.offset):\n" + $0.element.log.split(separator: "\n").suffix(20).joined(separator: "\n") }
            .joined(separator: "\n")
    }
}

struct ReplicaUser {
    let nsecFile: String
    let tokenFile: String
    let pubkey: String
}

/// A new work tree at `work` with one commit on main: `bytes` random bytes, or `text`.
@discardableResult
func makeWorkTree(_ work: String, bytes: Int = 0, text: String = "ciphertext") throws -> String {
    let content = bytes > 0 ? "head -c \(bytes) /dev/urandom > blob.bin" : "printf '%s\\n' \"$TEXT\" > a.json"
    let made = try shell("git init -q -b main '\(work)' && cd '\(work)' && \(content) && git add -A && git -c user.name=t -c user.email=t@t commit -q -m 'Initialize binder'",
                         environment: ["TEXT": text])
    XCTAssertEqual(made.status, 0, made.stderr)
    return work
}
