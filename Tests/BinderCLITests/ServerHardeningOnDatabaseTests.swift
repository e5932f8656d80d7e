import BinderCrypto
import Foundation
import XCTest

/// ServerHardeningTests' attacks against one replica on PostgreSQL (issue 42): repositories,
/// owners, refs, packs, login challenges and rate counters in the database, the token secret
/// from a file. What the server stored is read from the database's rows. Not run twice: the
/// front door's cases (slow headers and bodies), which no store takes part in, and the folder
/// index's cost with 2,000 repositories on disk. The challenge flood is a smaller one here.
final class ServerHardeningOnDatabaseTests: ServerHardeningTests {
    var replicas: ReplicaSet!

    override func start(_ options: [String] = []) throws {
        replicas = try ReplicaSet(count: 1, options: options)
        server = replicas[0]
    }

    override func tearDown() {
        super.tearDown()
        replicas = nil
    }

    override func serverTip(_ id: String) throws -> String {
        try replicas.query("SELECT target FROM binder_refs WHERE repository = '\(id)' AND name = 'refs/heads/main'")
    }

    override func serverOwner(_ id: String) throws -> String {
        try replicas.query("SELECT owner FROM binder_repositories WHERE id = '\(id)'")
    }

    override func repositoryFolders() throws -> [String] {
        try replicas.query("SELECT id FROM binder_repositories ORDER BY id").split(separator: "\n").map { $0 + ".git" }
    }

    override func testSlowlorisConnectionsDoNotStopAClone() throws { throw XCTSkip("the front door's: ServerHardeningTests runs it") }

    override func testSlowBodiesAndSlowHeadersAreCut() throws { throw XCTSkip("the front door's: ServerHardeningTests runs it") }

    override func testATrickledBodyIsCutAndASlowLinkIsNot() throws { throw XCTSkip("the front door's: ServerHardeningTests runs it") }

    /// The flood against the database's challenges, smaller: the database keeps no overall cap
    /// (the 10,000 the folder's flood overruns), so what a flood meets here is the per-address
    /// cap (32) and the rows of 320 other addresses: 1,040 challenges, not 20,450.
    override func testAFloodOfChallengesDoesNotPushOutAnotherUsersPendingOne() throws {
        try start(["--logins-per-minute", "1000000"])
        let nsec = try root.file("nsec", String(decoding: try SecretKey.generate().nsec().copyBytes(), as: UTF8.self))
        XCTAssertEqual(try attack(["challenge-flood", server.url, nsec, "127.0.0.2", "400", "127.0.0.3"]), "400 200")
        let crowd = (0..<320).map { "127.0.\(1 + $0 / 250).\(1 + $0 % 250)" }
        XCTAssertEqual(try attack(["challenge-flood", server.url, nsec, "127.0.0.2", "640"] + crowd), "640 200")
        XCTAssertEqual(try replicas.query("SELECT count(*) <= 32 FROM binder_challenges WHERE address = '127.0.0.3'").trimmingCharacters(in: .whitespacesAndNewlines), "t")
        XCTAssertLessThan(try serverMemory().rss, 200, "MiB")
    }

    override func testARequestReadsOnlyItsOwnersRepositories() throws {
        throw XCTSkip("puts 2,000 folders on disk; the database's listing is one indexed query (PostgresStorageTests)")
    }
}
