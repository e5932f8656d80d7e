import BinderCrypto
import BinderFormat
import Foundation
import XCTest

/// Writing through a real mount: every save becomes one encrypted commit in the apps' format,
/// proven by reading the repository without the mount.
final class WriteMountTests: MountedFixtureTestCase {
    func testShellSavesAreOneCommitEach() throws {
        var count = try commits()
        XCTAssertEqual(try shell("echo '# Knee follow-up' > visits/2026-05-01-knee.md", in: mnt).status, 0)
        XCTAssertEqual(try commits(), count + 1)
        XCTAssertEqual(try git("log -1 --format=%s main"), "Add visits entry\n")
        XCTAssertEqual(try git("log -1 --format='%an <%ae>' main"), "Limbo Health <app@limbo.health>\n")
        var document = try stored("visits/2026-05-01-knee.json")
        XCTAssertEqual(document.type, "visit")
        XCTAssertEqual(document.value, "# Knee follow-up\n")
        XCTAssertEqual(document.validate(), [])
        count += 1

        XCTAssertEqual(try shell("echo 'Better today.' >> visits/2026-05-01-knee.md", in: mnt).status, 0)
        XCTAssertEqual(try commits(), count + 1)
        XCTAssertEqual(try stored("visits/2026-05-01-knee.json").value, "# Knee follow-up\nBetter today.\n")
        count += 1

        XCTAssertEqual(try shell("sed -i 's/Better/Much better/' visits/2026-05-01-knee.md", in: mnt).status, 0)
        XCTAssertEqual(try commits(), count + 1)
        document = try stored("visits/2026-05-01-knee.json")
        XCTAssertEqual(document.value, "# Knee follow-up\nMuch better today.\n")
        XCTAssertEqual(try git("log -1 --format=%s main"), "Update entry\n")
        count += 1

        // Front matter written by hand: everything kept as written, `updated` set now.
        let edited = "---\ntype: visit\ncreated: \"2026-05-01T10:00:00.000Z\"\nprovider: Dr. Nguyen\nnpi: \"0123456789\"\ntags: [knee]\n---\n# Knee\n"
        XCTAssertEqual(try shell("cat > visits/2026-05-01-knee.md <<'EOF'\n\(edited)EOF", in: mnt).status, 0)
        XCTAssertEqual(try commits(), count + 1)
        document = try stored("visits/2026-05-01-knee.json")
        XCTAssertEqual(document.metadata["npi"], "0123456789")
        XCTAssertEqual(document.metadata["provider"], "Dr. Nguyen")
        XCTAssertEqual(document.metadata["tags"], ["knee"])
        XCTAssertEqual(document.created, "2026-05-01T10:00:00.000Z")
        XCTAssertNotNil(document.updated)
        // What the mount shows afterwards is the stored document, exactly.
        let shown = try FrontMatter.parse(try binder.read("visits/2026-05-01-knee.md"))
        XCTAssertEqual(shown.metadata, document.metadata)
        XCTAssertEqual(shown.value, "# Knee\n")
        let size = try FileManager.default.attributesOfItem(atPath: binder.path("visits/2026-05-01-knee.md"))[.size] as? Int
        XCTAssertEqual(size, try binder.read("visits/2026-05-01-knee.md").count)

        // The non-bare repository's work tree follows.
        XCTAssertEqual(try git("status --porcelain"), "")
        XCTAssertEqual(try shell("git -C '\(binder.repository)' fsck --strict 2>&1").status, 0)
    }

