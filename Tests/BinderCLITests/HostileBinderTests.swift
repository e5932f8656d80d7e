import BinderCrypto
import BinderFormat
import Foundation
import XCTest

/// A binder full of what must not break the mount: files for another key, corrupt ciphertext,
/// broken JSON, odd names, very deep folders, a 10 MB attachment, a tampered sidecar.
final class HostileBinderTests: XCTestCase {
    var binder: MountedBinder!
    var own: NIP44.ConversationKey!
    var stored: [String: [UInt8]] = [:]
    var bigAttachment: [UInt8] = []

    override func setUpWithError() throws {
        binder = try MountedBinder(cloneFixture: false)
        own = try NIP44.ConversationKey(selfOf: try SecretKey(nsec: Fixtures.nsec))
        let other = try NIP44.ConversationKey(selfOf: try SecretKey.generate())
        func document(_ type: String, _ value: String) throws -> [UInt8] {
            Array(try NIP44.encrypt(MedicalDocument(type: type, value: value).serializedBytes(), key: own).utf8)
        }
        bigAttachment = randomBytes(10_000_000)
        let tampered = try Sidecar.encrypt(Array("tampered content ".utf8) + [UInt8](repeating: 7, count: 5000), key: own)
        var flipped = tampered
        flipped[400] ^= 0x01
        let deep = (1...20).map { "d\($0)" }.joined(separator: "/")
        let bigRef = MedicalDocument(value: "big-scan.pdf.enc", metadata: ["type": "attachment_ref", "format": "pdf",
                                                                          "encoding": "base64", "originalSizeBytes": 10_000_000,
                                                                          "created": "2025-01-02T03:04:05.000Z"])
        stored = [
            "patient-info.json": try document("patient-info", "# Test Patient\n"),
            "visits/.meta.json": Array(try NIP44.encrypt(Array("{\"displayName\":\"Visits\"}".utf8), key: own).utf8),
            "visits/2025-01-01 odd name #1.json": try document("visit", "# Spaces and hash\n"),
            "visits/-leading-dash.json": try document("visit", "# Dash\n"),
            "visits/ünïcødé-名前.json": try document("visit", "# Unicode 名前\n"),
            "labs/other-key.json": Array(try NIP44.encrypt(MedicalDocument(type: "lab", value: "secret").serializedBytes(), key: other).utf8),
            "labs/corrupt.json": Array("AgAAAAAA not a payload at all".utf8),
            "labs/broken.json": Array(try NIP44.encrypt(Array("{\"value\": \"unterminated".utf8), key: own).utf8),
            "labs/not-a-doc.json": Array(try NIP44.encrypt(Array("{\"foo\":1}".utf8), key: own).utf8),
            "imaging/big-scan.json": Array(try NIP44.encrypt(bigRef.serializedBytes(), key: own).utf8),
            "imaging/big-scan.pdf.enc": try Sidecar.encrypt(bigAttachment, key: own),
            "imaging/orphan.png.enc": try Sidecar.encrypt(Array("orphan bytes".utf8), key: own),
            "imaging/bad.jpg.enc": [0x02, 0x00, 0x10, 1, 2, 3],
            "imaging/tampered.jpg.enc": flipped,
            "\(deep)/2025-05-05-deep-note.json": try document("note", "# Deep\n"),
            "notes.txt": Array("a plain file\n".utf8),
        ]
        try binder.commitRepository(stored)
        try binder.mount()
    }

    override func tearDown() {
        binder?.unmount()
        binder = nil
    }

