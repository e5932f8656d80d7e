import BinderGit
import Foundation
import Logging
import PostgresNIO

/// `RepositoryStorage` in the database (issue 42): every repository, owner, ref and git object
/// is a row, so a replica holds nothing another needs (its pack cache it may lose). Git's Smart
/// HTTP is binder's own engine (`endpoint`, given a `GitObjectHome`) over `PostgresObjectHome`;
/// the quotas are counted inside each push's transaction, so `reservePush` only turns away an
/// owner with no byte left before the body is read.
struct PostgresRepositoryStorage: RepositoryStorage {
    let storage: PostgresStorage
    let cache: PostgresPackCache
    let repositoriesPerUser: Int
    let bytesPerUser: Int64
    /// The Smart HTTP server over a home (the git engine).
    let endpoint: @Sendable (any GitObjectHome) -> any SmartHTTPEndpoint

    var rows: PostgresRepositories { PostgresRepositories(storage: storage) }

    func home(_ id: String, creating owner: String? = nil) -> PostgresObjectHome {
        PostgresObjectHome(id: id, storage: storage, cache: cache,
                           creation: owner.map { .init(owner: $0, repositoryLimit: repositoriesPerUser) },
                           bytesPerUser: bytesPerUser, compaction: PostgresCompaction(storage: storage, cache: cache))
    }

    func repository(_ id: String) async throws(StorageError) -> (any StoredRepository)? {
        guard let owner = try await rows.owner(of: id) else { return nil }
        let home = home(id)
        return PostgresRepository(id: id, owner: owner, home: home, endpoint: endpoint(home), rows: rows)
    }

    /// An id not made yet: the engine over a home with no refs and no objects.
    var unborn: any SmartHTTPEndpoint { endpoint(UnbornHome(cache: cache)) }

    func create(_ id: String, owner: String, byPush request: SpoolFile,
                protocolHeader: String?) async throws(StorageError) -> (response: PackResponse, created: Bool) {
        _ = try ReceivePackRequest.creatingPush(request)
        if let tombstone = try await tombstone(id) { throw .gone(id: id, tombstone: tombstone) }
        let home = home(id, creating: owner)
        let response = try await endpoint(home).receivePack(request, protocolHeader: protocolHeader)
        return (response, home.created)
    }

    /// Each repository's main from one query; its commit's time from this replica's cache (so
    /// a listing brings the owner's caches up to date).
    func list(owner: String) async throws(StorageError) -> [RepositorySummary] {
        let logger = storage.logger
        let mains = try await storage.perform("cannot list repositories") { client in
            try await client.query("""
                SELECT r.id, f.target FROM binder_repositories r
                LEFT JOIN binder_refs f ON f.repository = r.id AND f.name = 'refs/heads/main'
                WHERE r.owner = \(owner) ORDER BY r.id
                """, logger: logger).decode((String, String?).self).reduce(into: [(String, String?)]()) { $0.append($1) }
        }
        var summaries: [RepositorySummary] = []
        for (id, main) in mains {
            var last: String?
            if let tip = main {
                let path = try await cache.update(id)
                if let repository = try? GitRepository.open(path: path), let tipID = ObjectID(hex: tip),
                   let info = try? repository.commits.commit(tipID) {
                    last = ISO8601DateFormatter().string(from: info.committer.time)
                }
            }
            summaries.append(RepositorySummary(repoId: id, name: id, owner: owner, role: "owner", lastCommit: last))
        }
        return summaries
    }

    func checkCreationQuota(owner: String) async throws(StorageError) {
        guard try await rows.usage(owner: owner).repositories < repositoriesPerUser else {
            throw .repositoryQuota(limit: repositoriesPerUser)
        }
    }

    /// The push's own transaction counts repositories and bytes again (`PostgresObjectHome`):
    /// this only refuses early, before the body is read.
    func reservePush(owner: String, creating: Bool) async throws(StorageError) -> PushReservation {
        let usage = try await rows.usage(owner: owner)
        if creating, usage.repositories >= repositoriesPerUser { throw .repositoryQuota(limit: repositoriesPerUser) }
        let left = bytesPerUser - usage.bytes
        guard left > 0 else { throw .storageQuotaUsedUp }
        return PushReservation(bytesLeft: left, release: {})
    }

    func remove(_ id: String) async throws(StorageError) -> Bool {
        let removed = try await rows.remove(id)
        cache.drop(id)
        return removed
    }

