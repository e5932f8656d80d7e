import BinderCrypto
import Synchronization

/// Outstanding login challenges: each valid for `lifetime` seconds and good for one verify.
/// Bounded and fair: one client address holds at most `perClient` (its own oldest goes first),
/// and when the book holds `capacity` the address holding the most loses its oldest. However
/// many challenges one address, or a crowd of them, asks for, a real user's pending challenge
/// is dropped only once every other address holds as few as it does; memory stays bounded.
final class ChallengeBook: Sendable {
    private struct Pending {
        /// Challenge → (client, expiry).
        var challenges: [String: (client: String, expiry: Int64)] = [:]
        /// Each client's challenges, oldest first.
        var byClient: [String: [String]] = [:]

        mutating func drop(_ challenge: String) -> (client: String, expiry: Int64)? {
            guard let entry = challenges.removeValue(forKey: challenge) else { return nil }
            byClient[entry.client]?.removeAll { $0 == challenge }
            if byClient[entry.client]?.isEmpty == true { byClient[entry.client] = nil }
            return entry
        }

        mutating func dropOldest(of client: String) {
            guard let oldest = byClient[client]?.first else { return }
            _ = drop(oldest)
        }

        mutating func dropExpired(now: Int64) {
            for (challenge, entry) in challenges where entry.expiry <= now { _ = drop(challenge) }
        }
    }

    /// Guards the pending challenges.
    private let pending = Mutex(Pending())
    let lifetime: Int64
    let capacity: Int
    let perClient: Int

    init(lifetime: Int64 = 300, capacity: Int = 10_000, perClient: Int = 32) {
        self.lifetime = lifetime
        self.capacity = max(1, capacity)
        self.perClient = max(1, perClient)
    }

    /// A new challenge for the client at `address` (as the socket gives it).
    func make(for address: String, now: Int64) -> String {
        let challenge = Hex.encode(randomBytes(32))
        let client = address
        pending.withLock { book in
            if book.byClient[client, default: []].count >= perClient {
                book.dropOldest(of: client)
            }
            if book.challenges.count >= capacity {
                book.dropExpired(now: now)
            }
            if book.challenges.count >= capacity,
               let greediest = book.byClient.max(by: { $0.value.count < $1.value.count })?.key {
                book.dropOldest(of: greediest)
            }
            book.challenges[challenge] = (client, now + lifetime)
            book.byClient[client, default: []].append(challenge)
        }
        return challenge
    }

    /// Consumes `challenge`: true once, if it was issued here and has not expired.
    func consume(_ challenge: String, now: Int64) -> Bool {
        pending.withLock { book in
            guard let entry = book.drop(challenge) else { return false }
            return entry.expiry > now
        }
    }
}

extension ChallengeBook: ChallengeStorage {}
