import BinderCrypto
import Foundation
import XCTest

/// `binder sync` on a mounted binder never races the mount: the mount, the binder's one writer,
/// syncs when asked through its control channel (the command needs no key for that); a mount
/// that cannot is named in the refusal.
final class SyncThroughMountTests: XCTestCase {
    func testSyncWhileMountedGoesThroughTheMount() throws {
        let serverRoot = try BinderSandbox()
        let server = try TestServer(root: serverRoot.root)
        defer { server.stop() }
        let nsec = String(decoding: try SecretKey.generate().nsec().copyBytes(), as: UTF8.self)
        let laptop = try Device(nsec: nsec), phone = try Device(nsec: nsec)
        defer { laptop.unmount(); phone.unmount() }
        try laptop.binder(["login", "--server", server.url])
        try laptop.binder(["create", "health", "--patient-name", "Alex Doe"])
        try laptop.binder(["sync", "health", "--repo-id", "health"])
        try phone.binder(["login", "--server", server.url])
        try phone.binder(["clone", "health"])

        // The laptop's mount polls rarely: only the command can bring the phone's record now.
        try laptop.mount("health", ["--sync-interval", "3600"])
        let pid = try XCTUnwrap(daemonPID(laptop.mountpoint))
        eventually(10, "the mount's first sync") { laptop.status()["sync"] == "synced" }
        try phone.mount("health", ["--no-sync"])
        try phone.write("labs/2026-06-01-from-phone.md", "# From the phone\n")
        phone.unmount()
        try phone.binder(["sync", "health"])

        // The kernel is told the record's history is missing (it keeps that for 5 s)...
        let history = laptop.mountpoint + "/.binder/history/labs/2026-06-01-from-phone.md"
        XCTAssertFalse(FileManager.default.fileExists(atPath: history))
        let synced = try laptop.binder(["sync", "health"])
        XCTAssertTrue(synced.stdout.hasPrefix("Synced health: received"), synced.stdout)
        // ...and `.binder` follows the commit sync brought for `stat` too, within moments.
        eventually(2, "the synced record's history in .binder") { FileManager.default.fileExists(atPath: history) }
        XCTAssertTrue(synced.stdout.contains("(by its mount at \(laptop.mountpoint))"), synced.stdout)
        XCTAssertEqual(daemonPID(laptop.mountpoint), pid, "the same mount goes on serving")
        XCTAssertEqual(laptop.read("labs/2026-06-01-from-phone.md")?.hasSuffix("# From the phone\n"), true,
                       "the mount shows what its sync received")
        // A save through the mount, pushed by the command through the mount.
        try laptop.write("visits/2026-06-02-laptop.md", "# Laptop\n")
        let pushed = try laptop.binder(["sync", "health"])
        XCTAssertTrue(pushed.stdout.contains("(by its mount at"), pushed.stdout)
        XCTAssertEqual(try server.git("health", "rev-parse main").trimmingCharacters(in: .whitespacesAndNewlines), try laptop.tip("health"))

        // A mount with sync off cannot do it: the refusal names it.
        laptop.unmount()
        try laptop.mount("health", ["--no-sync"])
        let offPID = try XCTUnwrap(daemonPID(laptop.mountpoint))
        // The mount holds the key: with the key agent locked and no passphrase given, the
        // command asks for none (it did, to read a key it does not use) and says why not.
        try laptop.binder(["lock", "--keep-mounts"])
        let refused = try laptop.binder(["sync", "health"], expectFailure: true)
        assertFails(refused, mentioning: "cannot sync health while it is mounted at \(laptop.mountpoint) (pid \(offPID)): sync is off for this mount (--no-sync)")
    }
}
