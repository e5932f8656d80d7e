import Foundation
import Synchronization
import XCTest

/// Bounds on the waits of the command-line tests, so that a child that never ends (a server
/// that never answers, a process that never exits) fails its test, named, instead of holding
/// the whole run until CI's limit, with nothing in the log to say where (CI's run of
/// 2026-12-06 hung for an hour somewhere after ReplicaTests began; stdout was block-buffered,
/// so even the test's name was lost).
enum ChildDeadline {
    /// Longer than any one command of the suite takes (the longest, a 60 MB push or a
    /// 10,000-record import, take well under a minute).
    static let seconds: Double = 300

    /// Waits for `process` (started with `exited` signalled from its termination handler) at
    /// most `seconds`; past that kills it and all its descendants and returns false.
    static func wait(_ process: Process, exited: DispatchSemaphore, seconds: Double = seconds, label: String) -> Bool {
        if exited.wait(timeout: .now() + seconds) == .success { return true }
        expire(process.processIdentifier, label: label, after: seconds)
        // Killed, it ends; Foundation learns of it once every holder of its descriptor is gone.
        _ = exited.wait(timeout: .now() + 30)
        return false
    }

    /// Says that `label` (pid `pid`) outlived its `seconds`, with what it runs, and kills it
    /// and all its descendants.
    static func expire(_ pid: Int32, label: String, after seconds: Double) {
        let line = "test harness: '\(label)' (pid \(pid)) still running after \(Int(seconds)) s; killed with its descendants:\n"
            + ProcessTree.describe(under: pid)
        FileHandle.standardError.write(Data(line.utf8))
        ProcessTree.kill(under: pid, includingRoot: true)
    }
}

extension Process {
    /// `waitUntilExit`, bounded: at most `seconds` (then the process and its descendants are
    /// killed and false returned), and without spinning the run loop (Foundation delivers the
    /// exit to `isRunning` from its own thread).
    @discardableResult
    func waitBounded(seconds: Double = ChildDeadline.seconds, label: String) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while isRunning, Date() < deadline { usleep(10_000) }
        guard isRunning else { return true }
        ChildDeadline.expire(processIdentifier, label: label, after: seconds)
        let grace = Date().addingTimeInterval(30)
        while isRunning, Date() < grace { usleep(10_000) }
        return false
    }
}

/// This process's descendants, from /proc (parent ids), for the deadline and the watchdog.
enum ProcessTree {
    /// pid to parent pid and command line, for every process now.
    private static func table() -> [Int32: (parent: Int32, command: String)] {
        var table: [Int32: (Int32, String)] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(name), let stat = try? String(contentsOfFile: "/proc/\(name)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            // After "pid (comm) ": state, then the parent's pid.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 1, let parent = Int32(fields[1]) else { continue }
            let raw = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(name)/cmdline"))) ?? Data()
            let command = String(decoding: raw.map { $0 == 0 ? 32 : $0 }, as: UTF8.self)
            table[pid] = (parent, String(command.prefix(200)))
        }
        return table
    }

    /// The descendants of `root`, parents before children.
    static func descendants(of root: Int32) -> [(pid: Int32, command: String)] {
        let table = table()
        var children: [Int32: [Int32]] = [:]
        for (pid, entry) in table { children[entry.parent, default: []].append(pid) }
        var result: [(Int32, String)] = [], queue = children[root] ?? []
        while !queue.isEmpty {
            let pid = queue.removeFirst()
            result.append((pid, table[pid]?.command ?? ""))
            queue += children[pid] ?? []
        }
        return result
    }

    static func describe(under root: Int32) -> String {
        descendants(of: root).map { "  \($0.pid) \($0.command)\n" }.joined()
    }

    /// SIGKILL to the descendants of `root` (children last, so none is orphaned to go on).
    static func kill(under root: Int32, includingRoot: Bool) {
        for (pid, _) in descendants(of: root) { Glibc.kill(pid, SIGKILL) }
        if includingRoot { Glibc.kill(root, SIGKILL) }
    }
}

/// Fails a test that runs past `limit` instead of letting it hold the run: prints which test,
/// what it has running, and the FUSE mounts of this machine; kills its child processes and
/// aborts the FUSE connections of the test's mounts (a daemon that stopped answering holds
/// the test in the kernel); and ends the process if the test still does not end.
/// Started by the first `BinderSandbox` (every command-line test makes one).
final class TestWatchdog: NSObject, XCTestObservation, Sendable {
    static let limit: Double = 600
    /// After the kill, how long the test has to end before the process exits.
    static let grace: Double = 120

    /// The running test and when it began; guarded by its mutex.
    private let current = Mutex<(name: String, started: Date, warned: Bool)?>(nil)

    static let shared: TestWatchdog = {
        let watchdog = TestWatchdog()
        XCTestObservationCenter.shared.addTestObserver(watchdog)
        Thread.detachNewThread { watchdog.watch() }
        return watchdog
    }()

    func testCaseWillStart(_ testCase: XCTestCase) {
        current.withLock { $0 = (testCase.name, Date(), false) }
    }

    func testCaseDidFinish(_ testCase: XCTestCase) {
        current.withLock { $0 = nil }
    }

    /// The test it is watching now.
    var watchedTest: String? { current.withLock { $0?.name } }

    private func watch() {
        while true {
            Thread.sleep(forTimeInterval: 5)
            guard let (name, started, warned) = current.withLock({ $0 }) else { continue }
            let elapsed = Date().timeIntervalSince(started)
            if !warned, elapsed > Self.limit {
                current.withLock { if $0?.name == name { $0?.warned = true } }
                let me = getpid()
                var report = "test watchdog: \(name) has run \(Int(elapsed)) s (limit \(Int(Self.limit)) s); its processes:\n"
                report += ProcessTree.describe(under: me)
                let mounts = ((try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)) ?? "")
                    .split(separator: "\n").filter { $0.contains(" - fuse") }
                report += "FUSE mounts:\n" + mounts.map { "  \($0)\n" }.joined()
                FileHandle.standardError.write(Data(report.utf8))
                ProcessTree.kill(under: me, includingRoot: false)
                Self.abortFUSE(mounts)
            } else if warned, elapsed > Self.limit + Self.grace {
                FileHandle.standardError.write(Data("test watchdog: \(name) did not end after its processes were killed; exiting\n".utf8))
                exit(70)
            }
        }
    }

    /// Aborts the FUSE connections of mounts under the temporary folder (the tests' own), by
    /// their device's minor number (/sys/fs/fuse/connections/N/abort).
    private static func abortFUSE(_ mounts: [Substring]) {
        let temporary = FileManager.default.temporaryDirectory.path
        for line in mounts {
            let fields = line.split(separator: " ")
            guard fields.count > 4, fields[4].hasPrefix(temporary), let minor = fields[2].split(separator: ":").last else { continue }
            try? Data("1".utf8).write(to: URL(fileURLWithPath: "/sys/fs/fuse/connections/\(minor)/abort"))
        }
    }
}
