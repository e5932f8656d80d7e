import Foundation
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
