import Foundation
import XCTest

/// A read-only mount (`--read-only`, `-o ro`) answers OPEN and FLUSH with ENOSYS: the kernel
/// opens files itself and keeps their pages, and binder is read by path. What that changes in
/// the kernel's caching must not show: every byte as a read-write mount shows it, a file a sync
/// changed is read anew, and `.binder/status` follows the mount's state.
final class ReadOnlyMountTests: XCTestCase {
    /// The whole fixture read through a read-only mount is what a read-write mount shows, byte
    /// for byte, twice (the second time from the kernel's pages); `.binder/status` changes with
    /// what was read; writing is EROFS.
    func testEveryByteAsReadWriteShowsItAndStatusStaysFresh() throws {
        let binder = try MountedBinder()
        try binder.mount(["--no-sync"])
        let readWrite = binder.sandbox.root.appendingPathComponent("rw-copy").path
        XCTAssertEqual(try shell("cp -a '\(binder.mountpoint)/.' '\(readWrite)'").status, 0)
        binder.unmount()
        try binder.mount(["--read-only", "--no-sync"])
        defer { binder.unmount() }
        let before = try statusValue(binder, "cached_entries")
        for pass in 1...2 {
            let diff = try shell("diff -r '\(readWrite)' '\(binder.mountpoint)'")
            XCTAssertEqual(diff.status, 0, "pass \(pass): \(diff.stdout)\(diff.stderr)")
        }
        let large = try shell("find . -type f -size +200k | head -1", in: binder.mountpoint).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        if !large.isEmpty {
            // Read at offsets, as a program that seeks does.
            let sums = try shell("tail -c 70000 '\(large)' | sha256sum; tail -c 70000 '\(readWrite)/\(large)' | sha256sum", in: binder.mountpoint)
            let lines = sums.stdout.split(separator: "\n")
            XCTAssertEqual(lines.count, 2)
            XCTAssertEqual(lines.first, lines.last)
        }
        // The status file was read before the records were: read again, it shows the cache
        // they filled, not the kernel's copy of its first reading.
        XCTAssertGreaterThan(try statusValue(binder, "cached_entries"), before)
        for _ in 1...3 {
            let text = try statusText(binder)
            XCTAssertTrue(text.hasSuffix("sync: off (--no-sync)\n"), "read whole: \(text)")
        }
        let write = try shell("echo x >> patient-info.md", in: binder.mountpoint)
        XCTAssertNotEqual(write.status, 0)
        XCTAssertTrue(write.stderr.contains("Read-only file system"), write.stderr)
    }

    private func statusText(_ binder: MountedBinder) throws -> String {
        String(decoding: try binder.read(".binder/status"), as: UTF8.self)
    }

    private func statusValue(_ binder: MountedBinder, _ key: String) throws -> Int {
        let line = try XCTUnwrap(try statusText(binder).split(separator: "\n").first { $0.hasPrefix(key + ": ") })
        return try XCTUnwrap(Int(line.dropFirst(key.count + 2)))
    }
}

/// A read-only mount that syncs: what the kernel keeps of a file a sync changed is dropped.
final class ReadOnlySyncTests: ServerTestCase {
    /// A record the kernel holds pages of, changed by a sync under a read-only mount, is read
    /// anew: the new bytes, whole.
    func testAFileChangedBySyncIsReadAnew() throws {
        let laptop = try Device(nsec: nsec), phone = try Device(nsec: nsec)
        defer { laptop.unmount(); phone.unmount() }
        try laptop.binder(["login", "--server", server.url])
        try laptop.binder(["create", "health", "--patient-name", "-"], stdin: "Alex Doe\n")
        try laptop.mount("health", ["--no-sync"])
        try laptop.write("labs/2026-06-01-panel.md", "# Panel\n\nFirst version.\n")
        laptop.unmount()
        try laptop.binder(["sync", "health", "--repo-id", "health"])
        try phone.binder(["login", "--server", server.url])
        try phone.binder(["clone", "health"])

        try laptop.mount("health", ["--read-only", "--sync-interval", "3600"])
        eventually(10, "the mount's first sync") { laptop.status()["sync"] == "synced" }
        for _ in 1...2 { XCTAssertEqual(laptop.read("labs/2026-06-01-panel.md")?.hasSuffix("First version.\n"), true) }
        try phone.mount("health", ["--no-sync"])
        try phone.write("labs/2026-06-01-panel.md", "# Panel\n\nSecond version, longer than the first one was.\n")
        phone.unmount()
        try phone.binder(["sync", "health"])
        let synced = try laptop.binder(["sync", "health"])
        XCTAssertTrue(synced.stdout.contains("(by its mount at"), synced.stdout)
        eventually(5, "the synced record read anew") {
            laptop.read("labs/2026-06-01-panel.md")?.hasSuffix("Second version, longer than the first one was.\n") == true
        }
    }
}
