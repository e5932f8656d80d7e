import BinderCrypto
import Synchronization

/// Outstanding login challenges: each valid for `lifetime` seconds and good for one verify.
final class ChallengeBook: Sendable {
    /// Guards the challenges and their expiry times.
    private let open = Mutex<[String: Int64]>([:])
    let lifetime: Int64

    init(lifetime: Int64 = 300) { self.lifetime = lifetime }

    func make(now: Int64) -> String {
        let challenge = Hex.encode(randomBytes(32))
        open.withLock { book in
            book = book.filter { $0.value > now }   // forget the expired ones
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
