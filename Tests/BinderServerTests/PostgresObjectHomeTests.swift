@testable import BinderServer
import BinderTestPostgres
import Foundation
import Logging
import Testing

/// The database's `GitObjectHome` against a real PostgreSQL: packs made by stock git
/// (`git pack-objects`), stored through one replica's home and read through another replica's
/// cache, as the git engine would.
@Suite struct PostgresObjectHomeTests {
    /// A work repository where the tests make commits, and packs of them as the engine would
    /// hand them over (in the home's quarantine folder).
    struct Work {
        let path: String

        init(_ folder: String) throws {
            path = folder + "/work.git"
            try Self.git(["init", "-q", "--bare", "-b", "main", path])
        }

        /// A new commit on `parent` whose tree holds `bytes` random bytes (incompressible).
        func commit(_ name: String, bytes: Int, parent: String? = nil) throws -> String {
            let file = path + "/blob-\(UUID().uuidString)"
            var random = [UInt8](repeating: 0, count: bytes)
            for i in random.indices { random[i] = UInt8.random(in: 0...255) }
            FileManager.default.createFile(atPath: file, contents: Data(random))
            defer { unlink(file) }
            let blob = try Self.git(["-C", path, "hash-object", "-w", file])
            let tree = try Self.git(["-C", path, "mktree"], input: "100644 blob \(blob)\t\(name)\n")
            return try Self.git(["-C", path, "-c", "user.name=T", "-c", "user.email=t@example.invalid", "commit-tree", tree,
                                 "-m", name] + (parent.map { ["-p", $0] } ?? []))
        }

        /// A pack of what `tip` reaches beyond `base`, in `folder` (the home's quarantine).
        func pack(_ tip: String, since base: String? = nil, into folder: String) throws -> ReceivedPack {
            let quarantine = folder + "/push-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: quarantine, withIntermediateDirectories: true)
            let revisions = tip + "\n" + (base.map { "^" + $0 + "\n" } ?? "")
            let checksum = try Self.git(["-C", path, "pack-objects", "-q", "--revs", quarantine + "/pack"], input: revisions)
            let packPath = quarantine + "/pack-\(checksum).pack"
            let objects = try Self.git(["-C", path, "rev-list", "--objects", tip] + (base.map { ["^" + $0] } ?? []))
                .split(separator: "\n").count
            let size = try FileManager.default.attributesOfItem(atPath: packPath)[.size] as? Int ?? 0
            return ReceivedPack(packPath: packPath, indexPath: quarantine + "/pack-\(checksum).idx", checksum: checksum,
                                objects: objects, bytes: Int64(size))
        }

        /// `git ARGUMENTS` with `input` on stdin: stdout, trimmed; throws on a non-zero exit.
        @discardableResult
        static func git(_ arguments: [String], input: String = "") throws -> String {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/git")
            process.arguments = arguments
            let stdin = Pipe(), stdout = Pipe()
            process.standardInput = stdin
            process.standardOutput = stdout
            process.standardError = FileHandle.nullDevice
            try process.run()
            stdin.fileHandleForWriting.write(Data(input.utf8))
            try stdin.fileHandleForWriting.close()
            let output = stdout.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else { throw GitCommandFailure(message: "git \(arguments.joined(separator: " "))") }
            return String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    static let owner = String(repeating: "ab", count: 32)

    /// Two replicas (each a pool and a cache folder of its own) on one new database.
    static func withReplicas(_ body: ([PostgresPackCache], Work, String) async throws -> Void) async throws {
        let folder = try makeTemporaryFolder("pghome")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let work = try Work(folder)
        try await PostgresStorageTests.withReplicas(2) { replicas in
            let caches = replicas.enumerated().map { PostgresPackCache(folder: folder + "/cache\($0.offset)", storage: $0.element) }
            for cache in caches { try cache.prepare() }
            try await body(caches, work, folder)
        }
    }

    @Test func aPushToCreateIsReadThroughAnotherReplicaAndItsCacheComesBack() async throws {
        try await Self.withReplicas { caches, work, _ in
            // 2.5 MB of random bytes: a pack of three chunks.
            let first = try work.commit("a", bytes: 2_500_000)
            let home = PostgresObjectHome(id: "notes", storage: caches[0].storage, cache: caches[0],
                                          creation: .init(owner: Self.owner, repositoryLimit: 10))
            #expect(try await home.refs().isEmpty)
            _ = try await home.objectRepository()
            let pack = try work.pack(first, into: home.quarantine)
            #expect(try await home.store(pack, commands: [RefCommand(ref: "refs/heads/main", old: nil, new: first)]) == [.applied])
            #expect(home.created)
            let chunks = try await caches[0].storage.client.rows("SELECT count(*) FROM binder_pack_chunks", as: Int.self,
                                                                 logger: PostgresStorageTests.logger)
            #expect(chunks == [3])

            let other = PostgresObjectHome(id: "notes", storage: caches[1].storage, cache: caches[1])
            #expect(try await other.refs() == [StoredRef(name: "refs/heads/main", target: first)])
            for _ in 0..<2 {
                let repository = try await other.objectRepository()
                #expect(try Work.git(["-C", repository, "rev-list", "--objects", first]).split(separator: "\n").count == pack.objects)
                try Work.git(["-C", repository, "fsck", "--no-dangling", first])
                // A lost cache is downloaded again.
                try FileManager.default.removeItem(atPath: repository)
            }
            // A second push-to-create of the id: taken.
            let again = PostgresObjectHome(id: "notes", storage: caches[1].storage, cache: caches[1],
                                           creation: .init(owner: Self.owner, repositoryLimit: 10))
            await #expect(throws: StorageError.idTaken("notes")) {
                try await again.store(try work.pack(first, into: again.quarantine),
                                      commands: [RefCommand(ref: "refs/heads/main", old: nil, new: first)])
            }
        }
    }

