import BinderCrypto
import BinderFormat
import BinderSystem
import Foundation
import XCTest

/// close() means committed: a killed daemon loses nothing acknowledged, and writers in parallel
/// lose nothing.
final class DurabilityTests: XCTestCase {
    func stored(_ binder: MountedBinder, _ gitPath: String) throws -> MedicalDocument? {
        let key = try NIP44.ConversationKey(selfOf: try SecretKey(nsec: Fixtures.nsec))
        let payload = try shell("git -C '\(binder.repository)' show 'main:\(gitPath)' 2>/dev/null")
        guard payload.status == 0 else { return nil }
        return try MedicalDocument(plaintext: try NIP44.decrypt(payload: payload.stdout, key: key).copyBytes())
    }

    func looseObjects(_ binder: MountedBinder) throws -> Int {
        let counts = try shell("git -C '\(binder.repository)' count-objects -v").stdout
        return Int(counts.split(separator: "\n").first { $0.hasPrefix("count: ") }?.dropFirst(7) ?? "") ?? -1
    }

    func packs(_ binder: MountedBinder) throws -> Int {
        let counts = try shell("git -C '\(binder.repository)' count-objects -v").stdout
        return Int(counts.split(separator: "\n").first { $0.hasPrefix("packs: ") }?.dropFirst(7) ?? "") ?? -1
    }

    /// Each save writes a pack, folded every 32 saves of a mount; mounts that each end sooner
    /// leave theirs. The next mount that may write folds them once it is up, before any save;
    /// a read-only mount leaves them.
    func testAMountFoldsThePacksShortMountsLeft() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        for mount in 0..<2 {
            try binder.mount()
            let saves = try shell("for i in $(seq 20); do printf '# Short mount \(mount), save %s\\n' $i > visits/2026-07-0\(mount + 1)-short.md || exit 1; done",
                                  in: binder.mountpoint)
            XCTAssertEqual(saves.status, 0, saves.stderr)
            binder.unmount()
        }
        let piledUp = try packs(binder)
        XCTAssertGreaterThanOrEqual(piledUp, 40, "each save writes a pack")

        try binder.mount(["--read-only"])
        Thread.sleep(forTimeInterval: 3)
        XCTAssertEqual(try packs(binder), piledUp, "a read-only mount changed the repository")
        binder.unmount()

