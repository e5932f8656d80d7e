import Foundation
import XCTest

/// The harness's own bounds (TestWatchdog.swift): a child that never exits is killed at its
/// deadline with what it started, and the watchdog follows the running test.
final class TestHarnessTests: XCTestCase {
    override class func setUp() {
        super.setUp()
        _ = TestWatchdog.shared
    }

    func testAChildThatNeverExitsIsKilledWithItsDescendantsAtTheDeadline() throws {
        // A grandchild holding the inherited descriptors too: Foundation alone would wait for it.
        func sleeper(_ marker: String) -> [String] { ["-c", "(exec -a \(marker) sleep 1000) & sleep 1000"] }
        func left(_ marker: String) throws -> String {
            try shell("pgrep -f '[\(marker.prefix(1))]\(marker.dropFirst())' || true").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        // What every command of the suite goes through (`shell`, `binder …`).
        let marker = "harness-\(UUID().uuidString.prefix(8))"
        let started = Date()
        let run = try BinderSandbox.run(executable: "/bin/bash", sleeper(marker), deadline: 1)
        XCTAssertLessThan(Date().timeIntervalSince(started), 30)
        XCTAssertEqual(run.status, 124)
        XCTAssertTrue(run.stderr.contains("test harness: killed after 1 s"), run.stderr)
        XCTAssertEqual(try left(marker), "", "the grandchild was killed too")
        XCTAssertEqual(try BinderSandbox.run(executable: "/bin/true", []).status, 0)

        // A test's own process.
        let polled = "harness-\(UUID().uuidString.prefix(8))"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = sleeper(polled)
        try process.run()
        XCTAssertFalse(process.waitBounded(seconds: 1, label: "a sleeper"))
        XCTAssertFalse(process.isRunning)
        XCTAssertEqual(try left(polled), "", "the grandchild was killed too")
    }

    func testTheWatchdogFollowsTheRunningTest() throws {
        XCTAssertEqual(TestWatchdog.shared.watchedTest, name)
    }
}