    func testAttachmentsFoldersMovesAndDeletes() throws {
        let pdf = Array("%PDF-1.4\nscanned report\n".utf8) + [UInt8](repeating: 0xAB, count: 300_000)
        let source = binder.sandbox.root.appendingPathComponent("scan.pdf")
        try Data(pdf).write(to: source)
        XCTAssertEqual(try shell("cp '\(source.path)' labs/2026-05-02-scan.pdf", in: mnt).status, 0)
        XCTAssertEqual(try git("log -1 --format=%s main"), "Add attachment\n")
        let ref = try stored("labs/2026-05-02-scan.json")
        XCTAssertEqual(ref.type, "attachment_ref")
        XCTAssertEqual(ref.value, "2026-05-02-scan.pdf.enc")
        XCTAssertEqual(ref.metadata["originalSizeBytes"]?.intValue, pdf.count)
        let sidecar = [UInt8](try shell("git -C '\(binder.repository)' cat-file blob main:labs/2026-05-02-scan.pdf.enc | base64 -w0").stdout
            .trimmingCharacters(in: .whitespacesAndNewlines).utf8)
        XCTAssertEqual(try Sidecar.decrypt(Base64.decode(sidecar)!, key: key).copyBytes(), pdf)
        XCTAssertEqual(try binder.read("labs/2026-05-02-scan.pdf"), pdf)

        // A child of a record: mkdir X.children, then write into it.
        XCTAssertEqual(try shell("mkdir visits/2025-03-03-recording.children 2>&1 || true", in: mnt).status, 0)
        XCTAssertEqual(try shell("mkdir labs/2025-03-13-labs-r-sum-2.children && echo 'Reviewed.' > labs/2025-03-13-labs-r-sum-2.children/review.md", in: mnt).status, 0)
        let parent = try stored("labs/2025-03-13-labs-r-sum-2.json")
        XCTAssertEqual(parent.children.last?.value, "Reviewed.\n")
        XCTAssertEqual(parent.children.last?.metadata["fileName"], "review.md")
        XCTAssertTrue(FileManager.default.fileExists(atPath: binder.path("labs/2025-03-13-labs-r-sum-2.children/review.md")))

        // mkdir makes an encrypted .meta.json; mv moves a record (its ciphertext unchanged).
        XCTAssertEqual(try shell("mkdir dental", in: mnt).status, 0)
        XCTAssertEqual(try git("log -1 --format=%s main"), "Add folder\n")
        XCTAssertNotNil(try? NIP44.decrypt(payload: try git("show main:dental/.meta.json"), key: key))
        let blob = try git("rev-parse main:visits/2025-02-19-urgent-care-imported.json")
        XCTAssertEqual(try shell("mv visits/2025-02-19-urgent-care-imported.md dental/urgent.md", in: mnt).status, 0)
        XCTAssertEqual(try git("rev-parse main:dental/urgent.json"), blob)
        XCTAssertEqual(try git("log -1 --format=%s main"), "Rename entry\n")
        // mv over an existing record replaces it (one commit).
        XCTAssertEqual(try shell("echo '# Old' > dental/old.md && echo '# New' > dental/new.md && mv dental/new.md dental/old.md", in: mnt).status, 0)
        XCTAssertEqual(try git("log -1 --format=%s main"), "Rename entry\n")
        XCTAssertEqual(try stored("dental/old.json").value, "# New\n")
        XCTAssertFalse(FileManager.default.fileExists(atPath: binder.path("dental/new.md")))
        XCTAssertEqual(try shell("rm dental/old.md", in: mnt).status, 0)
        // A record with children moves with them.
        XCTAssertEqual(try shell("mv visits/2025-02-25-annual-physical.md dental/", in: mnt).status, 0)
        XCTAssertTrue(FileManager.default.fileExists(atPath: binder.path("dental/2025-02-25-annual-physical.children/01-addendum.md")))

        // rm deletes a record with its sidecar; rmdir removes an empty folder.
        XCTAssertEqual(try shell("rm labs/2026-05-02-scan.pdf && rm dental/urgent.md dental/2025-02-25-annual-physical.md && rmdir dental", in: mnt).status, 0)
        let tree = try git("ls-tree -r --name-only main")
        XCTAssertFalse(tree.contains("2026-05-02-scan"))
        XCTAssertFalse(tree.contains("dental/"))
        XCTAssertEqual(try git("log -1 --format=%s main"), "Delete folder\n")
        XCTAssertNotEqual(try shell("rmdir visits", in: mnt).status, 0)
        XCTAssertEqual(try git("status --porcelain"), "")
    }

