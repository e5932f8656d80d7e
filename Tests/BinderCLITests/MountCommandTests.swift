import BinderCrypto
import BinderFormat
import BinderSystem
import Foundation
import XCTest

/// `binder create`, `mount`, `unmount` and `verify` as a user runs them, including every
/// failure line.
final class MountCommandTests: XCTestCase {
    func testMountFailuresAreOneClearLine() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        let s = binder.sandbox
        let pass = binder.passphraseFile
        assertFails(try s.run(["mount", s.root.path, binder.mountpoint, "--passphrase-file", pass]), mentioning: "is not a binder")
        assertFails(try s.run(["mount", "no-such-binder", binder.mountpoint, "--passphrase-file", pass]), mentioning: "no binder named")
        assertFails(try s.run(["mount", binder.repository, s.root.path + "/missing", "--passphrase-file", pass]), mentioning: "does not exist")
        assertFails(try s.run(["mount", binder.repository, pass, "--passphrase-file", pass]), mentioning: "is not a folder")
        assertFails(try s.run(["mount", binder.repository, binder.mountpoint]), mentioning: "the key is locked")
        assertFails(try s.run(["mount", binder.repository, binder.mountpoint, "--passphrase-file", try s.file("bad", "nope\n")]),
                    mentioning: "wrong passphrase")
        assertFails(try s.run(["mount", binder.repository, binder.mountpoint, "--cache-size", "lots", "--passphrase-file", pass]),
                    mentioning: "--cache-size")
        try binder.mount()
        assertFails(try s.run(["mount", binder.repository, binder.mountpoint, "--passphrase-file", pass]), mentioning: "is busy")
        // Still mounted and answering after the refused attempts.
        XCTAssertTrue(FileManager.default.fileExists(atPath: binder.path("patient-info.md")))
    }

    func testAnotherKeyIsRefused() throws {
        let stranger = try SecretKey.generate()
        let binder = try MountedBinder(nsec: String(decoding: try stranger.nsec().copyBytes(), as: UTF8.self))
        let run = try binder.sandbox.run(["mount", binder.repository, binder.mountpoint, "--passphrase-file", binder.passphraseFile])
        assertFails(run, mentioning: "encrypted for another key")
        XCTAssertNil(mountEntry(binder.mountpoint))
    }

    func testUnmountCleanAndStale() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        try binder.mount()
        XCTAssertNotNil(mountEntry(binder.mountpoint))
        let unmount = try binder.sandbox.run(["unmount", binder.mountpoint])
        XCTAssertEqual(unmount.status, 0, unmount.stderr)
        XCTAssertNil(mountEntry(binder.mountpoint))
        assertFails(try binder.sandbox.run(["unmount", binder.mountpoint]), mentioning: "is not mounted")

        // A daemon killed with SIGKILL leaves a dead mount (ENOTCONN), never the folder beneath;
        // `binder unmount` clears it.
        try binder.mount()
        let daemon = try XCTUnwrap(daemonPID(binder.mountpoint))
        kill(daemon, SIGKILL)
        waitUntil { !ProcessLiveness.isRunning(daemon) && answersNotConnected(binder.mountpoint) }
        XCTAssertNotNil(mountEntry(binder.mountpoint), "expected a stale mount")
        XCTAssertTrue(try shell("ls '\(binder.mountpoint)' 2>&1").stdout.contains("not connected"))
        let stale = try binder.sandbox.run(["unmount", binder.mountpoint])
        XCTAssertEqual(stale.status, 0, stale.stderr)
        XCTAssertNil(mountEntry(binder.mountpoint))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: binder.mountpoint), [])
    }

    func testDaemonUnmountsOnSIGTERMAndIsDetached() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        try binder.mount()
        let pid = try XCTUnwrap(daemonPID(binder.mountpoint))
        // Detached: its own session, and no plaintext secret in its command line or environment.
        XCTAssertEqual(getsid(pid), pid)
        let cmdline = try String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8)
        XCTAssertFalse(cmdline.contains("nsec"))
        XCTAssertFalse(cmdline.contains("test passphrase"))
        let environment = (try? String(contentsOfFile: "/proc/\(pid)/environ", encoding: .utf8)) ?? ""
        XCTAssertFalse(environment.contains("nsec1"))
        kill(pid, SIGTERM)
        waitUntil { mountEntry(binder.mountpoint) == nil }
        XCTAssertNil(mountEntry(binder.mountpoint))
        waitUntil { !ProcessLiveness.isRunning(pid) }
        XCTAssertFalse(ProcessLiveness.isRunning(pid), "daemon still running after SIGTERM")
    }

    func testForegroundUnmountsOnSIGINT() throws {
        let binder = try MountedBinder()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: BinderSandbox.binary)
        process.arguments = ["mount", binder.repository, binder.mountpoint, "--foreground", "--passphrase-file", binder.passphraseFile]
        process.environment = ProcessInfo.processInfo.environment.merging(["BINDER_HOME": binder.sandbox.home.path]) { $1 }
        process.standardError = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        waitUntil { mountEntry(binder.mountpoint) != nil && FileManager.default.fileExists(atPath: binder.path("patient-info.md")) }
        XCTAssertTrue(FileManager.default.fileExists(atPath: binder.path("patient-info.md")))
        process.interrupt()
        process.waitBounded(label: "process")
        XCTAssertEqual(process.terminationStatus, 0)
        XCTAssertNil(mountEntry(binder.mountpoint))
    }

    /// The first mount of a binder on a terminal (script(1) gives it one) reads every folder's
    /// listing through the mount with a progress line, redrawn in place, then says how many
    /// files it found; the next mount starts from the listing index and reads nothing.
    func testFirstMountOnATerminalShowsListingProgress() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        let command = "BINDER_HOME='\(binder.sandbox.home.path)' '\(BinderSandbox.binary)' mount '\(binder.repository)' '\(binder.mountpoint)' "
            + "--passphrase-file '\(binder.passphraseFile)' 2>&1"
        let first = try shell("script -qec \"\(command)\" /dev/null")
        binder.markMounted()
        XCTAssertEqual(first.status, 0, first.stdout)
        XCTAssertTrue(first.stdout.contains("\r\u{1B}[KReading the binder's listings for its first mount"), first.stdout.debugDescription)
        let files = try shell("find . -type f | wc -l", in: binder.mountpoint).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertTrue(first.stdout.contains("Listings ready: ") && first.stdout.contains(" folders, \(files) files"), first.stdout.debugDescription)
        binder.unmount()
        let again = try shell("script -qec \"\(command)\" /dev/null")
        binder.markMounted()
        XCTAssertEqual(again.status, 0, again.stdout)
        XCTAssertTrue(again.stdout.contains("Mounted"), again.stdout)
        XCTAssertFalse(again.stdout.contains("Reading the binder's listings"), again.stdout.debugDescription)
    }

    func testCreateMountVerifyByName() throws {
        let binder = try MountedBinder(cloneFixture: false)
        defer { binder.unmount() }
        let s = binder.sandbox
        // The name and date of birth from standard input (`-`: one line each), never in argv.
        let create = try s.run(["create", "health", "--patient-name", "-", "--dob", "-", "--passphrase-file", binder.passphraseFile],
                               stdin: "Zoë Example\n1990-04-01\n")
        XCTAssertEqual(create.status, 0, create.stderr)
        XCTAssertFalse(create.stderr.contains("warning"), create.stderr)
        let path = s.home.appendingPathComponent("binders/health").path
        XCTAssertTrue(create.stdout.contains(path), create.stdout)
        assertFails(try s.run(["create", "health", "--passphrase-file", binder.passphraseFile]), mentioning: "already exists")
        XCTAssertNotEqual(try s.run(["create", "../escape", "--passphrase-file", binder.passphraseFile]).status, 0)
        XCTAssertNotEqual(try s.run(["create", "x", "--dob", "1990-13-01", "--passphrase-file", binder.passphraseFile]).status, 0)
        // A line missing for an option given as `-`, or a bad date read from it: refused, nothing made.
        let short = try s.run(["create", "y", "--patient-name", "-", "--dob", "-", "--passphrase-file", binder.passphraseFile], stdin: "Only A Name\n")
        XCTAssertEqual(short.status, 64)
        XCTAssertTrue(short.stderr.contains("--dob -: standard input ended"), short.stderr)
        let badDate = try s.run(["create", "y", "--dob", "-", "--passphrase-file", binder.passphraseFile], stdin: "1990-13-01\n")
        XCTAssertEqual(badDate.status, 64)
        XCTAssertTrue(badDate.stderr.contains("--dob must be a date"), badDate.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: s.home.appendingPathComponent("binders/y").path))
        // A literal value still works, with a warning that every local user can read it.
        let literal = try s.run(["create", "z", "--patient-name", "Literal Name", "--passphrase-file", binder.passphraseFile])
        XCTAssertEqual(literal.status, 0, literal.stderr)
        XCTAssertTrue(literal.stderr.contains("binder: warning: --patient-name on the command line could be read by every user"), literal.stderr)
        XCTAssertTrue(literal.stderr.contains("--patient-name -"), literal.stderr)

        // The commit: structural message, nothing but ciphertext in git.
        let log = try shell("git --git-dir='\(path)' log --format=%s main")
        XCTAssertEqual(log.stdout, "Initialize binder\n")
        let objects = try shell("git --git-dir='\(path)' cat-file --batch-all-objects --batch | grep -c 'Zoë' || true")
        XCTAssertEqual(objects.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "0")
        XCTAssertEqual(try shell("git --git-dir='\(path)' fsck --strict 2>&1").status, 0)

        let verify = try s.run(["verify", "health", "--passphrase-file", binder.passphraseFile])
        XCTAssertEqual(verify.status, 0, verify.stdout + verify.stderr)
        XCTAssertTrue(verify.stdout.contains("all good"), verify.stdout)

        binder.repository = "health"
        try binder.mount()
        let info = try FrontMatter.parse(try binder.read("patient-info.md"))
        XCTAssertEqual(info.value, "# Zoë Example\n\nDOB: 1990-04-01\n")
        XCTAssertEqual(info.metadata?["type"], "patient-info")

        // An independent implementation (rust-nostr) decrypts what binder wrote.
        let payload = try shell("git --git-dir='\(path)' show main:patient-info.json").stdout
        let payloadFile = try s.file("payload", payload)
        let nsecFile = try s.file("nsec", Fixtures.nsec)
        let script = Fixtures.directory.deletingLastPathComponent().appendingPathComponent("interop/nostr_check.py").path
        let decrypted = try BinderSandbox.run(executable: "/usr/bin/env", ["python3", script, "nip44-decrypt", nsecFile, payloadFile])
        XCTAssertEqual(decrypted.status, 0, decrypted.stderr)
        let document = try MedicalDocument(plaintext: Array(decrypted.stdout.utf8))
        XCTAssertEqual(document.type, "patient-info")
        XCTAssertEqual(document.value, "# Zoë Example\n\nDOB: 1990-04-01\n")
        XCTAssertEqual(document.validate(), [])
    }
}

