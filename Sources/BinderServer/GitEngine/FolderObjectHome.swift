import BinderGit
import Foundation
import Synchronization

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

/// A lock per repository path, made at its first use (a few bytes each; one per repository
/// pushed to since the start).
final class RepositoryLocks: Sendable {
    /// Guards the table; each entry guards its repository's refs and packs.
    private let table = Mutex<[String: NSLock]>([:])

    func withLock<T>(_ path: String, _ body: () throws -> T) rethrows -> T {
        let lock = table.withLock { table in
            if let lock = table[path] { return lock }
            let lock = NSLock()
            table[path] = lock
            return lock
        }
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }
}
