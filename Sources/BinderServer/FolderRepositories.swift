import Foundation
import Logging
import Synchronization

/// The first `RepositoryStorage`: one folder of bare repositories (`RepositoryStore`), served
/// by git itself (`GitBackend`, one process per request). Refs are git's own files, so git's
/// ref locks make receive-pack's and `updateRef`'s compare-and-swap atomic; quotas are checked
/// before the body is read (`reservePush`), since git receives the pack by itself.
final class FolderRepositories: RepositoryStorage {
    let store: RepositoryStore
    let git: GitBackend
    let repositoriesPerUser: Int
    let bytesPerUser: Int64
    /// The largest push, and so the largest object the engine takes.
    let pushBytes: Int
    /// Repositories being created per owner (counted against the quota until published).
    private let creating = Mutex<[String: Int]>([:])
    /// Set: git is served by binder's own engine (`--git-engine binder`, hidden) rather than
    /// by git processes, with the libgit2 work bounded by the same slots.
    let engine: BlockingWork?

    init(store: RepositoryStore, limits: ServeLimits, servesGitItself: Bool = false) {
        self.store = store
        let slots = ProcessSlots(limits.gitProcesses)
        git = GitBackend(spool: store.spoolFolder, slots: slots, timeout: limits.gitTimeout)
        engine = servesGitItself ? BlockingWork(slots: slots) : nil
        repositoriesPerUser = limits.repositoriesPerUser
        bytesPerUser = limits.bytesPerUser
        pushBytes = limits.pushBytes
    }

    func repository(_ id: String) -> (any StoredRepository)? {
        guard store.exists(id), store.tombstone(id) == nil else { return nil }
        return FolderRepository(id: id, owner: store.owner(id), endpoint: GitEndpoint(path: store.path(id), git: git), store: store,
                                smartHTTP: smartHTTP(at: store.path(id)))
    }

    var unborn: any SmartHTTPEndpoint { smartHTTP(at: store.emptyTemplate) }

    /// git's Smart HTTP on the bare repository at `path`: git's own, or the engine's.
    private func smartHTTP(at path: String) -> any SmartHTTPEndpoint {
        guard let engine else { return GitEndpoint(path: path, git: git) }
        return GitEngine(home: FolderObjectHome(path: path, quarantine: store.stagingFolder, work: engine),
                         spoolFolder: store.spoolFolder, work: engine, maximumObjectBytes: pushBytes)
    }

    func create(_ id: String, owner: String, byPush request: SpoolFile,
                protocolHeader: String?) async throws(StorageError) -> (response: PackResponse, created: Bool) {
        _ = try ReceivePackRequest.creatingPush(request)
        let staging: String
        do { staging = try store.stage(id, owner: owner) } catch {
            throw .backend(operation: "cannot create the repository", detail: "\(error)")
        }
        defer { try? FileManager.default.removeItem(atPath: staging) }
        let response = try await smartHTTP(at: staging).receivePack(request, protocolHeader: protocolHeader)
        guard store.hasBranch(at: staging) else { return (response, false) }   // git's report says why
        // Deleted meanwhile: a deleted id is never created again.
        if let tombstone = store.tombstone(id) { throw .gone(id: id, tombstone: tombstone) }
        guard store.publish(staging, as: id) else { throw .idTaken(id) }
        return (response, true)
    }

    func list(owner: String) -> [RepositorySummary] { store.list(owner: owner) }

    func checkCreationQuota(owner: String) throws(StorageError) {
        try countCreation(owner, reserve: false)
    }

    func reservePush(owner: String, creating isCreation: Bool) throws(StorageError) -> PushReservation {
        if isCreation { try countCreation(owner, reserve: true) }
        let release: @Sendable () -> Void = { [self] in
            if isCreation { creating.withLock { $0[owner, default: 1] -= 1 } }
        }
        let left = bytesPerUser - store.usage(owner: owner).bytes
        guard left > 0 else {
            release()
            throw .storageQuotaUsedUp
        }
        return PushReservation(bytesLeft: left, release: release)
    }

