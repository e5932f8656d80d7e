import BinderGit
import Dispatch
import Foundation
import Logging
import PostgresNIO

/// Background compaction of a repository's packs in the database: each push stores one pack
/// (`PostgresObjectHome.store`), so a repository pushed to a thousand times would have a
/// thousand packs, each a query to download and an index for libgit2 to search. Once a
/// repository holds more than `packLimit` packs (checked after each push that stored one),
/// one pack of everything its refs reach is built with libgit2's pack builder (BinderGit's
/// `repack`) and replaces the packs it read, in one transaction.
///
/// Safe against pushes meanwhile: the packs are listed before the refs are read, and every
/// listed pack was committed with the refs that reach its objects (refs only move forward:
/// the server refuses non-fast-forwards and deletions), so the new pack holds every object of
/// the packs it replaces that anything reaches; packs stored after the listing stay. Two
/// replicas never compact one repository at once: a per-repository advisory lock
/// (`pg_try_advisory_lock`), the other replica skips. A compaction cut anywhere leaves the old
/// packs (the transaction rolls back).
struct PostgresCompaction: Sendable {
    let storage: PostgresStorage
    let cache: PostgresPackCache
    /// More packs than this: compact. 16 keeps a fetch's index lookups few and a compaction's
    /// work (one full pack build) rare: at most one per 16 pushes.
    var packLimit: Int = 16

    /// The advisory lock's first key (the second is the id's hash): "bcmp".
    static let lockClass: Int32 = 0x62_63_6d_70

