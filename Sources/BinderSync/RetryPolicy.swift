import Foundation
import Synchronization

/// When to try again: the phone apps' schedule, 1 s doubling to 60 s, for every request and
/// every sync step, so that a flaky server is neither hammered nor given up on early.
///
/// `BINDER_RETRY_BASE` (seconds, not a secret) shortens the first wait, for tests: the
/// doubling and the 60 s ceiling (scaled by the same factor) stay.
public struct RetryPolicy: Sendable {
    /// The first wait.
    public var base: TimeInterval
    /// The longest wait.
    public var maximum: TimeInterval
    /// Tries in all (the first included); nil: no limit (the mount's background sync).
    public var attempts: Int?
    /// A command's deadline (`--deadline`): how long one request may go without progress
    /// (no answer, nothing sent or received), its tries and waits included, before it is given
    /// up. A transfer that keeps moving is never cut by it. nil: no deadline (the mount's
    /// background sync, which keeps trying on its own schedule).
    public var deadline: TimeInterval?
    /// Hears each failure that is retried and the wait before the next try: a command says it
    /// on the terminal (a person is waiting), the mount logs it.
    public var onRetry: (@Sendable (SyncError, TimeInterval) -> Void)?

    public init(base: TimeInterval, maximum: TimeInterval, attempts: Int?, deadline: TimeInterval? = nil,
                onRetry: (@Sendable (SyncError, TimeInterval) -> Void)? = nil) {
        self.base = base
        self.maximum = maximum
        self.attempts = attempts
        self.deadline = deadline
        self.onRetry = onRetry
    }

    /// A command's policy: `request`'s tries, within `deadline` seconds without progress,
    /// each retry told to `onRetry`.
    public static func command(deadline: TimeInterval, onRetry: (@Sendable (SyncError, TimeInterval) -> Void)?) -> RetryPolicy {
        var policy = request
        policy.deadline = deadline
        policy.onRetry = onRetry
        return policy
    }

    /// The deadline of a command a person waits for (`login`, `clone`, `sync`) unless it is
    /// given another (`--deadline`): 60 s. Debug builds only: `BINDER_TEST_DEFAULT_DEADLINE`
    /// replaces it, so that a test sees a command without `--deadline` give up within the
    /// default in seconds instead of a minute (release builds compile no such lookup).
    public static let defaultCommandDeadline: TimeInterval = {
        #if DEBUG
        if let seconds = ProcessInfo.processInfo.environment["BINDER_TEST_DEFAULT_DEADLINE"].flatMap({ Double($0) }),
           seconds.isFinite, seconds > 0 { return seconds }
        #endif
        return 60
    }()

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
    /// asked for (`Retry-After`, at least `base`; at most `longestServerWait` without a
    /// deadline: with one, the deadline decides whether it is waited at all), else the
    /// doubling schedule.
    public func delay(after error: SyncError, failures: Int) -> TimeInterval {
        guard let asked = error.retryAfter else { return delay(afterFailure: failures) }
        return deadline == nil ? min(max(asked, base), Self.longestServerWait) : max(asked, base)
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
        guard deadline == nil else { return nil }
        return attempts.map { attempts in
            max((1..<max(attempts, 1)).reduce(0) { $0 + delay(afterFailure: $1) }, Self.longestServerWait)
        }
    }

    /// Runs `body` until it succeeds, throws an error that is not `isTransient`, or the tries
    /// (or `totalWaitBudget`, or the deadline) run out; sleeps the thread between tries
    /// (callers are the command's and the sync's own threads, never a FUSE callback). A wait
    /// that would end past the deadline is not begun: the last error is thrown at once (a
    /// server's `Retry-After` longer than the deadline is its answer). `onRetry` (and the
    /// policy's own) hears each failure that is retried and the wait before the next try (the
    /// server's own when it sent `Retry-After`); `sleep` is the wait itself and `clock` the
    /// time (recorders in unit tests).
    public func run<T>(_ body: () throws(SyncError) -> T,
                       onRetry: (SyncError, TimeInterval) -> Void = { _, _ in },
                       sleep: (TimeInterval) -> Void = { Thread.sleep(forTimeInterval: $0) },
                       clock: @escaping @Sendable () -> Date = { Date() }) throws(SyncError) -> T {
        try run(within: { (_: TransferPatience) throws(SyncError) -> T in try body() }, onRetry: onRetry, sleep: sleep, clock: clock)
    }

    /// `run`, handing each try the request's `TransferPatience`: the try reports its progress
    /// to it and bounds its waits by it.
    public func run<T>(within body: (TransferPatience) throws(SyncError) -> T,
                       onRetry: (SyncError, TimeInterval) -> Void = { _, _ in },
                       sleep: (TimeInterval) -> Void = { Thread.sleep(forTimeInterval: $0) },
                       clock: @escaping @Sendable () -> Date = { Date() }) throws(SyncError) -> T {
        let patience = TransferPatience(deadline: deadline, clock: clock)
        var failures = 0
        var waited: TimeInterval = 0
        while true {
            do {
                return try body(patience)
            } catch {
                failures += 1
                guard error.isTransient, allowsRetry(afterFailure: failures) else { throw error }
                let wait = delay(after: error, failures: failures)
                if let budget = totalWaitBudget, waited + wait > budget + 0.001 { throw error }
                if let remaining = patience.remaining, wait >= remaining { throw error }
                waited += wait
                onRetry(error, wait)
                self.onRetry?(error, wait)
                sleep(wait)
            }
        }
    }
}

/// How long one request (its tries and the waits between them) may still go without progress
/// before it is given up: `RetryPolicy.deadline` seconds from its start or its last progress
/// (bytes sent or received, an answer's head). Shared by the request's tries and the HTTP
/// layer's watchdog (an event loop); the Mutex guards the time of the last progress.
public final class TransferPatience: Sendable {
    /// nil: no deadline.
    public let deadline: TimeInterval?
    let clock: @Sendable () -> Date
    private let lastProgress: Mutex<Date>

    public init(deadline: TimeInterval?, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.deadline = deadline
        self.clock = clock
        lastProgress = Mutex(clock())
    }

    /// Something moved: the deadline counts from now.
    public func progressed() {
        let now = clock()
        lastProgress.withLock { $0 = now }
    }

    /// Seconds left before the request is given up (never negative); nil without a deadline.
    public var remaining: TimeInterval? {
        guard let deadline else { return nil }
        let since = clock().timeIntervalSince(lastProgress.withLock { $0 })
        return max(0, deadline - since)
    }
}
