import BinderCrypto
import Foundation
import XCTest

/// "Share with a doctor" against a real `binder serve`: `binder share` makes the staging copy
/// and the scan session; an independent doctor (Tests/interop/scan_doctor.py: the scan page's
/// checks, command-line git, rust-nostr and `cryptography`) reads it from the QR payload alone.
final class ShareTests: XCTestCase {
    var server: TestServer!
    var serverRoot: BinderSandbox!
    var patient: Device!
    let photo = ShareTests.photo
    /// The PNG-looking attachment of the shared folder (its sidecar's hash is checked).
    static let photo: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + (0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }

    /// A patient logged in to `server` with the binder `health` synced there: a visit, an asthma
    /// record with a photo attachment, and `extra` records (path: markdown).
    static func patientWithSharedBinder(server: TestServer, extra: [String: String] = [:]) throws -> Device {
        let patient = try Device(nsec: String(decoding: try SecretKey.generate().nsec().copyBytes(), as: UTF8.self))
        try patient.binder(["login", "--server", server.url])
        try patient.binder(["create", "health", "--patient-name", "Alex Doe"])
        try patient.mount("health", ["--no-sync"])
        try patient.write("visits/2026-05-01-knee.md", "# Knee\nMarker-knee-1\n")
        try patient.write("conditions/asthma/2026-04-01-inhaler.md", "# Inhaler\nMarker-asthma-2\n")
        for (path, text) in extra.sorted(by: { $0.key < $1.key }) { try patient.write(path, text) }
        let source = patient.sandbox.root.appendingPathComponent("photo.png").path
        try Data(photo).write(to: URL(fileURLWithPath: source))
        let copied = try shell("cp '\(source)' '\(patient.path("conditions/asthma/peak-flow.png"))'")
        XCTAssertEqual(copied.status, 0, copied.stderr)
        patient.unmount()
        try patient.binder(["sync", "health", "--repo-id", "health"])
        return patient
    }

    static let doctor = URL(fileURLWithPath: MgitClient.script).deletingLastPathComponent().appendingPathComponent("scan_doctor.py").path

    override func setUpWithError() throws {
        serverRoot = try BinderSandbox()
        server = try TestServer(root: serverRoot.root)
        patient = try Self.patientWithSharedBinder(server: server)
    }

    override func tearDown() {
        patient?.unmount()
        server?.stop()
        patient = nil; server = nil; serverRoot = nil
    }

    /// The patient's files at `main` under `folder` ("" for all) that the app shares.
    func binderFiles(under folder: String, suffix: String) throws -> Set<String> {
        let all = try patient.git("health", "ls-tree -r --name-only main").split(separator: "\n").map(String.init)
        return Set(all.filter { ($0.hasPrefix(folder) || folder.isEmpty) && $0.hasSuffix(suffix) && !$0.hasPrefix(".") })
    }

