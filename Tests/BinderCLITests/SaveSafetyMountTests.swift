import BinderFormat
import Foundation
import XCTest

/// Saves that tools make in ways the first mount tests did not: a file emptied or created and
/// closed without a write, a new file renamed or unlinked while still open, a record replaced by
/// a rename, names too long for git, a record and an attachment of one stem, and saves of what
/// is stored already. Each was found losing data or committing late by a user's audit.
final class SaveSafetyMountTests: MountedFixtureTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        XCTAssertEqual(try shell("mkdir -p visits labs", in: mnt).status, 0)
    }

    /// PRODUCT.md: once close() returns, the change is in a commit on disk, also when nothing
    /// was written (`: > file`, `touch new.md`), while a shell's `> file` (a first descriptor
    /// closed before the write) still makes one commit, not an empty one first.
    func testEmptyingOrCreatingWithoutAWriteIsCommittedBeforeCloseReturns() throws {
        XCTAssertEqual(try shell("printf 'old\\n' > labs/w.txt", in: mnt).status, 0)
        var count = try commits()
        XCTAssertEqual(try shell(": > labs/w.txt", in: mnt).status, 0)
        XCTAssertEqual(try commits(), count + 1, "the truncation is committed when close() returns")
        XCTAssertEqual(try binder.read("labs/w.txt"), [])
        count += 1

        XCTAssertEqual(try shell("touch visits/empty.md", in: mnt).status, 0)
        XCTAssertEqual(try commits(), count + 1)
        XCTAssertEqual(try stored("visits/empty.json").value, "")
        let shown = try binder.read("visits/empty.md")
        XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: binder.path("visits/empty.md"))[.size] as? Int, shown.count,
                       "the size shown is the stored record's")
        count += 1

        XCTAssertEqual(try shell("echo hello > labs/w.txt", in: mnt).status, 0)
        XCTAssertEqual(try commits(), count + 1, "a shell redirect is one commit, not an emptied record and then the bytes")
        XCTAssertEqual(try binder.read("labs/w.txt"), Array("hello\n".utf8))
        count += 1

        // An fsync of a file emptied by O_TRUNC and not written stores it, before any close.
        let fsynced = try shell("""
            python3 -c "import os,subprocess,sys
            fd = os.open('labs/w.txt', os.O_WRONLY | os.O_TRUNC)
            os.fsync(fd)
            print(subprocess.run(['git', '-C', sys.argv[1], 'rev-list', '--count', 'main'], capture_output=True, text=True).stdout.strip())
            os.close(fd)" '\(binder.repository)'
            """, in: mnt)
        XCTAssertEqual(fsynced.status, 0, fsynced.stderr)
        XCTAssertEqual(fsynced.stdout, "\(count + 1)\n")
    }

    /// `mkstemp`, write, rename, then close (and libfuse's hidden name for a file unlinked
    /// while open): the new file goes on under its new name, nothing is stored twice.
    func testANewFileRenamedOrUnlinkedWhileOpen() throws {
        let count = try commits()
        let run = try shell("""
            python3 -c "import os,tempfile
            fd, t = tempfile.mkstemp(dir='visits', suffix='.md'); os.write(fd, b'# Renamed before close\\n'); os.replace(t, 'visits/a.md'); os.close(fd)
            fd, t = tempfile.mkstemp(dir='visits', suffix='.md'); os.write(fd, b'gone\\n'); os.unlink(t); os.close(fd)
            fd, t = tempfile.mkstemp(dir='visits', suffix='.md'); os.write(fd, b'aside\\n'); os.rename(t, 'visits/aside.md~'); os.close(fd)
            print(sorted(n for n in os.listdir('visits') if n.startswith('tmp')))"
            """, in: mnt)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stdout, "[]\n")
        XCTAssertEqual(try commits(), count + 1, "only a.md is stored")
        XCTAssertEqual(try stored("visits/a.json").value, "# Renamed before close\n")
        XCTAssertEqual(try git("ls-tree --name-only main visits/").split(separator: "\n").filter { $0.contains("tmp") }, [])
        XCTAssertEqual(try binder.read("visits/aside.md~"), Array("aside\n".utf8), "a backup name keeps the bytes in memory")
    }

    /// rename(2) replaces a file and leaves the folder beside it: a record saved by renaming a
    /// temporary file over it (a name no rule knows) keeps its children.
    func testRenamingOverARecordKeepsItsChildren() throws {
        let scan = (0..<5_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let source = binder.sandbox.root.appendingPathComponent("scan.png")
        try Data(scan).write(to: source)
        XCTAssertEqual(try shell("""
            printf -- '---\\ntype: visit\\n---\\n# Parent\\n' > visits/parent.md && mkdir visits/parent.children &&
            printf 'child\\n' > visits/parent.children/01-note.md && cp '\(source.path)' visits/parent.children/02-scan.png
            """, in: mnt).status, 0)
        let saved = try shell("""
            python3 -c "import os,tempfile
            with tempfile.NamedTemporaryFile('w', dir='visits', delete=False, suffix='.md') as f: f.write(open('visits/parent.md').read().replace('# Parent', '# Parent, edited'))
            os.replace(f.name, 'visits/parent.md')"
            """, in: mnt)
        XCTAssertEqual(saved.status, 0, saved.stderr)
        XCTAssertEqual(try shell("ls visits/parent.children", in: mnt).stdout, "01-note.md\n02-scan.png\n")
        XCTAssertEqual(try binder.read("visits/parent.children/02-scan.png"), scan)
        let document = try stored("visits/parent.json")
        XCTAssertEqual(document.value, "# Parent, edited\n")
        XCTAssertEqual(document.children.count, 2)

        // A record with children of its own cannot take the place of another's: refused, both kept.
        XCTAssertEqual(try shell("printf '# Other\\n' > visits/other.md && mkdir visits/other.children && printf 'c\\n' > visits/other.children/01-note.md",
                                 in: mnt).status, 0)
        let refused = try shell("mv visits/other.md visits/parent.md", in: mnt)
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("Directory not empty"), refused.stderr)
        XCTAssertEqual(try stored("visits/parent.json").children.count, 2)
        XCTAssertEqual(try stored("visits/other.json").children.count, 1)
    }

    /// A name that fits the mount but not git (its `.enc` or `.json` name past 255 bytes) is
    /// refused when the file is made: a shell redirect reports it, where a refusal at close
    /// would have lost the bytes without a word.
    func testNamesTooLongForGitAreRefusedWhenMade() throws {
        let count = try commits()
        for name in [String(repeating: "e", count: 248) + ".txt", String(repeating: "f", count: 251) + ".md"] {
            let run = try shell("echo hi > labs/\(name)", in: mnt)
            XCTAssertNotEqual(run.status, 0, "\(name.utf8.count) bytes")
            XCTAssertTrue(run.stderr.contains("File name too long"), run.stderr)
        }
        XCTAssertEqual(try commits(), count)
        let longest = String(repeating: "g", count: 250) + ".md"  // stored as 252 bytes + .json
        XCTAssertEqual(try shell("echo hi > labs/\(longest)", in: mnt).status, 0)
        XCTAssertEqual(try stored("labs/" + String(repeating: "g", count: 250) + ".json").value, "hi\n")
    }

    /// An attachment's reference is named after its file (`X.pdf` is `X.json` beside
    /// `X.pdf.enc`), as is a record (`X.md` is `X.json`): the reference, whose name is never
    /// shown, moves aside, in either order.
    func testARecordAndAnAttachmentOfOneStemAreBothKept() throws {
        let pdf = Array("%PDF-1.4\n".utf8) + [UInt8](repeating: 0x5A, count: 4_000)
        let source = binder.sandbox.root.appendingPathComponent("mri.pdf")
        try Data(pdf).write(to: source)
        XCTAssertEqual(try shell("mkdir scans && cp '\(source.path)' scans/2025-03-01-mri.pdf && printf '# MRI notes\\n' > scans/2025-03-01-mri.md",
                                 in: mnt).status, 0)
        XCTAssertEqual(try shell("printf '# Foo\\n' > scans/foo.md && cp '\(source.path)' scans/foo.pdf", in: mnt).status, 0)
        for _ in 0..<2 {
            XCTAssertEqual(try shell("ls scans", in: mnt).stdout, "2025-03-01-mri.md\n2025-03-01-mri.pdf\nfoo.md\nfoo.pdf\n")
            XCTAssertEqual(try binder.read("scans/2025-03-01-mri.pdf"), pdf)
            XCTAssertEqual(try binder.read("scans/foo.pdf"), pdf)
            XCTAssertEqual(try stored("scans/2025-03-01-mri.json").value, "# MRI notes\n")
            XCTAssertEqual(try stored("scans/foo.json").value, "# Foo\n")
            binder.unmount()
            try binder.mount()
        }
        let verify = try binder.sandbox.run(["verify", binder.repository, "--passphrase-file", binder.passphraseFile])
        XCTAssertEqual(verify.status, 0, verify.stdout + verify.stderr)
    }

    /// "Save the same bytes again: nothing": also when the tool sets the time it read
    /// (`cp -p`, `rsync -a`, `tar --overwrite`), for attachments too, and when front matter
    /// leaves out the dates the record has.
    func testSavingWhatIsStoredMakesNoCommit() throws {
        let out = binder.sandbox.root.appendingPathComponent("out").path
        XCTAssertEqual(try shell("""
            mkdir -p '\(out)' && printf -- '---\\ntype: visit\\n---\\n# Same\\n' > visits/same.md && mkdir visits/same.children &&
            head -c 3000 /dev/urandom > '\(out)/scan.png' && cp '\(out)/scan.png' visits/same.children/02-scan.png && cp '\(out)/scan.png' labs/photo.png
            """, in: mnt).status, 0)
        let count = try commits()
        XCTAssertEqual(try shell("cp -p visits/same.md '\(out)/same.md' && cp -p '\(out)/same.md' visits/same.md", in: mnt).status, 0)
        XCTAssertEqual(try commits(), count, "cp -p out and back")
        XCTAssertEqual(try shell("rsync -a visits/ '\(out)/v/' && rsync -a labs/ '\(out)/l/' && rsync -a '\(out)/v/' visits/ && rsync -a '\(out)/l/' labs/",
                                 in: mnt).status, 0)
        XCTAssertEqual(try commits(), count, "rsync -a out and back")
        XCTAssertEqual(try shell("tar -cf '\(out)/r.tar' visits labs && tar --overwrite -xf '\(out)/r.tar'", in: mnt).status, 0)
        XCTAssertEqual(try commits(), count, "tar --overwrite of what is stored")
        XCTAssertEqual(try shell("printf -- '---\\ntype: visit\\n---\\n# Same\\n' > visits/same.md", in: mnt).status, 0)
        XCTAssertEqual(try commits(), count, "the same front matter without the dates the record has")
        XCTAssertEqual(try shell("echo 'changed' >> visits/same.md", in: mnt).status, 0)
        XCTAssertEqual(try commits(), count + 1)
    }

    /// A child changed takes an `updated`, so its time moves and `rsync` (sizes and times)
    /// copies it again; a new child is made without one, as the apps make them.
    func testAChangedChildShowsANewTime() throws {
        XCTAssertEqual(try shell("printf '# P\\n' > visits/p.md && mkdir visits/p.children && printf 'KID\\n' > visits/p.children/01-note.md", in: mnt).status, 0)
        XCTAssertNil(try stored("visits/p.json").children.first?.metadata["updated"])
        let path = binder.path("visits/p.children/01-note.md")
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -3_600)], ofItemAtPath: path)
        let before = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date)
        XCTAssertEqual(try shell("sed -i s/KID/kid/ visits/p.children/01-note.md", in: mnt).status, 0)
        let after = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date)
        XCTAssertGreaterThan(after.timeIntervalSince(before), 3_000)
        XCTAssertNotNil(try stored("visits/p.json").children.first?.metadata["updated"])
    }

    /// `.binder/deleted/` holds records deleted, not records renamed, even once the renamed
    /// record changes.
    func testARenamedRecordIsNotDeleted() throws {
        XCTAssertEqual(try shell("printf 'a\\n' > visits/aa.md && mv visits/aa.md visits/bb.md && echo edit >> visits/bb.md", in: mnt).status, 0)
        XCTAssertFalse(try shell("ls .binder/deleted/visits 2>/dev/null", in: mnt).stdout.contains("aa.md"))
        XCTAssertEqual(try shell("rm visits/bb.md", in: mnt).status, 0)
        let deleted = try shell("ls .binder/deleted/visits", in: mnt).stdout
        XCTAssertTrue(deleted.contains("bb.md"), deleted)
        XCTAssertFalse(deleted.contains("aa.md"), deleted)
    }

    /// Two handles appending to one record (O_APPEND): every line lands once, whichever closes
    /// first, also across an fsync in between (each store of one goes after the other's).
    func testTwoAppendersToOneRecordKeepEveryLine() throws {
        XCTAssertEqual(try shell("printf '# Log\\n' > visits/log.md", in: mnt).status, 0)
        let run = try shell("""
            python3 -c "import os
            p = 'visits/log.md'
            a = os.open(p, os.O_WRONLY | os.O_APPEND); b = os.open(p, os.O_WRONLY | os.O_APPEND)
            os.write(a, b'LINE-ONE\\n'); os.write(b, b'LINE-TWO\\n')
            os.close(a); os.fsync(b)
            os.write(b, b'LINE-THREE\\n'); c = os.open(p, os.O_WRONLY | os.O_APPEND); os.write(c, b'LINE-FOUR\\n'); os.close(c)
            os.write(b, b'LINE-FIVE\\n'); os.close(b)"
            """, in: mnt)
        XCTAssertEqual(run.status, 0, run.stderr)
        let value = try stored("visits/log.json").value
        for line in ["LINE-ONE", "LINE-TWO", "LINE-THREE", "LINE-FOUR", "LINE-FIVE"] {
            XCTAssertEqual(value.components(separatedBy: line).count - 1, 1, "\(line) in \(value)")
        }
    }

    /// Two descriptors on one attachment (and one record), A writing at 0 and B at 1 MiB (at
    /// the end of the record), both closed: every write is stored, and a read through a third
    /// descriptor before the closes sees both (one file, one content, as POSIX has it).
    func testTwoWritersAtDifferentOffsetsKeepEveryWrite() throws {
        XCTAssertEqual(try shell("printf '# Log\\n' > visits/log.md && head -c 4096 /dev/zero > labs/scan.bin", in: mnt).status, 0)
        let run = try shell("""
            python3 -c "import os
            end = os.path.getsize('visits/log.md')
            for p, near, far in (('labs/scan.bin', 0, 1 << 20), ('visits/log.md', end, end + 13)):
                a = os.open(p, os.O_WRONLY); b = os.open(p, os.O_WRONLY)
                os.pwrite(a, b'FIRST-WRITER\\n', near); os.pwrite(b, b'SECOND-WRITER', far)
                r = os.open(p, os.O_RDONLY); seen = os.pread(r, far + 64, 0); os.close(r)
                assert b'FIRST-WRITER' in seen and b'SECOND-WRITER' in seen, seen[-64:]
                os.close(a); os.close(b)"
            """, in: mnt)
        XCTAssertEqual(run.status, 0, run.stderr)
        let scan = try binder.read("labs/scan.bin")
        XCTAssertEqual(scan.count, (1 << 20) + 13)
        XCTAssertEqual(Array(scan.prefix(13)), Array("FIRST-WRITER\n".utf8))
        XCTAssertEqual(Array(scan.suffix(13)), Array("SECOND-WRITER".utf8))
        let log = try stored("visits/log.json").value
        XCTAssertTrue(log.contains("FIRST-WRITER") && log.contains("SECOND-WRITER"), log)
    }

    /// A backup restored with plain `tar -x` into a fresh binder: tar unlinks patient-info.md
    /// before extracting it; the unlink is held, tar exits 0 and the backup's record is in its
    /// place. A `rm patient-info.md` that nothing replaces is undone at the next mount.
    func testPlainTarRestoresPatientInfoAndItNeverLeavesGit() throws {
        let root = binder.sandbox.root.path
        XCTAssertEqual(try shell("printf -- '---\\nname: Restored Person\\n---\\n# Me\\n' > patient-info.md", in: mnt).status, 0)
        // Remounted: tar says "file changed as we read it" of a root whose time moved under it.
        binder.unmount()
        try binder.mount()
        let backup = try shell("tar -C '\(mnt)' -cf '\(root)/b.tar' .")
        XCTAssertEqual(backup.status, 0, backup.stderr)
        let freshMount = "\(root)/fresh-tar"
        try FileManager.default.createDirectory(atPath: freshMount, withIntermediateDirectories: true)
        XCTAssertEqual(try binder.sandbox.run(["create", "fresh-tar", "--passphrase-file", binder.passphraseFile]).status, 0)
        let mounted = try binder.sandbox.run(["mount", "fresh-tar", freshMount, "--passphrase-file", binder.passphraseFile])
        XCTAssertEqual(mounted.status, 0, mounted.stderr)
        defer { unmountQuietly(binder.sandbox, freshMount) }
        let restore = try shell("tar -C '\(freshMount)' -xf '\(root)/b.tar'")
        XCTAssertEqual(restore.status, 0, restore.stderr)
        XCTAssertEqual(try shell("diff -r '\(mnt)' '\(freshMount)'").status, 0)
        let freshRepository = binder.sandbox.home.appendingPathComponent("binders/fresh-tar").path
        XCTAssertTrue(try git("show main:patient-info.json", in: freshRepository).count > 0)
        // rm alone: nothing stored, gone from sight, back at the next mount.
        let before = try git("rev-parse main")
        XCTAssertEqual(try shell("rm patient-info.md && ! test -e patient-info.md", in: mnt).status, 0)
        XCTAssertEqual(try git("rev-parse main"), before)
        binder.unmount()
        try binder.mount()
        XCTAssertTrue(String(decoding: try binder.read("patient-info.md"), as: UTF8.self).contains("Restored Person"))
    }

    /// The record limit is on what is stored (the document's JSON), not on the file shown: a
    /// record whose front matter renders past 65,535 bytes (deep metadata) is saved, and saved
    /// again unchanged; one whose JSON passes the limit is refused at write().
    func testTheRecordLimitIsOnWhatIsStored() throws {
        var yaml = "---\ndeep:\n"
        for level in 1..<300 { yaml += String(repeating: "  ", count: level) + "a:\n" }
        yaml += String(repeating: "  ", count: 300) + "a: x\n---\n# Deep\n"
        let source = binder.sandbox.root.appendingPathComponent("deep.md").path
        try Data(yaml.utf8).write(to: URL(fileURLWithPath: source))
        let saved = try shell("cp '\(source)' visits/deep.md && cat visits/deep.md > '\(source).shown' && cp '\(source).shown' visits/deep.md", in: mnt)
        XCTAssertEqual(saved.status, 0, saved.stderr)
        XCTAssertGreaterThan(try binder.read("visits/deep.md").count, 65_535)
        XCTAssertTrue(try stored("visits/deep.json").value.contains("# Deep"))
        // 40,000 newlines: 40 KB shown, 80 KB of JSON.
        let refused = try shell("python3 -c \"import os, errno\nfd = os.open('visits/lines.md', os.O_WRONLY | os.O_CREAT)\ntry:\n    [os.write(fd, b'\\\\n' * 4096) for _ in range(10)]\n    print('written')\nexcept OSError as e:\n    print(errno.errorcode[e.errno])\"", in: mnt)
        XCTAssertEqual(refused.stdout, "EFBIG\n", refused.stderr)
    }

    /// A refused save is logged once, not once for the close and again for the release; the
    /// scratch files an unmount drops are named in the log.
    func testARefusalIsLoggedOnceAndDroppedScratchFilesAreNamed() throws {
        XCTAssertEqual(try shell("printf -- '---\\nkey: [unclosed\\n---\\nbody\\n' > visits/bad.md; printf 'x\\n' > visits/notes.tmp", in: mnt).status, 0)
        binder.unmount()
        let log = try String(contentsOfFile: binder.sandbox.home.appendingPathComponent("logs/sample-binder.log").path, encoding: .utf8)
        XCTAssertEqual(log.components(separatedBy: "refused: visits/bad.md").count - 1, 1, log)
        XCTAssertTrue(log.contains("dropped at unmount: visits/notes.tmp"), log)
    }

    /// `binder status` names this binder's mount, not another state folder's binder that has
    /// the same name, and says when the daemon behind a mount has stopped.
    func testStatusNamesOnlyThisBindersMount() throws {
        let other = try MountedBinder()
        try other.mount()
        defer { other.unmount() }
        let status = try binder.sandbox.run(["status", binder.repository])
        XCTAssertEqual(status.status, 0, status.stderr)
        XCTAssertTrue(status.stdout.contains("mounted: \(mnt)\n"), status.stdout)
        XCTAssertFalse(status.stdout.contains(other.mountpoint), status.stdout)
        XCTAssertEqual(try shell("pkill -9 -f '\(other.mountpoint) --daemon-child'").status, 0)
        let stopped = try other.sandbox.run(["status", other.repository])
        XCTAssertTrue(stopped.stdout.contains("its daemon has stopped"), stopped.stdout)
    }
}
