import BinderCrypto
import Foundation
import XCTest

/// The server side of `binder key rotate` against a real `binder serve` (behind the fault proxy,
/// which cuts the network for one kind of request on demand): the next `binder sync` pushes the
/// rotated binder under a new id with the new key's account, then deletes the old copy with the
/// old key's; a cut anywhere is continued by the next sync; another device still on the old key
/// is told the binder moved (exit code 3) and keeps its commits.
final class RotationSyncTests: ServerTestCase {
    var laptop: Device!
    var phone: Device!
    var proxy: FaultProxy!
    var newKey: SecretKey!
    var newPassphrase: String!
    /// While this file exists, the proxy resets every request of the method it names.
    var cutFile: String { serverRoot.root.appendingPathComponent("cut-method").path }

    override func setUpWithError() throws {
        try super.setUpWithError()
        laptop = try Device(nsec: nsec)
        phone = try Device(nsec: nsec)
        proxy = try FaultProxy(upstream: server, ["--reset-method-file", cutFile])
        newKey = try SecretKey.generate()
        newPassphrase = try laptop.sandbox.file("new-passphrase", "the new passphrase\n")
    }

    override func tearDown() {
        laptop?.unmount()
        phone?.unmount()
        proxy?.stop()
        laptop = nil; phone = nil; proxy = nil
        super.tearDown()
    }

    /// `health` made on the laptop, pushed as `health`, cloned on the phone; then the laptop's key rotated.
    func createCloneAndRotate() throws -> String {
        try laptop.binder(["login", "--server", proxy.url])
        try laptop.binder(["create", "health", "--patient-name", "Alex Doe"])
        try laptop.binder(["sync", "health", "--repo-id", "health"])
        try phone.binder(["login", "--server", proxy.url])
        try phone.binder(["clone", "health"])
        let oldTip = try server.git("health", "rev-parse main").trimmingCharacters(in: .whitespacesAndNewlines)
        let rotated = try laptop.binder(["key", "rotate", "--import", "--passphrase-file", laptop.passphraseFile,
                                         "--new-passphrase-file", newPassphrase, "--log-n", "8"],
                                        stdin: String(decoding: try newKey.nsec().copyBytes(), as: UTF8.self) + "\n")
        XCTAssertTrue(rotated.stdout.contains("Not pushed yet: 'health'"), rotated.stdout)
        return oldTip
    }

    func sync(_ device: Device, _ passphrase: String, expectFailure: Bool = false) throws -> BinderRun {
        try device.binder(["sync", "health", "--passphrase-file", passphrase, "--deadline", "2"], expectFailure: expectFailure)
    }

    var oldCopyExists: Bool { FileManager.default.fileExists(atPath: server.repos + "/health.git") }

    func testSyncMovesARotatedBinderToANewIdThenDeletesTheOldCopyAcrossCuts() throws {
        let oldTip = try createCloneAndRotate()

        // The network down before the push: nothing moves, the new id is chosen and kept.
        server.stop()
        let down = try sync(laptop, newPassphrase, expectFailure: true)
        XCTAssertNotEqual(down.status, 0, down.stdout)
        let newId = try laptop.git("health", "config binder.newrepoid")
        XCTAssertTrue(newId.hasPrefix("binder-"), newId)
        XCTAssertEqual(try laptop.git("health", "config binder.repoid"), "health")
        try server.start()
        XCTAssertEqual(try server.git("health", "rev-parse main").trimmingCharacters(in: .whitespacesAndNewlines), oldTip)

        // The network down for the deletion, after the push: moved, the old copy still there.
        XCTAssertTrue(FileManager.default.createFile(atPath: cutFile, contents: Data("DELETE".utf8)))
        let moved = try sync(laptop, newPassphrase)
        XCTAssertTrue(moved.stdout.contains("Moved health to \(newId) on \(proxy.url), under your new key"), moved.stdout)
        XCTAssertTrue(moved.stdout.contains("the next 'binder sync health' deletes it"), moved.stdout)
        XCTAssertTrue(oldCopyExists)
        XCTAssertEqual(try String(contentsOfFile: server.repos + "/\(newId).git/binder-owner", encoding: .utf8), newKey.publicKey.hex + "\n")
        let newTip = try server.git(newId, "rev-parse main").trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(newTip, try laptop.tip("health"))
        XCTAssertNotEqual(newTip, oldTip, "the rotated history is new objects")
        XCTAssertEqual(try server.git("health", "rev-parse main").trimmingCharacters(in: .whitespacesAndNewlines), oldTip,
                       "nothing rotated went to the old id")
        XCTAssertEqual(try laptop.git("health", "config binder.repoid"), newId)
        XCTAssertEqual(try laptop.git("health", "config --get binder.rotatedfrom"), "")
        XCTAssertTrue(try laptop.binder(["status", "health"]).stdout.contains("old copy: health"))

        // Mended: the next sync deletes the old copy with the old key's login, and syncs as usual.
        try FileManager.default.removeItem(atPath: cutFile)
        let again = try sync(laptop, newPassphrase)
        XCTAssertTrue(again.stdout.contains("Deleted the old copy health (old key) from \(proxy.url)"), again.stdout)
        XCTAssertFalse(oldCopyExists)
        XCTAssertEqual(try laptop.git("health", "config --get binder.oldrepoid"), "")
        let quiet = try sync(laptop, newPassphrase)
        XCTAssertFalse(quiet.stdout.contains("old copy"), quiet.stdout)
        XCTAssertEqual(try server.git(newId, "rev-parse main").trimmingCharacters(in: .whitespacesAndNewlines), newTip)
    }

