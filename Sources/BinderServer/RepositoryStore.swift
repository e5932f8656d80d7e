import BinderGit
import Foundation

/// The server's bare repositories: `<root>/<repoId>.git`, each with its owner's public key in
/// `binder-owner` beside git's own files. A repository is made in a staging folder, receives
/// the first push there, and is renamed into place only once that push has stored a branch
/// ("push-to-create"): an empty or failed push leaves nothing behind. Who owns what, and the
/// sizes, are also kept in `index`, so that no request reads the whole folder.
struct RepositoryStore: Sendable {
    let root: String
    let index = RepositoryIndex()

    init(root: String) {
        self.root = root
    }

    /// The server's own folder (token secret, staging, spool): never a repository id.
    var serverFolder: String { root + "/.binder-serve" }
    var stagingFolder: String { serverFolder + "/staging" }
    var spoolFolder: String { serverFolder + "/spool" }
    /// An empty repository whose advertisement answers for ids that do not exist yet.
    var emptyTemplate: String { serverFolder + "/empty.git" }
    /// Tombstones of repositories their owners deleted: one file per id, `OWNER DELETEDAT`.
    var tombstoneFolder: String { serverFolder + "/deleted" }

    /// Makes the server's folders, clearing what an earlier run left in staging and spool, and
    /// fills `index` from the repositories there.
    func prepare() throws {
        let fm = FileManager.default
        for folder in [serverFolder, stagingFolder, spoolFolder, tombstoneFolder] {
            try fm.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        for folder in [stagingFolder, spoolFolder] {
            for name in (try? fm.contentsOfDirectory(atPath: folder)) ?? [] { try? fm.removeItem(atPath: folder + "/" + name) }
        }
        if !fm.fileExists(atPath: emptyTemplate + "/HEAD") {
            try? fm.removeItem(atPath: emptyTemplate)
            _ = try GitRepository.create(path: emptyTemplate, bare: true)
        }
        var owners: [String: String] = [:]
        // A deletion cut between its tombstone and the removal is finished here.
        for id in ids() where tombstone(id) != nil { remove(id) }
        for id in ids() where exists(id) {
            if let owner = owner(id) { owners[id] = owner }
        }
        index.load(owners)
    }

    /// `id` must be valid (`RepositoryID.isValid`): it becomes a folder name.
    func path(_ id: String) -> String { root + "/" + id + ".git" }

    func exists(_ id: String) -> Bool { FileManager.default.fileExists(atPath: path(id) + "/HEAD") }

    func owner(_ id: String) -> String? { Self.owner(ofRepositoryAt: path(id)) }

    private static func owner(ofRepositoryAt path: String) -> String? {
        guard let data = FileManager.default.contents(atPath: path + "/binder-owner") else { return nil }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A new empty bare repository owned by `owner` in the staging folder, refusing
    /// non-fast-forward pushes and deletions (the server never loses history) and checking
    /// every object pushed into it.
    func stage(_ id: String, owner: String) throws -> String {
        let staging = stagingFolder + "/\(id)-\(UUID().uuidString).git"
        let repository = try GitRepository.create(path: staging, bare: true)
        try repository.config.setValue("receive.denyNonFastForwards", "true")
        try repository.config.setValue("receive.denyDeletes", "true")
        try repository.config.setValue("receive.fsckObjects", "true")
        try Data((owner + "\n").utf8).write(to: URL(fileURLWithPath: staging + "/binder-owner"))
        return staging
    }

    /// True when a push stored at least one branch in the repository at `path`.
    func hasBranch(at path: String) -> Bool {
        let fm = FileManager.default
        if let packed = fm.contents(atPath: path + "/packed-refs"),
           String(decoding: packed, as: UTF8.self).contains(" refs/heads/") { return true }
        guard let walker = fm.enumerator(atPath: path + "/refs/heads") else { return false }
        for case let name as String in walker {
            var isFolder: ObjCBool = false
            if fm.fileExists(atPath: path + "/refs/heads/" + name, isDirectory: &isFolder), !isFolder.boolValue { return true }
        }
        return false
    }

    /// Moves a staged repository into place as `id`; false if `id` exists meanwhile (the
    /// first creator wins; the staged copy is then the caller's to remove).
    func publish(_ staging: String, as id: String) -> Bool {
        guard rename(staging, path(id)) == 0 else { return false }
        if let owner = owner(id) { index.add(id, owner: owner) }
        return true
    }

    /// How many repositories `owner` has and how many bytes they take: from `index`, measuring
    /// only those pushed to since their last measure.
    func usage(owner: String) -> (repositories: Int, bytes: Int64) {
        index.usage(of: owner) { id in
            var bytes: Int64 = 0
            guard let walker = FileManager.default.enumerator(at: URL(fileURLWithPath: path(id)),
                                                              includingPropertiesForKeys: [.fileSizeKey]) else { return 0 }
            for case let url as URL in walker {
                bytes += Int64((try? url.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0)
            }
            return bytes
        }
    }

    /// A push reached `id`: its size is measured again at the next quota check.
    func noteChanged(_ id: String) {
        index.invalidateSize(id)
    }

    /// Removes the repository `id`: renamed out of place first (it disappears at once for every
    /// request), then deleted. True if it was there.
    @discardableResult
    func remove(_ id: String) -> Bool {
        let doomed = stagingFolder + "/removed-\(id)-\(UUID().uuidString).git"
        guard rename(path(id), doomed) == 0 else { return false }
        index.remove(id)
        try? FileManager.default.removeItem(atPath: doomed)
        return true
    }

    /// Records that `owner` deleted `id` at `time`: written beside, fsynced, renamed, the
    /// folder fsynced, before the repository is removed (a kill between is finished by `prepare`).
    func writeTombstone(_ id: String, owner: String, at time: Int64) throws {
        let final = tombstoneFolder + "/" + id
        let temporary = final + ".\(UUID().uuidString).tmp"
        guard FileManager.default.createFile(atPath: temporary, contents: Data("\(owner) \(time)\n".utf8),
                                             attributes: [.posixPermissions: 0o600]) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: temporary])
        }
        defer { unlink(temporary) }
        for (path, flags) in [(temporary, O_RDONLY), (tombstoneFolder, O_RDONLY | O_DIRECTORY)] {
            let descriptor = open(path, flags)
            guard descriptor >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
            defer { close(descriptor) }
            if path == tombstoneFolder {
                guard rename(temporary, final) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
            }
            guard fsync(descriptor) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        }
    }

