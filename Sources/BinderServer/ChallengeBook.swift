import BinderCrypto
import Synchronization

/// Outstanding login challenges: each valid for `lifetime` seconds and good for one verify.
/// At most `capacity` are kept (the oldest go first), so that asking for challenges, even from
/// many addresses, cannot grow the server's memory without bound.
final class ChallengeBook: Sendable {
    /// Guards the challenges and their expiry times.
    private let open = Mutex<[String: Int64]>([:])
    let lifetime: Int64
    let capacity: Int

    init(lifetime: Int64 = 300, capacity: Int = 10_000) {
        self.lifetime = lifetime
        self.capacity = capacity
    }

    func make(now: Int64) -> String {
        let challenge = Hex.encode(randomBytes(32))
        open.withLock { book in
            if book.count >= capacity {
                book = book.filter { $0.value > now }   // forget the expired ones
                // Still full: drop the ones closest to expiring (the oldest).
                if book.count >= capacity {
                    for (key, _) in book.sorted(by: { $0.value < $1.value }).prefix(book.count - capacity + 1) {
                        book.removeValue(forKey: key)
                    }
                }
            }
            book[challenge] = now + lifetime
        }
        return challenge
    }

    /// Consumes `challenge`: true once, if it was issued here and has not expired.
    func consume(_ challenge: String, now: Int64) -> Bool {
        open.withLock { book in
            guard let expiry = book.removeValue(forKey: challenge) else { return false }
            return expiry > now
        }
    }
}