    /// The old key's login no longer accepted (the server's secret rotated, as when it expires):
    /// the move is done, the deletion waits, said so; the retired key's old passphrase deletes it.
    func testAnExpiredOldLoginDeletesWithTheRetiredKey() throws {
        _ = try createCloneAndRotate()
        server.stop()
        try server.start(["--rotate-secret"])
        let moved = try sync(laptop, newPassphrase)
        XCTAssertTrue(moved.stdout.contains("Moved health to"), moved.stdout)
        XCTAssertTrue(moved.stdout.contains("The old copy health (old key) is still on \(proxy.url): the old key's login expired and its passphrase was not given"),
                      moved.stdout)
        XCTAssertTrue(moved.stdout.contains("--retired-passphrase-file"), moved.stdout)
        XCTAssertTrue(oldCopyExists)
        server.stop()
        try server.start([])
        let wrong = try laptop.binder(["sync", "health", "--passphrase-file", newPassphrase,
                                       "--retired-passphrase-file", try laptop.sandbox.file("wrong", "not it\n")])
        XCTAssertTrue(wrong.stdout.contains("wrong passphrase for the retired key"), wrong.stdout)
        XCTAssertTrue(oldCopyExists)
        let deleted = try laptop.binder(["sync", "health", "--passphrase-file", newPassphrase, "--retired-passphrase-file", laptop.passphraseFile])
        XCTAssertTrue(deleted.stdout.contains("Deleted the old copy health (old key)"), deleted.stdout)
        XCTAssertFalse(oldCopyExists)
    }

    func testAnotherDeviceOnTheOldKeyIsToldTheBinderMovedAndKeepsItsCommits() throws {
        _ = try createCloneAndRotate()
        let moved = try sync(laptop, newPassphrase)
        XCTAssertTrue(moved.stdout.contains("Deleted the old copy health"), moved.stdout)
        let newId = try laptop.git("health", "config binder.repoid")

        try phone.mount("health", ["--no-sync", "--passphrase-file", phone.passphraseFile])
        try phone.write("visits/2026-12-06-knee.md", "# Knee\n\nWritten on the phone, never synced.\n")
        phone.unmount()
        let phoneTip = try phone.tip("health")
        let told = try sync(phone, phone.passphraseFile, expectFailure: true)
        XCTAssertEqual(told.status, 3, told.stderr)
        XCTAssertTrue(told.stderr.contains("moved to a new key on another device (binder key rotate)"), told.stderr)
        XCTAssertTrue(told.stderr.contains("binder key rotate --import"), told.stderr)
        XCTAssertEqual(try phone.tip("health"), phoneTip, "the unsynced commit is kept")
        XCTAssertEqual(try phone.git("health", "config binder.repoid"), "health")
        XCTAssertFalse(oldCopyExists, "the old key's push did not create the old id again")
        XCTAssertEqual(try server.git(newId, "rev-parse main").trimmingCharacters(in: .whitespacesAndNewlines), try laptop.tip("health"))

        // The phone takes the new key as told: its binder, its commit included, is re-encrypted; its
        // sync sees the old copy deleted and makes no second copy of the moved binder.
        let commits = try phone.git("health", "rev-list --count main")
        let phonePassphrase = try phone.sandbox.file("phone-new-passphrase", "the phone's new passphrase\n")
        try phone.binder(["key", "rotate", "--import", "--passphrase-file", phone.passphraseFile, "--new-passphrase-file", phonePassphrase,
                          "--log-n", "8"], stdin: String(decoding: try newKey.nsec().copyBytes(), as: UTF8.self) + "\n")
        let again = try sync(phone, phonePassphrase, expectFailure: true)
        XCTAssertEqual(again.status, 3, again.stderr)
        XCTAssertTrue(again.stderr.contains("another device moved it to the new key first"), again.stderr)
        XCTAssertEqual(try phone.git("health", "rev-list --count main"), commits)
        let owned = try shell("grep -l '\(newKey.publicKey.hex)' '\(server.repos)'/*.git/binder-owner | wc -l").stdout
        XCTAssertEqual(owned.trimmingCharacters(in: .whitespacesAndNewlines), "1", "one copy of the moved binder on the server")
    }
}
