import BinderCrypto
import BinderGit
import Foundation
import Logging
import PostgresNIO

/// A replica's copy of the packs the database holds (`binder_packs`, `binder_pack_chunks`): one
/// bare repository per repository id under `folder`, whose `objects/pack` holds the packs as
/// they arrived (each with the index libgit2's indexer wrote for it), so that the git engine
/// reads objects with libgit2 as from any repository. The database is the truth: a pack not
/// listed there any more (compacted) is dropped here, a listed one missing is downloaded
/// chunk by chunk into a temporary file, fsynced, its trailing checksum checked, renamed into
/// place (the `.pack` before its `.idx`, since libgit2 lists packs by their index). Losing the
/// whole folder costs downloads, nothing else; two replicas share nothing here.
///
/// Requests of one replica may bring one repository up to date at once: every file appears by
/// a rename of a complete file, so two downloads of one pack end with the same file.
struct PostgresPackCache: Sendable {
    let folder: String
    let storage: PostgresStorage
    /// This process's own files (quarantine, spool, downloads), apart from other processes'
    /// sharing the cache folder (two replicas on one machine may share it: every pack and
    /// repository there appears by a rename of a complete copy).
    let work: String

    init(folder: String, storage: PostgresStorage) {
        self.folder = folder
        self.storage = storage
        work = folder + "/work-\(getpid())"
    }

    /// Chunks fetched per query: a query stays short (the statement timeout bounds each) and
    /// memory bounded (16 MiB at most in flight) however large the pack.
    static let chunksPerQuery = 16

    /// Where the git engine makes each push's quarantine folder (the same file system, so an
    /// accepted pack is renamed into the cache).
    var quarantine: String { work + "/quarantine" }
    /// Request bodies (`SpoolFile`s).
    var spool: String { work + "/spool" }
    private var downloads: String { work + "/downloads" }

    func path(_ id: String) -> String { folder + "/" + id + ".git" }
    func packFolder(_ id: String) -> String { path(id) + "/objects/pack" }

    /// Makes the folders, removing what processes no longer running (an earlier run of this
    /// one, a replica killed) left in their work folders.
    func prepare() throws {
        let fm = FileManager.default
        try fm.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        for name in (try? fm.contentsOfDirectory(atPath: folder)) ?? [] where name.hasPrefix("work-") {
            guard let pid = pid_t(name.dropFirst(5)) else { continue }
            if pid == getpid() || (kill(pid, 0) != 0 && errno == ESRCH) { try? fm.removeItem(atPath: folder + "/" + name) }
        }
        for sub in [quarantine, spool, downloads] {
            try fm.createDirectory(atPath: sub, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
    }

    /// The cached bare repository of `id`, made empty when missing (made aside, renamed in).
    func repository(_ id: String) throws(StorageError) -> String {
        let target = path(id)
        if FileManager.default.fileExists(atPath: target + "/objects/pack") { return target }
        let made = downloads + "/repo-\(UUID().uuidString).git"
        do {
            _ = try GitRepository.create(path: made, bare: true)
            try FileManager.default.createDirectory(atPath: made + "/objects/pack", withIntermediateDirectories: true)
        } catch {
            try? FileManager.default.removeItem(atPath: made)
            throw .backend(operation: "cannot make the cache", detail: "\(error)")
        }
        // Another request may have made it meanwhile: then ours goes.
        if rename(made, target) != 0 { try? FileManager.default.removeItem(atPath: made) }
        guard FileManager.default.fileExists(atPath: target + "/objects/pack") else {
            throw .backend(operation: "cannot make the cache", detail: "errno \(errno)")
        }
        return target
    }

    /// The checksums of the packs present in `id`'s cache (those with both files).
    func cachedPacks(_ id: String) -> Set<String> {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: packFolder(id))) ?? []
        let set = Set(names)
        return Set(names.compactMap { name -> String? in
            guard name.hasPrefix("pack-"), name.hasSuffix(".idx") else { return nil }
            let checksum = String(name.dropFirst(5).dropLast(4))
            return set.contains("pack-\(checksum).pack") ? checksum : nil
        })
    }

    /// `id`'s cache brought up to date with the database: every listed pack present, the others
    /// dropped. Returns the repository's path.
    func update(_ id: String) async throws(StorageError) -> String {
        // A pack compacted away between the listing and its download: listed again once.
        if try await updateOnce(id) { return path(id) }
        _ = try await updateOnce(id)
        return path(id)
    }

    /// One pass of `update`: false when a listed pack was gone before it was downloaded.
    private func updateOnce(_ id: String) async throws(StorageError) -> Bool {
        _ = try repository(id)
        let logger = storage.logger
        let listed = Set(try await storage.perform("cannot list the packs") { client in
            try await client.rows("SELECT checksum FROM binder_packs WHERE repository = \(id)", as: String.self, logger: logger)
        })
        let present = cachedPacks(id)
        var complete = true
        for checksum in listed.subtracting(present).sorted() where try await !download(id, checksum: checksum) { complete = false }
        // A compacted pack: its objects are in a listed one (downloaded above). Its index goes
        // now, so that libgit2 no longer lists it; its pack stays a while for the requests of
        // this replica that listed it already and have yet to open it.
        for checksum in present.subtracting(listed) {
            let base = packFolder(id) + "/pack-\(checksum)"
            unlink(base + ".idx")
            utime(base + ".pack", nil)
        }
        dropRetiredPacks(id)
        return complete
    }

