import BinderCrypto
import Foundation
import XCTest

/// Accounts and sync against a real `binder serve` on loopback: two devices (two BINDER_HOMEs
/// with the same key), real git over Smart HTTP, real mounts.
final class SyncTests: XCTestCase {
    var server: TestServer!
    var serverRoot: BinderSandbox!
    var nsec: String!
    var laptop: Device!
    var phone: Device!

    override func setUpWithError() throws {
        serverRoot = try BinderSandbox()
        server = try TestServer(root: serverRoot.root)
        nsec = String(decoding: try SecretKey.generate().nsec().copyBytes(), as: UTF8.self)
        laptop = try Device(nsec: nsec)
        phone = try Device(nsec: nsec)
    }

    override func tearDown() {
        laptop?.unmount()
        phone?.unmount()
        server?.stop()
        laptop = nil; phone = nil; server = nil; serverRoot = nil
    }

    var publicKeyHex: String { try! SecretKey(nsec: nsec).publicKey.hex }

    /// The laptop makes a binder and pushes it (push-to-create); the phone clones it.
    func createOnLaptopAndCloneOnPhone(_ name: String = "health") throws {
        try laptop.binder(["login", "--server", server.url])
        try laptop.binder(["create", name, "--patient-name", "Alex Doe"])
        let synced = try laptop.binder(["sync", name, "--repo-id", name])
        XCTAssertTrue(synced.stdout.contains("created \(name) on \(server.url)"), synced.stdout)
        try phone.binder(["login", "--server", server.url])
        let cloned = try phone.binder(["clone", name])
        XCTAssertTrue(cloned.stdout.contains("Cloned \(name)"), cloned.stdout)
    }

    /// Writes through a mount with sync off (the device is offline), then unmounts.
    func offlineEdit(_ device: Device, _ name: String = "health", _ edit: (Device) throws -> Void) throws {
        try device.mount(name, ["--no-sync"])
        try edit(device)
        device.unmount()
    }

    /// A push the server refuses while its branch stays where it was (a hook, a quota) is no
    /// race to merge through: `binder sync` fails with the server's reason, and the commits
    /// stay pending.
    func testAPushTheServerRefusesIsAnErrorNotSynced() throws {
        try createOnLaptopAndCloneOnPhone()
        let hook = server.repos + "/health.git/hooks/pre-receive"
        XCTAssertEqual(try shell("mkdir -p '\(server.repos)/health.git/hooks' && printf '#!/bin/sh\\necho refused by policy >&2\\nexit 1\\n' > '\(hook)' && chmod +x '\(hook)'").status, 0)
        try offlineEdit(laptop) { try $0.write("visits/2026-05-01-knee.md", "# Knee\n") }
        let before = try server.git("health", "rev-parse main")
        let synced = try laptop.binder(["sync", "health"], expectFailure: true)
        XCTAssertNotEqual(synced.status, 0, synced.stdout)
        XCTAssertTrue(synced.stderr.contains("refused the push"), synced.stderr)
        XCTAssertEqual(try server.git("health", "rev-parse main"), before)
        XCTAssertTrue(try laptop.binder(["status", "health"]).stdout.contains("pending commits: 2"))
    }