        try binder.mount()
        waitUntil(timeout: 120) { ((try? self.packs(binder)) ?? Int.max) < 32 }
        XCTAssertLessThan(try packs(binder), 32, "the packs were not folded (\(piledUp) before)")
        XCTAssertTrue(String(decoding: try binder.read("visits/2026-07-02-short.md"), as: UTF8.self).hasSuffix("# Short mount 1, save 20\n"))
        binder.unmount()
        XCTAssertEqual(try shell("git -C '\(binder.repository)' fsck --strict 2>&1").status, 0)
    }

    func testKillDashNineLosesNoAcknowledgedSave() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        try binder.mount()
        let pid = try XCTUnwrap(daemonPID(binder.mountpoint))
        let looseBefore = try looseObjects(binder)
        // A stream of saves; each line of `acked` is written only after close() returned.
        let acked = binder.sandbox.root.appendingPathComponent("acked").path
        let writer = """
        import os, sys
        mnt, acked = sys.argv[1], sys.argv[2]
        with open(acked, "w") as log:
            for i in range(100000):
                path = os.path.join(mnt, "visits", "2026-07-01-stream-%d.md" % i)
                try:
                    with open(path, "w") as f:
                        f.write("# Stream %d\\n" % i)
                except OSError:
                    break
                log.write("%d\\n" % i); log.flush()
        """
        let script = try binder.sandbox.file("writer.py", writer)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script, binder.mountpoint, acked]
        process.standardError = FileHandle.nullDevice
        try process.run()
        waitUntil(timeout: 30) { ((try? String(contentsOfFile: acked, encoding: .utf8))?.split(separator: "\n").count ?? 0) >= 15 }
        kill(pid, SIGKILL)
        process.waitBounded(label: "process")
        waitUntil { !ProcessLiveness.isRunning(pid) }
        // The dead mount stays (ENOTCONN) until cleared: the mount at the end clears it.

        let saved = try String(contentsOfFile: acked, encoding: .utf8).split(separator: "\n").compactMap { Int($0) }
        XCTAssertGreaterThanOrEqual(saved.count, 15)
        XCTAssertEqual(try shell("git -C '\(binder.repository)' fsck --strict 2>&1").status, 0)
        XCTAssertEqual(try shell("git -C '\(binder.repository)' cat-file -t main").stdout, "commit\n")
        // Each save went to disk as one pack: no loose objects were added (a repack may have
        // removed some).
        XCTAssertLessThanOrEqual(try looseObjects(binder), looseBefore, "saves write packs, not loose objects")
        for i in saved {
            let document = try stored(binder, "visits/2026-07-01-stream-\(i).json")
            XCTAssertEqual(document?.value, "# Stream \(i)\n", "acknowledged save \(i) is missing")
        }
        // And the binder mounts again (clearing the dead mount, and any git lock the kill left)
        // and shows them.
        try binder.mount()
        XCTAssertTrue(FileManager.default.fileExists(atPath: binder.path("visits/2026-07-01-stream-\(saved.last!).md")))
    }

    func testParallelWritersLoseNothing() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        try binder.mount()
        let before = Int(try shell("git -C '\(binder.repository)' rev-list --count main").stdout.trimmingCharacters(in: .whitespacesAndNewlines))!
        let writers = 4, perWriter = 10
        let run = try shell((0..<writers).map { w in
            "( for i in $(seq 1 \(perWriter)); do echo \"# Writer \(w) entry $i\" > labs/2026-08-0\(w + 1)-w\(w)-$i.md || exit 1; done ) &"
        }.joined(separator: "\n") + "\nwait", in: binder.mountpoint)
        XCTAssertEqual(run.status, 0, run.stderr)
        let after = Int(try shell("git -C '\(binder.repository)' rev-list --count main").stdout.trimmingCharacters(in: .whitespacesAndNewlines))!
        XCTAssertEqual(after - before, writers * perWriter, run.stderr)
        for w in 0..<writers {
            for i in 1...perWriter {
                XCTAssertEqual(try stored(binder, "labs/2026-08-0\(w + 1)-w\(w)-\(i).json")?.value, "# Writer \(w) entry \(i)\n")
            }
        }
        XCTAssertEqual(try shell("ls labs | grep -c -- '-w[0-9]-'", in: binder.mountpoint).stdout.trimmingCharacters(in: .whitespacesAndNewlines),
                       "\(writers * perWriter)")
        XCTAssertEqual(try shell("git -C '\(binder.repository)' status --porcelain").stdout, "")
    }

    func testNanoSavesOnce() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        try binder.mount()
        let path = binder.path("immunizations/2025-02-25-influenza-vaccine.md")
        let before = Int(try shell("git -C '\(binder.repository)' rev-list --count main").stdout.trimmingCharacters(in: .whitespacesAndNewlines))!
        let session = "nano\(getpid())"
        let tmux = "python3 -c 'import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)' tmux -L binder-tests "
        XCTAssertEqual(try shell(tmux + "new-session -d -s \(session) -x 120 -y 40 \"nano '\(path)'\"").status, 0)
        defer { _ = try? shell(tmux + "kill-session -t \(session)") }
        waitUntil { (try? shell(tmux + "capture-pane -p -t \(session)").stdout.contains("influenza")) ?? false }
        _ = try shell(tmux + "send-keys -t \(session) M-/ 'Added in nano.' C-o Enter")
        waitUntil { (try? shell(tmux + "capture-pane -p -t \(session)").stdout.contains("Wrote")) ?? false }
        _ = try shell(tmux + "send-keys -t \(session) C-x")
        waitUntil { (try? shell("git -C '\(binder.repository)' rev-list --count main").stdout.trimmingCharacters(in: .whitespacesAndNewlines)) == "\(before + 1)" }
        let after = Int(try shell("git -C '\(binder.repository)' rev-list --count main").stdout.trimmingCharacters(in: .whitespacesAndNewlines))!
        XCTAssertEqual(after, before + 1)
        XCTAssertTrue(try stored(binder, "immunizations/2025-02-25-influenza-vaccine.json")?.value.contains("Added in nano.") ?? false)
    }
}

