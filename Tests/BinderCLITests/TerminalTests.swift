import BinderCrypto
import BinderFormat
import Foundation
import XCTest

/// A real terminal (tmux): passphrases not echoed and asked twice when setting one; an editor
/// that works; health data asked for rather than taken from argv.
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

    /// `binder key import` at a terminal asks for the key, does not show it, and ends at a whole
    /// key (no Ctrl-D): here an nsec typed in two halves, as off a printed sheet.
    func testAKeyTypedAtATerminalIsAskedForAndNeverShown() throws {
        let sandbox = try BinderSandbox()
        let session = "imp\(getpid())"
        let nsec = "nsec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5"
        XCTAssertEqual(try tmux("new-session -d -s \(session) -x 200 -y 50 \"BINDER_HOME='\(sandbox.home.path)' '\(BinderSandbox.binary)' key import --log-n 8; sleep 30\"").status, 0)
        defer { _ = try? tmux("kill-session -t \(session)") }
        _ = try waitForScreen(session, toContain: "Your key (nsec1")
        XCTAssertEqual(try tmux("send-keys -t \(session) '\(nsec.prefix(30))' Enter").status, 0)
        XCTAssertEqual(try tmux("send-keys -t \(session) '\(nsec.dropFirst(30))' Enter").status, 0)
        _ = try waitForScreen(session, toContain: "New passphrase")
        _ = try tmux("send-keys -t \(session) 'pw' Enter")
        _ = try waitForScreen(session, toContain: "Repeat the passphrase")
        _ = try tmux("send-keys -t \(session) 'pw' Enter")
        let shown = try waitForScreen(session, toContain: "Imported npub1")
        XCTAssertFalse(shown.contains(String(nsec.prefix(12))) || shown.contains(String(nsec.suffix(12))), "the key was echoed:\n\(shown)")
        XCTAssertEqual(try sandbox.run(["key", "show"]).stdout.contains("npub1"), true)
    }

    /// Starts `script` (a file of shell commands, so that no quoting crosses tmux) in a new
    /// tmux session; the caller kills it.
    func startSession(_ session: String, script: String, in sandbox: BinderSandbox) throws {
        let file = try sandbox.file("session-\(session).sh", script)
        XCTAssertEqual(try tmux("new-session -d -s \(session) -x 160 -y 40 \"sh '\(file)'; sleep 60\"").status, 0)
    }

    /// Waits for `prompt` on the screen, then types `keys` (tmux send-keys words).
    func answer(_ session: String, after prompt: String, _ keys: String) throws {
        let shown = try waitForScreen(session, toContain: prompt)
        XCTAssertTrue(shown.contains(prompt), shown)
        XCTAssertEqual(try tmux("send-keys -t \(session) \(keys)").status, 0)
    }

    /// `binder new --edit` with real vim: it runs in the terminal's foreground process group
    /// (before, it ran in a group of its own and the terminal stopped it: vim in state T,
    /// binder waiting for ever), the text typed is stored, and binder exits 0.
    func testNewEditRunsVimInTheTerminal() throws {
        try XCTSkipIf(try shell("command -v vim").status != 0, "vim missing")
        let binder = try MountedBinder()
        defer { binder.unmount() }
        try binder.mount()
        let session = "vim\(getpid())"
        try startSession(session, script: """
            export BINDER_HOME='\(binder.sandbox.home.path)' EDITOR='vim -u NONE -i NONE -N'
            '\(BinderSandbox.binary)' new visits --binder '\(binder.repository)' --edit
            echo "binder exited with $?"
            """, in: binder.sandbox)
        defer { _ = try? tmux("kill-session -t \(session)") }
        // The title, left out, is asked for on the terminal.
        try answer(session, after: "Title (Enter: Visit):", "'Knee check' Enter")
        let opened = try waitForScreen(session, toContain: "# Knee check")
        XCTAssertTrue(opened.contains("Provider:"), opened)
        XCTAssertEqual(try tmux("send-keys -t \(session) G o 'Typed in vim.' Escape").status, 0)
        XCTAssertEqual(try tmux("send-keys -t \(session) ':wq' Enter").status, 0)
        let done = try waitForScreen(session, toContain: "binder exited with")
        XCTAssertTrue(done.contains("binder exited with 0"), done)
        let day = String(ISO8601DateFormatter().string(from: Date()).prefix(10))
        let payload = try shell("git -C '\(binder.repository)' show 'main:visits/\(day)-knee-check.json'")
        XCTAssertEqual(payload.status, 0, payload.stderr)
        let key = try NIP44.ConversationKey(selfOf: try SecretKey(nsec: Fixtures.nsec))
        let stored = try MedicalDocument(plaintext: try NIP44.decrypt(payload: payload.stdout, key: key).copyBytes()).value
        XCTAssertTrue(stored.hasPrefix("# Knee check\n\nDate: \(day)\n"), stored)
        XCTAssertTrue(stored.hasSuffix("Typed in vim.\n"), stored)
    }

    /// Left out on a terminal, the patient's name and date of birth are asked for (not taken
    /// from argv, where every local user reads them), and stored encrypted.
    func testCreateAsksForThePatientOnATerminal() throws {
        let binder = try MountedBinder(cloneFixture: false)
        defer { binder.unmount() }
        let session = "ask\(getpid())"
        try startSession(session, script: """
            BINDER_HOME='\(binder.sandbox.home.path)' '\(BinderSandbox.binary)' create health --passphrase-file '\(binder.passphraseFile)'
            echo "binder exited with $?"
            """, in: binder.sandbox)
        defer { _ = try? tmux("kill-session -t \(session)") }
        try answer(session, after: "Patient's name (Enter: leave it out):", "'Zoë Asked' Enter")
        try answer(session, after: "Date of birth, YYYY-MM-DD (Enter: leave it out):", "'1991-05-02' Enter")
        let done = try waitForScreen(session, toContain: "binder exited with")
        XCTAssertTrue(done.contains("binder exited with 0") && done.contains("Created binder 'health'"), done)
        XCTAssertFalse(done.contains("warning"), done)
        binder.repository = "health"
        try binder.mount()
        XCTAssertEqual(try FrontMatter.parse(try binder.read("patient-info.md")).value, "# Zoë Asked\n\nDOB: 1991-05-02\n")
    }
}
