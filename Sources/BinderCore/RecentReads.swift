import BinderCrypto
import Synchronization

/// The contents last read by path (a read-only mount whose kernel sends no OPEN, so reads come
/// without a handle holding the content): a file larger than the plaintext cache, read in
/// 128 KiB requests, is decrypted once, not once per request. Keyed by what a node shows
/// (`Node.Source`), so a change is never served stale. Holds at most `capacity` entries and
/// `budget` bytes, the newest entry whatever its size. One lock, one reason.
final class RecentReads: Sendable {
    private struct Entries: ~Copyable {
        /// Newest last.
        var entries: [(key: Node.Source, bytes: SecureBytes)] = []
    }

    private let capacity = 4
    private let budget = 64 << 20
    /// Guards the entries.
    private let state = Mutex(Entries())

    init() {}

    func get(_ key: Node.Source) -> SecureBytes? {
        state.withLock { state in
            guard let index = state.entries.lastIndex(where: { $0.key == key }) else { return nil }
            let entry = state.entries.remove(at: index)
            state.entries.append(entry)
            return entry.bytes
        }
    }

    func put(_ key: Node.Source, _ bytes: SecureBytes) {
        state.withLock { state in
            state.entries.removeAll { $0.key == key }
            state.entries.append((key, bytes))
            var total = state.entries.reduce(0) { $0 + $1.bytes.count }
            while state.entries.count > 1 && (state.entries.count > capacity || total > budget) {
                total -= state.entries.removeFirst().bytes.count
            }
        }
    }

    func removeAll() { state.withLock { $0.entries.removeAll() } }
}
