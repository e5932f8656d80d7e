import Foundation

/// When to try again: the phone apps' schedule, 1 s doubling to 60 s, for every request and
/// every sync step, so that a flaky server is neither hammered nor given up on early.
///
/// `BINDER_RETRY_BASE` (seconds, not a secret) shortens the first wait, for tests: the
/// doubling and the 60 s ceiling (scaled by the same factor) stay.
public struct RetryPolicy: Sendable, Equatable {
    /// The first wait.
    public var base: TimeInterval
    /// The longest wait.
    public var maximum: TimeInterval
    /// Tries in all (the first included); nil: no limit (the mount's background sync).
    public var attempts: Int?

    public init(base: TimeInterval, maximum: TimeInterval, attempts: Int?) {
        self.base = base
        self.maximum = maximum
        self.attempts = attempts
    }

    /// `BINDER_RETRY_BASE`, else 1 s.
    public static var configuredBase: TimeInterval {
        ProcessInfo.processInfo.environment["BINDER_RETRY_BASE"].flatMap { Double($0) }.map { min(max($0, 0.001), 60) } ?? 1
    }

    /// 1 s, 2 s, 4 s … 60 s, `attempts` tries.
    public static func standard(attempts: Int?) -> RetryPolicy {
        let base = configuredBase
        return RetryPolicy(base: base, maximum: 60 * base, attempts: attempts)
    }

    /// One request: a few tries, so that one step gets past a server failing every other
    /// request, and a dead server is reported within a minute.
    public static var request: RetryPolicy { standard(attempts: 5) }

    /// The wait after the `failures`-th failure in a row (1-based).
    public func delay(afterFailure failures: Int) -> TimeInterval {
        guard failures > 0 else { return 0 }
        let doubled = base * pow(2, Double(min(failures - 1, 30)))
        return min(doubled, maximum)
    }

    /// The longest wait a server's `Retry-After` gets (a longer one is cut to this): a sync
    /// that was asked to wait an hour still tries again within a minute.
    public static let longestServerWait: TimeInterval = 60

    /// The wait after the `failures`-th failure in a row, which was `error`: what the server
    /// asked for (`Retry-After`, at least `base`, at most `longestServerWait`), else the
    /// doubling schedule.
    public func delay(after error: SyncError, failures: Int) -> TimeInterval {
        guard let asked = error.retryAfter else { return delay(afterFailure: failures) }
        return min(max(asked, base), Self.longestServerWait)
    }

    /// Whether another try follows the `failures`-th failure.
    public func allowsRetry(afterFailure failures: Int) -> Bool {
        attempts.map { failures < $0 } ?? true
    }

    /// The most a bounded policy waits in all: its own schedule's waits between its tries
    /// (15 s for five tries from 1 s), or one `longestServerWait` if that is longer. A server
    /// asking for more (`Retry-After: 60` on each try would keep a `binder login` four
    /// minutes) ends the tries early, with its answer. nil for the mount's unbounded policy,
    /// which waits as long as it is asked.
    public var totalWaitBudget: TimeInterval? {
        attempts.map { attempts in
            max((1..<max(attempts, 1)).reduce(0) { $0 + delay(afterFailure: $1) }, Self.longestServerWait)
        }
    }

    /// Runs `body` until it succeeds, throws an error that is not `isTransient`, or the tries
    /// (or `totalWaitBudget`) run out; sleeps the thread between tries (callers are the
    /// command's and the sync's own threads, never a FUSE callback). `onRetry` hears each
    /// failure that is retried and the wait before the next try (the server's own when it
    /// sent `Retry-After`); `sleep` is the wait itself (a recorder in unit tests).
    public func run<T>(_ body: () throws(SyncError) -> T,
                       onRetry: (SyncError, TimeInterval) -> Void = { _, _ in },
                       sleep: (TimeInterval) -> Void = { Thread.sleep(forTimeInterval: $0) }) throws(SyncError) -> T {
        var failures = 0
        var waited: TimeInterval = 0
        while true {
            do {
                return try body()
            } catch {
                failures += 1
                guard error.isTransient, allowsRetry(afterFailure: failures) else { throw error }
                let wait = delay(after: error, failures: failures)
                if let budget = totalWaitBudget, waited + wait > budget + 0.001 { throw error }
                waited += wait
                onRetry(error, wait)
                sleep(wait)
            }
        }
    }
}
