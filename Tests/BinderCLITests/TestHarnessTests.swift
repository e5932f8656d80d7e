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
        let marker = "harness-\(UUID().uuidString.prefix(8))"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        // A grandchild holding the inherited descriptors too: Foundation alone would wait for it.
        process.arguments = ["-c", "(exec -a \(marker) sleep 1000) & sleep 1000"]
        let started = Date()
        XCTAssertFalse(try ChildDeadline.run(process, seconds: 1, label: "a sleeper"))
        XCTAssertLessThan(Date().timeIntervalSince(started), 30)
        XCTAssertFalse(process.isRunning)
        let left = try shell("pgrep -f '[\(marker.prefix(1))]\(marker.dropFirst())' || true").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(left, "", "the grandchild was killed too")

        let quick = Process()
        quick.executableURL = URL(fileURLWithPath: "/bin/true")
        XCTAssertTrue(try ChildDeadline.run(quick, seconds: 60, label: "true"))
        XCTAssertEqual(quick.terminationStatus, 0)
    }

    func testTheWatchdogFollowsTheRunningTest() throws {
        XCTAssertEqual(TestWatchdog.shared.watchedTest, name)
    }
}