    @Test func twoPushesRacingOnOneRefThroughTwoReplicasOneWinsTheOtherLeavesNothing() async throws {
        try await Self.withReplicas { caches, work, _ in
            let base = try work.commit("base", bytes: 100)
            let creator = PostgresObjectHome(id: "race", storage: caches[0].storage, cache: caches[0],
                                             creation: .init(owner: Self.owner, repositoryLimit: 10))
            let basePack = try work.pack(base, into: creator.quarantine)
            _ = try await creator.store(basePack, commands: [RefCommand(ref: "refs/heads/main", old: nil, new: base)])
            let tips = try (0..<2).map { try work.commit("next \($0)", bytes: 1000, parent: base) }
            let homes = caches.map { PostgresObjectHome(id: "race", storage: $0.storage, cache: $0) }
            let packs = try (0..<2).map { try work.pack(tips[$0], since: base, into: homes[$0].quarantine) }
            let outcomes = try await withThrowingTaskGroup(of: (Int, [RefOutcome]).self) { group in
                for i in 0..<2 {
                    group.addTask {
                        (i, try await homes[i].store(packs[i], commands: [RefCommand(ref: "refs/heads/main", old: base, new: tips[i])]))
                    }
                }
                return try await group.reduce(into: [Int: [RefOutcome]]()) { $0[$1.0] = $1.1 }
            }
            let winners = (0..<2).filter { outcomes[$0] == [.applied] }
            try #require(winners.count == 1, "\(outcomes)")
            let loser = 1 - winners[0]
            #expect(outcomes[loser] == [.refused("non-fast-forward")])
            #expect(try await homes[loser].refs() == [StoredRef(name: "refs/heads/main", target: tips[winners[0]])])
            // The loser's pack was rolled back with its ref update.
            let stored = try await caches[0].storage.client.rows("SELECT checksum FROM binder_packs ORDER BY checksum",
                                                                 as: String.self, logger: PostgresStorageTests.logger)
            #expect(Set(stored) == [basePack.checksum, packs[winners[0]].checksum])
        }
    }