    func testEverythingIsShownOrReportedNeverHidden() throws {
        let files = Set(try binder.files())
        let deep = (1...20).map { "d\($0)" }.joined(separator: "/")
        let expected: Set<String> = [
            "patient-info.md", "notes.txt",
            "visits/2025-01-01 odd name #1.md", "visits/-leading-dash.md", "visits/ünïcødé-名前.md",
            "labs/other-key.json", "labs/corrupt.json", "labs/broken.json", "labs/not-a-doc.json",
            "imaging/big-scan.pdf", "imaging/orphan.png", "imaging/bad.jpg.enc", "imaging/tampered.jpg",
            "\(deep)/2025-05-05-deep-note.md",
        ]
        XCTAssertEqual(files, expected)
        // Undecryptable and unparsable files are shown as stored, read-only.
        for raw in ["labs/other-key.json", "labs/corrupt.json", "labs/broken.json", "labs/not-a-doc.json", "imaging/bad.jpg.enc", "notes.txt"] {
            XCTAssertEqual(try binder.read(raw), stored[raw], raw)
            let mode = try FileManager.default.attributesOfItem(atPath: binder.path(raw))[.posixPermissions] as? Int
            XCTAssertEqual(mode, 0o400, raw)
        }
        XCTAssertEqual(String(decoding: try binder.read("visits/-leading-dash.md"), as: UTF8.self).hasSuffix("# Dash\n"), true)
        XCTAssertEqual(try shell("cat -- '-leading-dash.md' | tail -n 1", in: binder.path("visits")).stdout, "# Dash\n")
        XCTAssertEqual(try shell("grep -rl '名前' . ", in: binder.mountpoint).stdout, "./visits/ünïcødé-名前.md\n")
    }

    func testTenMegabyteAttachmentStreamsInAnyBlockSize() throws {
        let path = binder.path("imaging/big-scan.pdf")
        XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int, 10_000_000)
        let expected = sha256Hex(bigAttachment)
        for blockSize in ["512", "4096", "131072", "3M"] {
            let run = try shell("dd if='\(path)' bs=\(blockSize) status=none | sha256sum | cut -c1-64")
            XCTAssertEqual(run.stdout.trimmingCharacters(in: .newlines), expected, "bs=\(blockSize)")
        }
        XCTAssertEqual(try shell("tail -c 100 '\(path)' | od -An -tx1 | tr -d ' \\n'").stdout,
                       Hex.encode(bigAttachment.suffix(100)))
    }

    func testTamperedSidecarFailsWithEIOAndTheMountLivesOn() throws {
        let read = try shell("cat imaging/tampered.jpg > /dev/null", in: binder.mountpoint)
        XCTAssertNotEqual(read.status, 0)
        XCTAssertTrue(read.stderr.contains("Input/output error"), read.stderr)
        XCTAssertEqual(try binder.read("imaging/orphan.png"), Array("orphan bytes".utf8))
        let log = try String(contentsOfFile: binder.sandbox.home.appendingPathComponent("logs/sample-binder.log").path, encoding: .utf8)
        XCTAssertTrue(log.contains("imaging/tampered.jpg.enc"), log)
        XCTAssertTrue(log.contains("authentication"), log)
        // Logs carry paths and reasons, never plaintext.
        XCTAssertFalse(log.contains("Test Patient"))
        XCTAssertFalse(log.contains("orphan bytes"))
    }

    func testPlaintextCacheStaysWithinItsBound() throws {
        binder.unmount()
        try binder.mount(["--cache-size", "2M"])
        // Everything read: the 10 MB scan into an empty cache, then the rest, then the scan again
        // into the full cache (each read of it decrypts 10 MB: twice is enough, not four times).
        XCTAssertEqual(try shell("cat imaging/big-scan.pdf > /dev/null && grep -r -c --exclude=big-scan.pdf Unicode . >/dev/null; "
                                 + "tar cf - --exclude=./imaging/big-scan.pdf . | wc -c", in: binder.mountpoint).status, 0)
        // Content larger than the cache is still served whole while open.
        XCTAssertEqual(sha256Hex(try binder.read("imaging/big-scan.pdf")), sha256Hex(bigAttachment))
        XCTAssertLessThanOrEqual(try binder.statusValue("cached_bytes"), 2 << 20)
        XCTAssertGreaterThan(try binder.statusValue("cached_entries"), 0)
        // The cache counts what its entries take of secret memory; all of it is in use, and
        // mapped. Only pages in use are locked: not whole 8 MiB regions, nor the 10 MB scan
        // decrypted once and dropped (the rest: keys, a slab kept per size class).
        let cached = try binder.statusValue("cached_bytes"), used = try binder.statusValue("secret_memory_used")
        XCTAssertLessThanOrEqual(cached, used)
        XCTAssertLessThanOrEqual(used, try binder.statusValue("secret_memory_mapped"))
        let pid = try XCTUnwrap(daemonPID(binder.mountpoint))
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let lockedKiB = try XCTUnwrap(status.split(separator: "\n").first { $0.hasPrefix("VmLck:") }
            .flatMap { Int($0.split(separator: " ", omittingEmptySubsequences: true)[1]) })
        XCTAssertLessThanOrEqual(lockedKiB, 6 << 10, "\(lockedKiB) KiB locked for a 2 MiB cache")
    }

    func testVerifyNamesEveryProblem() throws {
        let run = try binder.sandbox.run(["verify", binder.repository, "--passphrase-file", binder.passphraseFile])
        XCTAssertNotEqual(run.status, 0)
        for problem in ["labs/other-key.json", "labs/corrupt.json", "labs/broken.json", "labs/not-a-doc.json",
                        "imaging/bad.jpg.enc", "imaging/tampered.jpg.enc"] {
            XCTAssertTrue(run.stdout.contains("problem: \(problem):"), "\(problem) not reported:\n\(run.stdout)")
        }
        XCTAssertTrue(run.stdout.contains("note: notes.txt"), run.stdout)
        XCTAssertFalse(run.stdout.contains("problem: visits/"), run.stdout)
        XCTAssertTrue(run.stderr.contains("6 problems"), run.stderr)
    }
}

