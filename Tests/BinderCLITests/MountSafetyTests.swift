import BinderCrypto
import BinderSystem
import Foundation
import XCTest

/// What the mount promises under stress (PRODUCT.md, "Promises under stress"): a dead daemon
/// leaves a mount that errors, never a folder that takes plaintext; one writer per binder;
/// only binders mount, only on empty folders; stale git locks are reported and recovered.
final class MountSafetyTests: XCTestCase {
    func testADeadDaemonLeavesAMountThatErrorsNeverAFolderThatTakesPlaintext() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        try binder.mount()
        let pid = try XCTUnwrap(daemonPID(binder.mountpoint))
        kill(pid, SIGKILL)
        waitUntil { !ProcessLiveness.isRunning(pid) && answersNotConnected(binder.mountpoint) }
        XCTAssertFalse(ProcessLiveness.isRunning(pid), "the daemon is still running")
        XCTAssertTrue(answersNotConnected(binder.mountpoint), "the dead mount answers ENOTCONN")

        // The mount is still there, answering ENOTCONN: a write fails and lands nowhere.
        XCTAssertNotNil(mountEntry(binder.mountpoint), "the dead mount must stay until cleared")
        let write = try shell("printf '# Plaintext-marker-5521\\n' > '\(binder.path("visits/2026-01-01-after-crash.md"))'")
        XCTAssertNotEqual(write.status, 0, "a write to a dead mount must fail")
        XCTAssertTrue(write.stderr.contains("not connected"), write.stderr)
        XCTAssertNotEqual(try shell("printf x > '\(binder.path("x"))'").status, 0)

        // The next mount clears it, says so in one line, and serves the binder again.
        let again = try binder.sandbox.run(["mount", binder.repository, binder.mountpoint, "--passphrase-file", binder.passphraseFile])
        XCTAssertEqual(again.status, 0, again.stderr)
        let cleared = again.stdout.split(separator: "\n").filter { $0.contains("had stopped") }
        XCTAssertEqual(cleared, ["The previous mount at \(binder.mountpoint) had stopped (its daemon died); cleared it"], again.stdout)
        XCTAssertTrue(FileManager.default.fileExists(atPath: binder.path("patient-info.md")))
        XCTAssertFalse(FileManager.default.fileExists(atPath: binder.path("x")))
        let unmount = try binder.sandbox.run(["unmount", binder.mountpoint])
        XCTAssertEqual(unmount.status, 0, unmount.stderr)

