import Foundation
import XCTest

/// Passphrases typed at a real terminal (tmux): not echoed, asked twice when setting one.
final class TerminalTests: XCTestCase {
    /// tmux through Python's subprocess, which closes inherited descriptors: the tmux server
    /// outlives the command and must not hold the test's process-monitoring descriptor.
    func tmux(_ arguments: String) throws -> BinderRun {
        try shell("python3 -c 'import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)' tmux -L binder-tests " + arguments)
    }

    func screen(_ session: String) throws -> String { try tmux("capture-pane -p -t \(session)").stdout }

    func waitForScreen(_ session: String, toContain text: String) throws -> String {
        var last = ""
        waitUntil { last = (try? self.screen(session)) ?? ""; return last.contains(text) }
        return last
    }

    func testGenerateAsksTwiceWithoutEchoThenUnlockAsksOnce() throws {
        let sandbox = try BinderSandbox()
        let session = "gen\(getpid())"
        let env = "BINDER_HOME='\(sandbox.home.path)'"
        XCTAssertEqual(try tmux("new-session -d -s \(session) -x 200 -y 50 \"\(env) '\(BinderSandbox.binary)' key generate --log-n 8; sleep 30\"").status, 0)
        defer { _ = try? tmux("kill-session -t \(session)") }
        _ = try waitForScreen(session, toContain: "New passphrase")
        XCTAssertEqual(try tmux("send-keys -t \(session) 'tyPed-Secret-42' Enter").status, 0)
        _ = try waitForScreen(session, toContain: "Repeat the passphrase")
        XCTAssertEqual(try tmux("send-keys -t \(session) 'tyPed-Secret-42' Enter").status, 0)
        let shown = try waitForScreen(session, toContain: "Saved, encrypted")
        XCTAssertTrue(shown.contains("npub1"), shown)
        XCTAssertTrue(shown.contains("nsec1"), shown)
        XCTAssertFalse(shown.contains("tyPed-Secret-42"), "the passphrase was echoed:\n\(shown)")

        // The typed passphrase opens the key; a mismatch when setting is refused.
        let pass = try sandbox.file("p", "tyPed-Secret-42\n")
        XCTAssertEqual(try sandbox.run(["unlock", "--timeout", "1m", "--passphrase-file", pass]).status, 0)
        _ = try sandbox.run(["lock"])

        let other = try BinderSandbox()
        let mismatch = "mis\(getpid())"
        XCTAssertEqual(try tmux("new-session -d -s \(mismatch) -x 200 -y 50 \"BINDER_HOME='\(other.home.path)' '\(BinderSandbox.binary)' key generate --log-n 8; sleep 30\"").status, 0)
        defer { _ = try? tmux("kill-session -t \(mismatch)") }
        _ = try waitForScreen(mismatch, toContain: "New passphrase")
        _ = try tmux("send-keys -t \(mismatch) 'one' Enter")
        _ = try waitForScreen(mismatch, toContain: "Repeat the passphrase")
        _ = try tmux("send-keys -t \(mismatch) 'two' Enter")
        let refused = try waitForScreen(mismatch, toContain: "do not match")
        XCTAssertTrue(refused.contains("binder: the passphrases do not match"), refused)
        XCTAssertFalse(FileManager.default.fileExists(atPath: other.home.appendingPathComponent("key.ncryptsec").path))
    }
}
