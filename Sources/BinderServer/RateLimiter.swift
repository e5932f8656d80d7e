import Synchronization

/// A token bucket per client address: `burst` requests at once, then `perMinute` a minute.
/// Used for the login endpoints, which anyone may call.
final class RateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }

    let perMinute: Int
    let burst: Int
    /// Guards the buckets; full ones are forgotten when there are many.
    private let buckets = Mutex<[String: Bucket]>([:])
    private static let forgetAbove = 10_000

    init(perMinute: Int, burst: Int? = nil) {
        self.perMinute = max(1, perMinute)
        self.burst = max(1, burst ?? perMinute)
    }

    /// Takes one token for `address`: false when its bucket is empty.
    func allow(_ address: String, now: ContinuousClock.Instant = .now) -> Bool {
        let rate = Double(perMinute) / 60, capacity = Double(burst)
        return buckets.withLock { buckets in
            if buckets.count > Self.forgetAbove {
                buckets = buckets.filter { refilled($0.value, now: now, rate: rate, capacity: capacity) < capacity }
            }
            var bucket = buckets[address] ?? Bucket(tokens: capacity, updated: now)
            bucket.tokens = refilled(bucket, now: now, rate: rate, capacity: capacity)
            bucket.updated = now
            let allowed = bucket.tokens >= 1
            if allowed { bucket.tokens -= 1 }
            buckets[address] = bucket
            return allowed
        }
    }

    private func refilled(_ bucket: Bucket, now: ContinuousClock.Instant, rate: Double, capacity: Double) -> Double {
        let elapsed = bucket.updated.duration(to: now)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return min(capacity, bucket.tokens + seconds * rate)
    }
}

/// The folder store's `RateCounters`: one `RateLimiter` per login endpoint, in this process
/// (each replica would count on its own).
final class LoginCounters: RateCounters {
    private let challenges: RateLimiter
    private let verifies: RateLimiter

    init(perMinute: Int) {
        challenges = RateLimiter(perMinute: perMinute)
        verifies = RateLimiter(perMinute: perMinute)
    }

    func take(_ counter: RateCounter, address: String) -> Bool {
        switch counter {
        case .challenge: return challenges.allow(address)
        case .verify: return verifies.allow(address)
        }
    }
}