    func testBadWritesFailAtCloseAndKeepTheRecord() throws {
        let path = "allergies/2025-02-25-penicillin.md"
        let before = try git("rev-parse main")
        let original = try binder.read(path)
        // cp checks close(2), which is where a save that cannot be stored fails.
        let scratch = binder.sandbox.root.path
        let broken = try shell("printf -- '---\\ntype: [unclosed\\n---\\nbody\\n' > '\(scratch)/broken.md' && cp '\(scratch)/broken.md' \(path)", in: mnt)
        XCTAssertNotEqual(broken.status, 0)
        XCTAssertTrue(broken.stderr.contains("Invalid argument"), broken.stderr)
        let huge = try shell("head -c 70000 /dev/zero | tr '\\\\0' x > '\(scratch)/huge.md' && cp '\(scratch)/huge.md' \(path)", in: mnt)
        XCTAssertNotEqual(huge.status, 0)
        XCTAssertTrue(huge.stderr.contains("File too large"), huge.stderr)
        XCTAssertEqual(try git("rev-parse main"), before)
        XCTAssertEqual(try binder.read(path), original)
        // Undecryptable files are read-only; binder's status file too.
        let log = try String(contentsOfFile: binder.sandbox.home.appendingPathComponent("logs/sample-binder.log").path, encoding: .utf8)
        XCTAssertTrue(log.contains("front matter"), log)
        XCTAssertTrue(log.contains("65,535"), log)
        XCTAssertFalse(log.contains("unclosed"), "content reached the log")
    }

    func testEditorsSaveExactlyOnceAndLeaveNoScratch() throws {
        let path = "medications/2025-03-16-medications-review-12.md"
        XCTAssertTrue(FileManager.default.fileExists(atPath: binder.path(path)))
        var count = try commits()
        // vim with its defaults (the 4913 probe, backup, swap file, fsync).
        let vim = try shell("vim -es -c '%s/Medications/Meds (vim)/' -c 'wq' \(path)", in: mnt, environment: ["HOME": binder.sandbox.root.path])
        XCTAssertEqual(vim.status, 0, vim.stderr)
        XCTAssertEqual(try commits(), count + 1)
        XCTAssertTrue(try stored("medications/2025-03-16-medications-review-12.json").value.contains("Meds (vim)"))
        count += 1
        // vim with writebackup, a backup kept, and backupcopy=no (rename the original away).
        let renaming = try shell("vim -es -N -u NONE -c 'set backup writebackup backupcopy=no swapfile' -c '%s/vim/vim again/' -c 'wq' \(path)", in: mnt)
        XCTAssertEqual(renaming.status, 0, renaming.stderr)
        XCTAssertEqual(try commits(), count + 1)
        XCTAssertTrue(try stored("medications/2025-03-16-medications-review-12.json").value.contains("vim again"))
        count += 1
        // An atomic save: temporary file, then rename over the record (VS Code, gedit).
        let atomic = try shell("cp \(path) .goutputstream-AB12CD && sed -i 's/again/atomically/' .goutputstream-AB12CD && mv .goutputstream-AB12CD \(path)", in: mnt)
        XCTAssertEqual(atomic.status, 0, atomic.stderr)
        XCTAssertTrue(try stored("medications/2025-03-16-medications-review-12.json").value.contains("atomically"))
        XCTAssertEqual(try commits(), count + 1)
        // No scratch file reached git or stayed in the view.
        XCTAssertFalse(try git("ls-tree -r --name-only main").contains("~"))
        XCTAssertEqual(try shell("ls -A medications | grep -v '^20'", in: mnt).stdout, "")
    }

    /// A save replaces the record's version in the plaintext cache: the version before is no
    /// path's content any more. (Kept, each save's plaintext stayed until the bound pushed it
    /// out: with the default bound, never, in a run of thousands of saves.)
    func testSavesLeaveOnlyTheCurrentVersionCached() throws {
        let path = "medications/2025-03-16-medications-review-12.md"
        XCTAssertEqual(try shell("cat \(path) > /dev/null", in: mnt).status, 0)
        let entries = try binder.statusValue("cached_entries"), bytes = try binder.statusValue("cached_bytes")
        let saves = try shell("for i in 1 2 3 4 5 6 7 8; do cp \(path) .goutputstream-T && echo \"Saved $i.\" >> .goutputstream-T && mv .goutputstream-T \(path); done; cat \(path) > /dev/null", in: mnt)
        XCTAssertEqual(saves.status, 0, saves.stderr)
        XCTAssertTrue(try stored("medications/2025-03-16-medications-review-12.json").value.contains("Saved 8."))
        XCTAssertEqual(try binder.statusValue("cached_entries"), entries)
        XCTAssertLessThan(try binder.statusValue("cached_bytes"), bytes + 200)
    }