    /// How long a compacted pack outlives its index: longer than any request (git's 10 minutes).
    static let retiredPackLifetime: TimeInterval = 900

    /// Removes the `.pack` files left without their index (`update`) for `retiredPackLifetime`.
    private func dropRetiredPacks(_ id: String) {
        let folder = packFolder(id)
        let names = Set((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [])
        for name in names where name.hasPrefix("pack-") && name.hasSuffix(".pack") {
            guard !names.contains(String(name.dropLast(5)) + ".idx"),
                  let modified = (try? FileManager.default.attributesOfItem(atPath: folder + "/" + name))?[.modificationDate] as? Date,
                  modified.timeIntervalSinceNow < -Self.retiredPackLifetime else { continue }
            unlink(folder + "/" + name)
        }
    }

    /// Downloads one pack and its index into `id`'s cache; false when the database no longer has it.
    private func download(_ id: String, checksum: String) async throws(StorageError) -> Bool {
        guard FolderRepository.isObjectID(checksum) else { throw .backend(operation: "cannot read a pack", detail: "bad checksum") }
        let logger = storage.logger
        let operation = "cannot read pack \(checksum)"
        let found = try await storage.perform(operation) { client -> (Int64, ByteBuffer)? in
            for try await row in try await client.query("""
                SELECT pack_bytes, pack_index FROM binder_packs WHERE repository = \(id) AND checksum = \(checksum)
                """, logger: logger).decode((Int64, ByteBuffer).self) {
                return row
            }
            return nil
        }
        guard let (size, index) = found else { return false }   // compacted meanwhile
        let packTemporary = downloads + "/\(checksum)-\(UUID().uuidString).pack"
        let indexTemporary = downloads + "/\(checksum)-\(UUID().uuidString).idx"
        defer {
            unlink(packTemporary)
            unlink(indexTemporary)
        }
        let output = try Self.create(packTemporary)
        var written: Int64 = 0, next = 0, tail: [UInt8] = []
        do {
            defer { try? output.close() }
            while true {
                let from = next, count = Self.chunksPerQuery
                let chunks = try await storage.perform(operation) { client -> [(Int, ByteBuffer)] in
                    try await client.query("""
                        SELECT seq, data FROM binder_pack_chunks
                        WHERE repository = \(id) AND checksum = \(checksum) AND seq >= \(from) ORDER BY seq LIMIT \(count)
                        """, logger: logger).decode((Int, ByteBuffer).self).reduce(into: []) { $0.append($1) }
                }
                for (seq, data) in chunks {
                    guard seq == next else { throw StorageError.backend(operation: operation, detail: "chunk \(next) missing") }
                    let bytes = Array(data.readableBytesView)
                    try output.write(contentsOf: bytes)
                    tail = Array((tail + bytes.suffix(20)).suffix(20))
                    written += Int64(bytes.count)
                    next += 1
                }
                if chunks.count < count { break }
            }
            try output.synchronize()
        } catch let error as StorageError { throw error } catch {
            throw .backend(operation: operation, detail: "\(error)")
        }
        // The pack names itself: its last 20 bytes are its SHA-1, the name it is stored under.
        guard written == size, Hex.encode(tail) == checksum else {
            throw .backend(operation: operation, detail: "\(written) of \(size) bytes, or a checksum that does not match")
        }
        let indexFile = try Self.create(indexTemporary)
        do {
            try indexFile.write(contentsOf: Array(index.readableBytesView))
            try indexFile.synchronize()
            try indexFile.close()
        } catch { throw .backend(operation: operation, detail: "\(error)") }
        let base = packFolder(id) + "/pack-\(checksum)"
        guard rename(packTemporary, base + ".pack") == 0, rename(indexTemporary, base + ".idx") == 0 else {
            throw .backend(operation: operation, detail: "rename: errno \(errno)")
        }
        return true
    }

    /// A pack this replica just stored: moved from the push's quarantine into `id`'s cache
    /// (best effort: a pack not moved is downloaded when next needed).
    func adopt(_ pack: ReceivedPack, into id: String) {
        guard let target = try? repository(id) else { return }
        let base = target + "/objects/pack/pack-\(pack.checksum)"
        if rename(pack.packPath, base + ".pack") == 0 { _ = rename(pack.indexPath, base + ".idx") }
    }

    /// Drops `id`'s cache (the repository was removed).
    func drop(_ id: String) {
        let doomed = downloads + "/removed-\(id)-\(UUID().uuidString).git"
        if rename(path(id), doomed) == 0 { try? FileManager.default.removeItem(atPath: doomed) }
    }

    private static func create(_ path: String) throws(StorageError) -> FileHandle {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw .backend(operation: "cannot write the cache", detail: "errno \(errno)") }
        return FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
    }
}
