@_spi(Fuzzing) import BinderCrypto
import Foundation
import XCTest

/// `binder key passphrase`: the same key under a new passphrase; the old passphrase opens
/// nothing stored here afterwards, a wrong one changes nothing.
final class KeyPassphraseTests: XCTestCase {
    func testChangeWithFilesThenOnlyTheNewPassphraseOpensTheKey() throws {
        let binder = try MountedBinder()
        let sandbox = binder.sandbox
        let keyFile = sandbox.home.appendingPathComponent("key.ncryptsec").path
        let before = try sandbox.run(["key", "show"]).stdout
        let old = binder.passphraseFile
        let new = try sandbox.file("new", "a much better passphrase\n")

        let changed = try sandbox.run(["key", "passphrase", "--passphrase-file", old, "--new-passphrase-file", new, "--log-n", "8"])
        XCTAssertEqual(changed.status, 0, changed.stderr)
        XCTAssertTrue(changed.stdout.contains("still open with the OLD passphrase"), changed.stdout)
        XCTAssertEqual(try sandbox.run(["key", "show"]).stdout, before, "the key (npub) must not change")
        let attributes = try FileManager.default.attributesOfItem(atPath: keyFile)
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: sandbox.home.path).filter { $0.contains(".tmp") }, [])

        // The stored ncryptsec opens with the new passphrase to the same key, not with the old.
        let stored = try String(contentsOfFile: keyFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(try NIP49.decrypt(stored, passphrase: try SecureBytes(copyingUTF8: "a much better passphrase")).key.nsec().copyBytes(),
                       Array(Fixtures.nsec.utf8))
        XCTAssertEqual(try NIP49.fields(of: stored).logN, 8)

        // export --nsec, unlock and mount: the new passphrase works, the old one is wrong.
        let exported = try sandbox.run(["key", "export", "--nsec", "--confirm-plaintext", "--passphrase-file", new])
        XCTAssertEqual(exported.stdout, Fixtures.nsec + "\n", exported.stderr)
        assertFails(try sandbox.run(["key", "export", "--nsec", "--confirm-plaintext", "--passphrase-file", old]), mentioning: "wrong passphrase")
        assertFails(try sandbox.run(["unlock", "--passphrase-file", old]), mentioning: "wrong passphrase")
        let refused = try sandbox.run(["mount", binder.repository, binder.mountpoint, "--passphrase-file", old])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("wrong passphrase"), refused.stderr)
        let mounted = try sandbox.run(["mount", binder.repository, binder.mountpoint, "--passphrase-file", new])
        XCTAssertEqual(mounted.status, 0, mounted.stderr)
        binder.markMounted()
        XCTAssertFalse(try binder.files().isEmpty)
        binder.unmount()
        let unlocked = try sandbox.run(["unlock", "--timeout", "5m", "--passphrase-file", new])
        XCTAssertEqual(unlocked.status, 0, unlocked.stderr)
        _ = try sandbox.run(["lock"])
    }

    func testWrongOldPassphraseLeavesTheKeyFileByteIdentical() throws {
        let binder = try MountedBinder(cloneFixture: false)
        let sandbox = binder.sandbox
        let keyFile = sandbox.home.appendingPathComponent("key.ncryptsec").path
        let before = try Data(contentsOf: URL(fileURLWithPath: keyFile))
        let wrong = try sandbox.file("wrong", "not it\n")
        let new = try sandbox.file("new", "next\n")
        let run = try sandbox.run(["key", "passphrase", "--passphrase-file", wrong, "--new-passphrase-file", new, "--log-n", "8"])
        XCTAssertEqual(run.status, 1)
        XCTAssertTrue(run.stderr.contains("wrong passphrase: the key and its passphrase are unchanged"), run.stderr)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: keyFile)), before)
        // An empty new passphrase and a missing terminal are refused the same way.
        assertFails(try sandbox.run(["key", "passphrase", "--passphrase-file", binder.passphraseFile,
                                     "--new-passphrase-file", try sandbox.file("empty", "\n")]), mentioning: "empty")
        assertFails(try sandbox.run(["key", "passphrase", "--passphrase-file", binder.passphraseFile]), mentioning: "--new-passphrase-file")
        assertFails(try sandbox.run(["key", "passphrase"]), mentioning: "no terminal")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: keyFile)), before)
        let help = try sandbox.run(["key", "passphrase", "--help"])
        XCTAssertTrue(help.stdout.contains("OLD passphrase"), help.stdout)
        XCTAssertTrue(help.stdout.contains("--new-passphrase-file"), help.stdout)
    }

    /// A key unlocked before the change (cached in the kernel keyring) stays usable after it.
    func testUnlockedKeyStaysUnlocked() throws {
        let binder = try MountedBinder(cloneFixture: false)
        let sandbox = binder.sandbox
        XCTAssertEqual(try sandbox.run(["unlock", "--timeout", "5m", "--passphrase-file", binder.passphraseFile]).status, 0)
        defer { _ = try? sandbox.run(["lock"]) }
        let new = try sandbox.file("new", "next one\n")
        let changed = try sandbox.run(["key", "passphrase", "--passphrase-file", binder.passphraseFile, "--new-passphrase-file", new, "--log-n", "8"])
        XCTAssertEqual(changed.status, 0, changed.stderr)
        let exported = try sandbox.run(["key", "export", "--nsec", "--confirm-plaintext"])
        XCTAssertEqual(exported.stdout, Fixtures.nsec + "\n", exported.stderr)
    }
}

extension TerminalTests {
    /// On a terminal: the current passphrase once, the new one twice, none of them echoed.
    func testKeyPassphraseAsksOnATerminalWithoutEcho() throws {
        let sandbox = try BinderSandbox()
        let first = try sandbox.file("p", "First-Secret-1\n")
        XCTAssertEqual(try sandbox.run(["key", "generate", "--passphrase-file", first, "--log-n", "8"]).status, 0)
        let session = "kpw\(getpid())"
        try startSession(session, script: "BINDER_HOME='\(sandbox.home.path)' '\(BinderSandbox.binary)' key passphrase --log-n 8\n", in: sandbox)
        defer { _ = try? tmux("kill-session -t \(session)") }
        try answer(session, after: "Current passphrase", "'First-Secret-1' Enter")
        try answer(session, after: "New passphrase", "'Second-Secret-2' Enter")
        try answer(session, after: "Repeat the passphrase", "'Second-Secret-2' Enter")
        let shown = try waitForScreen(session, toContain: "Passphrase changed")
        XCTAssertTrue(shown.contains("OLD passphrase"), shown)
        XCTAssertFalse(shown.contains("First-Secret-1") || shown.contains("Second-Secret-2"), "a passphrase was echoed:\n\(shown)")
        let second = try sandbox.file("q", "Second-Secret-2\n")
        XCTAssertEqual(try sandbox.run(["key", "export", "--nsec", "--confirm-plaintext", "--passphrase-file", second]).status, 0)
        assertFails(try sandbox.run(["key", "export", "--nsec", "--confirm-plaintext", "--passphrase-file", first]), mentioning: "wrong passphrase")
    }
}
