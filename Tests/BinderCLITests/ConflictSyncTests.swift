import BinderCrypto
import Foundation
import XCTest

/// Two devices (two clones, each edited through its own mount) meet through a real
/// `binder serve`: edits that do not overlap merge into one record, overlapping ones leave a
/// visible conflict copy that `binder status` and `.binder/status` list until it is deleted,
/// and an edit beats a deletion.
final class ConflictSyncTests: XCTestCase {
    var server: TestServer!
    var serverRoot: BinderSandbox!
    var laptop: Device!
    var phone: Device!

    override func setUpWithError() throws {
        serverRoot = try BinderSandbox()
        server = try TestServer(root: serverRoot.root)
        let nsec = String(decoding: try SecretKey.generate().nsec().copyBytes(), as: UTF8.self)
        laptop = try Device(nsec: nsec)
        phone = try Device(nsec: nsec)
        try laptop.binder(["login", "--server", server.url])
        try laptop.binder(["create", "health", "--patient-name", "Alex Doe"])
        try laptop.binder(["sync", "health", "--repo-id", "health"])
        try phone.binder(["login", "--server", server.url])
        try phone.binder(["clone", "health"])
    }

    override func tearDown() {
        laptop?.unmount()
        phone?.unmount()
        server?.stop()
        laptop = nil; phone = nil; server = nil; serverRoot = nil
    }

    static let body = "# Visit\n\nline one\nline two\nline three\nline four\nline five\n"

    /// Edits through a mount with sync off (the device is offline), then unmounts.
    func offline(_ device: Device, _ edit: (Device) throws -> Void) throws {
        try device.mount("health", ["--no-sync"])
        try edit(device)
        device.unmount()
    }

    func sh(_ device: Device, _ command: String) throws {
        let run = try shell(command, in: device.mountpoint)
        XCTAssertEqual(run.status, 0, "\(command): \(run.stderr)")
    }