        // Nothing landed in the folder beneath.
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: binder.mountpoint), [])
        XCTAssertEqual(try shell("grep -rl 'Plaintext-marker-5521' '\(binder.sandbox.root.path)' || true").stdout, "")

        // Killed again, `binder unmount` clears it too.
        try binder.mount()
        let second = try XCTUnwrap(daemonPID(binder.mountpoint))
        kill(second, SIGKILL)
        waitUntil { !ProcessLiveness.isRunning(second) && answersNotConnected(binder.mountpoint) }
        XCTAssertTrue(try shell("ls '\(binder.mountpoint)' 2>&1").stdout.contains("not connected"))
        let stale = try binder.sandbox.run(["unmount", binder.mountpoint])
        XCTAssertEqual(stale.status, 0, stale.stderr)
        XCTAssertTrue(stale.stdout.contains("its daemon had stopped"), stale.stdout)
        XCTAssertNil(mountEntry(binder.mountpoint))
    }

    func testABinderHasOneWriter() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        let s = binder.sandbox
        let other = s.root.appendingPathComponent("mnt2").path
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        defer { unmountQuietly(s, other) }
        try binder.mount()
        let pid = try XCTUnwrap(daemonPID(binder.mountpoint))

        for extra in [[], ["--read-only"], ["-o", "ro"], ["--foreground"]] {
            let second = try s.run(["mount", binder.repository, other, "--passphrase-file", binder.passphraseFile] + extra)
            assertFails(second, mentioning: "is already mounted at \(binder.mountpoint) (pid \(pid))")
            XCTAssertNil(mountEntry(other), "\(extra)")
        }
        // Reading stays allowed.
        let verify = try s.run(["verify", binder.repository, "--passphrase-file", binder.passphraseFile])
        XCTAssertEqual(verify.status, 0, verify.stdout + verify.stderr)
        // Repairs are not.
        assertFails(try s.run(["verify", binder.repository, "--repair", "--passphrase-file", binder.passphraseFile]),
                    mentioning: "mounted at \(binder.mountpoint)")
        // A binder that never synced starts syncing through its running mount (never beside
        // it): here the server is down, and the refusal names the mount that tried.
        assertFails(try s.run(["sync", binder.repository, "--server", "http://127.0.0.1:9", "--passphrase-file", binder.passphraseFile]),
                    mentioning: "while it is mounted at \(binder.mountpoint) (pid \(pid))")

        // Once unmounted, the binder mounts elsewhere; the lock went with the daemon.
        binder.unmount()
        let moved = try s.run(["mount", binder.repository, other, "--passphrase-file", binder.passphraseFile])
        XCTAssertEqual(moved.status, 0, moved.stderr)
        let movedPID = try XCTUnwrap(daemonPID(other))
        kill(movedPID, SIGKILL)
        waitUntil { !ProcessLiveness.isRunning(movedPID) }
        // A daemon that died holds nothing: the binder mounts again at once.
        try binder.mount()
        XCTAssertTrue(FileManager.default.fileExists(atPath: binder.path("patient-info.md")))
    }

    func testOnlyBindersMountAndOnlyOnEmptyFolders() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        let s = binder.sandbox
        let pass = binder.passphraseFile
        func mount(_ repository: String, _ extra: [String] = []) throws -> BinderRun {
            try s.run(["mount", repository, binder.mountpoint, "--passphrase-file", pass] + extra)
        }
        let empty = s.root.appendingPathComponent("empty.git").path
        XCTAssertEqual(try shell("git init -q --bare -b main '\(empty)'").status, 0)
        assertFails(try mount(empty), mentioning: "\(empty) is not a binder: it has no commit on branch main")
        let unrelated = s.root.appendingPathComponent("unrelated").path
        XCTAssertEqual(try shell("git init -q -b main '\(unrelated)' && cd '\(unrelated)' && echo hi > README && git add README && git -c user.name=t -c user.email=t@t commit -qm init").status, 0)
        assertFails(try mount(unrelated), mentioning: "has no patient-info.json")
        let fake = s.root.appendingPathComponent("fake").path
        XCTAssertEqual(try shell("git init -q -b main '\(fake)' && cd '\(fake)' && echo '{\"not\":\"encrypted\"}' > patient-info.json && git add -A && git -c user.name=t -c user.email=t@t commit -qm init").status, 0)
        assertFails(try mount(fake), mentioning: "patient-info.json is not an encrypted binder document")
        for refused in [empty, unrelated, fake] {
            XCTAssertNil(mountEntry(binder.mountpoint))
            XCTAssertEqual(try shell("git -C '\(refused)' rev-list --all --count").stdout, refused == empty ? "0\n" : "1\n", "no commit written")
        }
        // --force mounts it anyway.
        let forced = try mount(empty, ["--force"])
        XCTAssertEqual(forced.status, 0, forced.stderr)
        XCTAssertEqual(try binder.files(), [])
        unmountQuietly(s, binder.mountpoint)

        // A folder that is not empty: refused, unless -o nonempty (or --force).
        try Data("mine\n".utf8).write(to: URL(fileURLWithPath: binder.path("notes.txt")))
        assertFails(try mount(binder.repository), mentioning: "mount point \(binder.mountpoint) is not empty")
        XCTAssertNil(mountEntry(binder.mountpoint))
        let nonempty = try mount(binder.repository, ["-o", "ro,nonempty"])
        XCTAssertEqual(nonempty.status, 0, nonempty.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: binder.path("patient-info.md")))
        XCTAssertFalse(FileManager.default.fileExists(atPath: binder.path("notes.txt")))
        XCTAssertNotEqual(try shell("printf x > '\(binder.path("labs/ro.md"))'").status, 0, "-o ro mounts read-only")
        unmountQuietly(s, binder.mountpoint)
        XCTAssertEqual(try String(contentsOfFile: binder.path("notes.txt"), encoding: .utf8), "mine\n")

        // Unknown -o options are a usage error.
        let unknown = try mount(binder.repository, ["-o", "nonempty,allow_everything"])
        XCTAssertEqual(unknown.status, 64, unknown.stderr)
        XCTAssertTrue(unknown.stderr.contains("unknown mount option allow_everything"), unknown.stderr)
        XCTAssertNil(mountEntry(binder.mountpoint))
    }

    func testAStaleGitLockIsReportedRepairedAndClearedAtMount() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        let s = binder.sandbox
        let gitDirectory = binder.repository + "/.git"
        let tip = try shell("git -C '\(binder.repository)' rev-parse main").stdout
        let unfinishedPacks = ["pack_git2_5f0c1d2e3a4b", "tmp_pack_Q1w2E3"]
        func unfinishedLeft() -> [String] { unfinishedPacks.filter { FileManager.default.fileExists(atPath: gitDirectory + "/objects/pack/" + $0) } }
        func plant() throws {
            // What git leaves when killed in the middle of updating the branch (and the index).
            try Data(tip.utf8).write(to: URL(fileURLWithPath: gitDirectory + "/refs/heads/main.lock"))
            try Data().write(to: URL(fileURLWithPath: gitDirectory + "/index.lock"))
            // What a fold or a save killed before its pack reached its name leaves.
            try FileManager.default.createDirectory(atPath: gitDirectory + "/objects/pack", withIntermediateDirectories: true)
            for name in unfinishedPacks { try Data(repeating: 7, count: 4096).write(to: URL(fileURLWithPath: gitDirectory + "/objects/pack/" + name)) }
        }
        try plant()
        let verify = try s.run(["verify", binder.repository, "--passphrase-file", binder.passphraseFile])
        XCTAssertNotEqual(verify.status, 0, verify.stdout)
        XCTAssertTrue(verify.stdout.contains("problem: refs/heads/main.lock: the lock of branch main, left by a process that stopped"), verify.stdout)
        XCTAssertTrue(verify.stdout.contains("problem: index.lock: the index's lock"), verify.stdout)
        XCTAssertTrue(verify.stderr.contains("2 problems"), verify.stderr)

        let repair = try s.run(["verify", binder.repository, "--repair", "--passphrase-file", binder.passphraseFile])
        XCTAssertEqual(repair.status, 0, repair.stdout + repair.stderr)
        XCTAssertTrue(repair.stdout.contains("repaired: removed refs/heads/main.lock"), repair.stdout)
        XCTAssertTrue(repair.stdout.contains("repaired: removed index.lock"), repair.stdout)
        XCTAssertTrue(repair.stdout.contains("all good"), repair.stdout)
        XCTAssertFalse(FileManager.default.fileExists(atPath: gitDirectory + "/refs/heads/main.lock"))
        XCTAssertTrue(repair.stdout.contains("repaired: removed objects/pack/pack_git2_5f0c1d2e3a4b, an unfinished pack file"), repair.stdout)
        XCTAssertEqual(unfinishedLeft(), [])

        // A lock some process still has open is left alone, and is no problem.
        let held = gitDirectory + "/packed-refs.lock"
        try Data().write(to: URL(fileURLWithPath: held))
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/bin/sh")
        holder.arguments = ["-c", "exec 7<'\(held)'; exec sleep 60"]
        try holder.run()
        defer { holder.terminate(); holder.waitBounded(label: "holder"); try? FileManager.default.removeItem(atPath: held) }
        waitUntil { (try? shell("ls -l /proc/\(holder.processIdentifier)/fd").stdout.contains("packed-refs.lock")) ?? false }
        let busy = try s.run(["verify", binder.repository, "--repair", "--passphrase-file", binder.passphraseFile])
        XCTAssertEqual(busy.status, 0, busy.stdout + busy.stderr)
        XCTAssertTrue(busy.stdout.contains("note: packed-refs.lock: the packed references' lock, held by pid \(holder.processIdentifier)"), busy.stdout)
        XCTAssertTrue(FileManager.default.fileExists(atPath: held))
        holder.terminate()
        holder.waitBounded(label: "holder")
        try FileManager.default.removeItem(atPath: held)

        // Planted again, the mount clears them (saying so) and saves work.
        try plant()
        let mount = try s.run(["mount", binder.repository, binder.mountpoint, "--passphrase-file", binder.passphraseFile])
        XCTAssertEqual(mount.status, 0, mount.stderr)
        binder.markMounted()
        XCTAssertTrue(mount.stdout.contains("Removed a stale git lock left by a process that stopped: refs/heads/main.lock (the lock of branch main)"), mount.stdout)
        let save = try shell("printf '# After the lock\\n' > labs/2026-03-03-after-lock.md", in: binder.mountpoint)
        XCTAssertEqual(save.status, 0, save.stderr)
        XCTAssertNotEqual(try shell("git -C '\(binder.repository)' rev-parse main").stdout, tip, "the save made a commit")
        XCTAssertEqual(try shell("git -C '\(binder.repository)' show --stat --format= main").stdout.contains("labs/2026-03-03-after-lock.json"), true)
        XCTAssertFalse(FileManager.default.fileExists(atPath: gitDirectory + "/refs/heads/main.lock"))
        let log = try String(contentsOfFile: s.home.appendingPathComponent("logs/sample-binder.log").path, encoding: .utf8)
        XCTAssertTrue(log.contains("removed a stale git lock file=refs/heads/main.lock"), log)
        XCTAssertEqual(unfinishedLeft(), [], "the mount removes unfinished pack files")
        XCTAssertTrue(log.contains("removed unfinished pack files bytes=8192 files=2"), log)
    }
}
