import BinderCore
import BinderGit
import Foundation

/// Where a binder syncs to: `binder.server` and `binder.repoid` in the repository's own git
/// config (plus `remote.origin.url`, so that plain git can fetch it too).
public struct SyncTarget: Sendable, Equatable {
    public let server: String
    public let repoId: String

    public init(server: String, repoId: String) {
        self.server = server
        self.repoId = repoId
    }

    public static func read(_ repository: GitRepository) -> SyncTarget? {
        guard let server = try? repository.config.value("binder.server"),
              let id = try? repository.config.value("binder.repoid") else { return nil }
        return SyncTarget(server: server, repoId: id)
    }

    public func write(_ repository: GitRepository) throws {
        try repository.config.setValue("binder.server", server)
        try repository.config.setValue("binder.repoid", repoId)
        try repository.config.setValue("remote.origin.url", server + "/api/mgit/repos/" + repoId)
        try repository.config.setValue("remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*")
    }

    /// A new repository id for a binder's first push: `binder-<milliseconds since 1970>` as the
    /// phone names them, plus 64 random bits, so that no one else's id (the phone's are bare
    /// timestamps) can be the same: the server creates a repository on a first push, and may
    /// let a push into someone else's.
    public static func newRepoID(now: Date = Date()) -> String {
        var generator = SystemRandomNumberGenerator()
        let random = String(generator.next() as UInt64, radix: 16)
        return "binder-\(Int64(now.timeIntervalSince1970 * 1000))-" + String(repeating: "0", count: 16 - random.count) + random
    }

    /// Repository ids the server accepts (they become folder names there).
    public static func isValidRepoID(_ id: String) -> Bool { GitRemotes.isValidRepositoryID(id) }

    /// `binder key rotate` re-encrypted this binder to a new key and did not push it: the npub
    /// of the key it left (`binder.rotatedfrom`), nil for any other binder. Such a binder must
    /// not sync with `repoId`, which holds its history under the old key.
    public static func rotatedFrom(_ repository: GitRepository) -> String? {
        (try? repository.config.value(rotatedFromKey)) ?? nil
    }

    public static func markRotated(_ repository: GitRepository, from npub: String) throws {
        try repository.config.setValue(rotatedFromKey, npub)
    }

    static let rotatedFromKey = "binder.rotatedfrom"

    // A rotated binder's move to a new id (`binder sync` after `binder key rotate`), kept in its
    // config so that a move cut anywhere continues: `binder.newrepoid` (the id it is pushed
    // under, chosen once), `binder.oldrepoid` and `binder.oldrepokey` (the copy under the old
    // key, and that key's npub, until the server deleted it).
    static let newIdKey = "binder.newrepoid", oldIdKey = "binder.oldrepoid", oldKeyKey = "binder.oldrepokey"

    /// Where a rotated binder (`rotatedFrom`) syncing with `self` is pushed: a new id on the
    /// same server, chosen at the first call and recorded with the old id and key.
    public func rotatedTarget(_ repository: GitRepository, oldNpub: String) throws -> SyncTarget {
        if let id = try repository.config.value(Self.newIdKey) { return SyncTarget(server: server, repoId: id) }
        let id = Self.newRepoID()
        try repository.config.setValue(Self.oldIdKey, repoId)
        try repository.config.setValue(Self.oldKeyKey, oldNpub)
        try repository.config.setValue(Self.newIdKey, id)
        return SyncTarget(server: server, repoId: id)
    }

    /// True once a rotated binder's new id was chosen (its move has started).
    public static func moveStarted(_ repository: GitRepository) -> Bool {
        ((try? repository.config.value(newIdKey)) ?? nil) != nil
    }

    /// The rotated history landed under the new id (now `binder.repoid`): the binder syncs as
    /// any other from here; the old copy stays recorded until deleted.
    public static func finishMove(_ repository: GitRepository) throws {
        try repository.config.removeValue(rotatedFromKey)
        try repository.config.removeValue(newIdKey)
    }

    /// A rotated binder joined onto the copy another device moved (`RotatedHistoryJoin`): it
    /// syncs with `self` as any other from here; no move of its own is left (nor an old copy
    /// to delete: the device that moved it does that).
    public func recordJoined(_ repository: GitRepository) throws {
        try write(repository)
        for key in [Self.rotatedFromKey, Self.newIdKey, Self.oldIdKey, Self.oldKeyKey] { try repository.config.removeValue(key) }
    }

    /// The repository id this rotated binder is being pushed under (its move started), if any.
    public static func movingTo(_ repository: GitRepository) -> String? {
        (try? repository.config.value(newIdKey)) ?? nil
    }

    /// The copy under the old key still to delete on the binder's server: its id and the old
    /// key's npub; nil when there is none (or it was deleted).
    public static func oldCopy(_ repository: GitRepository) -> (repoId: String, npub: String)? {
        guard rotatedFrom(repository) == nil, let id = (try? repository.config.value(oldIdKey)) ?? nil,
              let npub = (try? repository.config.value(oldKeyKey)) ?? nil else { return nil }
        return (id, npub)
    }

    public static func forgetOldCopy(_ repository: GitRepository) throws {
        try repository.config.removeValue(oldIdKey)
        try repository.config.removeValue(oldKeyKey)
    }
}

/// What the last syncs did, kept beside git's own files (`<git dir>/binder-sync.json`) for
/// `binder status`: times, the last error, and the conflicts resolved (paths and commit ids
/// only, never content).
public struct SyncRecord: Codable, Sendable, Equatable {
    public var lastSync: Int64?
    public var lastAttempt: Int64?
    public var lastError: String?
    public var conflicts: [MergeConflict] = []

    public init() {}

    static let keptConflicts = 200

    public static func path(_ repository: GitRepository) -> String { repository.gitDirectory + "/binder-sync.json" }

    public static func load(_ repository: GitRepository) -> SyncRecord {
        guard let bytes = try? RegularFile.read(path(repository), limit: 16 << 20),
              let record = try? JSONDecoder().decode(SyncRecord.self, from: Data(bytes)) else { return SyncRecord() }
        return record
    }

    public func save(_ repository: GitRepository) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        guard let data = try? encoder.encode(self) else { return }
        let target = Self.path(repository)
        let temporary = target + ".tmp-\(getpid())"
        guard FileManager.default.createFile(atPath: temporary, contents: data, attributes: [.posixPermissions: 0o600]),
              rename(temporary, target) == 0 else {
            unlink(temporary)
            return
        }
    }

    /// Commits on the local branch the server does not have yet.
    public static func pendingCommits(_ repository: GitRepository) -> Int {
        let local = try? repository.refs.branchTip()
        let remote = try? repository.refs.reference(GitRefs.trackingRef())
        return (try? repository.history.aheadBehind(local: local ?? nil, upstream: remote ?? nil).ahead) ?? 0
    }
}
