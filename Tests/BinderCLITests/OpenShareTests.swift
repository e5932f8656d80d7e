import BinderCrypto
import Foundation
import XCTest

/// A doctor who uses binder (`binder open-share`), against a real `binder serve` and a real
/// `binder share` by a patient in a sandbox of their own: the doctor has no key and no account,
/// only the QR payload (its JSON, or a picture of the QR code).
final class OpenShareTests: XCTestCase {
    var server: TestServer!
    var serverRoot: BinderSandbox!
    var patient: Device!
    var doctor: BinderSandbox!
    var mnt: String { doctor.root.appendingPathComponent("mnt").path }

    static let pictures = URL(fileURLWithPath: MgitClient.script).deletingLastPathComponent().appendingPathComponent("qr_pictures.py").path
    static let day: String = {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        return formatter.string(from: Date())
    }()

    override func setUpWithError() throws {
        serverRoot = try BinderSandbox()
        server = try TestServer(root: serverRoot.root)
        patient = try ShareTests.patientWithSharedBinder(
            server: server, extra: ["medications/2026-03-01-statin.md": "# Statin\nMarker-unshared-3\n"])
        doctor = try BinderSandbox()
        try FileManager.default.createDirectory(atPath: mnt, withIntermediateDirectories: true)
    }

    override func tearDown() {
        if let doctor { unmountQuietly(doctor, mnt) }
        patient?.unmount()
        server?.stop()
        patient = nil; server = nil; serverRoot = nil; doctor = nil
    }

