import Foundation
import Synchronization

/// Which repositories each owner has and what they take on disk, kept in memory so that a
/// request costs the same whether the server holds ten repositories or ten thousand: a listing
/// or a quota check reads its owner's entries, never the whole folder. Filled by one scan of the
/// folder at start, then kept up to date by the server's own creations, pushes and removals
/// (a repository put into the folder by hand is seen after a restart).
final class RepositoryIndex: Sendable {
    private struct Entries {
        /// Each repository's owner.
        var owners: [String: String] = [:]
        /// Each owner's repositories.
        var byOwner: [String: Set<String>] = [:]
        /// Bytes on disk per repository, as last measured; absent: to be measured at the next
        /// quota check (a push changed it, or it was never asked for).
        var bytes: [String: Int64] = [:]
        /// Pushes seen per repository: a measure begun before a push is not kept after it.
        var changes: [String: Int] = [:]
        /// The `scan-…` staging repositories (swept for expiry).
        var staging: Set<String> = []
    }

    /// Guards every entry.
    private let entries = Mutex(Entries())

    /// Replaces everything with `owners` (repository id → owner), read from the folder.
    func load(_ owners: [String: String]) {
        entries.withLock { entries in
            entries = Entries()
            for (id, owner) in owners { Self.insert(id, owner: owner, into: &entries) }
        }
    }

    func add(_ id: String, owner: String) {
        entries.withLock { Self.insert(id, owner: owner, into: &$0) }
    }

    private static func insert(_ id: String, owner: String, into entries: inout Entries) {
        entries.owners[id] = owner
        entries.byOwner[owner, default: []].insert(id)
        entries.bytes[id] = nil
        entries.changes[id, default: 0] += 1
        if ScanPolicy.isStagingID(id) { entries.staging.insert(id) }
    }

    func remove(_ id: String) {
        entries.withLock { entries in
            guard let owner = entries.owners.removeValue(forKey: id) else { return }
            entries.byOwner[owner]?.remove(id)
            if entries.byOwner[owner]?.isEmpty == true { entries.byOwner[owner] = nil }
            entries.bytes[id] = nil
            entries.changes[id] = nil
            entries.staging.remove(id)
        }
    }

    /// `id`'s size is to be measured again (a push changed it).
    func invalidateSize(_ id: String) {
        entries.withLock { entries in
            entries.bytes[id] = nil
            entries.changes[id, default: 0] += 1
        }
    }

    /// `owner`'s repositories, sorted.
    func repositories(of owner: String) -> [String] {
        entries.withLock { $0.byOwner[owner].map { $0.sorted() } ?? [] }
    }

    var stagingRepositories: [String] {
        entries.withLock { $0.staging.sorted() }
    }

    /// How many repositories `owner` has and their bytes on disk; `measure` walks one
    /// repository whose size is not known (outside the lock: it reads the disk).
    func usage(of owner: String, measure: (String) -> Int64) -> (repositories: Int, bytes: Int64) {
        // Each of the owner's repositories: its known size, or the pushes seen before measuring it.
        let known = entries.withLock { entries -> [(id: String, bytes: Int64?, changes: Int)] in
            (entries.byOwner[owner] ?? []).map { ($0, entries.bytes[$0], entries.changes[$0, default: 0]) }
        }
        var total: Int64 = 0
        var measured: [(id: String, bytes: Int64, changes: Int)] = []
        for entry in known {
            if let bytes = entry.bytes { total += bytes; continue }
            let bytes = measure(entry.id)
            measured.append((entry.id, bytes, entry.changes))
            total += bytes
        }
        if !measured.isEmpty {
            entries.withLock { entries in
                // Kept only for repositories still there and not pushed to since the measure began.
                for entry in measured where entries.owners[entry.id] != nil && entries.changes[entry.id, default: 0] == entry.changes {
                    entries.bytes[entry.id] = entry.bytes
                }
            }
        }
        return (known.count, total)
    }
}