final class SpecialBinderTests: XCTestCase {
    func testEmptyRepositoryMountsEmptyWhenForced() throws {
        let binder = try MountedBinder(cloneFixture: false)
        defer { binder.unmount() }
        XCTAssertEqual(try shell("git init -q -b main '\(binder.repository)'").status, 0)
        assertFails(try binder.sandbox.run(["mount", binder.repository, binder.mountpoint, "--passphrase-file", binder.passphraseFile]),
                    mentioning: "is not a binder")
        try binder.mount(["--force"])
        XCTAssertEqual(try binder.files(), [])
        XCTAssertTrue(String(decoding: try binder.read(".binder/status"), as: UTF8.self).contains("commit: none"))
        let verify = try binder.sandbox.run(["verify", binder.repository, "--passphrase-file", binder.passphraseFile])
        XCTAssertNotEqual(verify.status, 0)
        XCTAssertTrue(verify.stdout.contains("no commits"), verify.stdout)
    }

    func testLegacyFlatPatientInfo() throws {
        let binder = try MountedBinder(cloneFixture: false)
        defer { binder.unmount() }
        let key = try NIP44.ConversationKey(selfOf: try SecretKey(nsec: Fixtures.nsec))
        let flat = "{\"name\":\"Ada Example\",\"dob\":\"1970-01-01\",\"emergencyContact\":{\"name\":\"Bob\",\"phone\":\"0123\"},\"created\":\"2019-01-01T00:00:00Z\"}"
        try FileManager.default.createDirectory(atPath: binder.repository, withIntermediateDirectories: true)
        try Data(try NIP44.encrypt(Array(flat.utf8), key: key).utf8).write(to: URL(fileURLWithPath: binder.repository + "/patient-info.json"))
        XCTAssertEqual(try shell("git init -q -b main . && git add -A && git -c user.name=t -c user.email=t@t commit -qm init", in: binder.repository).status, 0)
        try binder.mount()
        let parsed = try FrontMatter.parse(try binder.read("patient-info.md"))
        XCTAssertEqual(parsed.metadata?["name"], "Ada Example")
        XCTAssertEqual(parsed.metadata?["emergencyContact"]?.objectValue?["phone"], "0123")
        XCTAssertEqual(parsed.value, "")
        // mtime comes from the flat `created`.
        XCTAssertEqual(try shell("stat -c %Y patient-info.md", in: binder.mountpoint).stdout, "1546300800\n")
    }
}
