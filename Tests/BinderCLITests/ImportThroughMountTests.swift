import BinderCrypto
import BinderFormat
import Foundation
import XCTest

/// `binder import` on a mounted binder, with the real binary and a real FUSE mount: the import
/// goes through the mount's control socket and is stored by the mount as one commit, in line
/// with its saves; the records show in the mounted folder at once.
final class ImportThroughMountTests: MountedFixtureTestCase {
    func fixture(_ name: String) -> String { ImportCommandTests.fixtures + "/" + name }

    /// No --passphrase-file: the mount holds the key, and the import never asks for it.
    func importing(_ arguments: [String]) throws -> BinderRun {
        try binder.sandbox.run(["import"] + arguments + ["--binder", binder.repository])
    }

    func summary(_ run: BinderRun) throws -> [String: Any] {
        try XCTUnwrap(JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], run.stdout + run.stderr)
    }

    func testAnImportIsOneCommitOfTheMountAndShowsInTheFolderAtOnce() throws {
        let before = try commits()
        // The folders as the kernel cached them before the import.
        XCTAssertEqual(try shell("ls conditions allergies >/dev/null 2>&1; true", in: mnt).status, 0)
        // The commit is dated when it is made, not when the mount started.
        Thread.sleep(forTimeInterval: 1.1)
        let started = Int(Date().timeIntervalSince1970)
        let run = try importing([fixture("hl7/CCD-1.xml"), "--force", "--json"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let result = try summary(run)
        let created = try XCTUnwrap(result["created"] as? [String])
        XCTAssertGreaterThan(created.count, 5)
        XCTAssertEqual(try commits(), before + 1, "one import, one commit")
        XCTAssertEqual(result["commit"] as? String, try git("rev-parse main").trimmingCharacters(in: .whitespacesAndNewlines))
        XCTAssertEqual(try git("log -1 --format=%s main"), "Import records\n")
        XCTAssertGreaterThanOrEqual(Int(try git("log -1 --format=%at main").trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0, started)
        // The clone's work tree (ciphertext) follows, as it does for saves.
        XCTAssertEqual(try git("status --porcelain"), "", "the work tree follows the import")
        // Each record is there in the mounted folder now, and reads as the stored record.
        for path in created {
            let shown = String(decoding: try binder.read(path), as: UTF8.self)
            XCTAssertTrue(shown.contains("imported: true"), "\(path): \(shown)")
            let gitPath = String(path.dropLast(".md".count)) + ".json"
            XCTAssertTrue(shown.contains(try stored(gitPath).value.prefix(40)), path)
        }
        let listed = try shell("ls conditions", in: mnt).stdout
        for path in created where path.hasPrefix("conditions/") {
            XCTAssertTrue(listed.contains(String(path.dropFirst("conditions/".count))), "\(path) not listed: \(listed)")
        }
        // Again: nothing new, no commit.
        let again = try importing([fixture("hl7/CCD-1.xml"), "--force"])
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertTrue(again.stdout.hasSuffix("Nothing new: the binder is unchanged\n"), again.stdout)
        XCTAssertEqual(try commits(), before + 1)
    }

    /// Files saved through the mount while an import is stored: every one is kept, and so is the import.
    func testSavesMadeDuringAnImportAreKept() throws {
        XCTAssertEqual(try shell("mkdir journal", in: mnt).status, 0)
        let before = try commits()
        let sources = ["hl7/CCD-1.xml", "hl7/CCD-2.xml", "hl7/Discharge_Summary.xml", "hl7/Referral_Note.xml"].map { "'\(fixture($0))'" }
        let both = try shell("""
            (for i in $(seq 1 40); do printf '# Saved while importing %s\\n' $i > journal/2026-12-06-saved-$i.md || exit 1; done) &
            saves=$!
            '\(BinderSandbox.binary)' import \(sources.joined(separator: " ")) --force --json --binder '\(binder.repository)' > ../import.json || exit 2
            wait $saves || exit 3
            """, in: mnt, environment: ["BINDER_HOME": binder.sandbox.home.path])
        XCTAssertEqual(both.status, 0, both.stderr)
        let result = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: binder.sandbox.root.appendingPathComponent("import.json")))
            as? [String: Any])
        let created = try XCTUnwrap(result["created"] as? [String])
        XCTAssertGreaterThan(created.count, 10)
        let onMain = Set(try git("ls-tree -r --name-only main").split(separator: "\n").map(String.init))
        for i in 1...40 {
            XCTAssertTrue(onMain.contains("journal/2026-12-06-saved-\(i).json"), "save \(i) lost")
            XCTAssertEqual(String(decoding: try binder.read("journal/2026-12-06-saved-\(i).md"), as: UTF8.self).contains("# Saved while importing \(i)\n"), true)
        }
        for path in created {
            XCTAssertTrue(onMain.contains(String(path.dropLast(".md".count)) + ".json"), "\(path) not stored")
            XCTAssertTrue(FileManager.default.fileExists(atPath: binder.path(path)), "\(path) not shown")
        }
        // 40 saves and one import: each its own commit, none merged away or repeated.
        XCTAssertEqual(try commits(), before + 41)
        XCTAssertEqual(try git("log --format=%s main").split(separator: "\n").filter { $0 == "Import records" }.count, 1)
    }

    /// Two imports of one document at once: the mount stores its records once (the second is
    /// planned again against the tip the first moved, or planned after it), in one commit.
    func testTwoImportsAtOnceStoreTheRecordsOnce() throws {
        let before = try commits()
        let both = try shell("""
            '\(BinderSandbox.binary)' import '\(fixture("ccd.xml"))' --json --binder '\(binder.repository)' > ../first.json & first=$!
            '\(BinderSandbox.binary)' import '\(fixture("ccd.xml"))' --json --binder '\(binder.repository)' > ../second.json & second=$!
            wait $first || exit 1
            wait $second || exit 2
            """, in: mnt, environment: ["BINDER_HOME": binder.sandbox.home.path])
        XCTAssertEqual(both.status, 0, both.stderr)
        var created = 0
        for name in ["first.json", "second.json"] {
            let data = try Data(contentsOf: binder.sandbox.root.appendingPathComponent(name))
            let result = try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? [String: Any], String(decoding: data, as: UTF8.self))
            created += (result["created"] as? [String])?.count ?? -100
        }
        XCTAssertEqual(created, 12)
        XCTAssertEqual(try commits(), before + 1)
        XCTAssertEqual(try git("ls-tree -r --name-only main medications").split(separator: "\n").filter { $0.contains("metoprolol") }.count, 2)
    }

    func testADryRunThroughTheMountStoresNothing() throws {
        let before = try git("rev-parse main")
        let files = try binder.files()
        let run = try importing([fixture("ccd.xml"), "--dry-run"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("conditions/\n  2005-01-01-mild-persistent-asthma.md\n  2019-03-12-essential-hypertension.md\n"), run.stdout)
        XCTAssertTrue(run.stdout.contains("Would import 12 records"), run.stdout)
        XCTAssertEqual(try git("rev-parse main"), before)
        XCTAssertEqual(try binder.files(), files)
    }

    func testAReadOnlyMountRefuses() throws {
        binder.unmount()
        try binder.mount(["--read-only"])
        let before = try git("rev-parse main")
        let run = try importing([fixture("ccd.xml")])
        XCTAssertEqual(run.status, 1)
        XCTAssertTrue(run.stderr.contains("mounted read-only at \(mnt): nothing can be stored through it"), run.stderr)
        XCTAssertTrue(run.stderr.contains("(nothing was imported)"), run.stderr)
        XCTAssertEqual(try git("rev-parse main"), before)
        // A dry run stores nothing: a read-only mount answers it.
        let dryRun = try importing([fixture("ccd.xml"), "--dry-run"])
        XCTAssertEqual(dryRun.status, 0, dryRun.stderr)
        XCTAssertTrue(dryRun.stdout.contains("Would import 12 records"), dryRun.stdout)
        XCTAssertEqual(try git("rev-parse main"), before)
    }

    func testADocumentAboutSomeoneElseIsRefusedThroughTheMountToo() throws {
        let before = try git("rev-parse main")
        let run = try importing([fixture("hl7/CCD-1.xml")])
        XCTAssertEqual(run.status, 1)
        XCTAssertTrue(run.stderr.contains("is about a different person than this binder's patient-info"), run.stderr)
        XCTAssertEqual(try git("rev-parse main"), before)
    }

    /// The import's plaintext goes from memory to memory: none of it in git's objects, the
    /// state folder (logs, run), the sandbox or any temporary file.
    func testAnImportThroughTheMountWritesNoPlaintextToDisk() throws {
        let marker = "CANARY-\(UUID().uuidString.prefix(8))"
        let sourceFolder = FileManager.default.temporaryDirectory.appendingPathComponent("binder-import-source-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: sourceFolder, withIntermediateDirectories: true)
        let source = sourceFolder.appendingPathComponent("note.md")
        try Data("# Note \(marker)\n\nThe words \(marker) again.\n".utf8).write(to: source)
        let stamp = binder.sandbox.root.appendingPathComponent("before-import").path
        XCTAssertEqual(try shell("touch '\(stamp)'").status, 0)
        let run = try importing([source.path])
        XCTAssertEqual(run.status, 0, run.stderr)
        try FileManager.default.removeItem(at: sourceFolder)
        XCTAssertEqual(try shell("grep -r -l -- '\(marker)' '\(mnt)/documents'").status, 0, "the note is not shown")
        let objects = try shell("git -C '\(binder.repository)' cat-file --batch-all-objects --batch | grep -a -c -- '\(marker)' || true")
        XCTAssertEqual(objects.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "0", "plaintext in git objects")
        XCTAssertFalse(try git("log --format=%B main").contains(marker))
        let onDisk = try shell("grep -r -a -l --exclude-dir=mnt -- '\(marker)' '\(binder.sandbox.root.path)' 2>/dev/null || true")
        XCTAssertEqual(onDisk.stdout, "", "plaintext in the sandbox (state folder, logs, repository)")
        // Any file written since, anywhere in the temporary folder (other file systems, such as mounts, not entered).
        let temporary = try shell("find '\(FileManager.default.temporaryDirectory.path)' -xdev -type f -newer '\(stamp)' -size -64M -print0 2>/dev/null"
                                  + " | xargs -0 -r grep -a -l -- '\(marker)' 2>/dev/null || true")
        XCTAssertEqual(temporary.stdout, "", "plaintext in a temporary file")
    }
}
