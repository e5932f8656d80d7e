import BinderCrypto
import BinderFormat
import Foundation
import XCTest

/// docs/PRODUCT.md, "Promises under stress", through a real mount: hostile write patterns,
/// refusals that are loud and lose nothing, times that survive copies, the format's own
/// files, and backups that restore to the same binder.
final class PromisesUnderStressTests: MountedFixtureTestCase {
    func log() throws -> String {
        try String(contentsOfFile: binder.sandbox.home.appendingPathComponent("logs/sample-binder.log").path, encoding: .utf8)
    }

    /// The mount daemon's peak resident memory, in KiB.
    func daemonPeakKiB() throws -> Int {
        let pid = try XCTUnwrap(daemonPID(mnt))
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let line = try XCTUnwrap(status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") })
        return try XCTUnwrap(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]))
    }

    func testHugeOffsetsAndSizesAreRefusedAtOnceWithMemoryBounded() throws {
        let before = try git("rev-parse main")
        let record = "allergies/2025-02-25-penicillin.md"
        let original = try binder.read(record)
        let script = """
        import errno, os, sys
        def attempt(path, offset, flags=os.O_WRONLY):
            fd = os.open(path, flags | os.O_CREAT, 0o600)
            try:
                os.pwrite(fd, b"x", offset)
                return "ok"
            except OSError as e:
                return errno.errorcode[e.errno]
            finally:
                try: os.close(fd)
                except OSError as e: pass
        for path, offset in [("visits/new.md", 2**40), ("visits/new.bin", 2**40), ("visits/new.bin", 2**62),
                             ("visits/new.md", 70000), ("\(record)", 2**40)]:
            print(path, offset, attempt(path, offset))
        """
        let run = try shell("python3 -c '\(script.replacingOccurrences(of: "'", with: "'\\''"))'", in: mnt)
        XCTAssertEqual(run.status, 0, run.stderr)
        for line in run.stdout.split(separator: "\n") {
            XCTAssertTrue(line.hasSuffix(" EFBIG"), "every write past a limit is EFBIG at write(): \(line)")
        }
        XCTAssertEqual(run.stdout.split(separator: "\n").count, 5, run.stdout)
        // truncate(1) of a record and of an attachment past its limit.
        let truncated = try shell("truncate -s 1G \(record); echo $?; truncate -s 1G visits/2025-03-03-recording.m4a; echo $?", in: mnt)
        XCTAssertTrue(truncated.stderr.contains("File too large"), truncated.stderr)
        XCTAssertEqual(truncated.stdout, "1\n1\n")
        XCTAssertEqual(try git("rev-parse main"), before, "nothing was stored")
        XCTAssertEqual(try binder.read(record), original)
        XCTAssertFalse(FileManager.default.fileExists(atPath: binder.path("visits/new.md")), "a refused new file is not listed")
        XCTAssertLessThan(try daemonPeakKiB(), 256 << 10, "memory stays bounded by what was written (KiB)")
        XCTAssertTrue(String(decoding: try binder.read(".binder/status"), as: UTF8.self).contains("last_refused_save:"))
    }

    func testTheAttachmentLimitIsAnOption() throws {
        binder.unmount()
        try binder.mount(["--max-attachment-size", "1M"])
        let big = try shell("head -c 2000000 /dev/urandom > labs/scan.bin", in: mnt)
        XCTAssertTrue(big.stderr.contains("File too large"), big.stderr)
        XCTAssertEqual(try shell("head -c 900000 /dev/urandom > labs/scan.bin && stat -c %s labs/scan.bin", in: mnt).stdout, "900000\n")
        XCTAssertTrue(try log().contains("the limit is 1,048,576"))
    }

    func testALargeRecordThroughAShellRedirectFailsLoudlyAndKeepsWhatIsStored() throws {
        let before = try git("rev-parse main")
        let record = "allergies/2025-02-25-penicillin.md"
        let original = try binder.read(record)
        // Shells ignore close(2); the refusal must come at write(2).
        let new = try shell("head -c 10000000 /dev/zero | tr '\\\\0' x > visits/big.md", in: mnt)
        XCTAssertNotEqual(new.status, 0)
        XCTAssertTrue(new.stderr.contains("File too large"), new.stderr)
        let over = try shell("head -c 10000000 /dev/zero | tr '\\\\0' x > \(record)", in: mnt)
        XCTAssertNotEqual(over.status, 0)
        XCTAssertEqual(try git("rev-parse main"), before)
        XCTAssertFalse(FileManager.default.fileExists(atPath: binder.path("visits/big.md")), "the listing shows what is stored")
        // The kernel is told to forget what it cached of the refused bytes (asynchronously).
        var size = -1
        for _ in 0..<200 {  // up to 20 s on a loaded machine
            size = Int(try shell("stat -c %s \(record)", in: mnt).stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
            if size == original.count { break }
            Thread.sleep(forTimeInterval: 0.1)
        }
        XCTAssertEqual(size, original.count)
        XCTAssertEqual(try binder.read(record), original)
        let status = String(decoding: try binder.read(".binder/status"), as: UTF8.self)
        XCTAssertTrue(status.contains("last_refused_save:") && status.contains("the limit is 65,535"), status)
        let log = try log()
        XCTAssertTrue(log.contains("visits/big.md") && log.contains("the limit is 65,535"), log)
        XCTAssertFalse(log.contains("xxxxxxxx"), "content reached the log")
    }

    func testTimesSetByToolsAreStoredAsUpdated() throws {
        let scratch = binder.sandbox.root.path
        // cp -p sets the time before closing: one commit with the bytes.
        let count = try git("rev-list --count main")
        XCTAssertEqual(try shell("printf '# Copied\\n' > '\(scratch)/c.md' && touch -d '2021-06-07 08:09:10 UTC' '\(scratch)/c.md' && cp -p '\(scratch)/c.md' visits/c.md", in: mnt).status, 0)
        XCTAssertEqual(Int(try git("rev-list --count main").trimmingCharacters(in: .whitespacesAndNewlines)),
                       Int(count.trimmingCharacters(in: .whitespacesAndNewlines))! + 1, "cp -p is one commit")
        XCTAssertEqual(try shell("stat -c %Y visits/c.md", in: mnt).stdout, "1623053350\n")
        XCTAssertTrue(String(decoding: try binder.read("visits/c.md"), as: UTF8.self).contains("updated: \"2021-06-07T08:09:10.000Z\""))
        // touch -d on a stored record.
        XCTAssertEqual(try shell("touch -d '2019-01-02 03:04:05 UTC' visits/c.md", in: mnt).status, 0)
        XCTAssertEqual(try shell("stat -c %Y visits/c.md", in: mnt).stdout, "1546398245\n")
        // An updated: the writer changed is kept.
        let written = "---\ntype: visit\ncreated: \"2018-01-01T00:00:00.000Z\"\nupdated: \"2018-02-03T04:05:06.000Z\"\n---\nBody\n"
        XCTAssertEqual(try shell("printf -- '\(written.replacingOccurrences(of: "\n", with: "\\n"))' > visits/d.md", in: mnt).status, 0)
        XCTAssertEqual(try shell("stat -c %Y visits/d.md", in: mnt).stdout, "1517630706\n")
        XCTAssertEqual(try binder.read("visits/d.md"), Array(written.utf8))
        // Each commit carries the time of its own save.
        Thread.sleep(forTimeInterval: 1.1)
        XCTAssertEqual(try shell("echo more >> visits/d.md", in: mnt).status, 0)
        let times = try git("log -2 --format=%at main").split(separator: "\n")
        XCTAssertEqual(times.count, 2)
        XCTAssertNotEqual(times[0], times[1], "commits of one mount are stamped with their own times")
    }

    func testTheFormatsOwnFilesAndNamesGetClearErrors() throws {
        // rm patient-info.md stores nothing: the record is held out of sight for its
        // replacement (tar -x), and never leaves git.
        let before = try git("rev-parse main")
        let rm = try shell("rm patient-info.md", in: mnt)
        XCTAssertEqual(rm.status, 0, rm.stderr)
        XCTAssertEqual(try git("rev-parse main"), before)
        XCTAssertTrue(try git("ls-tree --name-only main").contains("patient-info.json"))
        let gitFolder = try shell("mkdir .git", in: mnt)
        XCTAssertTrue(gitFolder.stderr.contains("Operation not permitted"), gitFolder.stderr)
        let long = String(repeating: "n", count: 256)
        let tooLong = try shell("touch visits/\(long).md", in: mnt)
        XCTAssertTrue(tooLong.stderr.contains("File name too long"), tooLong.stderr)
        // mv X.md X.txt: the same bytes, now as X.txt.
        let record = "immunizations/2025-02-25-influenza-vaccine"
        let bytes = try binder.read(record + ".md")
        let moved = try shell("mv \(record).md \(record).txt", in: mnt)
        XCTAssertEqual(moved.status, 0, moved.stderr)
        XCTAssertEqual(try binder.read(record + ".txt"), bytes)
        XCTAssertFalse(FileManager.default.fileExists(atPath: binder.path(record + ".md")))
        XCTAssertTrue(try git("ls-tree -r --name-only main").contains(record + ".txt.enc"))
        // A folder moved with mv takes a subfolder whose name begins with a combining mark
        // (U+0301, which joins the '/' before it into one Swift Character) along.
        let odd = try shell("mkdir -p moving/$'\\u0301'odd && printf '# Kept\\n' > moving/$'\\u0301'odd/kept.md && mv moving moved && cat moved/$'\\u0301'odd/kept.md", in: mnt)
        XCTAssertEqual(odd.status, 0, odd.stderr)
        XCTAssertTrue(odd.stdout.hasSuffix("# Kept\n"), odd.stdout)
        XCTAssertTrue(try git("-c core.quotePath=false ls-tree -r --name-only main").contains("moved/\u{301}odd/kept.json"))
    }

    func testBackupsRestoreToTheSameBinder() throws {
        let root = binder.sandbox.root.path
        let tools: [(name: String, backup: String, restore: String)] = [
            ("cp -a", "cp -a '\(mnt)/.' '\(root)/backup-cp'", "cp -a '\(root)/backup-cp/.' '%MNT%/'"),
            ("rsync -a", "rsync -a '\(mnt)/' '\(root)/backup-rsync/'", "rsync -a '\(root)/backup-rsync/' '%MNT%/'"),
            // tar replaces an existing file by unlinking it first: patient-info.md's unlink is
            // held until tar writes the backup's in its place (plain tar -x, exit 0).
            ("tar", "tar -C '\(mnt)' -cf '\(root)/backup.tar' . && mkdir '\(root)/backup-tar' && tar -C '\(root)/backup-tar' -xf '\(root)/backup.tar'",
             "tar -C '%MNT%' -xf '\(root)/backup.tar'"),
        ]
        let original = try structure(of: binder.repository)
        for (index, tool) in tools.enumerated() {
            let backup = try shell(tool.backup)
            XCTAssertEqual(backup.status, 0, "\(tool.name) backup: \(backup.stderr)")
            let copy = "\(root)/\(["backup-cp", "backup-rsync", "backup-tar"][index])"
            // A fresh binder, mounted, restored into.
            let fresh = "fresh-\(index)", freshMount = "\(root)/fresh-mnt-\(index)"
            try FileManager.default.createDirectory(atPath: freshMount, withIntermediateDirectories: true)
            let created = try binder.sandbox.run(["create", fresh, "--passphrase-file", binder.passphraseFile])
            XCTAssertEqual(created.status, 0, created.stderr)
            let mounted = try binder.sandbox.run(["mount", fresh, freshMount, "--passphrase-file", binder.passphraseFile])
            XCTAssertEqual(mounted.status, 0, mounted.stderr)
            defer { unmountQuietly(binder.sandbox, freshMount) }
            let restore = try shell(tool.restore.replacingOccurrences(of: "%MNT%", with: freshMount))
            XCTAssertEqual(restore.status, 0, "\(tool.name) restore: \(restore.stderr)")
            let diff = try shell("diff -r '\(copy)' '\(freshMount)'")
            XCTAssertEqual(diff.status, 0, "\(tool.name): the restored view differs:\n\(diff.stdout)\(diff.stderr)")
            XCTAssertEqual(try structure(of: binder.sandbox.home.appendingPathComponent("binders/\(fresh)").path), original,
                           "\(tool.name): the document/child structure in git")
        }
    }

    /// Each document's git folder, and how many children it has at each depth: what a restore
    /// must give back (names of attachments' sidecars may differ).
    func structure(of repository: String) throws -> [String: [Int]] {
        var out: [String: [Int]] = [:]
        let files = try git("ls-tree -r --name-only main", in: repository).split(separator: "\n").map(String.init)
        for path in files where path.hasSuffix(".json") && !path.hasSuffix(".meta.json") {
            let payload = try shell("git -C '\(repository)' show 'main:\(path)'").stdout
            let document = try MedicalDocument(plaintext: try NIP44.decrypt(payload: payload, key: key).copyBytes())
            var depths: [Int] = []
            func walk(_ d: MedicalDocument, _ depth: Int) {
                for child in d.children {
                    depths.append(depth)
                    walk(child, depth + 1)
                }
            }
            walk(document, 1)
            let stem = String(path.dropLast(5))
            if document.type == "attachment_ref" { continue }  // attachments are compared by the view's bytes
            out[stem, default: []] += depths
        }
        return out
    }
}