    /// Starts `compact(id)` in the background when `id` holds more than `packLimit` packs.
    func compactIfDue(_ id: String) {
        Task.detached(priority: .background) {
            do { _ = try await compact(id, onlyAbove: packLimit) } catch {
                storage.logger.warning("compaction failed", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Compacts `id` when it holds more than `onlyAbove` packs and no other replica is doing
    /// it: true when its packs were replaced by one.
    @discardableResult
    func compact(_ id: String, onlyAbove: Int = 1) async throws(StorageError) -> Bool {
        let logger = storage.logger
        let operation = "cannot compact \(id)"
        return try await storage.perform(operation) { client in
            try await client.withConnection { connection in
                guard try await Self.tryLock(id, on: connection, logger: logger) else { return false }
                do {
                    let done = try await replacePacks(id, onlyAbove: onlyAbove, on: connection, logger: logger)
                    try await Self.unlock(id, on: connection, logger: logger)
                    return done
                } catch {
                    try? await Self.unlock(id, on: connection, logger: logger)
                    throw error
                }
            }
        }
    }

    private func replacePacks(_ id: String, onlyAbove: Int, on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        // The packs first, then the refs (see above).
        var listed: [String: Int64] = [:]
        for try await (checksum, bytes) in try await connection.query("""
            SELECT checksum, pack_bytes + length(pack_index) FROM binder_packs WHERE repository = \(id)
            """, logger: logger).decode((String, Int64).self) {
            listed[checksum] = bytes
        }
        guard listed.count > onlyAbove else { return false }
        var refs: [(String, String)] = []
        for try await row in try await connection.query("SELECT name, target FROM binder_refs WHERE repository = \(id)",
                                                        logger: logger).decode((String, String).self) {
            refs.append(row)
        }
        let cached = try await cache.update(id)
        let scratch = cache.quarantine, tips = refs
        // libgit2's walk and pack build block for as long as the repository is large: on a
        // Dispatch thread, not one of the few that serve every request.
        let built = try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global(qos: .utility).async {
                continuation.resume(with: Result { try Self.packOfEverything(in: cached, reachableFrom: tips, scratch: scratch) })
            }
        }
        guard let pack = built else { return false }
        defer { try? FileManager.default.removeItem(atPath: pack.folder) }
        guard listed[pack.received.checksum] == nil else { return false }   // already one pack of it all
        let index = try Data(contentsOf: URL(fileURLWithPath: pack.received.indexPath))
        let replaced = Array(listed.keys)
        try await connection.exec("BEGIN", logger: logger)
        do {
            // Packs another compaction replaced meanwhile are not there: then this one is void.
            var present = 0
            for try await count in try await connection.query("""
                SELECT count(*) FROM (SELECT 1 FROM binder_packs WHERE repository = \(id) AND checksum = ANY(\(replaced)) FOR UPDATE) p
                """, logger: logger).decode(Int.self) {
                present = count
            }
            guard present == replaced.count else {
                try await connection.exec("ROLLBACK", logger: logger)
                return false
            }
            let added = try await PostgresObjectHome.insert(pack.received, index: index, into: id, on: connection, logger: logger)
            let removed = replaced.reduce(Int64(0)) { $0 + (listed[$1] ?? 0) }
            try await connection.exec("DELETE FROM binder_packs WHERE repository = \(id) AND checksum = ANY(\(replaced))", logger: logger)
            try await connection.exec("""
                UPDATE binder_repositories SET bytes = GREATEST(bytes + \(added) - \(removed), 0) WHERE id = \(id)
                """, logger: logger)
            try await connection.exec("COMMIT", logger: logger)
        } catch {
            try? await connection.exec("ROLLBACK", logger: logger)
            throw error
        }
        cache.adopt(pack.received, into: id)
        _ = try? await cache.update(id)
        logger.info("compacted", metadata: ["packs": "\(replaced.count)", "objects": "\(pack.received.objects)"])
        return true
    }

    /// One pack of everything `refs` reach in the bare repository at `repository`, built in a
    /// scratch repository under `scratch` that borrows its objects (`objects/info/alternates`)
    /// and holds the refs; nil when a ref does not name a commit there (an annotated tag: the
    /// walk would pack what it points at, not the tag itself, so such a repository is left as
    /// it is). The caller removes `folder`.
    static func packOfEverything(in repository: String, reachableFrom refs: [(String, String)],
                                 scratch: String) throws -> (received: ReceivedPack, folder: String)? {
        let cached = repository
        let folder = scratch + "/compact-\(UUID().uuidString).git"
        do {
            _ = try GitRepository.create(path: folder, bare: true)
            try FileManager.default.createDirectory(atPath: folder + "/objects/info", withIntermediateDirectories: true)
            try Data((cached + "/objects\n").utf8).write(to: URL(fileURLWithPath: folder + "/objects/info/alternates"))
            let reader = try GitRepository.open(path: folder)
            for (name, target) in refs {
                guard let object = ObjectID(hex: target), (try? reader.commits.commit(object)) != nil else {
                    try? FileManager.default.removeItem(atPath: folder)
                    return nil
                }
                try reader.refs.setReference(name, to: object, expected: nil, force: true, message: "compaction")
            }
            let result = try reader.packs.repack()
            let names = try FileManager.default.contentsOfDirectory(atPath: folder + "/objects/pack")
            guard result.objects > 0, let indexName = names.first(where: { $0.hasSuffix(".idx") }) else {
                try? FileManager.default.removeItem(atPath: folder)
                return nil
            }
            let base = folder + "/objects/pack/" + indexName.dropLast(4)
            let checksum = String(indexName.dropFirst(5).dropLast(4))
            let bytes = try FileManager.default.attributesOfItem(atPath: base + ".pack")[.size] as? Int ?? 0
            return (ReceivedPack(packPath: base + ".pack", indexPath: base + ".idx", checksum: checksum,
                                 objects: result.objects, bytes: Int64(bytes)), folder)
        } catch {
            try? FileManager.default.removeItem(atPath: folder)
            throw error
        }
    }

    private static func tryLock(_ id: String, on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        for try await locked in try await connection.query("SELECT pg_try_advisory_lock(\(lockClass), hashtext(\(id)))",
                                                           logger: logger).decode(Bool.self) {
            return locked
        }
        return false
    }

    private static func unlock(_ id: String, on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.exec("SELECT pg_advisory_unlock(\(lockClass), hashtext(\(id)))", logger: logger)
    }
}
