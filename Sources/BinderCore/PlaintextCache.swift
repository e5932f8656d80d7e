import BinderCrypto
import Synchronization

/// A bounded least-recently-used cache of plaintext, keyed by where it came from: why it
/// exists is that decrypting is the cost of a read, and memory for it must have a bound.
///
/// Entries are `SecureBytes`: memory is zeroed when an entry is evicted and the last reader lets
/// go of it (open files keep their own reference), and at unmount when the cache is cleared.
final class PlaintextCache: Sendable {
    private struct Entries: ~Copyable {
        var size = 0
        var entries: [Node.Source: (bytes: SecureBytes, lastUse: UInt64)] = [:]
        var clock: UInt64 = 0
    }

    let capacity: Int
    /// Guards the entries, their total size and the use clock.
    private let state = Mutex(Entries())

    init(capacity: Int) { self.capacity = capacity }

    func get(_ key: Node.Source) -> SecureBytes? {
        state.withLock { state in
            guard let entry = state.entries[key] else { return nil }
            state.clock += 1
            state.entries[key] = (entry.bytes, state.clock)
            return entry.bytes
        }
    }

    /// Stores `bytes` unless it alone is larger than the whole cache; evicts the least recently
    /// used entries to make room.
    func put(_ key: Node.Source, _ bytes: SecureBytes) {
        guard bytes.count <= capacity else { return }
        state.withLock { state in
            if let old = state.entries.removeValue(forKey: key) { state.size -= old.bytes.count }
            while state.size + bytes.count > capacity, let victim = state.entries.min(by: { $0.value.lastUse < $1.value.lastUse }) {
                state.entries.removeValue(forKey: victim.key)
                state.size -= victim.value.bytes.count
            }
            state.clock += 1
            state.entries[key] = (bytes, state.clock)
            state.size += bytes.count
        }
    }

    func removeAll() {
        state.withLock { state in
            state.entries.removeAll()
            state.size = 0
        }
    }

    /// Bytes and entries held.
    var usage: (bytes: Int, entries: Int) { state.withLock { ($0.size, $0.entries.count) } }
}