    /// The independent doctor; with `note`, pushes it as the scan page does, or with `record`
    /// too as a child of that shared record (as `binder open-share` writes one).
    func runDoctor(_ payload: String, note: String? = nil, record: String? = nil) throws -> (run: BinderRun, json: [String: Any]) {
        let payloadFile = try serverRoot.file("payload-\(UUID().uuidString)", payload)
        let work = serverRoot.root.appendingPathComponent("doctor-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        let run = try BinderSandbox.run(executable: "/usr/bin/env", ["python3", Self.doctor, payloadFile, work] + (note.map { [$0] } ?? [])
                                                                                   + (record.map { [$0] } ?? []))
        let json = (try? JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any]) ?? [:]
        return (run, json)
    }

    func httpStatus(_ url: String) throws -> String {
        try shell("curl -s -o /dev/null -w '%{http_code}' '\(url)'").stdout
    }

    func testDoctorReadsExactlyTheSharedFolderThenRevokeEndsIt() throws {
        // The label (health data: whom it is for) from standard input, never in argv.
        let shared = try patient.binder(["share", "conditions/asthma", "--binder", "health", "--label", "-", "--json"], stdin: "Dr. Lee\n")
        let share = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(shared.stdout.utf8)) as? [String: Any], shared.stdout)
        XCTAssertEqual(share["label"] as? String, "Dr. Lee")
        XCTAssertFalse(shared.stderr.contains("warning"), shared.stderr)
        let id = try XCTUnwrap(share["id"] as? String)
        let payload = try XCTUnwrap(share["payload"] as? String)
        XCTAssertNotNil(id.range(of: "^scan-[0-9a-f]+$", options: .regularExpression), id)
        // The app's QR text, byte for byte in its key order.
        XCTAssertNotNil(payload.range(of: #"^\{"action":"scan_session","ephemeralPrivkey":"[0-9a-f]{64}","sessionToken":"sctk_[0-9a-f]{64}","repoId":"scan-[0-9a-f]+","expiresAt":[0-9]+,"endpoint":"http://127\.0\.0\.1:[0-9]+"\}$"#,
                                      options: .regularExpression), payload)
        let fields = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any])
        let privateKey = try XCTUnwrap(fields["ephemeralPrivkey"] as? String)
        let token = try XCTUnwrap(fields["sessionToken"] as? String)
        XCTAssertEqual(fields["repoId"] as? String, id)
        XCTAssertEqual(fields["expiresAt"] as? Int, share["expiresAt"] as? Int)
        let expiresAt = try XCTUnwrap(fields["expiresAt"] as? Int)
        XCTAssertGreaterThan(expiresAt, Int(Date().timeIntervalSince1970) + 3000, "one hour by default")

        // The doctor decrypts every file with the throwaway key and finds exactly the folder.
        let doctor = try runDoctor(payload)
        XCTAssertEqual(doctor.run.status, 0, doctor.run.stderr)
        let documents = try XCTUnwrap(doctor.json["documents"] as? [String: Any])
        let expected = try binderFiles(under: "conditions/asthma/", suffix: ".json").filter { !$0.hasSuffix(".meta.json") }
        XCTAssertEqual(Set(documents.keys), expected)
        XCTAssertEqual(expected.count, 2, "the note and the photo's attachment_ref")
        XCTAssertTrue(doctor.run.stdout.contains("Marker-asthma-2"))
        XCTAssertFalse(doctor.run.stdout.contains("Marker-knee-1"))
        let sidecars = try XCTUnwrap(doctor.json["sidecars"] as? [String: String])
        XCTAssertEqual(Set(sidecars.keys), try binderFiles(under: "conditions/asthma/", suffix: ".enc"))
        XCTAssertEqual(Array(sidecars.values), [Hex.encode(sha256(photo))])
        let folders = try XCTUnwrap(doctor.json["folders"] as? [String: Any])
        XCTAssertEqual(Set(folders.keys), try binderFiles(under: "conditions/", suffix: ".meta.json"))
        XCTAssertTrue(folders.keys.contains("conditions/.meta.json"), "\(folders.keys)")
        // Re-wrapped, not re-encrypted: the sidecar's nonce and ciphertext are the binder's own.
        let sidecar = try XCTUnwrap(sidecars.keys.first)
        let mine = try shell("git -C '\(patient.repository("health"))' cat-file blob 'main:\(sidecar)' | tail -c 4000 | sha256sum").stdout
        let theirs = try shell("git -C '\(server.repos)/\(id).git' cat-file blob 'main:\(sidecar)' | tail -c 4000 | sha256sum").stdout
        XCTAssertEqual(mine, theirs)
        XCTAssertEqual(try server.git(id, "log --format=%s main"), "Shared medical records\nInitialize binder\n")

        // The scan page's way (token as a query parameter) works on this repository only.
        XCTAssertEqual(try httpStatus("\(server.url)/api/mgit/repos/\(id)/info/refs?service=git-upload-pack&scan_token=\(token)"), "200")
        XCTAssertEqual(try httpStatus("\(server.url)/api/mgit/repos/health/info/refs?service=git-upload-pack&scan_token=\(token)"), "403")
        XCTAssertEqual(try httpStatus("\(server.url)/api/mgit/repos/scan-1/info/refs?service=git-receive-pack&scan_token=\(token)"), "403")

        // The throwaway key and the token are nowhere on the patient's disk in the clear.
        for secret in [privateKey, token] {
            XCTAssertEqual(try shell("grep -r -l -F -e '\(secret)' '\(patient.sandbox.root.path)' || true").stdout, "")
        }

        // Another user can neither open a session on the staging repository nor revoke this one.
        let otherKey = try serverRoot.file("other.nsec", String(decoding: try SecretKey.generate().nsec().copyBytes(), as: UTF8.self))
        let login = try MgitClient.run(["login", server.url, otherKey])
        XCTAssertEqual(login.status, 0, login.stderr)
        let otherToken = try serverRoot.file("other.token", login.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        let open = try MgitClient.run(["post", server.url, "/api/auth/scan/session",
                                       try serverRoot.file("open.json", #"{"stagingRepoId":"\#(id)"}"#), otherToken])
        XCTAssertTrue(open.stdout.hasPrefix("403 "), open.stdout)
        let missing = try MgitClient.run(["post", server.url, "/api/auth/scan/session",
                                          try serverRoot.file("missing.json", #"{"stagingRepoId":"scan-123"}"#), otherToken])
        XCTAssertTrue(missing.stdout.hasPrefix("404 "), missing.stdout)
        let notScan = try MgitClient.run(["post", server.url, "/api/auth/scan/session",
                                          try serverRoot.file("health.json", #"{"stagingRepoId":"health"}"#), otherToken])
        XCTAssertTrue(notScan.stdout.hasPrefix("400 "), notScan.stdout)
        let theirRevoke = try MgitClient.run(["post", server.url, "/api/auth/scan/revoke",
                                              try serverRoot.file("revoke.json", #"{"sessionToken":"\#(token)"}"#), otherToken])
        XCTAssertTrue(theirRevoke.stdout.hasPrefix("404 "), theirRevoke.stdout)
        // Nor push into it with their own token (push-to-create never touches another's repository).
        let before = try server.git(id, "rev-parse main")
        let push = try shell("cd '\(serverRoot.root.path)' && git init -q -b main intruder && cd intruder && git -c user.name=x -c user.email=x@x commit -q --allow-empty -m x && git -c http.extraHeader=\"Authorization: Bearer $(cat '\(otherToken)')\" push -q '\(server.url)/api/mgit/repos/\(id)' main")
        XCTAssertNotEqual(push.status, 0, push.stderr)
        XCTAssertEqual(try server.git(id, "rev-parse main"), before)
        // The scan token writes the shared copy's main branch only: no other branch or tag.
        let cloned = try shell("cd '\(serverRoot.root.path)' && git clone -q -c http.extraHeader='Authorization: ScanToken \(token)' '\(server.url)/api/mgit/repos/\(id)' stray")
        XCTAssertEqual(cloned.status, 0, cloned.stderr)
        let stray = try shell("cd '\(serverRoot.root.path)/stray' && git -c http.extraHeader='Authorization: ScanToken \(token)' push -q origin main:refs/heads/evil main:refs/tags/t 2>&1")
        XCTAssertTrue(stray.status != 0 && stray.stdout.contains("403"), stray.stdout)
        XCTAssertEqual(try server.git(id, "for-each-ref --format='%(refname)'").trimmingCharacters(in: .whitespacesAndNewlines), "refs/heads/main")
        // The doctor may push a note with the scan token, as the scan page does.
        let noted = try runDoctor(payload, note: "Marker-doctor-3")
        XCTAssertEqual(noted.run.status, 0, noted.run.stderr)
        let pushed = try XCTUnwrap(noted.json["pushed"] as? String)
        XCTAssertEqual(try server.git(id, "rev-parse main").trimmingCharacters(in: .whitespacesAndNewlines), pushed)
        XCTAssertTrue(try runDoctor(payload).run.stdout.contains("Marker-doctor-3"), "still shared, the note readable")

        // The note comes home, under the patient's key; a second one the same day (which the scan
        // page writes over the first) lands beside it; nothing is overwritten or collected twice.
        let day = String(ISO8601DateFormatter().string(from: Date()).prefix(10))
        let note = "visits/\(day)-doctor-note.json"
        let collected = try patient.binder(["share", "--collect", id])
        XCTAssertEqual(collected.stdout, "\(id): collected 1 note(s): \(note)\n")
        XCTAssertEqual(try patient.storedValue("health", note), "Marker-doctor-3")
        XCTAssertEqual(try patient.git("health", "log -1 --format=%s main"), "Incorporate doctor note")
        XCTAssertEqual(try runDoctor(payload, note: "Marker-doctor-4").run.status, 0)
        let second = try patient.binder(["share", "--collect"])
        XCTAssertEqual(second.stdout, "\(id): collected 1 note(s): visits/\(day)-doctor-note-2.json\n")
        XCTAssertEqual(try patient.storedValue("health", "visits/\(day)-doctor-note-2.json"), "Marker-doctor-4")
        XCTAssertEqual(try patient.storedValue("health", note), "Marker-doctor-3")
        XCTAssertEqual(try patient.binder(["share", "--collect", id]).stdout, "\(id): no new notes\n")

        let listed = try patient.binder(["share", "--list"]).stdout
        XCTAssertTrue(listed.contains(id) && listed.contains("conditions/asthma") && listed.contains("Dr. Lee"), listed)

        // A revoke brings home what came since the last collection first.
        XCTAssertEqual(try runDoctor(payload, note: "Marker-doctor-5").run.status, 0)
        let revoked = try patient.binder(["share", "--revoke", id])
        XCTAssertTrue(revoked.stdout.hasPrefix("Collected 1 note(s): visits/\(day)-doctor-note-3.json\nRevoked \(id)"), revoked.stdout)
        XCTAssertEqual(try patient.storedValue("health", "visits/\(day)-doctor-note-3.json"), "Marker-doctor-5")
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(server.repos)/\(id).git"), "the staging repository is deleted")
        let after = try runDoctor(payload)
        XCTAssertNotEqual(after.run.status, 0, "the token no longer opens anything")
        XCTAssertEqual(try httpStatus("\(server.url)/api/mgit/repos/\(id)/info/refs?service=git-upload-pack&scan_token=\(token)"), "403")
        XCTAssertEqual(try patient.binder(["share", "--list"]).stdout, "No active shares.\n")
        assertFails(try patient.binder(["share", "--revoke", id], expectFailure: true), mentioning: "no active share")
        // The patient's own binder is untouched.
        XCTAssertEqual(try patient.storedValue("health", "visits/2026-05-01-knee.json"), "# Knee\nMarker-knee-1\n")
    }

    func testWholeBinderShareEndsAtItsExpiry() throws {
        let shared = try patient.binder(["share", "--expires", "4s", "--json"])
        let share = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(shared.stdout.utf8)) as? [String: Any], shared.stdout)
        let id = try XCTUnwrap(share["id"] as? String)
        let payload = try XCTUnwrap(share["payload"] as? String)
        let expiresAt = try XCTUnwrap(share["expiresAt"] as? Int)
        let doctor = try runDoctor(payload)
        XCTAssertEqual(doctor.run.status, 0, doctor.run.stderr)
        let documents = try XCTUnwrap(doctor.json["documents"] as? [String: Any])
        let expected = try binderFiles(under: "", suffix: ".json").filter { !$0.hasSuffix(".meta.json") }
        XCTAssertEqual(Set(documents.keys), expected)
        XCTAssertTrue(doctor.run.stdout.contains("Marker-knee-1") && doctor.run.stdout.contains("Marker-asthma-2"))
        // A note the doctor leaves while the patient is away must not end with the share.
        XCTAssertEqual(try runDoctor(payload, note: "Marker-before-expiry").run.status, 0)

        // Past the expiry (waiting for the clock, not timing anything): the token opens nothing,
        // the server keeps the staging repository for the patient to collect from, and the
        // patient's next run collects, revokes (which removes it) and forgets the share.
        while Int(Date().timeIntervalSince1970) <= expiresAt { usleep(200_000) }
        let late = try runDoctor(payload).run
        XCTAssertTrue(late.status != 0 && late.stderr.contains("payload expired"), late.stderr)
        let token = try XCTUnwrap((try JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any])?["sessionToken"] as? String)
        XCTAssertEqual(try httpStatus("\(server.url)/api/mgit/repos/\(id)/info/refs?service=git-upload-pack&scan_token=\(token)"), "403")
        XCTAssertTrue(FileManager.default.fileExists(atPath: "\(server.repos)/\(id).git"), "kept for the patient to collect")
        let listed = try patient.binder(["share", "--list"])
        XCTAssertTrue(listed.stderr.contains("share \(id) expired"), listed.stderr)
        let day = String(ISO8601DateFormatter().string(from: Date()).prefix(10))
        XCTAssertEqual(listed.stdout, "\(id): collected 1 note(s): visits/\(day)-doctor-note.json\nNo active shares.\n")
        XCTAssertEqual(try patient.storedValue("health", "visits/\(day)-doctor-note.json"), "Marker-before-expiry")
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(server.repos)/\(id).git"), "removed once the patient ended it")
    }

    func testTextModeDrawsTheQRCodeAboveThePayload() throws {
        let shared = try patient.binder(["share", "visits", "--binder", "health"])
        let lines = shared.stdout.split(separator: "\n").map(String.init)
        let payload = try XCTUnwrap(lines.last)
        XCTAssertTrue(payload.hasPrefix(#"{"action":"scan_session","#), payload)
        let qr = lines.dropLast()
        // A QR code's side is 17 + 4 × version modules; with a quiet zone of 2 on each side, in half-block rows.
        let side = try XCTUnwrap(qr.first).count
        XCTAssertEqual((side - 4 - 17) % 4, 0, "\(side)")
        XCTAssertEqual(qr.count, (side + 1) / 2)
        XCTAssertTrue(qr.allSatisfy { $0.count == side && $0.allSatisfy { "█▀▄ ".contains($0) } })
        XCTAssertTrue(shared.stderr.contains("Shared 1 record(s) as scan-"), shared.stderr)
        // A real decoder (zbar) reads the payload back from the drawing, made an image.
        let image = try serverRoot.file("qr.pbm", Self.pbm(terminalQR: Array(qr), side: side))
        let decoded = try shell("zbarimg --raw -q '\(image)'")
        XCTAssertEqual(decoded.status, 0, decoded.stderr)
        XCTAssertEqual(decoded.stdout, payload + "\n")
        let id = try XCTUnwrap((try JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any])?["repoId"] as? String)
        XCTAssertEqual(try runDoctor(payload).run.status, 0)
        try patient.binder(["share", "--revoke", id])
    }

    /// The staging repositories on the server.
    func stagingRepositories() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: server.repos).filter { $0.hasPrefix("scan-") }
    }

    func testQRCodeAsAPNGGoesToStdoutOrToMemoryNeverToADisk() throws {
        // On a disk the image (which holds the throwaway key) is refused before anything is shared.
        let onDisk = patient.sandbox.root.appendingPathComponent("qr.png").path
        assertFails(try patient.binder(["share", "visits", "--qr-png", onDisk], expectFailure: true), mentioning: "memory file system")
        XCTAssertFalse(FileManager.default.fileExists(atPath: onDisk))
        XCTAssertEqual(try stagingRepositories(), [])

        // `-`: the PNG alone on stdout; a real decoder (zbar) reads the exact payload from it.
        let piped = serverRoot.root.appendingPathComponent("piped.png").path
        let run = try shell("'\(BinderSandbox.binary)' share visits --label piped --qr-png - > '\(piped)'",
                            environment: ["BINDER_HOME": patient.sandbox.home.path, "BINDER_RETRY_BASE": "0.05"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: piped)).prefix(8)), [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        let decoded = try shell("zbarimg --raw -q '\(piped)'")
        XCTAssertEqual(decoded.status, 0, decoded.stderr)
        let payload = String(decoded.stdout.dropLast())
        XCTAssertNotNil(payload.range(of: #"^\{"action":"scan_session","ephemeralPrivkey":"[0-9a-f]{64}","sessionToken":"sctk_[0-9a-f]{64}","repoId":"scan-[0-9a-f]+","expiresAt":[0-9]+,"endpoint":"http://127\.0\.0\.1:[0-9]+"\}$"#,
                                      options: .regularExpression), payload)
        let doctor = try runDoctor(payload)
        XCTAssertEqual(doctor.run.status, 0, doctor.run.stderr)
        XCTAssertTrue(doctor.run.stdout.contains("Marker-knee-1"))
        let pipedID = try XCTUnwrap(doctor.json["repoId"] as? String)

        // A file on a memory file system: made new, 0600, the same payload as the text; gone with the share.
        let image = "/dev/shm/binder-test-\(UUID().uuidString).png"
        defer { unlink(image) }
        let made = try patient.binder(["share", "conditions/asthma", "--qr-png", image])
        let textPayload = try XCTUnwrap(made.stdout.split(separator: "\n").last.map(String.init))
        XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: image)[.posixPermissions] as? Int, 0o600)
        XCTAssertEqual(try shell("zbarimg --raw -q '\(image)'").stdout, textPayload + "\n")
        XCTAssertTrue(made.stderr.contains(image), made.stderr)
        // Never over an existing file (nor through a link): refused before sharing.
        assertFails(try patient.binder(["share", "visits", "--qr-png", image], expectFailure: true), mentioning: "cannot create")
        XCTAssertEqual(try stagingRepositories().count, 2)
        let id = try XCTUnwrap((try JSONSerialization.jsonObject(with: Data(textPayload.utf8)) as? [String: Any])?["repoId"] as? String)
        try patient.binder(["share", "--revoke", id])
        XCTAssertFalse(FileManager.default.fileExists(atPath: image), "the image goes when the share ends")
        try patient.binder(["share", "--revoke", pipedID])
        XCTAssertEqual(try stagingRepositories(), [])
    }

    func testAMountedBinderBringsTheDoctorsNotesHomeItself() throws {
        let record = "conditions/asthma/2026-04-01-inhaler.json"
        let children = "conditions/asthma/2026-04-01-inhaler.children"
        let day = String(ISO8601DateFormatter().string(from: Date()).prefix(10))
        try patient.mount("health", ["--sync-interval", "1"])
        let shared = try patient.binder(["share", "conditions/asthma", "--binder", "health", "--json"])
        let share = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(shared.stdout.utf8)) as? [String: Any], shared.stdout)
        let id = try XCTUnwrap(share["id"] as? String)
        let payload = try XCTUnwrap(share["payload"] as? String)

        // A note on a record: the mount's sync brings it home as that record's child, the
        // user doing nothing; the record itself is as the patient wrote it.
        let noted = try runDoctor(payload, note: "Marker-child-6", record: record)
        XCTAssertEqual(noted.run.status, 0, noted.run.stderr)
        func childTexts() -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: patient.path(children))) ?? []).compactMap { patient.read(children + "/" + $0) }
        }
        eventually(60, "the doctor's note as a child in the mount", diagnostics: { self.patient.diagnostics() }) {
            childTexts().contains { $0.contains("Marker-child-6") }
        }
        XCTAssertEqual(try patient.storedValue("health", record), "# Inhaler\nMarker-asthma-2\n")
        XCTAssertEqual(try patient.git("health", "log -1 --format=%s main"), "Incorporate doctor note")
        // The same sync pushes it.
        eventually(60, "the note pushed", diagnostics: { self.patient.diagnostics() }) {
            (try? server.git("health", "rev-parse main").trimmingCharacters(in: .whitespacesAndNewlines)) == (try? patient.tip("health"))
        }
        patient.unmount()

        // Mounted without sync: `--collect` and `--revoke` ask the mount, which shows the notes at once.
        try patient.mount("health", ["--no-sync"])
        XCTAssertEqual(try runDoctor(payload, note: "Marker-free-7").run.status, 0)
        let collected = try patient.binder(["share", "--collect", id])
        XCTAssertEqual(collected.stdout, "\(id): collected 1 note(s): visits/\(day)-doctor-note.json\n")
        XCTAssertEqual(patient.read("visits/\(day)-doctor-note.md").map { $0.contains("Marker-free-7") }, true)
        XCTAssertEqual(try runDoctor(payload, note: "Marker-free-8").run.status, 0)
        let revoked = try patient.binder(["share", "--revoke", id])
        XCTAssertTrue(revoked.stdout.hasPrefix("Collected 1 note(s): visits/\(day)-doctor-note-2.json\nRevoked \(id)"), revoked.stdout)
        XCTAssertEqual(patient.read("visits/\(day)-doctor-note-2.md").map { $0.contains("Marker-free-8") }, true)
        XCTAssertEqual(childTexts().filter { $0.contains("Marker-child-6") }.count, 1, "collected once")
        XCTAssertEqual(try stagingRepositories(), [])
        XCTAssertEqual(try patient.binder(["share", "--list"]).stdout, "No active shares.\n")
    }

    /// The half-block drawing as a plain PBM (1 = dark), 4 more light modules around, 6 pixels a module.
    static func pbm(terminalQR lines: [String], side: Int) -> String {
        var rows: [[Bool]] = []
        for line in lines {
            var top: [Bool] = [], bottom: [Bool] = []
            for character in line {
                top.append(character == " " || character == "▄")
                bottom.append(character == " " || character == "▀")
            }
            rows.append(top)
            if rows.count < side { rows.append(bottom) }
        }
        let margin = 4, scale = 6
        let width = (side + 2 * margin) * scale
        var out = "P1\n\(width) \(width)\n"
        for y in 0..<(side + 2 * margin) {
            var pixels = ""
            for x in 0..<(side + 2 * margin) {
                let dark = y >= margin && y < side + margin && x >= margin && x < side + margin && rows[y - margin][x - margin]
                pixels += String(repeating: dark ? "1 " : "0 ", count: scale)
            }
            out += String(repeating: pixels + "\n", count: scale)
        }
        return out
    }

    func testBadSharesFailClearlyAndLeaveNothing() throws {
        assertFails(try patient.binder(["share", "no/such/folder", "--binder", "health"], expectFailure: true),
                    mentioning: "no record or folder 'no/such/folder'")
        assertFails(try patient.binder(["share", "../etc", "--binder", "health"], expectFailure: true), mentioning: "not a path inside")
        assertFails(try patient.binder(["share", "--expires", "9d"], expectFailure: true), mentioning: "--expires")
        let repositories = try FileManager.default.contentsOfDirectory(atPath: server.repos).filter { $0.hasPrefix("scan-") }
        XCTAssertEqual(repositories, [])
        XCTAssertEqual(try patient.binder(["share", "--list"]).stdout, "No active shares.\n")
    }
}
