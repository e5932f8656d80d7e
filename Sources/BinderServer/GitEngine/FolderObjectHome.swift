import BinderGit
import Foundation

/// A `GitObjectHome` over one bare repository of the folder store, for serving it through the
/// engine (`binder serve --git-engine binder`, hidden) and for the engine's tests without a
/// database: a pushed pack is moved into `objects/pack` (the `.pack` first, then its `.idx`,
/// as git does, so no reader sees an index without its pack), then each ref is moved by
/// libgit2's compare-and-swap, all under the repository's lock in this process
/// (`RepositoryLocks`): the check of every command's old id and the writes are one step.
struct FolderObjectHome: GitObjectHome {
    /// The bare repository.
    let path: String
    let quarantine: String
    let work: BlockingWork

    /// One lock per repository path, for the whole process.
    static let locks = RepositoryLocks()

    func refs() async throws(StorageError) -> [StoredRef] {
        let path = self.path
        do {
            return try await work.run {
                try ServedRepository.open(path: path).references().map { StoredRef(name: $0.name, target: $0.target.hex) }
            }
        } catch { throw .backend(operation: "cannot read the refs", detail: "\(error)") }
    }

    func objectRepository() async throws(StorageError) -> String { path }

    func store(_ pack: ReceivedPack?, commands: [RefCommand]) async throws(StorageError) -> [RefOutcome] {
        let path = self.path
        do {
            return try await work.run { try Self.locks.withLock(path) { try Self.apply(pack, commands, at: path) } }
        } catch let error as StorageError { throw error } catch {
            throw .backend(operation: "cannot store the push", detail: "\(error)")
        }
    }

    /// The store itself, the repository's lock held.
    private static func apply(_ pack: ReceivedPack?, _ commands: [RefCommand], at path: String) throws -> [RefOutcome] {
        let before = try GitRepository.open(path: path)
        var moved: [Bool] = []
        for command in commands { moved.append(try before.refs.reference(command.ref)?.hex != command.old) }
        if moved.contains(true) {
            return moved.map { $0 ? .refused("non-fast-forward") : .refused("atomic push failed") }
        }
        if let pack {
            let packFolder = path + "/objects/pack"
            for (from, name) in [(pack.packPath, "pack-\(pack.checksum).pack"), (pack.indexPath, "pack-\(pack.checksum).idx")] {
                guard rename(from, packFolder + "/" + name) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
            }
        }
        // Opened after the move: its object database finds the new pack's objects.
        let repository = try GitRepository.open(path: path)
        var outcomes: [RefOutcome] = []
        for command in commands {
            guard let newHex = command.new, let new = ObjectID(hex: newHex) else {
                outcomes.append(.refused("deletion prohibited"))
                continue
            }
            let expected = command.old.flatMap { ObjectID(hex: $0) }
            do {
                try repository.refs.setReference(command.ref, to: new, expected: expected, message: "push")
                outcomes.append(.applied)
            } catch {
                guard error.isConcurrentUpdate else { throw error }
                outcomes.append(.refused("non-fast-forward"))
            }
        }
        return outcomes
    }
}

/// Locks for repositories by path: a fixed set of stripes, a path always taking the same one
/// (two repositories may share a stripe and then take turns), so that the table stays the same
/// size however many repositories (each creation's staging folder has a path of its own) are pushed to.
final class RepositoryLocks: Sendable {
    /// Each guards the refs and packs of the repositories whose paths hash to it.
    private let stripes: [NSLock] = (0..<64).map { _ in NSLock() }

    func withLock<T>(_ path: String, _ body: () throws -> T) throws -> T {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325   // FNV-1a: the same stripe in every run
        for byte in path.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        let lock = stripes[Int(hash % UInt64(stripes.count))]
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }
}