    func testNothingButCiphertextReachesDisk() throws {
        let marker = "CANARY-\(UUID().uuidString.prefix(8))"
        XCTAssertEqual(try shell("echo '# \(marker)' > visits/2026-06-01-canary.md && echo '\(marker)' > labs/\(marker.lowercased()).txt && vim -es -c 'normal Go\(marker) again' -c wq visits/2026-06-01-canary.md", in: mnt).status, 0)
        let objects = try shell("git -C '\(binder.repository)' cat-file --batch-all-objects --batch | grep -a -c -- '\(marker)' || true")
        XCTAssertEqual(objects.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "0", "plaintext in git objects")
        XCTAssertFalse(try git("log --format=%B main").contains(marker))
        let onDisk = try shell("grep -r -a -l --exclude-dir=mnt -- '\(marker)' '\(binder.sandbox.root.path)' 2>/dev/null || true")
        XCTAssertEqual(onDisk.stdout, "", "plaintext on disk")
    }
}

/// What binder writes, read back by independent code (rust-nostr and `cryptography`), the way
/// the Limbo Health apps read it.
final class AppsReadWhatBinderWritesTests: XCTestCase {
    func testIndependentReaderDecryptsEverythingWritten() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        try binder.mount()
        let photo = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let photoFile = binder.sandbox.root.appendingPathComponent("photo.jpg")
        try Data(photo).write(to: photoFile)
        let script = """
        mkdir dental
        printf -- '---\\ntype: procedure\\ncreated: "2026-05-05T10:00:00.000Z"\\nnpi: "0042"\\n---\\n# Cleaning\\n' > dental/2026-05-05-cleaning.md
        cp '\(photoFile.path)' dental/2026-05-05-xray.jpg
        mkdir dental/2026-05-05-cleaning.children
        cp '\(photoFile.path)' dental/2026-05-05-cleaning.children/before.jpg
        echo 'Follow up in 6 months.' > dental/2026-05-05-cleaning.children/plan.md
        """
        let tip = try shell("git -C '\(binder.repository)' rev-parse main").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let run = try shell(script, in: binder.mountpoint)
        XCTAssertEqual(run.status, 0, run.stderr)