final class FullDiskTests: XCTestCase {
    /// A full disk fails the save at close with ENOSPC and leaves every stored record readable;
    /// an undecryptable file refuses writes.
    func testFullDiskAndReadOnlyFilesFailCleanly() throws {
        let binder = try MountedBinder(cloneFixture: false)
        defer {
            binder.unmount()
            _ = try? shell("umount -l '\(binder.sandbox.root.path)/small'")
        }
        let small = binder.sandbox.root.appendingPathComponent("small").path
        guard try shell("mkdir -p '\(small)' && mount -t tmpfs -o size=3m tmpfs '\(small)'").status == 0 else {
            throw XCTSkip("cannot mount a tmpfs here")
        }
        binder.repository = small + "/binder"
        XCTAssertEqual(try shell("git clone -q '\(Fixtures.bundle)' '\(binder.repository)' && echo 'not a record' > '\(binder.repository)/labs/notes.txt' && git -C '\(binder.repository)' add -A && git -C '\(binder.repository)' -c user.name=t -c user.email=t@t commit -qm 'Add entry'").status, 0)
        try binder.mount()
        let mnt = binder.mountpoint
        let before = try shell("git -C '\(binder.repository)' rev-parse main").stdout
        XCTAssertNotEqual(try shell("echo x >> labs/notes.txt", in: mnt).status, 0)

        // Fill the disk (dd stops at ENOSPC).
        _ = try shell("dd if=/dev/zero of='\(small)/filler' bs=64k 2>/dev/null")
        XCTAssertEqual(try shell("df --output=avail '\(small)' | tail -n 1").stdout.trimmingCharacters(in: .whitespacesAndNewlines), "0")
        let scan = binder.sandbox.root.appendingPathComponent("scan.bin").path
        XCTAssertEqual(try shell("head -c 400000 /dev/urandom > '\(scan)'").status, 0)
        let full = try shell("cp '\(scan)' labs/scan.bin", in: mnt)
        XCTAssertNotEqual(full.status, 0)
        XCTAssertTrue(full.stderr.contains("No space left on device"), "the errno comes from the failing call: \(full.stderr)")
        XCTAssertEqual(try shell("git -C '\(binder.repository)' rev-parse main").stdout, before)
        // Stored records are intact and still shown.
        XCTAssertEqual(try shell("grep -c 'Penicillin' allergies/2025-02-25-penicillin.md", in: mnt).stdout, "1\n")
        // With space again, saving works.
        XCTAssertEqual(try shell("rm '\(small)/filler' && cp '\(scan)' labs/scan.bin && cmp '\(scan)' labs/scan.bin", in: mnt).status, 0)

        // A read-only repository (read-only bind mount) is reported the same way.
        let tip = try shell("git -C '\(binder.repository)' rev-parse main").stdout
        XCTAssertEqual(try shell("mount --bind '\(binder.repository)' '\(binder.repository)' && mount -o remount,ro,bind '\(binder.repository)'").status, 0)
        defer { _ = try? shell("umount -l '\(binder.repository)'") }
        let refused = try shell("echo '# More' >> allergies/2025-02-25-penicillin.md && cp '\(scan)' labs/scan2.bin", in: mnt)
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertEqual(try shell("git -C '\(binder.repository)' rev-parse main").stdout, tip)
        XCTAssertEqual(try shell("grep -c 'More' allergies/2025-02-25-penicillin.md", in: mnt).stdout, "0\n")
    }
}
