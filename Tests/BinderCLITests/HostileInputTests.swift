import Foundation
import XCTest

/// What an attacker's audit found hanging, crashing or losing data, each proved fixed on a real
/// mount: a FIFO where git or binder expects a file, a loose object cut short, a blob of a
/// gigabyte of zeros, `rmdir` of a folder holding only what the view hides, names that are not
/// UTF-8, names that would forge log lines, another record renamed over `patient-info.md`.
final class HostileInputTests: XCTestCase {
    var binder: MountedBinder!
    var repository: String { binder.repository }

    override func setUpWithError() throws {
        binder = try MountedBinder()
    }

    override func tearDown() {
        binder?.unmount()
        binder = nil
    }

    /// `git` in the fixture's clone (a work tree with its index), committing as a stranger would.
    @discardableResult
    func git(_ arguments: String) throws -> String {
        let run = try shell("git -C '\(repository)' -c user.name=x -c user.email=x@x \(arguments)")
        XCTAssertEqual(run.status, 0, "git \(arguments): \(run.stderr)")
        return run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `binder ARGUMENTS` with a deadline: a hang fails the test instead of stopping the suite.
    func binderWithin(_ seconds: Int, _ arguments: String) throws -> BinderRun {
        try shell("timeout -s KILL \(seconds) '\(BinderSandbox.binary)' \(arguments)",
                  environment: ["BINDER_HOME": binder.sandbox.home.path])
    }

    func testAFIFOWhereAFileBelongsIsRefusedNotWaitedOn() throws {
        XCTAssertEqual(try shell("mkdir -p '\(repository)/.git/binder' && mkfifo '\(repository)/.git/binder/listing-index'").status, 0)
        let mount = try binderWithin(30, "mount '\(repository)' '\(binder.mountpoint)' --passphrase-file '\(binder.passphraseFile)'")
        XCTAssertNotEqual(mount.status, 0)
        XCTAssertNotEqual(mount.status, 137, "the mount waited on the FIFO")
        XCTAssertTrue(mount.stderr.contains("FIFO") && mount.stderr.contains("binder/listing-index"), mount.stderr)
        let status = try binderWithin(30, "status '\(repository)'")
        XCTAssertNotEqual(status.status, 137, "status waited on the FIFO")
    }

    func testALooseObjectCutShortIsMovedAsideNotInflatedForever() throws {
        XCTAssertEqual(try shell("mkdir -p '\(repository)/visits' && printf 'not a document, stored loose\\n' > '\(repository)/visits/loose.json'").status, 0)
        try git("add visits/loose.json")
        try git("commit -q -m 'Add entry'")
        let blob = try git("rev-parse HEAD:visits/loose.json")
        let object = "\(repository)/.git/objects/\(blob.prefix(2))/\(blob.dropFirst(2))"
        XCTAssertEqual(try shell("chmod u+w '\(object)' && truncate -s $(( $(stat -c %s '\(object)') / 2 )) '\(object)'").status, 0)

        let verify = try binderWithin(60, "verify '\(repository)' --passphrase-file '\(binder.passphraseFile)'")
        XCTAssertEqual(verify.status, 1, verify.stdout + verify.stderr)
        XCTAssertTrue(verify.stdout.contains("damaged git object"), verify.stdout)

        try binder.mount()
        let listed = try shell("timeout -s KILL 30 ls visits", in: binder.mountpoint)
        XCTAssertEqual(listed.status, 0, "the listing waited: \(listed.stderr)")
        XCTAssertNotEqual(try shell("timeout -s KILL 30 cat visits/loose.json", in: binder.mountpoint).status, 0)
        XCTAssertTrue(FileManager.default.fileExists(atPath: "\(repository)/.git/binder/damaged-objects/\(blob)"))
        XCTAssertEqual(try shell("timeout -s KILL 30 cat patient-info.md", in: binder.mountpoint).status, 0, "the rest reads")
    }

    func testABlobOfZerosIsNotReadWhole() throws {
        let bomb = try shell("head -c 64M /dev/zero | git -C '\(repository)' hash-object -w --stdin").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try git("update-index --add --cacheinfo 100644,\(bomb),visits/bomb.json")
        try git("update-index --add --cacheinfo 100644,\(bomb),visits/bomb.jpg.enc")
        try git("commit -q -m 'Add entry'")
        try binder.mount(["--max-attachment-size", "1M"])
        let listed = try shell("timeout -s KILL 60 ls -l visits", in: binder.mountpoint)
        XCTAssertEqual(listed.status, 0, listed.stderr)
        XCTAssertNotEqual(try shell("timeout -s KILL 60 cat visits/bomb.json > /dev/null", in: binder.mountpoint).status, 0)
        let pid = try shell("pgrep -nf '\(binder.mountpoint) --daemon-child'").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let peak = try shell("awk '/VmHWM/ {print $2}' /proc/\(pid)/status").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertLessThan(Int(peak) ?? .max, 48 * 1024, "the daemon's peak, KiB: the 64 MiB blob was read whole")
    }

    func testRmdirKeepsWhatTheViewHides() throws {
        let commit = try git("rev-parse HEAD")
        try git("update-index --add --cacheinfo 160000,\(commit),hidden/sub")
        try git("commit -q -m 'Add folder'")
        try binder.mount()
        XCTAssertEqual(try shell("ls -A hidden", in: binder.mountpoint).stdout, "")
        let removed = try shell("rmdir hidden", in: binder.mountpoint)
        XCTAssertNotEqual(removed.status, 0)
        XCTAssertTrue(removed.stderr.contains("Directory not empty"), removed.stderr)
        XCTAssertEqual(try git("ls-tree --name-only main hidden/"), "hidden/sub")
    }

    func testNamesThatAreNotUTF8AreRefused() throws {
        try binder.mount()
        let made = try shell("printf 'x\\n' > \"visits/q$(printf '\\351').md\"", in: binder.mountpoint)
        XCTAssertNotEqual(made.status, 0)
        XCTAssertTrue(made.stderr.contains("Invalid or incomplete multibyte"), made.stderr)
        XCTAssertNotEqual(try shell("mkdir \"d$(printf '\\377')\"", in: binder.mountpoint).status, 0)
        XCTAssertTrue(try shell("cat \"visits/q$(printf '\\350').md\"", in: binder.mountpoint).stderr.contains("No such file"))
        XCTAssertEqual(try git("ls-tree -r --name-only main").contains("\u{FFFD}"), false)
    }

    func testANameCannotForgeALogLine() throws {
        XCTAssertEqual(try shell("mkdir -p '\(repository)/visits' && printf 'not a payload' > \"\(repository)/visits/$(printf 'x\\n2026-01-01T00:00:00.000Z error FORGED\\033[31m.json')\"").status, 0)
        try git("add -A visits")
        try git("commit -q -m 'Add entry'")
        try binder.mount()
        _ = try shell("ls -l visits > /dev/null", in: binder.mountpoint)
        binder.unmount()
        let log = try String(contentsOfFile: binder.sandbox.home.appendingPathComponent("logs/sample-binder.log").path, encoding: .utf8)
        XCTAssertFalse(log.split(separator: "\n").contains { $0.hasPrefix("2026-01-01T00:00:00.000Z") }, log)
        XCTAssertFalse(log.contains("\u{1B}"), "a raw escape character in the log")
        XCTAssertTrue(log.contains("x\\u{a}2026-01-01T00:00:00.000Z error FORGED\\u{1b}[31m.json"), log)
    }

    /// Two records naming one sidecar (a reference copied under a second name): writing or
    /// deleting through the second leaves the first's attachment as it was; and a note cannot
    /// make itself such a second reference through its front matter.
    func testASidecarTwoRecordsNameStaysTheFirstsBytes() throws {
        let reference = try git("rev-parse HEAD:visits/2025-03-03-recording.json")
        try git("update-index --add --cacheinfo 100644,\(reference),visits/zz-copy.json")
        try git("commit -q -m 'Add entry'")
        try binder.mount()
        let original = try binder.read("visits/2025-03-03-recording.m4a")
        XCTAssertEqual(try binder.read("visits/2025-03-03-recording-2.m4a"), original)
        XCTAssertEqual(try shell("rm visits/2025-03-03-recording-2.m4a", in: binder.mountpoint).status, 0)
        XCTAssertEqual(try binder.read("visits/2025-03-03-recording.m4a"), original)
        XCTAssertNotEqual(try git("ls-tree --name-only main visits/").split(separator: "\n").filter { $0 == "visits/2025-03-03-recording.m4a.enc" }, [])

        let note = try shell("printf -- '---\\ntype: attachment_ref\\n---\\n2025-03-03-recording.m4a.enc' > visits/claim.md", in: binder.mountpoint)
        XCTAssertEqual(try shell("ls visits/claim.md", in: binder.mountpoint).status == 0, false, note.stderr)
        XCTAssertEqual(try binder.read("visits/2025-03-03-recording.m4a"), original)
    }

    /// A sidecar at the root named `.binder.enc` would be shown as `.binder`, where the views are.
    func testNoFileTakesTheNameOfTheViewsFolder() throws {
        let sidecar = try git("rev-parse HEAD:visits/2025-03-03-recording.m4a.enc")
        try git("update-index --add --cacheinfo 100644,\(sidecar),.binder.enc")
        try git("commit -q -m 'Add entry'")
        try binder.mount(["--views", "visible"])
        XCTAssertEqual(try shell("ls -A | grep -c '^.binder$'", in: binder.mountpoint).stdout, "1\n")
        XCTAssertEqual(try shell("test -d .binder && ls .binder/timeline > /dev/null", in: binder.mountpoint).status, 0)
    }

    func testAnotherRecordCannotTakeThePlaceOfPatientInfo() throws {
        try binder.mount()
        XCTAssertEqual(try shell("mkdir -p visits && printf '# A visit\\n' > visits/a.md", in: binder.mountpoint).status, 0)
        let moved = try shell("mv visits/a.md patient-info.md", in: binder.mountpoint)
        XCTAssertNotEqual(moved.status, 0)
        XCTAssertTrue(moved.stderr.contains("Operation not permitted"), moved.stderr)
        XCTAssertTrue(String(decoding: try binder.read("patient-info.md"), as: UTF8.self).contains("type: patient-info"))
    }
}
