@testable import BinderCrypto
import BinderFormat
import Foundation
import XCTest

/// A folder whose listing takes the kernel many readdir chunks (the mount answers each from
/// the listing taken when the folder was opened, by offset): every name comes exactly once,
/// with its attributes, and a folder read while a file is added to it still lists what it held
/// when opened, no name twice and none lost.
final class LargeFolderMountTests: XCTestCase {
    static let records = 1_200

    /// `visits/` with `records` documents under long names (about 25 to a 4 KB chunk).
    private func makeBinder() throws -> (binder: MountedBinder, names: [String]) {
        let binder = try MountedBinder(cloneFixture: false)
        let key = try NIP44.ConversationKey(selfOf: try SecretKey(nsec: Fixtures.nsec))
        var files: [String: [UInt8]] = [
            "patient-info.json": Array(try NIP44.encrypt(MedicalDocument(type: "patient-info", value: "# Test Patient\n").serializedBytes(),
                                                         key: key).utf8),
        ]
        var names: [String] = []
        for i in 0..<Self.records {
            let stem = String(format: "2026-01-%02d-visit-%04d-", i % 28 + 1, i) + String(repeating: "x", count: 40)
            let document = MedicalDocument(type: "visit", value: "# Visit \(i)\n\nSeen.\n", now: "2026-01-02T03:04:05.000Z")
            files["visits/\(stem).json"] = Array(try NIP44.encrypt(document.serializedBytes(), key: key).utf8)
            names.append(stem + ".md")
        }
        try binder.commitRepository(files)
        try binder.mount()
        return (binder, names.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
    }

    func testEveryNameOnceAcrossManyChunks() throws {
        let (binder, names) = try makeBinder()
        defer { binder.unmount() }
        let plain = try shell("ls -f -a visits | LC_ALL=C sort", in: binder.mountpoint)
        XCTAssertEqual(plain.status, 0, plain.stderr)
        XCTAssertEqual(plain.stdout.split(separator: "\n").map(String.init), [".", ".."] + names)

        // `ls -l` (readdirplus): each entry with its own size, no getattr needed to say it.
        let long = try shell("LC_ALL=C ls -l visits", in: binder.mountpoint)
        XCTAssertEqual(long.status, 0, long.stderr)
        let rows = long.stdout.split(separator: "\n").dropFirst()  // "total N"
        XCTAssertEqual(rows.count, Self.records)
        for row in rows.prefix(50) {
            let fields = row.split(separator: " ", omittingEmptySubsequences: true)
            XCTAssertEqual(fields.first?.first, "-", String(row))
            XCTAssertGreaterThan(Int(fields[4]) ?? 0, 20, String(row))
        }
        // Sizes agree with what a read gives.
        let sizes = try shell("for f in visits/*-0007-* visits/*-1199-*; do printf '%s %s\\n' \"$(stat -c %s \"$f\")\" \"$(wc -c < \"$f\")\"; done",
                              in: binder.mountpoint)
        for line in sizes.stdout.split(separator: "\n") {
            let pair = line.split(separator: " ")
            XCTAssertEqual(pair.first, pair.last, String(line))
        }
        XCTAssertEqual(sizes.stdout.split(separator: "\n").count, 2)
    }

    func testAFolderReadWhileAFileIsAddedListsWhatItHeldWhenOpened() throws {
        let (binder, names) = try makeBinder()
        defer { binder.unmount() }
        // Half the entries through one handle, a new record saved, then the rest of the handle.
        let script = """
        import os, sys
        folder = sys.argv[1]
        seen = []
        with os.scandir(folder) as entries:
            for n, entry in enumerate(entries):
                seen.append(entry.name)
                if n == 600:
                    with open(os.path.join(folder, "2026-02-01-added.md"), "w") as f:
                        f.write("# Added\\n\\nWhile the folder was read.\\n")
        print("\\n".join(seen))
        """
        let run = try shell("python3 -c '\(script.replacingOccurrences(of: "'", with: "'\\''"))' visits", in: binder.mountpoint)
        XCTAssertEqual(run.status, 0, run.stderr)
        let seen = run.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(seen.count, Set(seen).count, "a name came twice")
        XCTAssertTrue(Set(names).isSubset(of: Set(seen)), "a name was lost")
        XCTAssertEqual(Set(seen).subtracting(names).subtracting(["2026-02-01-added.md"]), [], "a name that is not there")
        // The next opening lists the new record too.
        let after = try shell("ls -f visits | grep -c '\\.md$'", in: binder.mountpoint)
        XCTAssertEqual(after.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "\(Self.records + 1)")
    }
}
