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

    /// Rotated twice before a sync: the server's copy is still under the first key, so the
    /// binder stays marked as moving off that key, and that key's login (set aside, sealed to
    /// the newest key) deletes the old copy; no retired passphrase is asked for.
    func testASecondRotationBeforeTheSyncStillDeletesTheFirstKeysCopy() throws {
        _ = try createCloneAndRotate()
        let third = try SecretKey.generate()
        let thirdPassphrase = try laptop.sandbox.file("third-passphrase", "a third passphrase\n")
        try laptop.binder(["key", "rotate", "--import", "--passphrase-file", newPassphrase, "--new-passphrase-file", thirdPassphrase,
                           "--log-n", "8"], stdin: String(decoding: try third.nsec().copyBytes(), as: UTF8.self) + "\n")
        XCTAssertEqual(try laptop.git("health", "config binder.rotatedfrom"), try SecretKey(nsec: nsec).publicKey.npub)
        let moved = try sync(laptop, thirdPassphrase)
        XCTAssertTrue(moved.stdout.contains("Moved health to"), moved.stdout)
        XCTAssertTrue(moved.stdout.contains("Deleted the old copy health (old key)"), moved.stdout)
        XCTAssertFalse(oldCopyExists)
        let newId = try laptop.git("health", "config binder.repoid")
        XCTAssertEqual(try String(contentsOfFile: server.repos + "/\(newId).git/binder-owner", encoding: .utf8), third.publicKey.hex + "\n")
    }

    /// The phone, still on the old key, made a commit it never synced; the laptop rotated, moved
    /// the binder and deleted the old copy, then went on writing. The phone is told (exit 3), keeps
    /// its commit, takes the new key, and its next sync finds the moved copy among the new key's
    /// repositories and brings its commit onto it: one copy on the server, both devices' writings
    /// in it, no conflict on the files only one side changed.
    func testAnotherDeviceOnTheOldKeyIsToldTheBinderMovedThenBringsItsCommitsOver() throws {
        _ = try createCloneAndRotate()
        let moved = try sync(laptop, newPassphrase)
        XCTAssertTrue(moved.stdout.contains("Deleted the old copy health"), moved.stdout)
        let newId = try laptop.git("health", "config binder.repoid")
        try laptop.mount("health", ["--no-sync", "--passphrase-file", newPassphrase])
        try laptop.write("visits/2026-12-07-back.md", "# Back\n\nWritten on the laptop after the move.\n")
        laptop.unmount()
        _ = try sync(laptop, newPassphrase)

        try phone.mount("health", ["--no-sync", "--passphrase-file", phone.passphraseFile])
        try phone.write("visits/2026-12-06-knee.md", "# Knee\n\nWritten on the phone, never synced.\n")
        phone.unmount()
        let phoneTip = try phone.tip("health")
        let unsynced = try phone.git("health", "rev-list --count main ^refs/remotes/origin/main")
        XCTAssertNotEqual(unsynced, "0")
        let told = try sync(phone, phone.passphraseFile, expectFailure: true)
        XCTAssertEqual(told.status, 3, told.stderr)
        XCTAssertTrue(told.stderr.contains("moved to a new key on another device (binder key rotate)"), told.stderr)
        XCTAssertTrue(told.stderr.contains("binder key rotate --import"), told.stderr)
        XCTAssertEqual(try phone.tip("health"), phoneTip, "the unsynced commit is kept")
        XCTAssertEqual(try phone.git("health", "config binder.repoid"), "health")
        XCTAssertFalse(oldCopyExists, "the old key's push did not create the old id again")
        // Mounted, the sync goes through the mount: told the same (a typed refusal, exit 3), and to unmount first.
        try phone.mount("health", ["--passphrase-file", phone.passphraseFile])
        let toldMounted = try sync(phone, phone.passphraseFile, expectFailure: true)
        phone.unmount()
        XCTAssertEqual(toldMounted.status, 3, toldMounted.stderr)
        XCTAssertTrue(toldMounted.stderr.contains("Unmount it ('binder unmount "), toldMounted.stderr)
        XCTAssertEqual(try phone.tip("health"), phoneTip, "the unsynced commit is kept")

        // The phone first takes a wrong key: told again (no repository of that key holds the
        // binder), nothing made; then the new key (a second rotation before any sync), and
        // its sync brings its commit onto the moved copy.
        let phonePassphrase = try phone.sandbox.file("phone-new-passphrase", "the phone's new passphrase\n")
        let wrongKey = try SecretKey.generate()
        try phone.binder(["key", "rotate", "--import", "--passphrase-file", phone.passphraseFile, "--new-passphrase-file", phonePassphrase,
                          "--log-n", "8"], stdin: String(decoding: try wrongKey.nsec().copyBytes(), as: UTF8.self) + "\n")
        let wrong = try sync(phone, phonePassphrase, expectFailure: true)
        XCTAssertEqual(wrong.status, 3, wrong.stderr)
        XCTAssertTrue(wrong.stderr.contains("no repository of your key (\(wrongKey.publicKey.npub)) there holds its history"), wrong.stderr)
        XCTAssertEqual(try phone.git("health", "config --get binder.newrepoid"), "")
        try phone.binder(["key", "rotate", "--import", "--passphrase-file", phonePassphrase, "--new-passphrase-file", phonePassphrase,
                          "--log-n", "8"], stdin: String(decoding: try newKey.nsec().copyBytes(), as: UTF8.self) + "\n")
        // A clone of the moved copy made here by hand (as this message once told) does not hide it.
        try phone.binder(["clone", newId, "--name", "moved", "--passphrase-file", phonePassphrase])
        let joined = try sync(phone, phonePassphrase)
        XCTAssertTrue(joined.stdout.contains("Found health's copy that another device moved to the new key: \(newId)"), joined.stdout)
        // Fewer than `unsynced` when a commit of the phone's is the same as the laptop's (both
        // made the folder `visits` in the same second: the same commit, paired, not carried).
        XCTAssertTrue(joined.stdout.contains(" commit(s) made here are carried onto it"), joined.stdout)
        XCTAssertEqual(try phone.git("health", "config binder.repoid"), newId)
        XCTAssertEqual(try phone.git("health", "config --get binder.rotatedfrom"), "")
        XCTAssertEqual(try server.git(newId, "rev-parse main").trimmingCharacters(in: .whitespacesAndNewlines), try phone.tip("health"))
        let files = try phone.git("health", "ls-tree -r --name-only main")
        XCTAssertTrue(files.contains("visits/2026-12-06-knee"), files)
        XCTAssertTrue(files.contains("visits/2026-12-07-back"), files)
        XCTAssertFalse(files.contains("conflict"), "only the phone changed its file, only the laptop its own: \(files)")
        // The carried commits change only what the phone wrote: every other file is the moved copy's blob.
        let carriedChanges = try phone.git("health", "diff --name-only $(git -C '\(phone.repository("health"))' merge-base main^1 main^2) main^1")
        let changedPaths = Set(carriedChanges.split(separator: "\n").map(String.init))
        XCTAssertTrue(changedPaths.contains("visits/2026-12-06-knee.json"), carriedChanges)
        XCTAssertTrue(changedPaths.isSubset(of: ["visits/2026-12-06-knee.json", "visits/.meta.json"]), carriedChanges)
        XCTAssertEqual(try phone.git("health", "rev-list --count main ^refs/remotes/origin/main"), "0")
        let owned = try shell("grep -l '\(newKey.publicKey.hex)' '\(server.repos)'/*.git/binder-owner | wc -l").stdout
        XCTAssertEqual(owned.trimmingCharacters(in: .whitespacesAndNewlines), "1", "one copy of the moved binder on the server")

        // The laptop gets the phone's writing, readable with the new key.
        _ = try sync(laptop, newPassphrase)
        try laptop.mount("health", ["--no-sync", "--passphrase-file", newPassphrase])
        let knee = laptop.read("visits/2026-12-06-knee.md")
        XCTAssertTrue(knee?.hasSuffix("# Knee\n\nWritten on the phone, never synced.\n") == true, knee ?? "(none)")
        laptop.unmount()
    }
}