    func testNonOverlappingEditsMergeOverlappingOnesLeaveAVisibleCopy() throws {
        try offline(laptop) { device in
            for name in ["merged", "overlap", "kept"] { try device.write("visits/\(name).md", Self.body) }
        }
        try laptop.binder(["sync", "health"])
        try phone.binder(["sync", "health"])

        // Both offline. The laptop first, the phone a second later (its `updated` is later).
        try offline(laptop) { device in
            try sh(device, "sed -i 's/^line one$/line ONE/; s/^type: visit$/type: visit\\nprovider: Dr. A/' visits/merged.md")
            try sh(device, "sed -i 's/^line two$/line two, says the laptop/' visits/overlap.md")
            try sh(device, "printf 'still needed\\n' >> visits/kept.md")
        }
        sleep(1)
        try offline(phone) { device in
            try sh(device, "sed -i 's/^line five$/line FIVE/; s/^type: visit$/type: visit\\nnpi: \"123\"/' visits/merged.md")
            try sh(device, "sed -i 's/^line two$/line two, says the phone/' visits/overlap.md")
            try sh(device, "rm visits/kept.md")
        }
        let laptopEdit = try laptop.tip("health")
        try laptop.binder(["sync", "health"])
        try phone.binder(["sync", "health"])   // the merge happens here
        try laptop.binder(["sync", "health"])
        XCTAssertEqual(try laptop.tip("health"), try phone.tip("health"))

        // One record with both edits: body lines and metadata keys from each side.
        let merged = Self.body.replacingOccurrences(of: "line one", with: "line ONE").replacingOccurrences(of: "line five", with: "line FIVE")
        XCTAssertEqual(try laptop.storedValue("health", "visits/merged.json"), merged)
        try laptop.mount("health", ["--no-sync"])
        let front = try XCTUnwrap(laptop.read("visits/merged.md"))
        XCTAssertTrue(front.contains("\nprovider: Dr. A\n") && front.contains("\nnpi: \"123\"\n"), front)

        // The overlap: the later edit in place, the other a record of its own beside it.
        XCTAssertEqual(try laptop.storedValue("health", "visits/overlap.json"),
                       Self.body.replacingOccurrences(of: "line two", with: "line two, says the phone"))
        let listing = try shell("ls visits", in: laptop.mountpoint).stdout.split(separator: "\n").map(String.init)
        let copy = try XCTUnwrap(listing.first { $0.hasPrefix("overlap (conflict ") }, "\(listing)")
        XCTAssertNotNil(copy.range(of: #"^overlap \(conflict \d{4}-\d{2}-\d{2} \d{4}\)\.md$"#, options: .regularExpression), copy)
        let copyText = try XCTUnwrap(laptop.read("visits/" + copy))
        XCTAssertTrue(copyText.hasSuffix(Self.body.replacingOccurrences(of: "line two", with: "line two, says the laptop")), copyText)
        XCTAssertTrue(copyText.contains("\nconflict_of: visits/overlap.json\n"), copyText)
        // The laptop's version is in history too.
        XCTAssertEqual(try laptop.storedValue("health", "visits/overlap.json", at: laptopEdit),
                       Self.body.replacingOccurrences(of: "line two", with: "line two, says the laptop"))

        // Edited on one side, deleted on the other: the edit is kept.
        XCTAssertEqual(try laptop.storedValue("health", "visits/kept.json"), Self.body + "still needed\n")

        // Open conflicts are listed until the copy is deleted.
        XCTAssertEqual(laptop.status()["open_conflicts"], "1")
        XCTAssertEqual(laptop.status()["conflict"], "visits/" + copy)
        let status = try laptop.binder(["status", "health"]).stdout
        XCTAssertTrue(status.contains("open conflicts: 1"), status)
        XCTAssertTrue(status.contains("  visits/" + copy), status)
        XCTAssertFalse(status.contains("says the"), "status shows no content")
        try sh(laptop, "rm 'visits/\(copy)'")
        XCTAssertEqual(laptop.status()["open_conflicts"], "0")
        XCTAssertNil(laptop.status()["conflict"])
        laptop.unmount()
        XCTAssertTrue(try laptop.binder(["status", "health"]).stdout.contains("open conflicts: 0"))
    }

    /// An attachment both devices replaced (different sizes, so its record conflicts too): the
    /// later stays in place with its own sidecar, the other is a record of its own,
    /// `scan (conflict …).pdf`, whose `attachment_ref` names its own sidecar (as the apps read
    /// it): each shown once, with its own bytes and size, listed once as an open conflict, and
    /// deleting the copy leaves the original whole.
    func testAnAttachmentBothReplacedIsShownOnceAndItsCopyOnce() throws {
        try offline(laptop) { device in
            try sh(device, "mkdir -p visits && printf 'base pdf bytes' > visits/scan.pdf")
        }
        try laptop.binder(["sync", "health"])
        try phone.binder(["sync", "health"])
        let laptopBytes = "the laptop version of the scan", phoneBytes = "phone version of it!"
        try offline(laptop) { device in try sh(device, "printf '\(laptopBytes)' > visits/scan.pdf") }
        sleep(1)
        try offline(phone) { device in try sh(device, "printf '\(phoneBytes)' > visits/scan.pdf") }
        try laptop.binder(["sync", "health"])
        try phone.binder(["sync", "health"])   // the merge happens here
        try laptop.binder(["sync", "health"])
        XCTAssertEqual(try laptop.tip("health"), try phone.tip("health"))

        // In git: the original and its sidecar, the copy and its own sidecar, nothing else.
        let stored = try laptop.git("health", "ls-tree -r --name-only main visits").split(separator: "\n").map(String.init)
            .filter { !$0.hasSuffix("/.meta.json") }
        let copyRecord = try XCTUnwrap(stored.first { $0.hasPrefix("visits/scan (conflict ") && $0.hasSuffix(".json") }, "\(stored)")
        let copyStem = String(copyRecord.dropLast(".json".count))
        XCTAssertEqual(stored.sorted(), [copyRecord, copyStem + ".pdf.enc", "visits/scan.json", "visits/scan.pdf.enc"].sorted())
        // The Limbo app's reader rule: an attachment_ref's value names a sidecar in its folder.
        XCTAssertEqual(try laptop.storedValue("health", "visits/scan.json"), "scan.pdf.enc")
        XCTAssertEqual(try laptop.storedValue("health", copyRecord), String(copyStem.dropFirst("visits/".count)) + ".pdf.enc")

        try laptop.mount("health", ["--no-sync"])
        let copy = String(copyStem.dropFirst("visits/".count)) + ".pdf"
        let listing = try shell("ls visits", in: laptop.mountpoint).stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(listing.sorted(), [copy, "scan.pdf"].sorted(), "each attachment once")
        XCTAssertEqual(laptop.read("visits/scan.pdf"), phoneBytes, "the later replacement stays in place")
        XCTAssertEqual(laptop.read("visits/" + copy), laptopBytes, "the other is the copy")
        let size = { (name: String) in (try? FileManager.default.attributesOfItem(atPath: self.laptop.path("visits/" + name)))?[.size] as? Int }
        XCTAssertEqual(size("scan.pdf"), phoneBytes.utf8.count)
        XCTAssertEqual(size(copy), laptopBytes.utf8.count)
        XCTAssertEqual(laptop.status()["open_conflicts"], "1")
        XCTAssertEqual(laptop.status()["conflict"], "visits/" + copy)
        let status = try laptop.binder(["status", "health"]).stdout
        XCTAssertTrue(status.contains("open conflicts: 1 ") && status.contains("\n  visits/\(copy)\n"), status)
        XCTAssertFalse(status.contains("(conflict") && status.contains(".md"), "no record copy listed besides: \(status)")

        // Deleting the copy resolves it and leaves the original as it was.
        try sh(laptop, "rm 'visits/\(copy)'")
        XCTAssertEqual(try shell("ls visits", in: laptop.mountpoint).stdout, "scan.pdf\n")
        XCTAssertEqual(laptop.read("visits/scan.pdf"), phoneBytes)
        XCTAssertEqual(laptop.status()["open_conflicts"], "0")
        laptop.unmount()
        XCTAssertEqual(try laptop.git("health", "ls-tree -r --name-only main visits").split(separator: "\n").filter { !$0.hasSuffix("/.meta.json") },
                       ["visits/scan.json", "visits/scan.pdf.enc"])
    }
}
