import BinderGit
import Foundation

/// The server's bare repositories: `<root>/<repoId>.git`, each with its owner's public key in
/// `binder-owner` beside git's own files. Created on first push ("push-to-create").
struct RepositoryStore: Sendable {
    let root: String

    struct Summary: Codable, Sendable {
        let repoId: String
        let name: String
        let owner: String
        let role: String
        /// ISO 8601 time of the last commit of main; nil for an empty repository.
        let lastCommit: String?
    }

    /// Repository ids become folder names (`GitRepository.isValidRepositoryID`).
    static func isValidID(_ id: String) -> Bool { GitRepository.isValidRepositoryID(id) }

    func path(_ id: String) -> String { root + "/" + id + ".git" }

    func exists(_ id: String) -> Bool { FileManager.default.fileExists(atPath: path(id) + "/HEAD") }

    func owner(_ id: String) -> String? {
        guard let data = FileManager.default.contents(atPath: path(id) + "/binder-owner") else { return nil }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Creates an empty bare repository owned by `owner`, refusing non-fast-forward pushes and
    /// deletions (the server never loses history). Racing creators: the first one wins.
    func create(_ id: String, owner: String) throws {
        let final = path(id)
        let staging = root + "/.binder-serve/new-\(id)-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: staging) }
        let repository = try GitRepository.create(path: staging, bare: true)
        try repository.setConfigValue("receive.denyNonFastForwards", "true")
        try repository.setConfigValue("receive.denyDeletes", "true")
        try Data((owner + "\n").utf8).write(to: URL(fileURLWithPath: staging + "/binder-owner"))
        if rename(staging, final) != 0 && !exists(id) {
            throw ServerError.setup("cannot create repository \(id): \(String(cString: strerror(errno)))")
        }
    }

    func list(owner: String) -> [Summary] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return names.sorted().compactMap { name -> Summary? in
            guard name.hasSuffix(".git") else { return nil }
            let id = String(name.dropLast(4))
            guard Self.isValidID(id), self.owner(id) == owner else { return nil }
            var last: String? = nil
            if let repository = try? GitRepository.open(path: path(id)), let tip = try? repository.branchTip(),
               let info = try? repository.commit(tip) {
                last = ISO8601DateFormatter().string(from: info.committer.time)
            }
            return Summary(repoId: id, name: id, owner: owner, role: "owner", lastCommit: last)
        }
    }
}