/// The mount table entry at `path`, if any.
func mountEntry(_ path: String) -> String? {
    let table = (try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8)) ?? ""
    return table.split(separator: "\n").first { $0.split(separator: " ").dropFirst().first.map(String.init) == path }.map(String.init)
}

/// The pid of the daemon serving `mountpoint`.
func daemonPID(_ mountpoint: String) -> pid_t? {
    let run = try? shell("pgrep -f -- '--daemon-child' | while read p; do tr '\\0' ' ' < /proc/$p/cmdline | grep -qF -- ' \(mountpoint) ' && echo $p; done")
    return run.flatMap { pid_t($0.stdout.split(separator: "\n").first ?? "") }
}

/// Whether the kernel answers `ENOTCONN` at `mountpoint`: its daemon's connection is gone. While
/// the kernel is still tearing the connection down (the daemon just died), a request gets
/// `ECONNABORTED` instead; tests that look for "not connected" wait for this first.
func answersNotConnected(_ mountpoint: String) -> Bool {
    var info = statvfs()
    return statvfs(mountpoint, &info) != 0 && errno == ENOTCONN
}

/// Polls `condition` until it holds or `timeout` passes (the callers assert afterwards). The
/// default is generous: it costs nothing when the condition comes true, and a shared CI machine
/// can take many seconds to end a daemon that is finishing a pack fold.
func waitUntil(timeout: TimeInterval = 60, _ condition: () -> Bool) {
    let deadline = Date().addingTimeInterval(timeout)
    while !condition() && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
}