    /// `binder share PATHS --json` by the patient: the share's id and its QR payload.
    func share(_ paths: [String]) throws -> (id: String, payload: String) {
        let shared = try patient.binder(["share"] + paths + ["--binder", "health", "--json"])
        let share = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(shared.stdout.utf8)) as? [String: Any], shared.stdout)
        return (try XCTUnwrap(share["id"] as? String), try XCTUnwrap(share["payload"] as? String))
    }

    func clonePath(_ id: String) -> String { doctor.home.appendingPathComponent("opened/\(id).git").path }

    /// The doctor's shell in the mount, with the doctor's BINDER_HOME.
    func doctorShell(_ command: String) throws -> BinderRun {
        try shell(command, in: mnt, environment: ["BINDER_HOME": doctor.home.path, "HOME": doctor.root.path])
    }

    /// Every file below `root` (not `.binder`), by relative path, with its bytes.
    func files(under root: String, only folders: [String]? = nil) throws -> [String: Data] {
        var out: [String: Data] = [:]
        let found = try shell("find . -type f", in: root)
        XCTAssertEqual(found.status, 0, found.stderr)
        for line in found.stdout.split(separator: "\n") {
            let relative = String(line.dropFirst(2))  // "./"
            if let folders, !folders.contains(where: { relative.hasPrefix($0 + "/") }) { continue }
            out[relative] = try Data(contentsOf: URL(fileURLWithPath: root + "/" + relative))
        }
        return out
    }

    /// The staging repository's documents, as the Python doctor (the scan page's reader)
    /// decrypts them with the payload's throwaway key, by git path.
    func stagingDocuments(_ payloadFile: String) throws -> [String: Any] {
        let work = serverRoot.root.appendingPathComponent("reader-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        let reader = try BinderSandbox.run(executable: "/usr/bin/env", ["python3", ShareTests.doctor, payloadFile, work])
        XCTAssertEqual(reader.status, 0, reader.stderr)
        return try XCTUnwrap((try JSONSerialization.jsonObject(with: Data(reader.stdout.utf8)) as? [String: Any])?["documents"] as? [String: Any])
    }

    func diagnostics(_ id: String) -> String {
        let log = (try? String(contentsOfFile: doctor.home.appendingPathComponent("logs/\(id).log").path, encoding: .utf8)) ?? ""
        let status = (try? String(contentsOfFile: mnt + "/.binder/status", encoding: .utf8)) ?? "(none)"
        return "status:\n\(status)\nlog:\n" + log.split(separator: "\n").suffix(30).joined(separator: "\n")
    }

    func testDoctorReadsTheShareWritesNotesWithCpAndVimAndTheyReachThePatient() throws {
        let (id, payload) = try share(["conditions/asthma", "visits"])
        let payloadFile = try serverRoot.file("payload.json", payload + "\n")
        let fields = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any])
        let privateKey = try XCTUnwrap(fields["ephemeralPrivkey"] as? String), token = try XCTUnwrap(fields["sessionToken"] as? String)

        // The patient's own view of the shared folders, byte for byte.
        try patient.mount("health", ["--no-sync", "--read-only"])
        let expected = try files(under: patient.mountpoint, only: ["conditions/asthma", "visits"])
        patient.unmount()
        XCTAssertEqual(expected.count, 3, "\(expected.keys)")

        let opened = try doctor.run(["open-share", "--qr", payloadFile, mnt])
        XCTAssertEqual(opened.status, 0, opened.stderr)
        XCTAssertTrue(opened.stdout.contains("Opened \(id) at \(mnt)"), opened.stdout)
        XCTAssertTrue(FileManager.default.fileExists(atPath: clonePath(id)), "the copy is in the doctor's state folder")
        XCTAssertEqual(try files(under: mnt), expected, "exactly the shared records, as the patient's mount shows them")

        // What the share holds is read-only.
        let record = "visits/2026-05-01-knee.md"
        for change in ["printf more >> '\(record)'", "printf new > '\(record)'", "rm '\(record)'", "mv '\(record)' visits/moved.md",
                       "touch -d 2020-01-01 '\(record)'", "truncate -s 0 '\(record)'", "rmdir conditions/asthma", "rm -r conditions"] {
            let run = try doctorShell(change)
            XCTAssertNotEqual(run.status, 0, change)
            XCTAssertTrue(run.stderr.contains("Read-only file system"), "\(change): \(run.stderr)")
        }
        let mkdir = try doctorShell("mkdir new-folder")
        XCTAssertNotEqual(mkdir.status, 0)
        XCTAssertEqual(try files(under: mnt), expected, "nothing changed")

        // A note with cp, then edited with vim (backup renamed away, as vim's defaults do on many setups).
        let note = try doctor.file("note.md", "# Seen today\nMarker-doctor-cp\n")
        let copied = try doctorShell("cp '\(note)' visits/\(Self.day)-dr-lee.md")
        XCTAssertEqual(copied.status, 0, copied.stderr)
        let edited = try doctorShell("vim -Nu NONE -es -c 'set backup writebackup backupcopy=no swapfile' -c '%s/Marker-doctor-cp/Marker-doctor-cp-edited/' -c 'wq' visits/\(Self.day)-dr-lee.md")
        XCTAssertEqual(edited.status, 0, edited.stderr)
        // A note on a record, written with vim into its children folder.
        let child = try doctorShell("mkdir conditions/asthma/2026-04-01-inhaler.children && vim -Nu NONE -es -c 'call setline(1, [\"# Inhaler check\", \"Marker-doctor-vim\"])' -c 'wq' conditions/asthma/2026-04-01-inhaler.children/dr-lee.md")
        XCTAssertEqual(child.status, 0, child.stderr)
        XCTAssertTrue(try doctorShell("cat conditions/asthma/2026-04-01-inhaler.children/dr-lee.md").stdout.hasSuffix("---\n# Inhaler check\nMarker-doctor-vim\n"))
        XCTAssertTrue(try doctorShell("cat visits/\(Self.day)-dr-lee.md").stdout.contains("Marker-doctor-cp-edited"))

        // Each note commit reaches the staging repository, as the scan page's would.
        try eventually(30, "the notes pushed", diagnostics: { diagnostics(id) }) {
            try server.git(id, "rev-parse main") == (try shell("git -C '\(clonePath(id))' rev-parse main").stdout)
                && (try server.git(id, "log --format=%s main")).contains("Doctor note added")
        }
        let log = try server.git(id, "log '--format=%an <%ae>|%s' main").split(separator: "\n").map(String.init)
        XCTAssertEqual(Array(log.suffix(2)), ["Limbo Health <app@limbo.health>|Shared medical records", "Limbo Health <app@limbo.health>|Initialize binder"])
        XCTAssertGreaterThanOrEqual(log.count, 4, "\(log)")
        for line in log.dropLast(2) { XCTAssertEqual(line, "Doctor <scan@limbo.health>|Doctor note added \(Self.day)") }
        XCTAssertTrue(try doctorShell("cat .binder/status").stdout.contains("push: ok"), diagnostics(id))

        // An independent reader with the throwaway key finds the notes; the shared records unchanged.
        let documents = try stagingDocuments(payloadFile)
        let noteDocument = try XCTUnwrap(documents["visits/\(Self.day)-dr-lee.json"] as? [String: Any], "\(documents.keys)")
        XCTAssertTrue((noteDocument["value"] as? String ?? "").contains("Marker-doctor-cp-edited"), "\(noteDocument)")
        let inhaler = try XCTUnwrap(documents["conditions/asthma/2026-04-01-inhaler.json"] as? [String: Any])
        let children = try XCTUnwrap(inhaler["children"] as? [[String: Any]])
        XCTAssertEqual(children.count, 1)
        XCTAssertTrue((children.first?["value"] as? String ?? "").contains("Marker-doctor-vim"), "\(children)")
        XCTAssertTrue((inhaler["value"] as? String ?? "").contains("Marker-asthma-2"))
        let shared = try patient.git("health", "ls-tree -r --name-only main").split(separator: "\n").map(String.init)
            .filter { ($0.hasPrefix("visits/") || $0.hasPrefix("conditions/asthma/")) && $0.hasSuffix(".json") && !$0.hasSuffix(".meta.json") }
        XCTAssertEqual(Set(documents.keys), Set(shared + ["visits/\(Self.day)-dr-lee.json"]), "the shared records and the note, nothing else")

        // The throwaway key and the token touch neither the doctor's disk nor the daemon's argv.
        // (The patterns come from a file outside the doctor's folder: grep's own argv would match.)
        let patterns = try serverRoot.file("secrets", privateKey + "\n" + token + "\n")
        XCTAssertEqual(try shell("grep -r -l -F -f '\(patterns)' '\(doctor.root.path)' || true").stdout, "", "on disk")
        XCTAssertEqual(try shell("grep -l -F -f '\(patterns)' /proc/[0-9]*/cmdline /proc/[0-9]*/environ 2>/dev/null || true").stdout, "",
                       "argv or environment")

        // Unmounting ends it: the copy goes; the patient's collect brings the free note home.
        let closed = try doctor.run(["unmount", mnt])
        XCTAssertEqual(closed.status, 0, closed.stderr)
        eventually(30, "the copy removed", diagnostics: { diagnostics(id) }) { !FileManager.default.fileExists(atPath: clonePath(id)) }
        let collected = try patient.binder(["share", "--collect", id])
        XCTAssertTrue(collected.stdout.contains("visits/\(Self.day)-dr-lee.json"), collected.stdout)
        XCTAssertEqual(try patient.storedValue("health", "visits/\(Self.day)-dr-lee.json").map { $0.contains("Marker-doctor-cp-edited") }, true)
    }

    func testDoctorOpensFromAPNGAndFromAPhotoOnStdinAndKeepsTheCopyWithKeep() throws {
        let (id, payload) = try share(["visits"])
        let payloadFile = try serverRoot.file("payload.json", payload)
        let png = serverRoot.root.appendingPathComponent("qr.png").path
        let made = try shell("qrencode -r '\(payloadFile)' -o '\(png)'")
        XCTAssertEqual(made.status, 0, made.stderr)
        let opened = try doctor.run(["open-share", "--qr", png, mnt])
        XCTAssertEqual(opened.status, 0, opened.stderr)
        XCTAssertTrue(try doctorShell("cat visits/2026-05-01-knee.md").stdout.hasSuffix("---\n# Knee\nMarker-knee-1\n"))
        XCTAssertEqual(try doctor.run(["unmount", mnt]).status, 0)
        eventually(30, "the copy removed", diagnostics: { diagnostics(id) }) { !FileManager.default.fileExists(atPath: clonePath(id)) }

        let jpeg = serverRoot.root.appendingPathComponent("photo.jpg").path
        let photo = try shell("python3 '\(Self.pictures)' photo '\(payloadFile)' '\(jpeg)'")
        XCTAssertEqual(photo.status, 0, photo.stderr)
        let fromStdin = try shell("'\(BinderSandbox.binary)' open-share --keep --qr - '\(mnt)' < '\(jpeg)'",
                                  environment: ["BINDER_HOME": doctor.home.path])
        XCTAssertEqual(fromStdin.status, 0, fromStdin.stderr)
        XCTAssertTrue(try doctorShell("cat visits/2026-05-01-knee.md").stdout.hasSuffix("---\n# Knee\nMarker-knee-1\n"))
        XCTAssertEqual(try doctor.run(["unmount", mnt]).status, 0)
        // --keep: the copy stays (ciphertext only); a second open refuses to reuse it silently.
        eventually(30, "the daemon done", diagnostics: { diagnostics(id) }) {
            ((try? String(contentsOfFile: doctor.home.appendingPathComponent("logs/\(id).log").path, encoding: .utf8)) ?? "").contains("kept")
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: clonePath(id)))
        assertFails(try doctor.run(["open-share", "--qr", payloadFile, mnt]), mentioning: "kept with --keep")
    }

    func testARevokedShareMakesTheDoctorsPushFailCleanly() throws {
        let (id, payload) = try share(["visits"])
        let payloadFile = try serverRoot.file("payload.json", payload)
        XCTAssertEqual(try doctor.run(["open-share", "--qr", payloadFile, mnt]).status, 0)
        XCTAssertEqual(try patient.binder(["share", "--revoke", id]).status, 0)
        let note = try doctor.file("note.md", "# Too late\nMarker-late\n")
        let copied = try doctorShell("cp '\(note)' visits/late.md")
        XCTAssertEqual(copied.status, 0, copied.stderr)
        try eventually(30, "the push failure in the status", diagnostics: { diagnostics(id) }) {
            (try doctorShell("cat .binder/status").stdout).contains("push: failed: forbidden: the share is over")
        }
        let log = try String(contentsOfFile: doctor.home.appendingPathComponent("logs/\(id).log").path, encoding: .utf8)
        XCTAssertTrue(log.contains("the doctor's note was not pushed") && log.contains("the share is over"), log)
        XCTAssertFalse(log.contains("Marker-late"), "no content in the log")
        XCTAssertEqual(try doctor.run(["unmount", mnt]).status, 0)
        // The note reached nobody: the copy stays, and the log says where and how many notes.
        try eventually(30, "the daemon done", diagnostics: { diagnostics(id) }) {
            (try String(contentsOfFile: doctor.home.appendingPathComponent("logs/\(id).log").path, encoding: .utf8)).contains("kept")
        }
        let kept = try String(contentsOfFile: doctor.home.appendingPathComponent("logs/\(id).log").path, encoding: .utf8)
        XCTAssertTrue(kept.contains("1 note(s) never reached the patient") && kept.contains("kept in \(clonePath(id))"), kept)
        XCTAssertTrue(FileManager.default.fileExists(atPath: clonePath(id)), "the copy with the unpushed note is kept")
        let history = try shell("git -C '\(clonePath(id))' log --format=%s main")
        XCTAssertTrue(history.stdout.hasPrefix("Doctor note added \(Self.day)\n"), history.stdout)
        // Opening it again reuses the kept copy, and fails cleanly: the share is over. It stays.
        assertFails(try doctor.run(["open-share", "--qr", payloadFile, mnt]), mentioning: "the share is over")
        XCTAssertTrue(FileManager.default.fileExists(atPath: clonePath(id)))
        XCTAssertEqual(try shell("git -C '\(clonePath(id))' log --format=%s main").stdout, history.stdout)
    }

    func testANoteAnotherDoctorPushedMeanwhileIsMergedAndBothReachThePatient() throws {
        let (id, payload) = try share(["visits"])
        let payloadFile = try serverRoot.file("payload.json", payload)
        let opened = try doctor.run(["open-share", "--qr", payloadFile, mnt])
        XCTAssertEqual(opened.status, 0, opened.stderr)
        // The scan page (another doctor) pushes a note while this doctor's mount is open.
        let work = serverRoot.root.appendingPathComponent("scan-page").path
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        let scanPage = try BinderSandbox.run(executable: "/usr/bin/env", ["python3", ShareTests.doctor, payloadFile, work, "Marker-scan-page"])
        XCTAssertEqual(scanPage.status, 0, scanPage.stderr)
        let pushedByScanPage = try XCTUnwrap((try JSONSerialization.jsonObject(with: Data(scanPage.stdout.utf8)) as? [String: Any])?["pushed"] as? String)
        XCTAssertEqual(try server.git(id, "rev-parse main").trimmingCharacters(in: .whitespacesAndNewlines), pushedByScanPage)

        // This doctor's note: its push is refused (not a fast-forward), merged onto the staging
        // tip and pushed again.
        let note = try doctor.file("note.md", "# Seen today\nMarker-doctor-binder\n")
        let copied = try doctorShell("cp '\(note)' visits/\(Self.day)-dr-lee.md")
        XCTAssertEqual(copied.status, 0, copied.stderr)
        try eventually(30, "the merge pushed", diagnostics: { diagnostics(id) }) {
            try server.git(id, "rev-parse main") == (try shell("git -C '\(clonePath(id))' rev-parse main").stdout)
                && (try server.git(id, "log --format=%s main")).contains("Merge changes from another device")
        }
        XCTAssertEqual(try server.git(id, "merge-base --is-ancestor \(pushedByScanPage) main; echo $?"), "0\n", "the scan page's commit kept")
        let log = try server.git(id, "log '--format=%an <%ae>|%s' main").split(separator: "\n").map(String.init)
        XCTAssertEqual(log.first, "Doctor <scan@limbo.health>|Merge changes from another device", "\(log)")
        XCTAssertTrue(try doctorShell("cat .binder/status").stdout.contains("push: ok"), diagnostics(id))

        // The doctor's mount shows the other note, next to the doctor's own (still editable).
        try eventually(30, "the scan page's note shown", diagnostics: { diagnostics(id) }) {
            (try doctorShell("cat visits/\(Self.day)-doctor-note.md").stdout).contains("Marker-scan-page")
        }
        XCTAssertTrue(try doctorShell("cat visits/\(Self.day)-dr-lee.md").stdout.contains("Marker-doctor-binder"))

        // An independent reader finds both notes in the staging repository.
        let documents = try stagingDocuments(payloadFile)
        let ours = try XCTUnwrap(documents["visits/\(Self.day)-dr-lee.json"] as? [String: Any], "\(documents.keys)")
        XCTAssertTrue((ours["value"] as? String ?? "").contains("Marker-doctor-binder"), "\(ours)")
        let theirs = try XCTUnwrap(documents["visits/\(Self.day)-doctor-note.json"] as? [String: Any], "\(documents.keys)")
        XCTAssertEqual(theirs["value"] as? String, "Marker-scan-page")

        // Everything pushed: the unmount removes the copy; the patient collects both notes.
        XCTAssertEqual(try doctor.run(["unmount", mnt]).status, 0)
        eventually(30, "the copy removed", diagnostics: { diagnostics(id) }) { !FileManager.default.fileExists(atPath: clonePath(id)) }
        let collected = try patient.binder(["share", "--collect", id])
        XCTAssertTrue(collected.stdout.contains("visits/\(Self.day)-dr-lee.json") && collected.stdout.contains("visits/\(Self.day)-doctor-note.json"),
                      collected.stdout)
        XCTAssertEqual(try patient.storedValue("health", "visits/\(Self.day)-dr-lee.json").map { $0.contains("Marker-doctor-binder") }, true)
        XCTAssertEqual(try patient.storedValue("health", "visits/\(Self.day)-doctor-note.json"), "Marker-scan-page")
    }

    func testHostileInputsFailWithOneClearLine() throws {
        let valid = #"{"action":"scan_session","ephemeralPrivkey":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","sessionToken":"sctk_0011","repoId":"scan-1","expiresAt":4102444800,"endpoint":"http://127.0.0.1:9"}"#
        let root = doctor.root.path
        let qrOf = { (name: String, text: String) throws -> String in
            let path = root + "/" + name
            let run = try shell("printf '%s' \"$TEXT\" | qrencode -o '\(path)'", environment: ["TEXT": text])
            XCTAssertEqual(run.status, 0, run.stderr)
            return path
        }
        let png = try qrOf("valid.png", valid)
        let whole = try Data(contentsOf: URL(fileURLWithPath: png))
        try whole.prefix(whole.count / 2).write(to: URL(fileURLWithPath: root + "/truncated.png"))
        XCTAssertEqual(try shell("python3 '\(Self.pictures)' blank '\(root)/blank.png' && python3 '\(Self.pictures)' huge '\(root)/huge.png'").status, 0)
        try Data([0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10] + Array("JFIF".utf8)).write(to: URL(fileURLWithPath: root + "/truncated.jpg"))
        let cases: [(input: String, says: String)] = [
            (root + "/missing.json", "cannot read"),
            (try doctor.file("words.txt", "hello doctor"), "not a share's QR payload: the payload is not JSON"),
            (try doctor.file("legacy.json", #"{"action":"mgit_clone","clone_url":"x"}"#), "the payload's action is not scan_session"),
            (try doctor.file("bad-key.json", valid.replacingOccurrences(of: "0123456789abcdef0123", with: "xyz")), "ephemeralPrivkey is not 64 hex"),
            (try doctor.file("path.json", valid.replacingOccurrences(of: "scan-1", with: "../../etc")), "repoId is not a repository id"),
            (try doctor.file("file-url.json", valid.replacingOccurrences(of: "http://127.0.0.1:9", with: "file:///etc")), "endpoint is not an http(s) URL"),
            (try doctor.file("expired.json", valid.replacingOccurrences(of: "4102444800", with: "1700000000")), "the share ended at"),
            (root + "/truncated.png", "the PNG image cannot be decoded"),
            (root + "/truncated.jpg", "the JPEG image cannot be decoded"),
            (root + "/huge.png", "the image is 30000×30000 pixels"),
            (root + "/blank.png", "no QR code found in the image"),
            (try qrOf("words.png", "hello doctor"), "not a share's QR payload"),
        ]
        for (input, says) in cases {
            assertFails(try doctor.run(["open-share", "--qr", input, mnt]), mentioning: says)
        }
        // A valid payload of a server that is not there: one line too, and nothing left behind.
        assertFails(try doctor.run(["open-share", "--qr", png, mnt]), mentioning: "cannot fetch the share scan-1")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: doctor.home.appendingPathComponent("opened").path), [])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mnt), [])
    }
}
