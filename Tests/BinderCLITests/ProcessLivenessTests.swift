import BinderSystem
import Foundation
import XCTest

/// A lock's holder that has exited but is not reaped yet (a zombie) is not running: the
/// commands that ask a mount by the pid its lock file names took such a daemon for a mount.
final class ProcessLivenessTests: XCTestCase {
    func testAZombieIsNotRunningAndARunningChildIs() throws {
        var pid: pid_t = 0
        var argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/sleep"), strdup("30"), nil]
        defer { argv.forEach { free($0) } }
        XCTAssertEqual(posix_spawn(&pid, "/bin/sleep", nil, nil, &argv, environ), 0)
        XCTAssertTrue(ProcessLiveness.isRunning(pid))
        kill(pid, SIGKILL)
        // Not reaped yet: a zombie, which kill(pid, 0) still finds.
        eventually(10, "the child is a zombie") {
            ((try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? "").contains(") Z ")
        }
        XCTAssertEqual(kill(pid, 0), 0, "a zombie answers kill(pid, 0)")
        XCTAssertFalse(ProcessLiveness.isRunning(pid))
        var status: Int32 = 0
        XCTAssertEqual(waitpid(pid, &status, 0), pid)
        XCTAssertFalse(ProcessLiveness.isRunning(pid))
        XCTAssertTrue(ProcessLiveness.isRunning(getpid()))
        XCTAssertFalse(ProcessLiveness.isRunning(0))
    }
}