        let reader = Fixtures.directory.deletingLastPathComponent().appendingPathComponent("interop/read_binder.py").path
        let nsecFile = try binder.sandbox.file("nsec", Fixtures.nsec)
        let read = try BinderSandbox.run(executable: "/usr/bin/env", ["python3", reader, binder.repository, nsecFile])
        XCTAssertEqual(read.status, 0, read.stderr)
        let result = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(read.stdout.utf8)) as? [String: Any])
        let documents = try XCTUnwrap(result["documents"] as? [String: [String: Any]])
        let sidecars = try XCTUnwrap(result["sidecars"] as? [String: String])
        let folders = try XCTUnwrap(result["folders"] as? [String: [String: Any]])

        XCTAssertEqual(folders["dental/.meta.json"]?["displayName"] as? String, "dental")
        let cleaning = try XCTUnwrap(documents["dental/2026-05-05-cleaning.json"])
        XCTAssertEqual(cleaning["value"] as? String, "# Cleaning\n")
        let metadata = try XCTUnwrap(cleaning["metadata"] as? [String: Any])
        XCTAssertEqual(metadata["type"] as? String, "procedure")
        XCTAssertEqual(metadata["npi"] as? String, "0042")
        XCTAssertNotNil(metadata["updated"] as? String)
        let children = try XCTUnwrap(cleaning["children"] as? [[String: Any]])
        XCTAssertEqual(children.count, 2)
        let childSidecar = try XCTUnwrap(children[0]["value"] as? String)
        XCTAssertEqual((children[0]["metadata"] as? [String: Any])?["type"] as? String, "attachment_ref")
        XCTAssertEqual(sidecars["dental/" + childSidecar], sha256Hex(photo))
        XCTAssertEqual(children[1]["value"] as? String, "Follow up in 6 months.\n")

        let xray = try XCTUnwrap(documents["dental/2026-05-05-xray.json"])
        XCTAssertEqual(xray["value"] as? String, "2026-05-05-xray.jpg.enc")
        let xrayMetadata = try XCTUnwrap(xray["metadata"] as? [String: Any])
        XCTAssertEqual(xrayMetadata["type"] as? String, "attachment_ref")
        XCTAssertEqual(xrayMetadata["format"] as? String, "jpeg")
        XCTAssertEqual((xrayMetadata["originalSizeBytes"] as? NSNumber)?.intValue, photo.count)
        XCTAssertEqual(sidecars["dental/2026-05-05-xray.jpg.enc"], sha256Hex(photo))
        // Commit messages are structural only: one per save.
        let messages = try shell("git -C '\(binder.repository)' log --format=%s \(tip)..main").stdout
        XCTAssertEqual(messages, "Update entry\nUpdate entry\nAdd attachment\nAdd dental entry\nAdd folder\n")
    }

    func testEmacsSavesOnceWithBackupAndLockInMemory() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/emacs") else {
            throw XCTSkip("emacs is not installed (scripts/setup installs emacs-nox)")
        }
        let binder = try MountedBinder()
        defer { binder.unmount() }
        try binder.mount()
        let count = { Int(try shell("git -C '\(binder.repository)' rev-list --count main").stdout.trimmingCharacters(in: .whitespacesAndNewlines))! }
        let before = try count()
        let path = "procedures/2025-03-16-procedures-r-sum-9.md"
        let emacs = try shell("emacs -Q --batch \(path) --eval '(progn (setq make-backup-files t create-lockfiles t) (goto-char (point-max)) (insert \"Edited in emacs.\\n\") (save-buffer))'",
                              in: binder.mountpoint, environment: ["HOME": binder.sandbox.root.path])
        XCTAssertEqual(emacs.status, 0, emacs.stderr)
        XCTAssertEqual(try count(), before + 1)
        XCTAssertTrue(String(decoding: try binder.read(path), as: UTF8.self).hasSuffix("Edited in emacs.\n"))
        // The backup (`name~`) lives in memory only; no lock or backup reached git.
        XCTAssertFalse(try shell("git -C '\(binder.repository)' ls-tree -r --name-only main").stdout.contains("~"))
        XCTAssertFalse(try shell("git -C '\(binder.repository)' ls-tree -r --name-only main").stdout.contains(".#"))
    }
}