    /// The tombstone of `id`, if its owner deleted it (a file that does not parse counts as
    /// one with no owner: the id stays gone, and nobody is told more).
    func tombstone(_ id: String) -> RepositoryTombstone? {
        guard let data = FileManager.default.contents(atPath: tombstoneFolder + "/" + id) else { return nil }
        let fields = String(decoding: data.prefix(256), as: UTF8.self).split(whereSeparator: \.isWhitespace)
        guard fields.count == 2, let time = Int64(fields[1]) else { return RepositoryTombstone(owner: "", deletedAt: 0) }
        return RepositoryTombstone(owner: String(fields[0]), deletedAt: time)
    }

    /// When the last session opened on staging repository `id` ends (written when a session
    /// opens, kept across restarts); nil when none was ever opened.
    func shareEnds(_ id: String) -> Int64? {
        (try? String(contentsOfFile: path(id) + "/binder-share-ends", encoding: .utf8)).flatMap { Int64($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    func noteShareEnds(_ id: String, at time: Int64) {
        guard time > (shareEnds(id) ?? 0) else { return }
        try? Data("\(time)\n".utf8).write(to: URL(fileURLWithPath: path(id) + "/binder-share-ends"), options: .atomic)
    }

    /// The `scan-…` staging repositories, with when each was last changed.
    func stagingRepositories() -> [(id: String, modified: Date)] {
        index.stagingRepositories.map { id in
            let attributes = try? FileManager.default.attributesOfItem(atPath: path(id))
            return (id, (attributes?[.modificationDate] as? Date) ?? .distantPast)
        }
    }

    /// Every repository id in the folder (read once, at start: see `index`).
    private func ids() -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return names.sorted().compactMap { name in
            guard name.hasSuffix(".git") else { return nil }
            let id = String(name.dropLast(4))
            return RepositoryID.isValid(id) ? id : nil
        }
    }

    func list(owner: String) -> [RepositorySummary] {
        index.repositories(of: owner).compactMap { id -> RepositorySummary? in
            guard exists(id), self.owner(id) == owner else { return nil }
            var last: String? = nil
            if let repository = try? GitRepository.open(path: path(id)), let tip = try? repository.refs.branchTip(),
               let info = try? repository.commits.commit(tip) {
                last = ISO8601DateFormatter().string(from: info.committer.time)
            }
            return RepositorySummary(repoId: id, name: id, owner: owner, role: "owner", lastCommit: last)
        }
    }
}