    /// `.repositoryQuota` once `owner` has as many repositories as allowed, counting those
    /// being created; with `reserve`, also counts one more creation (released by the caller).
    private func countCreation(_ owner: String, reserve: Bool) throws(StorageError) {
        let owned = store.usage(owner: owner).repositories
        let allowed = creating.withLock { creating -> Bool in
            guard owned + creating[owner, default: 0] < repositoriesPerUser else { return false }
            if reserve { creating[owner, default: 0] += 1 }
            return true
        }
        guard allowed else { throw .repositoryQuota(limit: repositoriesPerUser) }
    }

    func remove(_ id: String) -> Bool { store.remove(id) }

    func delete(_ id: String, now: Int64) throws(StorageError) -> RepositoryTombstone {
        let tombstone = RepositoryTombstone(owner: store.owner(id) ?? "", deletedAt: now)
        do { try store.writeTombstone(id, owner: tombstone.owner, at: now) } catch {
            throw .backend(operation: "cannot delete the repository", detail: "\(error)")
        }
        store.remove(id)
        return tombstone
    }

    func tombstone(_ id: String) -> RepositoryTombstone? { store.tombstone(id) }

    func stagingRepositories() -> [(id: String, modified: Date)] { store.stagingRepositories() }

    func spool() throws(StorageError) -> SpoolFile {
        do { return try SpoolFile(folder: store.spoolFolder) } catch {
            throw .backend(operation: "cannot make a spool file", detail: "\(error)")
        }
    }
}

extension ServerStorage {
    /// The folder store at `root`, prepared: what an earlier run left in staging and spool is
    /// cleared, and so are its `scan-…` repositories (scan sessions live in memory: those of
    /// an earlier run are over).
    static func folder(root: String, limits: ServeLimits, servesGitItself: Bool = false) throws -> ServerStorage {
        let store = RepositoryStore(root: root)
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        do { try store.prepare() } catch { throw ServerError.setup("cannot prepare \(store.serverFolder): \(error)") }
        for staging in store.stagingRepositories() { store.remove(staging.id) }
        return ServerStorage(repositories: FolderRepositories(store: store, limits: limits, servesGitItself: servesGitItself), challenges: ChallengeBook(),
                             scans: ScanSessions(), counters: LoginCounters(perMinute: limits.loginsPerMinute))
    }
}

/// git's Smart HTTP on one bare repository folder (or the empty template, for ids not made yet).
struct GitEndpoint: SmartHTTPEndpoint {
    let path: String
    let git: GitBackend

    func advertiseRefs(_ service: GitService, protocolHeader: String?) async throws(StorageError) -> [UInt8] {
        do { return try await git.advertisement(service, repository: path, protocolHeader: protocolHeader) } catch {
            throw .backend(operation: "git failed", detail: "\(error)")
        }
    }

    func uploadPack(_ request: SpoolFile, protocolHeader: String?) async throws(StorageError) -> PackResponse {
        try await serve(.uploadPack, request, protocolHeader)
    }

    func receivePack(_ request: SpoolFile, protocolHeader: String?) async throws(StorageError) -> PackResponse {
        try await serve(.receivePack, request, protocolHeader)
    }

    private func serve(_ service: GitService, _ request: SpoolFile, _ protocolHeader: String?) async throws(StorageError) -> PackResponse {
        let output: GitBackend.Output
        do { output = try await git.serve(service, repository: path, input: request, protocolHeader: protocolHeader) } catch {
            throw .backend(operation: "git failed", detail: "\(error)")
        }
        guard output.status == 0 else { throw .backend(operation: "git failed", detail: "exit \(output.status): \(output.errors)") }
        let stdout = output.stdout
        let size = stdout.size
        try? stdout.rewind()
        return PackResponse(length: size) { count in try stdout.read(upTo: count) }
    }
}