    func testPushToCreateCloneByIdAndNonOverlappingEditsSyncBothWays() throws {
        try createOnLaptopAndCloneOnPhone()
        XCTAssertEqual(try server.git("health", "rev-parse main").trimmingCharacters(in: .whitespacesAndNewlines), try laptop.tip("health"))
        XCTAssertEqual(try String(contentsOfFile: server.repos + "/health.git/binder-owner", encoding: .utf8), publicKeyHex + "\n")
        // What the server keeps is its account's alone: no other local user reads or lists it.
        XCTAssertEqual(try shell("stat -c %a '\(server.repos)'").stdout, "700\n")
        XCTAssertEqual(try shell("find '\(server.repos)' -perm /o=rwx | head -3").stdout, "", "readable by other users")
        XCTAssertEqual(try phone.tip("health"), try laptop.tip("health"))
        XCTAssertEqual(try phone.git("health", "rev-parse --is-bare-repository"), "true", "a clone is bare, as create makes them")
        XCTAssertEqual(try laptop.git("health", "rev-parse --is-bare-repository"), "true")

        let listing = try laptop.binder(["list"]).stdout
        XCTAssertTrue(listing.contains("0 to push to \(server.url) as health"), listing)
        XCTAssertTrue(listing.contains("On \(server.url):\n  health  last commit 20"), listing)
        XCTAssertTrue(listing.contains("(cloned)"), listing)

        try offlineEdit(laptop) { try $0.write("visits/2026-05-01-knee.md", "# Knee\nMarker-laptop-7731\n") }
        try offlineEdit(phone) { try $0.write("labs/2026-05-02-lipids.md", "# Lipids\nMarker-phone-9182\n") }
        XCTAssertTrue(try laptop.binder(["status", "health"]).stdout.contains("pending commits: 2"))  // folder + entry

        XCTAssertTrue(try laptop.binder(["sync", "health"]).stdout.contains("pushed 2 commit(s)"))
        let merged = try phone.binder(["sync", "health"]).stdout
        XCTAssertTrue(merged.contains("merged") && merged.contains("pushed"), merged)
        XCTAssertFalse(merged.contains("conflict"), merged)
        XCTAssertTrue(try laptop.binder(["sync", "health"]).stdout.contains("received"))
        XCTAssertEqual(try laptop.tip("health"), try phone.tip("health"))
        for device in [laptop!, phone!] {
            XCTAssertEqual(try device.storedValue("health", "visits/2026-05-01-knee.json"), "# Knee\nMarker-laptop-7731\n")
            XCTAssertEqual(try device.storedValue("health", "labs/2026-05-02-lipids.json"), "# Lipids\nMarker-phone-9182\n")
            let status = try device.binder(["status", "health"]).stdout
            XCTAssertTrue(status.contains("pending commits: 0") && status.contains("last error: none")
                          && status.contains("conflicts resolved: 0"), status)
        }
        // A merge of both devices' histories sits on the server, never a rewrite.
        XCTAssertEqual(try server.git("health", "rev-list --merges --count main").trimmingCharacters(in: .whitespaces), "1\n")

        // An independent reader (rust-nostr + cryptography) decrypts everything the server holds…
        let reader = URL(fileURLWithPath: MgitClient.script).deletingLastPathComponent().appendingPathComponent("read_binder.py").path
        let read = try BinderSandbox.run(executable: "/usr/bin/env", ["python3", reader, server.repos + "/health.git", laptop.nsecFile])
        XCTAssertEqual(read.status, 0, read.stderr)
        XCTAssertTrue(read.stdout.contains("Marker-laptop-7731") && read.stdout.contains("Marker-phone-9182"))
        // …and no object on the server (any blob, tree or commit, decompressed by git) holds plaintext.
        let objects = try shell("git -C '\(server.repos)/health.git' cat-file --batch-all-objects --batch | grep -a -c -E 'Marker-|Alex Doe|Knee|Lipids'")
        XCTAssertEqual(objects.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "0")

        // Plain git, logged in by the independent client, clones the same history over Smart HTTP.
        let token = try MgitClient.run(["login", server.url, laptop.nsecFile])
        XCTAssertEqual(token.status, 0, token.stderr)
        let tokenFile = try serverRoot.file("token", token.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        let clone = try shell("git -c http.extraHeader=\"Authorization: Bearer $(cat '\(tokenFile)')\" clone -q '\(server.url)/api/mgit/repos/health' '\(serverRoot.root.path)/plain' && git -C '\(serverRoot.root.path)/plain' rev-parse HEAD")
        XCTAssertEqual(clone.status, 0, clone.stderr)
        XCTAssertEqual(clone.stdout.trimmingCharacters(in: .whitespacesAndNewlines), try laptop.tip("health"))
    }

    /// A clone made before clones were bare (a work tree with `.git`, as `binder clone` used to
    /// make them) is still a binder like any: it mounts and shows its records, syncs both
    /// ways, and its work tree follows what arrives.
    func testAnOldCloneWithAWorkTreeIsReadAndSynced() throws {
        try createOnLaptopAndCloneOnPhone()
        try offlineEdit(laptop) { try $0.write("visits/first.md", "# First\nMarker-old-clone-1\n") }
        try laptop.binder(["sync", "health"])
        let old = phone.repository("old")
        let made = try shell("git clone -q -b main '\(server.repos)/health.git' '\(old)' && git -C '\(old)' config binder.server '\(server.url)'"
                             + " && git -C '\(old)' config binder.repoid health && git -C '\(old)' remote set-url origin '\(server.url)/api/mgit/repos/health'")
        XCTAssertEqual(made.status, 0, made.stderr)
        XCTAssertEqual(try phone.git("old", "rev-parse --is-bare-repository"), "false")
        try phone.mount("old", ["--no-sync"])
        XCTAssertTrue(phone.read("visits/first.md")?.contains("# First\nMarker-old-clone-1\n") == true, phone.read("visits/first.md") ?? "unreadable")
        try phone.write("labs/from-old.md", "# From the old clone\n")
        phone.unmount()
        XCTAssertTrue(try phone.binder(["sync", "old"]).stdout.contains("pushed"))
        try offlineEdit(laptop) { try $0.write("visits/second.md", "# Second\n") }
        try laptop.binder(["sync", "health"])
        let received = try phone.binder(["sync", "old"]).stdout
        XCTAssertTrue(received.contains("received") || received.contains("merged"), received)
        XCTAssertEqual(try phone.tip("old"), try laptop.tip("health"))
        XCTAssertEqual(try phone.git("old", "status --porcelain"), "", "the work tree follows")
        XCTAssertEqual(try laptop.storedValue("health", "labs/from-old.json"), "# From the old clone\n")
    }

    func testCloneFromTheWebAppsQRPayloadUsesItsTokenOnceAndKeepsNothing() throws {
        try laptop.binder(["login", "--server", server.url])
        try laptop.binder(["create", "records"])
        try laptop.binder(["sync", "records", "--repo-id", "records"])
        let token = try MgitClient.run(["login", server.url, laptop.nsecFile])
        let tokenFile = try serverRoot.file("token", token.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        let qr = try MgitClient.run(["get", server.url, "/api/mgit/qr/clone/records", tokenFile])
        XCTAssertTrue(qr.stdout.hasPrefix("200 "), qr.stdout)
        let payload = String(qr.stdout.dropFirst(4))
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: String])
        XCTAssertEqual(object["action"], "mgit_clone")
        XCTAssertEqual(object["clone_url"], server.url + "/api/mgit/repos/records")

        // The phone never logged in: the QR's token is all it has.
        let cloned = try phone.binder(["clone", "--qr", "-", "--name", "mine"], stdin: payload)
        XCTAssertTrue(cloned.stdout.contains("Cloned records"), cloned.stdout)
        XCTAssertEqual(try phone.tip("mine"), try laptop.tip("records"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: phone.sandbox.home.appendingPathComponent("accounts.json").path))
        let jwt = try XCTUnwrap(object["jwt_token"])
        let leaks = try shell("grep -r -l -F -e '\(jwt)' '\(phone.sandbox.root.path)' || true")
        XCTAssertEqual(leaks.stdout, "", "the QR token was written to disk")
        XCTAssertTrue(try phone.binder(["status", "mine"]).stdout.contains("repository: records"))

        for (bad, message) in [(#"{"action":"other","clone_url":"x","jwt_token":"y"}"#, "mgit_clone"),
                               (#"{"action":"mgit_clone","jwt_token":"y"}"#, "clone_url"),
                               ("not json", "not a JSON object"),
                               (#"{"action":"mgit_clone","clone_url":"http://example.com/api/mgit/repos/x","jwt_token":"y"}"#, "refusing plain http")] {
            assertFails(try phone.binder(["clone", "--qr", "-"], stdin: bad, expectFailure: true), mentioning: message)
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: phone.binders), ["mine"], "failed clones leave nothing")
    }

    func testConflictingEditsTheLaterUpdateWinsAndTheOtherStaysInHistory() throws {
        try createOnLaptopAndCloneOnPhone()
        try offlineEdit(laptop) { device in
            try device.write("visits/shared.md", "# Shared\nfirst\n")
            try device.write("visits/deleted-on-phone.md", "# Gone?\n")
        }
        try laptop.binder(["sync", "health"])
        try phone.binder(["sync", "health"])

        // Both offline: the laptop edits first, the phone later; the phone deletes a record the
        // laptop edits.
        try offlineEdit(laptop) { device in
            try device.write("visits/shared.md", "# Shared\nlaptop version\n")
            try device.write("visits/deleted-on-phone.md", "# Gone?\nstill needed\n")
        }
        sleep(1)
        try offlineEdit(phone) { device in
            try device.write("visits/shared.md", "# Shared\nphone version, later\n")
            XCTAssertEqual(try shell("rm visits/deleted-on-phone.md", in: device.mountpoint).status, 0)
        }
        let laptopEdit = try laptop.tip("health")

        try laptop.binder(["sync", "health"])
        let merged = try phone.binder(["sync", "health"]).stdout
        XCTAssertTrue(merged.contains("2 conflict(s) resolved"), merged)
        try laptop.binder(["sync", "health"])
        XCTAssertEqual(try laptop.tip("health"), try phone.tip("health"))

        for device in [laptop!, phone!] {
            XCTAssertEqual(try device.storedValue("health", "visits/shared.json"), "# Shared\nphone version, later\n")
            XCTAssertEqual(try device.storedValue("health", "visits/deleted-on-phone.json"), "# Gone?\nstill needed\n")
        }
        let status = try phone.binder(["status", "health"]).stdout
        XCTAssertTrue(status.contains("conflicts resolved: 2"), status)
        XCTAssertTrue(status.contains("visits/shared.json: kept the local version (both edited: the later metadata.updated wins); the other is in commit \(laptopEdit)"), status)
        XCTAssertTrue(status.contains("visits/deleted-on-phone.json: kept the other device's version"), status)
        // Nothing is lost: the laptop's losing version is in history, on the server too.
        XCTAssertEqual(try phone.storedValue("health", "visits/shared.json", at: laptopEdit), "# Shared\nlaptop version\n")
        XCTAssertEqual(try server.git("health", "merge-base --is-ancestor \(laptopEdit) main; echo $?").trimmingCharacters(in: .whitespacesAndNewlines), "0")
        XCTAssertFalse(status.contains("phone version") || status.contains("laptop version"), "status shows no content")
    }

    func testTwoLiveMountsFollowEachOther() throws {
        try createOnLaptopAndCloneOnPhone()
        try laptop.mount("health", ["--sync-interval", "1"])
        try phone.mount("health", ["--sync-interval", "1"])
        eventually(10, "both mounts online") { laptop.status()["sync"] == "synced" && phone.status()["sync"] == "synced" }

        try laptop.write("visits/live.md", "# Live\none\n")
        eventually(20, "the phone's mount shows the laptop's new record") {
            phone.read("visits/live.md")?.contains("one") == true
        }
        XCTAssertEqual(laptop.status()["pending_commits"], "0")

        // The phone has read it (its pages are cached); the laptop changes it again.
        XCTAssertTrue(phone.read("visits/live.md")!.hasSuffix("# Live\none\n"))
        try laptop.write("visits/live.md", "# Live\none\ntwo\n")
        eventually(20, "the phone's mount shows the new content (kernel cache dropped)") {
            phone.read("visits/live.md")?.hasSuffix("one\ntwo\n") == true
        }
        let size = try FileManager.default.attributesOfItem(atPath: phone.path("visits/live.md"))[.size] as? Int
        XCTAssertEqual(size, phone.read("visits/live.md")?.utf8.count, "the size follows the content")

        // The other way, and a deletion.
        try phone.write("labs/from-phone.md", "# From the phone\n")
        XCTAssertEqual(try shell("rm visits/live.md", in: phone.mountpoint).status, 0)
        eventually(20, "the laptop's mount shows the phone's changes") {
            laptop.read("labs/from-phone.md")?.hasSuffix("# From the phone\n") == true
                && !FileManager.default.fileExists(atPath: laptop.path("visits/live.md"))
        }
        XCTAssertTrue(laptop.read("labs/from-phone.md")!.hasPrefix("---\ntype: lab\n"))
        let listing = try shell("ls visits", in: laptop.mountpoint).stdout
        XCTAssertFalse(listing.contains("live.md"), listing)
        eventually(10, "both sides settle") { laptop.status()["pending_commits"] == "0" && phone.status()["pending_commits"] == "0" }
    }

    func testExpiredAndRevokedTokensAreRenewedSilently() throws {
        server.stop()
        try server.start(["--token-lifetime", "2"])
        try laptop.binder(["login", "--server", server.url])
        try laptop.binder(["create", "health"])
        try laptop.binder(["sync", "health", "--repo-id", "health"])
        let accounts = laptop.sandbox.home.appendingPathComponent("accounts.json").path
        let firstToken = try String(contentsOfFile: accounts, encoding: .utf8)

        sleep(3)  // the token has expired
        try offlineEdit(laptop) { try $0.write("visits/a.md", "# A\n") }
        let afterExpiry = try laptop.binder(["sync", "health"])
        XCTAssertTrue(afterExpiry.stdout.contains("pushed"), afterExpiry.stdout)
        XCTAssertEqual(afterExpiry.stderr, "", "renewal is silent")
        XCTAssertNotEqual(try String(contentsOfFile: accounts, encoding: .utf8), firstToken, "the renewed token is kept")
        XCTAssertTrue(server.log.contains("info/refs 401"), "the expired token was refused first")

        // Revoked: the server rotates its signing secret; the next sync logs in again.
        server.stop()
        try server.start(["--rotate-secret"])
        try offlineEdit(laptop) { try $0.write("visits/b.md", "# B\n") }
        XCTAssertTrue(try laptop.binder(["sync", "health"]).stdout.contains("pushed"))
        XCTAssertEqual(try server.git("health", "rev-parse main").trimmingCharacters(in: .whitespacesAndNewlines), try laptop.tip("health"))
    }

    func testServerDownCommitsQueueSurviveARestartAndLandOnce() throws {
        try laptop.binder(["login", "--server", server.url])
        try laptop.binder(["create", "health"])
        try offlineEdit(laptop) { try $0.write("visits/first.md", "# First\n") }
        try laptop.binder(["sync", "health", "--repo-id", "health"])
        try laptop.mount("health", ["--sync-interval", "1", "--sync-max-backoff", "2"])
        eventually(10, "online") { laptop.status()["sync"] == "synced" }

        server.stop()
        for i in 1...5 { try laptop.write("visits/offline-\(i).md", "# Offline \(i)\n") }
        eventually(15, "the mount reports being offline with 5 commits queued") {
            let status = laptop.status()
            return status["sync"] == "offline" && status["pending_commits"] == "5" && status["last_error"] != "none"
        }
        // The daemon restarts while offline (a reboot): the queue is in git, nothing is lost.
        laptop.unmount()
        try laptop.mount("health", ["--sync-interval", "1", "--sync-max-backoff", "2"])
        XCTAssertEqual(laptop.status()["pending_commits"], "5")
        XCTAssertTrue(try laptop.binder(["status", "health"]).stdout.contains("pending commits: 5"))

        try server.start()
        eventually(60, "the queued commits land once the server is back (retries at most 2 s apart)",
                   diagnostics: { self.laptop.diagnostics() + "\nserver:\n" + self.server.log.split(separator: "\n").suffix(20).joined(separator: "\n") }) {
            laptop.status()["pending_commits"] == "0" && laptop.status()["sync"] == "synced"
        }
        XCTAssertEqual(try server.git("health", "rev-parse main").trimmingCharacters(in: .whitespacesAndNewlines), try laptop.tip("health"))
        let files = try server.git("health", "ls-tree --name-only main visits/").split(separator: "\n").filter { $0.hasSuffix(".json") && !$0.hasPrefix("visits/.") }
        XCTAssertEqual(files.sorted(), ["visits/first.json"] + (1...5).map { "visits/offline-\($0).json" })
        XCTAssertEqual(try server.git("health", "rev-list --count main"), try laptop.git("health", "rev-list --count main") + "\n",
                       "no commit duplicated or lost")
    }
}