/// The rest of what tools do to files: rsync in, truncate, chmod/chown, utimensat, unlinking an
/// open file, rename without replacing.
final class FileOperationTests: XCTestCase {
    func testCommitAuthorIsConfigurable() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        try binder.mount(environment: ["BINDER_AUTHOR_NAME": "Pat Example", "BINDER_AUTHOR_EMAIL": "pat@example.org"])
        XCTAssertEqual(try shell("echo '# Note' > visits/2026-09-09-note.md", in: binder.mountpoint).status, 0)
        XCTAssertEqual(try shell("git -C '\(binder.repository)' log -1 --format='%an <%ae>|%s' main").stdout,
                       "Pat Example <pat@example.org>|Add visits entry\n")
    }

    /// A folder handle opened before a change and read after it lists what the folder held
    /// when it was opened; what it read must not become the folder's listing for later readers
    /// (a kernel that keeps listings, `cache_readdir`, fills its copy from whichever handle
    /// reads first).
    func testAFolderReadAcrossAChangeLeavesNoStaleListing() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        try binder.mount()
        let mnt = binder.mountpoint
        let folder = binder.path("allergies")
        let name = "2026-06-01-shellfish.md"
        func readAll(_ handle: OpaquePointer) -> Set<String> {
            var names = Set<String>()
            while let entry = readdir(handle) {
                names.insert(withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) })
            }
            return names
        }
        func listed() throws -> Set<String> { Set(try FileManager.default.contentsOfDirectory(atPath: folder)) }
        for (change, present) in [("printf '# Shellfish\\n' > allergies/\(name)", true), ("rm allergies/\(name)", false)] {
            _ = try listed()
            let handle = try XCTUnwrap(opendir(folder))
            XCTAssertEqual(try shell(change, in: mnt).status, 0, change)
            let seen = readAll(handle)
            closedir(handle)
            XCTAssertEqual(seen.contains(name), !present, "the handle lists the folder as it was opened (\(change))")
            XCTAssertEqual(try listed().contains(name), present, change)
            XCTAssertEqual(try shell("ls allergies", in: mnt).stdout.split(separator: "\n").contains(Substring(name)), present, change)
        }
    }

    func testRsyncTruncateAttributesAndOpenFiles() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        try binder.mount()
        let mnt = binder.mountpoint
        let key = try NIP44.ConversationKey(selfOf: try SecretKey(nsec: Fixtures.nsec))
        func stored(_ path: String) throws -> MedicalDocument {
            let payload = try shell("git -C '\(binder.repository)' show 'main:\(path)'").stdout
            return try MedicalDocument(plaintext: try NIP44.decrypt(payload: payload, key: key).copyBytes())
        }

        // rsync -a into the mount: temporary file + rename + utimes.
        let source = binder.sandbox.root.appendingPathComponent("export").path
        XCTAssertEqual(try shell("mkdir -p '\(source)' && printf '# Imported\\n' > '\(source)/2026-04-04-imported.md' && head -c 50000 /dev/urandom > '\(source)/scan.pdf' && touch -d '2024-01-02 03:04:05 UTC' '\(source)/scan.pdf' '\(source)/2026-04-04-imported.md'").status, 0)
        XCTAssertEqual(try shell("mkdir imports && rsync -a '\(source)/' imports/", in: mnt).status, 0)
        XCTAssertEqual(try stored("imports/2026-04-04-imported.json").value, "# Imported\n")
        XCTAssertEqual(try stored("imports/2026-04-04-imported.json").updated, "2024-01-02T03:04:05.000Z")
        XCTAssertEqual(try shell("cmp '\(source)/scan.pdf' imports/scan.pdf", in: mnt).status, 0)
        XCTAssertEqual(try shell("stat -c %Y imports/scan.pdf", in: mnt).stdout, "1704164645\n")
        // The attachment is not copied again (same size and time; modes are fixed, so rsync may
        // only report them); nothing is left behind.
        let second = try shell("rsync -ai '\(source)/scan.pdf' imports/", in: mnt)
        XCTAssertFalse(second.stdout.hasPrefix(">f"), second.stdout)
        XCTAssertEqual(try shell("ls -A imports", in: mnt).stdout, "2026-04-04-imported.md\nscan.pdf\n")

        // truncate, chmod, chown to the same owner (another owner is refused).
        let record = "allergies/2025-02-25-penicillin.md"
        let body = try FrontMatter.parse(try binder.read(record))
        XCTAssertEqual(try shell("truncate -s 0 \(record)", in: mnt).status, 0)
        XCTAssertEqual(try stored("allergies/2025-02-25-penicillin.json").value, "")
        XCTAssertEqual(try stored("allergies/2025-02-25-penicillin.json").metadata["tags"], body.metadata?["tags"])
        XCTAssertEqual(try shell("chmod 600 \(record) && chmod 644 \(record) && chown \(getuid()):\(getgid()) \(record)", in: mnt).status, 0)
        XCTAssertNotEqual(try shell("chown 12345 \(record)", in: mnt).status, 0)

        // Unlinking an open file: the reader keeps its bytes; a writer's later close stores nothing.
        let python = """
        import os
        r = open('labs/2025-03-13-labs-r-sum-2.md', 'rb'); w = open('labs/2025-03-13-labs-r-sum-2.md', 'r+b')
        first = r.read(3)
        os.unlink('labs/2025-03-13-labs-r-sum-2.md')
        w.write(b'gone'); w.close()
        print(first.decode(), len(r.read()) > 0, os.path.exists('labs/2025-03-13-labs-r-sum-2.md'))
        """
        let unlinked = try shell("python3 -c \"\(python)\"", in: mnt)
        XCTAssertEqual(unlinked.stdout, "--- True False\n", unlinked.stderr)
        XCTAssertNotEqual(try shell("git -C '\(binder.repository)' cat-file -e main:labs/2025-03-13-labs-r-sum-2.json 2>/dev/null").status, 0)

        // rename without replacing an existing record (renameat2 RENAME_NOREPLACE via mv -n).
        XCTAssertEqual(try shell("mv -n imports/2026-04-04-imported.md \(record); test -e imports/2026-04-04-imported.md", in: mnt).status, 0)
        XCTAssertEqual(try stored("allergies/2025-02-25-penicillin.json").value, "")
        XCTAssertEqual(try shell("git -C '\(binder.repository)' status --porcelain").stdout, "")
    }
}
