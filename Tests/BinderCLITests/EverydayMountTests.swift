import BinderSystem
import Foundation
import XCTest

/// Mounting like other filesystems, auto-lock, `binder lock`, busy unmounts, logs and
/// notifications (issue 15).
final class EverydayMountTests: XCTestCase {
    /// `mount -t fuse.binder` and an fstab line go through `mount.fuse.binder` (installed by
    /// scripts/install, linked where mount(8) looks), with `-o` options; `umount` ends it.
    func testMountDashTFuseBinderThroughTheHelper() throws {
        guard getuid() == 0 else { throw XCTSkip("mount(8) runs helpers for root only") }
        let binder = try MountedBinder()
        defer { binder.unmount() }
        let s = binder.sandbox
        let prefix = s.root.appendingPathComponent("prefix").path
        // mount(8) looks for helpers in /sbin only: link it there for this test, as scripts/install does as root.
        let helperLink = "/sbin/mount.fuse.binder"
        let previous = try? FileManager.default.destinationOfSymbolicLink(atPath: helperLink)
        let install = try shell("scripts/install --prefix '\(prefix)' --binary '\(BinderSandbox.binary)' --helper-dir /sbin",
                                in: EverydayCommandTests.repositoryRoot.path)
        XCTAssertEqual(install.status, 0, install.stderr)
        defer {
            unlink(helperLink)
            if let previous { _ = symlink(previous, helperLink) }
        }
        XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: helperLink), prefix + "/sbin/mount.fuse.binder")

        let environment = ["BINDER_HOME": s.home.path]
        let mounted = try shell("mount -t fuse.binder '\(binder.repository)' '\(binder.mountpoint)' -o ro,idle=1h,passphrase_file='\(binder.passphraseFile)'",
                                environment: environment)
        binder.markMounted()
        XCTAssertEqual(mounted.status, 0, mounted.stdout + mounted.stderr)
        let entry = try XCTUnwrap(mountEntry(binder.mountpoint))
        XCTAssertTrue(entry.hasPrefix("binder:sample-binder ") && entry.contains(" fuse.binder ro,"), entry)
        XCTAssertTrue(FileManager.default.fileExists(atPath: binder.path("patient-info.md")))
        XCTAssertNotEqual(try shell("touch '\(binder.path("new.md"))'").status, 0, "read-only")
        XCTAssertEqual(try shell("umount '\(binder.mountpoint)'").status, 0)
        XCTAssertNil(mountEntry(binder.mountpoint))

        // An /etc/fstab line (here an fstab of the test's own, `mount -T`), key from `binder unlock`.
        XCTAssertEqual(try s.run(["unlock", "--timeout", "5m", "--passphrase-file", binder.passphraseFile]).status, 0)
        defer { _ = try? s.run(["lock"]) }
        let fstab = try s.file("fstab", "binder:\(binder.repository) \(binder.mountpoint) fuse.binder noauto,nodev,idle=15m,x-systemd.automount 0 0\n")
        let viaFstab = try shell("mount -T '\(fstab)' '\(binder.mountpoint)'", environment: environment)
        XCTAssertEqual(viaFstab.status, 0, viaFstab.stdout + viaFstab.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: binder.path("patient-info.md")))
        let daemon = try XCTUnwrap(daemonPID(binder.mountpoint))
        let cmdline = try String(contentsOfFile: "/proc/\(daemon)/cmdline", encoding: .utf8).replacingOccurrences(of: "\0", with: " ")
        XCTAssertTrue(cmdline.contains("--idle 900s"), cmdline)
        XCTAssertEqual(try shell("umount '\(binder.mountpoint)'").status, 0)
        waitUntil { !ProcessLiveness.isRunning(daemon) }
        XCTAssertFalse(ProcessLiveness.isRunning(daemon))

        // An option binder does not know is refused by name, before anything is mounted.
        let bad = try shell("mount -t fuse.binder '\(binder.repository)' '\(binder.mountpoint)' -o colour=blue", environment: environment)
        XCTAssertNotEqual(bad.status, 0)
        XCTAssertTrue(bad.stderr.contains("unknown mount option colour=blue"), bad.stderr)
        XCTAssertNil(mountEntry(binder.mountpoint))
    }

    /// The mount daemon draws nothing: Pango, Cairo, libjpeg, poppler, libzbar and libqrencode are opened
    /// only by the commands that draw or read pictures (CPangoCairo's shim.h), so the daemon,
    /// which holds the plaintext for hours, never maps them or what they bring (X11, fontconfig).
    func testTheDaemonDoesNotMapTheDrawingLibraries() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        try binder.mount()
        XCTAssertFalse(try String(contentsOfFile: binder.path("patient-info.md"), encoding: .utf8).isEmpty)
        let daemon = try XCTUnwrap(daemonPID(binder.mountpoint))
        // (read by `cat`: a /proc file has size 0, and Foundation's read of this one came back short)
        let maps = try shell("cat /proc/\(daemon)/maps").stdout
        XCTAssertTrue(maps.contains("libgit2"), "the daemon's own libraries are in its maps")
        for library in ["libpango", "libcairo", "libjpeg", "libzbar", "libqrencode", "libpoppler", "libX11", "libfontconfig"] {
            XCTAssertFalse(maps.contains(library), "the mount daemon maps \(library)")
        }
    }

    /// With a short `--idle`, the mount locks itself: the daemon (holding all plaintext and the
    /// key) exits and the folder is empty again. The settings file's `idle` does the same.
    func testIdleMountLocksItself() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        try binder.mount(["--idle", "1s"])
        let daemon = try XCTUnwrap(daemonPID(binder.mountpoint))
        waitUntil(timeout: 30) { mountEntry(binder.mountpoint) == nil && !ProcessLiveness.isRunning(daemon) }
        XCTAssertNil(mountEntry(binder.mountpoint), "still mounted after idling")
        XCTAssertFalse(ProcessLiveness.isRunning(daemon), "the daemon, holding plaintext and the key, still runs")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: binder.mountpoint), [])
        let log = try String(contentsOfFile: binder.sandbox.home.appendingPathComponent("logs/sample-binder.log").path, encoding: .utf8)
        XCTAssertTrue(log.contains("locked: plaintext and key dropped"), log)

        // A save made before idling is committed; the settings file sets the idle time.
        binder.unmount()
        try Data("idle = 1s   # lock quickly\n".utf8).write(to: binder.sandbox.home.appendingPathComponent("settings"))
        try binder.mount()
        let second = try XCTUnwrap(daemonPID(binder.mountpoint))
        XCTAssertEqual(try shell("printf -- '---\\ntitle: Idle\\n---\\nbody\\n' > '\(binder.path("visits/idle.md"))'").status, 0)
        waitUntil(timeout: 30) { mountEntry(binder.mountpoint) == nil && !ProcessLiveness.isRunning(second) }
        XCTAssertNil(mountEntry(binder.mountpoint))
        XCTAssertTrue(try shell("git -C '\(binder.repository)' log --name-only --format=%s main").stdout.contains("visits/idle.json"))
    }

    /// `binder lock` locks every running mount (and forgets the key); a mount with a file open
    /// is left mounted and the process holding it is named; `binder unmount` says the same,
    /// and `--lazy` detaches it anyway.
    func testLockAndUnmountNameWhatHoldsABusyMount() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        let s = binder.sandbox
        try binder.mount()
        let holder = try holdOpen(binder.path("patient-info.md"))
        defer { if holder.isRunning { holder.terminate() } }

        let busyLock = try s.run(["lock"])
        assertFails(busyLock, mentioning: "pid \(holder.processIdentifier) (sleep)")
        XCTAssertNotNil(mountEntry(binder.mountpoint), "a busy mount was unmounted")
        let busyUnmount = try s.run(["unmount", binder.mountpoint])
        assertFails(busyUnmount, mentioning: "in use by pid \(holder.processIdentifier) (sleep)")
        XCTAssertTrue(busyUnmount.stderr.contains("--lazy"), busyUnmount.stderr)
        XCTAssertNotNil(mountEntry(binder.mountpoint))

        holder.terminate()
        holder.waitBounded(label: "holder")
        let daemon = try XCTUnwrap(daemonPID(binder.mountpoint))
        let lock = try s.run(["lock"])
        XCTAssertEqual(lock.status, 0, lock.stderr)
        XCTAssertTrue(lock.stdout.contains("Locked \(binder.mountpoint)"), lock.stdout)
        XCTAssertNil(mountEntry(binder.mountpoint))
        waitUntil { !ProcessLiveness.isRunning(daemon) }
        XCTAssertFalse(ProcessLiveness.isRunning(daemon))

        // --lazy: detached at once even while a file is open.
        try binder.mount()
        let second = try holdOpen(binder.path("patient-info.md"))
        defer { if second.isRunning { second.terminate() } }
        let lazy = try s.run(["unmount", "--lazy", binder.mountpoint])
        XCTAssertEqual(lazy.status, 0, lazy.stderr)
        XCTAssertNil(mountEntry(binder.mountpoint))
        binder.markMounted()
    }

    /// A `sleep` holding `path` open (as its stdin); this process does not keep it open.
    private func holdOpen(_ path: String) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sleep")
        process.arguments = ["120"]
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        process.standardInput = handle
        try process.run()
        try handle.close()
        return process
    }

    /// `binder mount --install-unit` writes a systemd user unit that mounts in the foreground
    /// (unmounting cleanly on systemd's SIGTERM at logout) with the options given.
    func testInstallUnitWritesASystemdUserUnit() throws {
        let binder = try MountedBinder()
        let s = binder.sandbox
        let config = s.root.appendingPathComponent("config").path
        let run = try s.run(["mount", "--install-unit", "health", "/home/alex/Health records", "--idle", "15m", "-o", "ro"],
                            environment: ["XDG_CONFIG_HOME": config])
        XCTAssertEqual(run.status, 0, run.stderr)
        let unit = try String(contentsOfFile: config + "/systemd/user/binder-health.service", encoding: .utf8)
        let execStart = try XCTUnwrap(unit.split(separator: "\n").first { $0.hasPrefix("ExecStart=") })
        XCTAssertTrue(execStart.hasSuffix(" mount --foreground health \"/home/alex/Health records\" --read-only -o ro --idle 15m")
                      || execStart.hasSuffix(" mount --foreground health \"/home/alex/Health records\" -o ro --idle 15m"), String(execStart))
        let executable = String(execStart.dropFirst("ExecStart=".count).split(separator: " ").first ?? "")
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: executable), executable)
        XCTAssertTrue(unit.contains("Environment=BINDER_HOME=\(s.home.path)"), unit)
        XCTAssertTrue(unit.contains("WantedBy=default.target"), unit)
        XCTAssertTrue(unit.contains("ExecStopPost=-"), unit)
        XCTAssertTrue(unit.contains("Restart=on-failure"), unit)
        if try shell("command -v systemd-analyze").status == 0 {
            let check = try shell("systemd-analyze --user verify '\(config)/systemd/user/binder-health.service' 2>&1")
            XCTAssertFalse(check.stdout.contains("binder-health.service:"), check.stdout)
        }
    }

    /// Without BINDER_HOME, mount logs go to $XDG_STATE_HOME/binder (rotated at 1 MiB, keeping
    /// three old files); `binder status` names the file.
    func testLogsFollowXDGAndRotate() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        let s = binder.sandbox
        let data = s.root.appendingPathComponent("data").path, stateHome = s.root.appendingPathComponent("state").path
        let environment = ["BINDER_HOME": "", "XDG_DATA_HOME": data, "XDG_STATE_HOME": stateHome]
        XCTAssertEqual(try s.run(["key", "import", "--passphrase-file", binder.passphraseFile, "--log-n", "8"], stdin: Fixtures.nsec + "\n",
                                 environment: environment).status, 0)
        let logFolder = stateHome + "/binder"
        try FileManager.default.createDirectory(atPath: logFolder, withIntermediateDirectories: true)
        // A full log from earlier mounts.
        let oldLine = "2026-01-01T00:00:00Z info an old line\n"
        try Data(String(repeating: oldLine, count: (1 << 20) / oldLine.utf8.count + 1).utf8).write(to: URL(fileURLWithPath: logFolder + "/sample-binder.log"))
        try binder.mount(environment: environment)
        let log = try String(contentsOfFile: logFolder + "/sample-binder.log", encoding: .utf8)
        XCTAssertTrue(log.contains("mounted"), log)
        XCTAssertFalse(log.contains("an old line"))
        XCTAssertTrue(try String(contentsOfFile: logFolder + "/sample-binder.log.1", encoding: .utf8).contains("an old line"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: data + "/binder/logs"))
        let status = try s.run(["status", binder.repository], environment: environment)
        XCTAssertTrue(status.stdout.contains("log: \(logFolder)/sample-binder.log"), status.stdout)
        var info = stat()
        XCTAssertEqual(stat(logFolder + "/sample-binder.log", &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
    }

    /// `--notify`: where a desktop session is, a refused save reaches notify-send (here a
    /// stand-in on the PATH that records what it was asked to show), without the file's name.
    func testNotifyReportsARefusedSave() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        let s = binder.sandbox
        let tools = s.root.appendingPathComponent("tools").path
        let record = s.root.appendingPathComponent("notified").path
        try FileManager.default.createDirectory(atPath: tools, withIntermediateDirectories: true)
        let fake = tools + "/notify-send"
        try Data("#!/bin/sh\nprintf '%s\\n' \"$@\" >> '\(record)'\n".utf8).write(to: URL(fileURLWithPath: fake))
        chmod(fake, 0o755)
        try binder.mount(["--notify"], environment: ["PATH": tools + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"),
                                                     "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent"])
        // Past a record's 65,535 bytes: refused at write() (EFBIG).
        let refused = try shell("head -c 70000 /dev/zero | tr '\\0' b > '\(binder.path("visits/bad.md"))'")
        XCTAssertNotEqual(refused.status, 0, "the save should be refused")
        waitUntil { FileManager.default.fileExists(atPath: record) }
        let shown = (try? String(contentsOfFile: record, encoding: .utf8)) ?? ""
        XCTAssertTrue(shown.contains("binder: sample-binder"), shown)
        XCTAssertTrue(shown.contains("refused") && shown.contains("binder status sample-binder"), shown)
        // notify-send's command line is readable by other processes: no names, no content.
        XCTAssertFalse(shown.contains("bad.md") || shown.contains("bbbb"), shown)
    }
}