/// A repository of the folder store: its git endpoint, and its files for the rest.
struct FolderRepository: StoredRepository {
    let id: String
    let owner: String?
    /// git itself on the repository (for `ref` and `updateRef`).
    let endpoint: GitEndpoint
    let store: RepositoryStore
    /// Who answers Smart HTTP: `endpoint`, or binder's own engine.
    let smartHTTP: any SmartHTTPEndpoint

    func advertiseRefs(_ service: GitService, protocolHeader: String?) async throws(StorageError) -> [UInt8] {
        try await smartHTTP.advertiseRefs(service, protocolHeader: protocolHeader)
    }

    func uploadPack(_ request: SpoolFile, protocolHeader: String?) async throws(StorageError) -> PackResponse {
        try await smartHTTP.uploadPack(request, protocolHeader: protocolHeader)
    }

    func receivePack(_ request: SpoolFile, protocolHeader: String?) async throws(StorageError) -> PackResponse {
        defer { store.noteChanged(id) }   // measured again at the next quota check
        return try await smartHTTP.receivePack(request, protocolHeader: protocolHeader)
    }

    func ref(_ name: String) async throws(StorageError) -> String? {
        guard Self.isRefName(name) else { throw .badRefUpdate(ref: name) }
        let output: GitBackend.Output
        do {
            output = try await endpoint.git.command(["show-ref", "--verify", "--hash", "--end-of-options", name],
                                                    repository: endpoint.path)
        } catch { throw .backend(operation: "cannot read \(name)", detail: "\(error)") }
        // Absent: git exits non-zero and prints nothing on stdout.
        guard output.status == 0 else { return nil }
        let text = String(decoding: (try? output.stdout.read(upTo: 200)) ?? [], as: UTF8.self)
        let id = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard Self.isObjectID(id) else { throw .backend(operation: "cannot read \(name)", detail: "not an object id") }
        return id
    }

    func updateRef(_ name: String, from expected: String?, to new: String) async throws(StorageError) {
        guard Self.isRefName(name), Self.isObjectID(new), expected.map(Self.isObjectID) ?? true else {
            throw .badRefUpdate(ref: name)
        }
        // git's own ref lock makes this atomic against a push updating the same ref; the old
        // value of all zeros means "must not exist yet".
        let old = expected ?? String(repeating: "0", count: new.utf8.count)
        let output: GitBackend.Output
        do {
            output = try await endpoint.git.command(["update-ref", "--no-deref", "--end-of-options", name, new, old],
                                                    repository: endpoint.path)
        } catch { throw .backend(operation: "cannot update \(name)", detail: "\(error)") }
        if output.status != 0 {
            // Told apart by where the ref is now, not by git's words.
            let found = try await ref(name)
            guard found == expected else { throw .refConflict(ref: name, expected: expected, found: found) }
            throw .backend(operation: "cannot update \(name)", detail: "exit \(output.status): \(output.errors)")
        }
        store.noteChanged(id)
    }

    /// A full ref name git would accept, checked before it reaches git: `refs/` and path parts
    /// of letters, digits, `-`, `_`, `.` (none starting with `.`, none ending in `.lock`).
    static func isRefName(_ name: String) -> Bool {
        guard name.hasPrefix("refs/"), name.utf8.count <= 255, !name.contains(".."), !name.hasSuffix("/") else { return false }
        return name.split(separator: "/", omittingEmptySubsequences: false).allSatisfy { part in
            !part.isEmpty && !part.hasPrefix(".") && !part.hasSuffix(".lock") && part.utf8.allSatisfy(isRefNameByte)
        }
    }

    private static func isRefNameByte(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || "-_.".utf8.contains(byte)
    }

    /// 40 (SHA-1) or 64 (SHA-256) lowercase hexadecimal digits.
    static func isObjectID(_ text: String) -> Bool {
        (text.utf8.count == 40 || text.utf8.count == 64)
            && text.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
    }

    func shareEnds() -> Int64? { store.shareEnds(id) }

    func noteShareEnds(at time: Int64) { store.noteShareEnds(id, at: time) }
}
