import Foundation
import Synchronization
import Testing
import BinderSync

/// `RetryPolicy.run`: how often a request is tried and how long it waits in all, for servers
/// that fail, and servers that ask to wait (`Retry-After`). A row per case.
@Suite struct RetryPolicyTests {
    struct Row: CustomStringConvertible {
        let name: String
        let attempts: Int?
        /// What the server answers to each try, in order (nil: success).
        let answers: [SyncError?]
        let tries: Int
        let waits: [TimeInterval]
        let succeeds: Bool
        var description: String { name }
    }

    static let busy60 = SyncError.busy(status: 503, message: "busy", retryAfter: 60)
    static let busy1 = SyncError.busy(status: 429, message: "slow down", retryAfter: 1)
    static let down = SyncError.server(status: 502, message: "bad gateway")

    static let rows: [Row] = [
        Row(name: "a failing server: the doubling schedule, five tries", attempts: 5,
            answers: Array(repeating: down, count: 9), tries: 5, waits: [1, 2, 4, 8], succeeds: false),
        Row(name: "a server that asks for 1 s gets exactly that", attempts: 5,
            answers: [busy1, busy1, nil], tries: 3, waits: [1, 1], succeeds: true),
        Row(name: "Retry-After 60 on every try: one wait, not four minutes", attempts: 5,
            answers: Array(repeating: busy60, count: 9), tries: 2, waits: [60], succeeds: false),
        Row(name: "an hour is cut to a minute", attempts: 5,
            answers: [.busy(status: 503, message: "later", retryAfter: 3600), nil], tries: 2, waits: [60], succeeds: true),
        Row(name: "the mount's unbounded policy waits as long as it is asked", attempts: nil,
            answers: [busy60, busy60, busy60, nil], tries: 4, waits: [60, 60, 60], succeeds: true),
        Row(name: "a refusal is not retried", attempts: 5,
            answers: [.server(status: 403, message: "forbidden")], tries: 1, waits: [], succeeds: false),
    ]

    @Test(arguments: rows) func triesAndWaits(_ row: Row) {
        let policy = RetryPolicy(base: 1, maximum: 60, attempts: row.attempts)
        var tries = 0
        var waits: [TimeInterval] = []
        let result = Result { () throws(SyncError) -> Int in
            try policy.run({ () throws(SyncError) -> Int in
                defer { tries += 1 }
                if tries < row.answers.count, let failure = row.answers[tries] { throw failure }
                return tries
            }, sleep: { waits.append($0) })
        }
        #expect(tries == row.tries)
        #expect(waits == row.waits)
        let succeeded = (try? result.get()) != nil
        #expect(succeeded == row.succeeds)
    }
}

/// `RetryPolicy.run` with a command's deadline (`--deadline`): a server's `Retry-After` is
/// waited in full when it fits (past the mount's one-minute cut), and answered at once when it
/// does not; failures are retried while the deadline lasts. Time is a clock the waits (and
/// each try's own `tryTakes` seconds) move on. A row per case.
@Suite struct RetryDeadlineTests {
    struct Row: CustomStringConvertible {
        let name: String
        let deadline: TimeInterval
        let answers: [SyncError?]
        /// Seconds each try takes (a server that never answers: the try's own timeout).
        let tryTakes: TimeInterval
        let tries: Int
        let waits: [TimeInterval]
        let succeeds: Bool
        var description: String { name }
    }

    static let down = SyncError.offline("127.0.0.1 stopped answering (timed out)")

    static let rows: [Row] = [
        Row(name: "Retry-After past the deadline is the answer, at once", deadline: 5,
            answers: [.busy(status: 503, message: "busy", retryAfter: 30), nil], tryTakes: 0, tries: 1, waits: [], succeeds: false),
        Row(name: "Retry-After within the deadline is waited in full, past a minute", deadline: 300,
            answers: [.busy(status: 429, message: "slow down", retryAfter: 120), nil], tryTakes: 0, tries: 2, waits: [120], succeeds: true),
        Row(name: "a failing server: the doubling schedule until the deadline", deadline: 10,
            answers: Array(repeating: down, count: 9), tryTakes: 0, tries: 4, waits: [1, 2, 4], succeeds: false),
        Row(name: "a silent server (each try 30 s) within the default minute", deadline: 60,
            answers: Array(repeating: down, count: 9), tryTakes: 30, tries: 2, waits: [1], succeeds: false),
        Row(name: "a long deadline keeps the five tries", deadline: 600,
            answers: Array(repeating: down, count: 9), tryTakes: 30, tries: 5, waits: [1, 2, 4, 8], succeeds: false),
    ]

    /// A clock that only the test moves.
    final class FakeClock: Sendable {
        private let now = Mutex(Date(timeIntervalSince1970: 1_000_000))
        func advance(_ seconds: TimeInterval) { now.withLock { $0 += seconds } }
        var date: Date { now.withLock { $0 } }
    }

    @Test(arguments: rows) func triesAndWaits(_ row: Row) {
        let clock = FakeClock()
        let policy = RetryPolicy(base: 1, maximum: 60, attempts: 5, deadline: row.deadline)
        var tries = 0
        var waits: [TimeInterval] = []
        let result = Result { () throws(SyncError) -> Int in
            try policy.run({ () throws(SyncError) -> Int in
                defer { tries += 1 }
                clock.advance(row.tryTakes)
                if tries < row.answers.count, let failure = row.answers[tries] { throw failure }
                return tries
            }, sleep: { waits.append($0); clock.advance($0) }, clock: { clock.date })
        }
        #expect(tries == row.tries)
        #expect(waits == row.waits)
        #expect(((try? result.get()) != nil) == row.succeeds)
    }

    /// The default is PRODUCT.md's minute (SyncPatienceTests sees a command without
    /// `--deadline` give up within it through `BINDER_TEST_DEFAULT_DEADLINE`, unset here).
    @Test func theDefaultDeadlineIsAMinute() {
        #expect(ProcessInfo.processInfo.environment["BINDER_TEST_DEFAULT_DEADLINE"] == nil)
        #expect(RetryPolicy.defaultCommandDeadline == 60)
    }

    /// Progress (bytes moving) restarts the deadline: a transfer that keeps moving is not cut.
    @Test func progressRestartsTheDeadline() {
        let clock = FakeClock()
        let patience = TransferPatience(deadline: 5, clock: { clock.date })
        clock.advance(4)
        #expect(patience.remaining == 1)
        patience.progressed()
        clock.advance(4)
        #expect(patience.remaining == 1)
        clock.advance(2)
        #expect(patience.remaining == 0)
        #expect(TransferPatience(deadline: nil).remaining == nil)
    }
}
