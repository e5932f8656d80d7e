import BinderCrypto

/// A bounded least-recently-used cache of plaintext, keyed by where it came from.
///
/// Entries are `SecureBytes`: memory is zeroed when an entry is evicted and the last reader lets
/// go of it (open files keep their own reference), and at unmount when the cache is cleared.
/// Not thread-safe: `BinderView` guards it with its state lock.
struct PlaintextCache {
    let capacity: Int
    private(set) var size = 0
    private var entries: [Node.Source: (bytes: SecureBytes, lastUse: UInt64)] = [:]
    private var clock: UInt64 = 0

    init(capacity: Int) { self.capacity = capacity }

    mutating func get(_ key: Node.Source) -> SecureBytes? {
        guard let entry = entries[key] else { return nil }
        clock += 1
        entries[key] = (entry.bytes, clock)
        return entry.bytes
    }

    /// Stores `bytes` unless it alone is larger than the whole cache; evicts the least recently
    /// used entries to make room.
    mutating func put(_ key: Node.Source, _ bytes: SecureBytes) {
        guard bytes.count <= capacity else { return }
        if let old = entries.removeValue(forKey: key) { size -= old.bytes.count }
        while size + bytes.count > capacity, let victim = entries.min(by: { $0.value.lastUse < $1.value.lastUse }) {
            entries.removeValue(forKey: victim.key)
            size -= victim.value.bytes.count
        }
        clock += 1
        entries[key] = (bytes, clock)
        size += bytes.count
    }

    mutating func removeAll() {
        entries.removeAll()
        size = 0
    }

    var count: Int { entries.count }
}