    /// The tombstone and the removal in one transaction: nobody sees the id both gone and there.
    func delete(_ id: String, now: Int64) async throws(StorageError) -> RepositoryTombstone {
        let logger = storage.logger
        let tombstone = try await storage.transaction("cannot delete the repository") { connection in
            let owner = try await PostgresObjectHome.owner(of: id, on: connection, logger: logger) ?? ""
            try await connection.exec("""
                INSERT INTO binder_tombstones (id, owner, deleted_at) VALUES (\(id), \(owner), \(now)) ON CONFLICT DO NOTHING
                """, logger: logger)
            try await connection.exec("DELETE FROM binder_repositories WHERE id = \(id)", logger: logger)
            return try await PostgresTombstones.find(id, on: connection, logger: logger) ?? RepositoryTombstone(owner: owner, deletedAt: now)
        }
        cache.drop(id)
        return tombstone
    }

    func tombstone(_ id: String) async throws(StorageError) -> RepositoryTombstone? {
        let logger = storage.logger
        return try await storage.transaction("cannot read the tombstone") { connection in
            try await PostgresTombstones.find(id, on: connection, logger: logger)
        }
    }

    func stagingRepositories() async throws(StorageError) -> [(id: String, modified: Date)] {
        try await rows.stagingRepositories()
    }

    func spool() throws(StorageError) -> SpoolFile {
        do { return try SpoolFile(folder: cache.spool) } catch {
            throw .backend(operation: "cannot make a spool file", detail: "\(error)")
        }
    }
}

/// One repository of the database store: the engine over its home for git, its rows for the rest.
struct PostgresRepository: StoredRepository {
    let id: String
    let owner: String?
    let home: PostgresObjectHome
    let endpoint: any SmartHTTPEndpoint
    let rows: PostgresRepositories

    func advertiseRefs(_ service: GitService, protocolHeader: String?) async throws(StorageError) -> [UInt8] {
        try await endpoint.advertiseRefs(service, protocolHeader: protocolHeader)
    }

    func uploadPack(_ request: SpoolFile, protocolHeader: String?) async throws(StorageError) -> PackResponse {
        try await endpoint.uploadPack(request, protocolHeader: protocolHeader)
    }

    func receivePack(_ request: SpoolFile, protocolHeader: String?) async throws(StorageError) -> PackResponse {
        try await endpoint.receivePack(request, protocolHeader: protocolHeader)
    }

    func ref(_ name: String) async throws(StorageError) -> String? { try await rows.ref(name, in: id) }

    /// `new` must be stored here already: checked in this replica's cache (brought up to date).
    func updateRef(_ name: String, from expected: String?, to new: String) async throws(StorageError) {
        guard FolderRepository.isRefName(name), FolderRepository.isObjectID(new) else { throw .badRefUpdate(ref: name) }
        let path = try await home.objectRepository()
        guard let repository = try? GitRepository.open(path: path), let object = ObjectID(hex: new),
              (try? repository.commits.commit(object)) != nil else {
            throw .badRefUpdate(ref: name)
        }
        try await rows.updateRef(name, in: id, from: expected, to: new)
    }

    func shareEnds() async throws(StorageError) -> Int64? { try await rows.shareEnds(id) }

    func noteShareEnds(at time: Int64) async throws(StorageError) { try await rows.noteShareEnds(id, at: time) }
}

/// What an id that does not exist yet answers: no refs, an empty repository (`.empty.git` in the
/// cache: never an id's folder, since ids do not start with a dot), and no push (a first push
/// goes through `create`).
struct UnbornHome: GitObjectHome {
    let cache: PostgresPackCache

    func refs() async throws(StorageError) -> [StoredRef] { [] }

    func objectRepository() async throws(StorageError) -> String { try cache.repository(".empty") }

    var quarantine: String { cache.quarantine }

    func store(_ pack: ReceivedPack?, commands: [RefCommand]) async throws(StorageError) -> [RefOutcome] {
        throw .notACreatingPush
    }
}

extension ServerStorage {
    /// Everything in the database (`binder serve --database-url-file`): repositories and git
    /// objects (served by binder's engine from this replica's pack cache in `cacheFolder`),
    /// login challenges, scan sessions and the login rate counters, shared by every replica.
    static func database(_ database: PostgresStorage, cacheFolder: String, limits: ServeLimits) throws -> ServerStorage {
        let cache = PostgresPackCache(folder: cacheFolder, storage: database)
        do { try cache.prepare() } catch { throw ServerError.setup("cannot prepare the cache \(cacheFolder): \(error)") }
        let work = BlockingWork(slots: ProcessSlots(limits.gitProcesses))
        let repositories = PostgresRepositoryStorage(storage: database, cache: cache, repositoriesPerUser: limits.repositoriesPerUser,
                                                     bytesPerUser: limits.bytesPerUser) { home in
            var engine = GitEngine(home: home, spoolFolder: cache.spool, work: work)
            engine.maximumObjectBytes = limits.pushBytes
            return engine
        }
        return ServerStorage(repositories: repositories, challenges: PostgresChallenges(storage: database),
                             scans: PostgresScanSessions(storage: database),
                             counters: PostgresRateCounters(storage: database, perMinute: limits.loginsPerMinute))
    }
}
