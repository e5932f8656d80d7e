@testable import BinderServer
import BinderTestPostgres
import Foundation
import Logging
import Testing

/// The database store against a real PostgreSQL (`PostgresCluster`): each test opens one or
/// more `PostgresStorage` instances on a database of its own, each its own pool, as replicas do.
@Suite struct PostgresStorageTests {
    static let logger = Logger(label: "binder.test.postgres") { _ in SwiftLogNoOpLogHandler() }

    /// `count` storages on one new database, started together; shut down after `body`.
    @discardableResult
    static func withReplicas<Result>(_ count: Int, url: String? = nil,
                                     _ body: ([PostgresStorage]) async throws -> Result) async throws -> Result {
        let location = try PostgresLocation(url: try url ?? PostgresCluster.shared().database().url)
        let replicas = try await withThrowingTaskGroup(of: PostgresStorage.self) { group in
            for _ in 0..<count { group.addTask { try await PostgresStorage.start(location, logger: logger) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        do {
            let result = try await body(replicas)
            for replica in replicas { await replica.shutdown() }
            return result
        } catch {
            for replica in replicas { await replica.shutdown() }
            throw error
        }
    }

    @Test func twoReplicasStartingTogetherApplyEachMigrationOnce() async throws {
        let database = try PostgresCluster.shared().database()
        let all = PostgresSchema.migrations.map(\.version)
        try await Self.withReplicas(2, url: database.url) { replicas in
            // Under the advisory lock one start applies everything and the other finds it done.
            let applied = replicas.map(\.appliedMigrations)
            #expect(applied.contains(all) && applied.contains([]), "\(applied)")
            let recorded = try await replicas[1].client.rows("SELECT version FROM binder_schema_migrations ORDER BY version",
                                                               as: Int.self, logger: Self.logger)
            #expect(recorded == all)
            #expect(try await PostgresSchema.isCurrent(replicas[0].client, logger: Self.logger))
        }
        // A later start (a restart) applies nothing.
        try await Self.withReplicas(1, url: database.url) { replicas in #expect(replicas[0].appliedMigrations.isEmpty) }
    }

    @Test func aDatabaseMigratedByANewerBinderIsRefused() async throws {
        let database = try PostgresCluster.shared().database()
        try await Self.withReplicas(1, url: database.url) { replicas in
            try await replicas[0].client.query("INSERT INTO binder_schema_migrations (version) VALUES (9999)")
        }
        await #expect(throws: PostgresStorageError.self) {
            _ = try await PostgresStorage.start(try PostgresLocation(url: database.url), logger: Self.logger)
        }
    }

    @Test func aStatementPastItsTimeoutIsCancelledByTheServer() async throws {
        let location = try PostgresLocation(url: try PostgresCluster.shared().database().url)
        let storage = try await PostgresStorage.start(location, limits: .init(statementTimeout: .seconds(1)), logger: Self.logger)
        do {
            try await storage.perform("a long query") { client in try await client.exec("SELECT pg_sleep(30)", logger: Self.logger) }
            Issue.record("a 30 s statement ran past a 1 s statement_timeout")
        } catch {
            guard case .backend(let operation, let detail) = error else { throw error }
            #expect(operation == "a long query")
            #expect(detail.contains("57014"), "\(detail)")   // SQLSTATE query_canceled
        }
        // The pool goes on serving.
        #expect(try await storage.client.rows("SELECT 1", as: Int.self, logger: Self.logger) == [1])
        await storage.shutdown()
    }

    /// What a failed operation is: `.unavailable` (503, retry later) when the database could not
    /// be reached or dropped the connection, `.backend` (500) when a statement failed.
    /// (`true`: the server ends the session, SQLSTATE 57P01; `false`: SQLSTATE 22012.)
    @Test(arguments: [true, false])
    func aLostConnectionIsUnavailableAndAFailedStatementIsNot(unavailable: Bool) async throws {
        let location = try PostgresLocation(url: try PostgresCluster.shared().database().url)
        let storage = try await PostgresStorage.start(location, logger: Self.logger)
        do {
            try await storage.perform("an operation") { client in
                try await client.exec(unavailable ? "SELECT pg_terminate_backend(pg_backend_pid())" : "SELECT 1 / 0", logger: Self.logger)
            }
            Issue.record("the statement succeeded")
        } catch {
            switch error {
            case .unavailable: #expect(unavailable, "\(error)")
            case .backend: #expect(!unavailable, "\(error)")
            default: Issue.record("\(error)")
            }
        }
        await storage.shutdown()
        // A closed pool: no connection to be had.
        do {
            try await storage.perform("after") { client in try await client.exec("SELECT 1", logger: Self.logger) }
            Issue.record("a closed pool ran a statement")
        } catch {
            guard case .unavailable = error else { Issue.record("\(error)"); return }
        }
    }

    @Test func eightCreatorsOfOneRefThroughTwoReplicasOneWins() async throws {
        try await Self.withReplicas(2) { replicas in
            let records = replicas.map(PostgresRepositories.init)
            try await records[0].create("alpha", owner: "ab".padding(toLength: 64, withPad: "c", startingAt: 0))
            let targets = (0..<8).map { String(repeating: String($0), count: 40) }
            let outcomes = await withTaskGroup(of: (String, StorageError?).self) { group in
                for (index, target) in targets.enumerated() {
                    group.addTask {
                        do throws(StorageError) {
                            try await records[index % 2].updateRef("refs/heads/main", in: "alpha", from: nil, to: target)
                            return (target, nil)
                        } catch { return (target, error) }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            let winners = outcomes.filter { $0.1 == nil }.map(\.0)
            #expect(winners.count == 1)
            let winner = try #require(winners.first)
            #expect(try await records[1].ref("refs/heads/main", in: "alpha") == winner)
            for (target, error) in outcomes where target != winner {
                #expect(error == .refConflict(ref: "refs/heads/main", expected: nil, found: winner))
            }
            // An update from a stale old value is refused and changes nothing; from the current one it applies.
            let stale = targets.first { $0 != winner }!, next = String(repeating: "a", count: 40)
            await #expect(throws: StorageError.refConflict(ref: "refs/heads/main", expected: stale, found: winner)) {
                try await records[0].updateRef("refs/heads/main", in: "alpha", from: stale, to: next)
            }
            #expect(try await records[0].ref("refs/heads/main", in: "alpha") == winner)
            try await records[1].updateRef("refs/heads/main", in: "alpha", from: winner, to: next)
            #expect(try await records[0].ref("refs/heads/main", in: "alpha") == next)
            // No ref in a repository that does not exist; bad names and ids are refused before any query.
            await #expect(throws: StorageError.refConflict(ref: "refs/heads/main", expected: nil, found: nil)) {
                try await records[0].updateRef("refs/heads/main", in: "nowhere", from: nil, to: next)
            }
            await #expect(throws: StorageError.badRefUpdate(ref: "refs/heads/../x")) {
                try await records[0].updateRef("refs/heads/../x", in: "alpha", from: nil, to: next)
            }
            await #expect(throws: StorageError.badRefUpdate(ref: "refs/heads/main")) {
                try await records[0].updateRef("refs/heads/main", in: "alpha", from: nil, to: "XYZ")
            }
        }
    }

    @Test func repositoriesTheirOwnersAndQuotaCounts() async throws {
        try await Self.withReplicas(2) { replicas in
            let (a, b) = (PostgresRepositories(storage: replicas[0]), PostgresRepositories(storage: replicas[1]))
            let owner = String(repeating: "1", count: 64), other = String(repeating: "2", count: 64)
            try await a.create("beta", owner: owner)
            try await b.create("alpha", owner: owner)
            try await a.create("scan-x1", owner: other)
            await #expect(throws: StorageError.idTaken("alpha")) { try await a.create("alpha", owner: other) }
            #expect(try await b.owner(of: "alpha") == owner)
            #expect(try await b.owner(of: "gamma") == nil)
            #expect(try await a.ids(owner: owner) == ["alpha", "beta"])
            #expect(try await b.usage(owner: owner) == StorageUsage(repositories: 2, bytes: 0))
            #expect(try await b.stagingRepositories().map(\.id) == ["scan-x1"])
            #expect(try await a.shareEnds("scan-x1") == nil)
            try await a.noteShareEnds("scan-x1", at: 2000)
            try await b.noteShareEnds("scan-x1", at: 1000)   // earlier: kept at the later end
            #expect(try await a.shareEnds("scan-x1") == 2000)
            try await a.updateRef("refs/heads/main", in: "alpha", from: nil, to: String(repeating: "f", count: 40))
            #expect(try await b.remove("alpha"))
            #expect(try await a.remove("alpha") == false)
            #expect(try await a.ref("refs/heads/main", in: "alpha") == nil)   // its refs went with it
            #expect(try await a.usage(owner: owner) == StorageUsage(repositories: 1, bytes: 0))
        }
    }

    @Test func racingCreationsAndPushesThroughTwoReplicasStayWithinTheQuota() async throws {
        try await Self.withReplicas(2) { replicas in
            let records = replicas.map(PostgresRepositories.init)
            let owner = String(repeating: "6", count: 64)
            // Eight creations at once, three allowed: exactly three pass, whichever replica runs them.
            let created = await withTaskGroup(of: StorageError?.self) { group in
                for index in 0..<8 {
                    group.addTask {
                        do throws(StorageError) {
                            try await records[index % 2].create("repo-\(index)", owner: owner, repositoryLimit: 3)
                            return nil
                        } catch { return error }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            #expect(created.filter { $0 == nil }.count == 3)
            #expect(created.compactMap { $0 }.allSatisfy { $0 == .repositoryQuota(limit: 3) })
            #expect(try await records[1].usage(owner: owner).repositories == 3)
            // Eight pushes of 300 bytes at once against 1,000 bytes: three are counted, the rest refused.
            let repository = try await records[0].ids(owner: owner)[0]
            let pushed = await withTaskGroup(of: StorageError?.self) { group in
                for index in 0..<8 {
                    group.addTask {
                        do throws(StorageError) {
                            try await records[index % 2].addBytes(300, to: repository, byteLimit: 1000)
                            return nil
                        } catch { return error }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            #expect(pushed.filter { $0 == nil }.count == 3)
            #expect(pushed.compactMap { $0 }.allSatisfy { $0 == .storageQuotaUsedUp })
            #expect(try await records[1].usage(owner: owner) == StorageUsage(repositories: 3, bytes: 900))
        }
    }

    @Test func aChallengeIssuedByOneReplicaIsConsumedOnceThroughAnother() async throws {
        try await Self.withReplicas(2) { replicas in
            let issuing = PostgresChallenges(storage: replicas[0]), answering = PostgresChallenges(storage: replicas[1])
            let challenge = try await issuing.make(for: "192.0.2.1", now: 1000)
            #expect(challenge.count == 64)
            // Eight verifications at once through both replicas: exactly one consumes it.
            let results = try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<8 {
                    group.addTask { try await (index % 2 == 0 ? answering : issuing).consume(challenge, now: 1001) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(results.filter { $0 }.count == 1)
            #expect(try await answering.consume(challenge, now: 1002) == false)
            // Expired, or never issued: refused.
            let late = try await issuing.make(for: "192.0.2.1", now: 1000)
            #expect(try await answering.consume(late, now: 1000 + issuing.lifetime) == false)
            #expect(try await answering.consume(String(repeating: "0", count: 64), now: 1000) == false)
        }
    }

    @Test func oneAddressHoldsAtMostItsShareOfChallenges() async throws {
        try await Self.withReplicas(1) { replicas in
            let book = PostgresChallenges(storage: replicas[0], lifetime: 300, perClient: 3)
            var made: [String] = []
            for second in 0..<5 { made.append(try await book.make(for: "198.51.100.7", now: 1000 + Int64(second))) }
            let other = try await book.make(for: "198.51.100.8", now: 1010)
            // The two oldest of the greedy address went; the newest three and the other address's remain.
            #expect(try await book.consume(made[0], now: 1011) == false)
            #expect(try await book.consume(made[1], now: 1011) == false)
            for challenge in made[2...] { #expect(try await book.consume(challenge, now: 1011)) }
            #expect(try await book.consume(other, now: 1011))
        }
    }

    @Test func scanSessionsLifecycleAcrossReplicas() async throws {
        try await Self.withReplicas(2) { replicas in
            let a = PostgresScanSessions(storage: replicas[0]), b = PostgresScanSessions(storage: replicas[1])
            let owner = String(repeating: "3", count: 64)
            let first = try await a.open(repoId: "scan-one", owner: owner, now: 1000, lifetime: 100)
            let second = try await b.open(repoId: "scan-one", owner: owner, now: 1000, lifetime: 500)
            #expect(first.token.hasPrefix("sctk_") && first.expiresAt == 1100)
            // The token is stored only as its digest.
            let stored = try await replicas[0].client.rows("SELECT token_digest FROM binder_scan_sessions", as: String.self,
                                                           logger: Self.logger)
            #expect(stored.count == 2 && !stored.contains(first.token) && !stored.contains(String(first.token.dropFirst(5))))
            #expect(try await b.repository(forToken: first.token, now: 1050) == "scan-one")
            #expect(try await b.repository(forToken: first.token, now: 1100) == nil)   // expired
            #expect(try await b.repository(forToken: "sctk_" + String(repeating: "0", count: 64), now: 1000) == nil)
            #expect(try await a.revoke(token: first.token, owner: String(repeating: "4", count: 64)) == nil)   // not its owner
            let revoked = try #require(try await b.revoke(token: first.token, owner: owner))
            #expect(revoked.repoId == "scan-one" && revoked.stillShared)
            #expect(try await a.revoke(token: first.token, owner: owner) == nil)   // once
            #expect(try await a.isShared("scan-one"))
            #expect(try await b.expire(now: 1400) == [])
            #expect(try await a.expire(now: 1500) == ["scan-one"])
            #expect(try await b.isShared("scan-one") == false)
            #expect(try await b.repository(forToken: second.token, now: 1499) == nil)   // dropped by the expiry
            // The orphan sweep is due once a minute for all the replicas together.
            let now = Date(timeIntervalSince1970: 2_000_000)
            #expect(try await a.orphanSweepDue(now: now))
            #expect(try await b.orphanSweepDue(now: now.addingTimeInterval(30)) == false)
            #expect(try await a.orphanSweepDue(now: now.addingTimeInterval(59)) == false)
            #expect(try await b.orphanSweepDue(now: now.addingTimeInterval(60)))
        }
    }

    @Test func rateCountersAreSharedByTheReplicas() async throws {
        try await Self.withReplicas(2) { replicas async throws in
            // A day's window, so that no window ends in the middle of the test.
            let a = PostgresRateCounters(storage: replicas[0], perMinute: 5, window: 86_400)
            let b = PostgresRateCounters(storage: replicas[1], perMinute: 5, window: 86_400)
            for _ in 0..<3 { #expect(try await a.take(.challenge, address: "203.0.113.9")) }
            for _ in 0..<2 { #expect(try await b.take(.challenge, address: "203.0.113.9")) }
            #expect(try await a.take(.challenge, address: "203.0.113.9") == false)
            #expect(try await b.take(.challenge, address: "203.0.113.9") == false)
            // Another address, and the other counter, have their own allowance.
            #expect(try await b.take(.challenge, address: "203.0.113.10"))
            #expect(try await a.take(.verify, address: "203.0.113.9"))
        }
    }
}