    @Test func theQuotaIsCheckedInsideThePushSoTwoRacingPushesCannotBothPass() async throws {
        try await Self.withReplicas { caches, work, _ in
            let base = try work.commit("base", bytes: 100)
            let creator = PostgresObjectHome(id: "quota", storage: caches[0].storage, cache: caches[0],
                                             creation: .init(owner: Self.owner, repositoryLimit: 10))
            _ = try await creator.store(try work.pack(base, into: creator.quarantine),
                                        commands: [RefCommand(ref: "refs/heads/main", old: nil, new: base)])
            // Each push fits alone (600 kB of 1 MB left), not both together.
            let tips = try (0..<2).map { try work.commit("big \($0)", bytes: 600_000, parent: base) }
            let homes = caches.map { PostgresObjectHome(id: "quota", storage: $0.storage, cache: $0, bytesPerUser: 1_000_000) }
            let packs = try (0..<2).map { try work.pack(tips[$0], since: base, into: homes[$0].quarantine) }
            let results = await withTaskGroup(of: Result<[RefOutcome], StorageError>.self) { group in
                for i in 0..<2 {
                    group.addTask {
                        do throws(StorageError) {
                            return .success(try await homes[i].store(packs[i], commands: [RefCommand(ref: "refs/heads/b\(i)", old: nil,
                                                                                                    new: tips[i])]))
                        } catch { return .failure(error) }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            #expect(results.filter { (try? $0.get()) == [.applied] }.count == 1, "\(results)")
            #expect(results.filter { if case .failure(.storageQuotaUsedUp) = $0 { return true } else { return false } }.count == 1)
            let refs = try await homes[0].refs()
            #expect(refs.count == 2)   // main and the winner's branch, nothing of the loser's
            let packRows = try await caches[0].storage.client.rows("SELECT count(*) FROM binder_packs", as: Int.self,
                                                                   logger: PostgresStorageTests.logger)
            #expect(packRows == [2])
        }
    }

    @Test func twoPushesToCreateRacingThroughTwoReplicasStayWithinTheRepositoryQuota() async throws {
        try await Self.withReplicas { caches, work, _ in
            let tips = try (0..<2).map { try work.commit("first \($0)", bytes: 200_000) }
            let homes = (0..<2).map { PostgresObjectHome(id: "new-\($0)", storage: caches[$0].storage, cache: caches[$0],
                                                         creation: .init(owner: Self.owner, repositoryLimit: 1)) }
            let packs = try (0..<2).map { try work.pack(tips[$0], into: homes[$0].quarantine) }
            let results = await withTaskGroup(of: Result<[RefOutcome], StorageError>.self) { group in
                for i in 0..<2 {
                    group.addTask {
                        do throws(StorageError) {
                            return .success(try await homes[i].store(packs[i], commands: [RefCommand(ref: "refs/heads/main", old: nil, new: tips[i])]))
                        } catch { return .failure(error) }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            #expect(results.filter { (try? $0.get()) == [.applied] }.count == 1, "\(results)")
            #expect(results.contains { if case .failure(.repositoryQuota(limit: 1)) = $0 { return true } else { return false } })
            let usage = try await PostgresRepositories(storage: caches[0].storage).usage(owner: Self.owner)
            #expect(usage.repositories == 1)
        }
    }

    /// Each creation's repository row holds a key-share lock on the owner's row: the owner's
    /// lock must not wait for it (it did, FOR UPDATE: a deadlock, one push in two failing).
    @Test func firstPushesOfOneOwnerAtOnceThroughTwoReplicasAllLand() async throws {
        try await Self.withReplicas { caches, work, _ in
            let count = 8
            let tips = try (0..<count).map { try work.commit("own \($0)", bytes: 50_000) }
            let homes = (0..<count).map { PostgresObjectHome(id: "own-\($0)", storage: caches[$0 % 2].storage, cache: caches[$0 % 2],
                                                             creation: .init(owner: Self.owner, repositoryLimit: 100)) }
            let packs = try (0..<count).map { try work.pack(tips[$0], into: homes[$0].quarantine) }
            let outcomes = try await withThrowingTaskGroup(of: [RefOutcome].self) { group in
                for i in 0..<count {
                    group.addTask { try await homes[i].store(packs[i], commands: [RefCommand(ref: "refs/heads/main", old: nil, new: tips[i])]) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(outcomes == Array(repeating: [.applied], count: count))
        }
    }

    @Test func compactionReplacesThePacksByOneThatKeepsEveryObject() async throws {
        try await Self.withReplicas { caches, work, _ in
            var tips: [String] = []
            for n in 0..<4 {
                let tip = try work.commit("c\(n)", bytes: 300_000, parent: tips.last)
                let home = PostgresObjectHome(id: "packed", storage: caches[0].storage, cache: caches[0],
                                              creation: tips.isEmpty ? .init(owner: Self.owner, repositoryLimit: 10) : nil)
                _ = try await home.objectRepository()
                let outcome = try await home.store(try work.pack(tip, since: tips.last, into: home.quarantine),
                                                   commands: [RefCommand(ref: "refs/heads/main", old: tips.last, new: tip)])
                #expect(outcome == [.applied])
                tips.append(tip)
            }
            let logger = PostgresStorageTests.logger
            let bytesBefore = try await caches[0].storage.client.rows("SELECT bytes FROM binder_repositories", as: Int64.self, logger: logger)
            let compaction = PostgresCompaction(storage: caches[1].storage, cache: caches[1])
            #expect(try await compaction.compact("packed", onlyAbove: 4) == false)   // 4 packs: not above the limit
            // Another replica compacting it (holding its advisory lock): this one leaves it.
            try await caches[0].storage.client.withConnection { connection in
                try await connection.exec("SELECT pg_advisory_lock(\(PostgresCompaction.lockClass), hashtext('packed'))", logger: logger)
                #expect(try await compaction.compact("packed", onlyAbove: 3) == false)
                try await connection.exec("SELECT pg_advisory_unlock(\(PostgresCompaction.lockClass), hashtext('packed'))", logger: logger)
            }
            #expect(try await compaction.compact("packed", onlyAbove: 3))
            #expect(try await caches[0].storage.client.rows("SELECT count(*) FROM binder_packs", as: Int.self, logger: logger) == [1])
            let bytesAfter = try await caches[0].storage.client.rows("SELECT bytes FROM binder_repositories", as: Int64.self, logger: logger)
            #expect(bytesAfter[0] > 1_200_000 && bytesAfter[0] <= bytesBefore[0], "\(bytesBefore) -> \(bytesAfter)")
            // The first replica's cache drops the four packs and takes the one.
            let repository = try await PostgresObjectHome(id: "packed", storage: caches[0].storage, cache: caches[0]).objectRepository()
            #expect(caches[0].cachedPacks("packed").count == 1)
            let expected = try Work.git(["-C", work.path, "rev-list", "--objects", tips[3]]).split(separator: "\n").count
            #expect(try Work.git(["-C", repository, "rev-list", "--objects", tips[3]]).split(separator: "\n").count == expected)
            try Work.git(["-C", repository, "fsck", "--no-dangling", tips[3]])
            #expect(try await compaction.compact("packed") == false)   // one pack already
        }
    }

    @Test func aDeletedRepositoryLeavesATombstoneAndItsIdIsNeverCreatedAgain() async throws {
        try await Self.withReplicas { caches, work, _ in
            let storages = caches.map { cache in
                PostgresRepositoryStorage(storage: cache.storage, cache: cache, repositoriesPerUser: 10, bytesPerUser: 1 << 30,
                                          endpoint: { home in UnbornHomeEndpoint(home: home) })
            }
            let tip = try work.commit("a", bytes: 100)
            let home = storages[0].home("gone", creating: Self.owner)
            _ = try await home.store(try work.pack(tip, into: home.quarantine), commands: [RefCommand(ref: "refs/heads/main", old: nil, new: tip)])
            let listed = try await storages[1].list(owner: Self.owner)
            #expect(listed.map(\.repoId) == ["gone"])
            #expect(listed.first?.lastCommit != nil)
            #expect(try await storages[1].repository("gone")?.owner == Self.owner)

            let tombstone = try await storages[1].delete("gone", now: 1234)
            #expect(tombstone == RepositoryTombstone(owner: Self.owner, deletedAt: 1234))
            #expect(try await storages[0].repository("gone") == nil)
            #expect(try await storages[0].tombstone("gone") == tombstone)
            #expect(try await storages[0].list(owner: Self.owner).isEmpty)
            #expect(try await storages[0].rows.usage(owner: Self.owner) == StorageUsage(repositories: 0, bytes: 0))
            // A push-to-create of the id, even one that began before the deletion: gone.
            let late = storages[0].home("gone", creating: Self.owner)
            await #expect(throws: StorageError.gone(id: "gone", tombstone: tombstone)) {
                try await late.store(try work.pack(tip, into: late.quarantine), commands: [RefCommand(ref: "refs/heads/main", old: nil, new: tip)])
            }
        }
    }
}

/// An endpoint for tests of the storage's rows: never asked for git.
struct UnbornHomeEndpoint: SmartHTTPEndpoint {
    let home: any GitObjectHome
    func advertiseRefs(_ service: GitService, protocolHeader: String?) async throws(StorageError) -> [UInt8] { [] }
    func uploadPack(_ request: SpoolFile, protocolHeader: String?) async throws(StorageError) -> PackResponse {
        throw .backend(operation: "not in this test", detail: "")
    }
    func receivePack(_ request: SpoolFile, protocolHeader: String?) async throws(StorageError) -> PackResponse {
        throw .backend(operation: "not in this test", detail: "")
    }
}
