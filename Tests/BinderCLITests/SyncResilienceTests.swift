import BinderCrypto
import Foundation
import XCTest

/// Sync on a bad network and against a server that answers the way limbo.health does: a real
/// `binder serve` behind a real fault-injecting proxy on loopback (`Tests/interop/fault_proxy.py`).
final class SyncResilienceTests: ServerTestCase {
    func gitOnServer(_ id: String, _ arguments: String) throws -> String {
        try server.git(id, arguments).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Every 3rd request fails (503) and every 5th connection is reset: one `binder sync` still
    /// completes (each request is retried on its own, the transfer goes on), a second device
    /// merges through the same faults, and the mount's background sync lands every save, also
    /// across a server restart with a new signing secret. No commit is lost or duplicated.
    /// A login is signed for the server it is meant for (NIP-42's relay tag): a server that
    /// knows its own address refuses one another server hands on (a hostile server relaying
    /// what its user signed, to get that user's token here), and takes one signed for it.
    func testALoginHandedOnByAnotherServerIsRefused() throws {
        let url = server.url
        server.stop()
        try server.start(["--public-url", url])
        let relay = try FaultProxy(upstream: server, [])
        defer { relay.stop() }
        let laptop = try Device(nsec: nsec)
        let relayed = try laptop.binder(["login", "--server", relay.url], expectFailure: true)
        XCTAssertNotEqual(relayed.status, 0, relayed.stdout)
        XCTAssertTrue(relayed.stderr.contains("signed for another server"), relayed.stderr)
        XCTAssertEqual(try laptop.binder(["login", "--server", server.url]).status, 0)
    }

    func testSyncConvergesThroughAServerThatFailsEveryThirdRequestAndResetsConnections() throws {
        let proxy = try FaultProxy(upstream: server, ["--fail-every", "3", "--reset-every", "5"])
        defer { proxy.stop() }
        let laptop = try Device(nsec: nsec), phone = try Device(nsec: nsec)
        defer { laptop.unmount(); phone.unmount() }

        try laptop.binder(["login", "--server", proxy.url])
        try laptop.binder(["create", "health", "--patient-name", "Alex Doe"])
        try laptop.mount("health", ["--no-sync"])
        for i in 1...3 { try laptop.write("visits/first-\(i).md", "# First \(i)\n") }
        laptop.unmount()
        let created = try laptop.binder(["sync", "health", "--repo-id", "health"])
        XCTAssertTrue(created.stdout.contains("created health on \(proxy.url)"), created.stdout)
        XCTAssertEqual(try gitOnServer("health", "rev-parse main"), try laptop.tip("health"))

        try phone.binder(["login", "--server", proxy.url])
        try phone.binder(["clone", "health"])
        try phone.mount("health", ["--no-sync"])
        try phone.write("labs/from-phone.md", "# From the phone\n")
        phone.unmount()
        try laptop.mount("health", ["--no-sync"])
        try laptop.write("visits/from-laptop.md", "# From the laptop\n")
        laptop.unmount()
        XCTAssertTrue(try phone.binder(["sync", "health"]).stdout.contains("pushed"))
        let merged = try laptop.binder(["sync", "health"]).stdout
        XCTAssertTrue(merged.contains("merged") && merged.contains("pushed"), merged)
        XCTAssertTrue(try phone.binder(["sync", "health"]).stdout.contains("received"))
        XCTAssertEqual(try phone.tip("health"), try laptop.tip("health"))

        // The mount's background sync, through the same faults and a restart with a new secret
        // (every token the devices hold is refused afterwards).
        try laptop.mount("health", ["--sync-interval", "1"])
        for i in 1...4 { try laptop.write("visits/mounted-\(i).md", "# Mounted \(i)\n") }
        eventually(60, "the first saves reach the server", diagnostics: { laptop.diagnostics() }) {
            (try? self.gitOnServer("health", "rev-parse main")) == (try? laptop.tip("health")) && laptop.status()["pending_commits"] == "0"
        }
        server.stop()
        try server.start(["--rotate-secret"])
        for i in 5...6 { try laptop.write("visits/mounted-\(i).md", "# Mounted \(i)\n") }
        eventually(60, "the saves after the restart reach the server", diagnostics: { laptop.diagnostics() }) {
            (try? self.gitOnServer("health", "rev-parse main")) == (try? laptop.tip("health")) && laptop.status()["pending_commits"] == "0"
        }
        eventually(10, "the mount says it is synced", diagnostics: { laptop.diagnostics() }) { laptop.status()["sync"] == "synced" }

        let statuses = proxy.requests.map { $0.last ?? "" }
        XCTAssertTrue(statuses.contains("503") && statuses.contains("reset"), "faults were injected")
        XCTAssertTrue(statuses.contains("401"), "the rotated secret refused the old token first")
        XCTAssertEqual(try gitOnServer("health", "rev-list --count main"), try laptop.git("health", "rev-list --count main"),
                       "no commit lost or duplicated")
        let files = try gitOnServer("health", "ls-tree -r --name-only main").split(separator: "\n").filter { !$0.contains("/.") }
        for expected in ["labs/from-phone.json", "visits/from-laptop.json"] + (1...3).map({ "visits/first-\($0).json" })
            + (1...6).map({ "visits/mounted-\($0).json" }) {
            XCTAssertTrue(files.contains(Substring(expected)), "\(expected) is on the server: \(files)")
        }
        XCTAssertEqual(try laptop.storedValue("health", "labs/from-phone.json"), "# From the phone\n")
    }

    /// A server that answers a login challenge of 200 MB: binder stops reading at its cap and
    /// says so, instead of reading (and holding) it all.
    func testLoginStopsReadingAnOversizedChallenge() throws {
        let proxy = try FaultProxy(upstream: server, ["--huge-challenge", "200000000"])
        defer { proxy.stop() }
        let device = try Device(nsec: nsec)
        let login = try device.binder(["login", "--server", proxy.url], expectFailure: true)
        assertFails(login, mentioning: "larger than 65536 bytes (stopped reading)")
        XCTAssertEqual(proxy.requests.first?.last, "huge")
        XCTAssertFalse(FileManager.default.fileExists(atPath: device.sandbox.home.appendingPathComponent("accounts.json").path))
    }

    /// Every answer is bounded: a server that stops answering is given up on (the idle timeout,
    /// `BINDER_HTTP_IDLE_TIMEOUT` here 0.5 s), a ref advertisement past 1 MiB and a pack past
    /// the pack cap (`BINDER_MAX_PACK_BYTES` here 1 KiB) are cut off, and nothing is kept of them.
    func testStalledAndOversizedAnswersAreCutOff() throws {
        let device = try Device(nsec: nsec)
        let stalled = try FaultProxy(upstream: server, ["--stall-challenge"])
        defer { stalled.stop() }
        let login = try device.sandbox.run(["login", "--server", stalled.url], environment: ["BINDER_HTTP_IDLE_TIMEOUT": "0.5"])
        assertFails(login, mentioning: "stopped answering (timed out)")
        XCTAssertEqual(stalled.requests.filter { $0.last == "stall" }.count, 5, "tried five times, then gave up")

        let huge = try FaultProxy(upstream: server, ["--huge-advertisement", "50000000"])
        defer { huge.stop() }
        try device.binder(["login", "--server", huge.url])
        try device.binder(["create", "health"])
        try device.mount("health", ["--no-sync"])
        for i in 1...3 { try device.write("visits/record-\(i).md", "# Record \(i)\n" + String(repeating: "Lorem ipsum dolor sit amet. ", count: 40)) }
        device.unmount()
        assertFails(try device.binder(["sync", "health", "--repo-id", "health"], expectFailure: true),
                    mentioning: "larger than 1048576 bytes (stopped reading)")
        XCTAssertTrue(try device.binder(["status", "health"]).stdout.contains("sync: local only"), "nothing recorded of a failed first sync")

        // The real server: the binder lands; a clone with a 1 KiB pack cap stops, one without it works.
        try device.binder(["login", "--server", server.url])
        try device.binder(["sync", "health", "--repo-id", "health"])
        let phone = try Device(nsec: nsec)
        try phone.binder(["login", "--server", server.url])
        let capped = try phone.sandbox.run(["clone", "health"], environment: ["BINDER_MAX_PACK_BYTES": "1024"])
        assertFails(capped, mentioning: "larger than 1024 bytes (stopped reading)")
        XCTAssertEqual((try? FileManager.default.contentsOfDirectory(atPath: phone.binders)) ?? [], [], "a failed clone leaves nothing")
        try phone.binder(["clone", "health"])
        XCTAssertEqual(try phone.tip("health"), try device.tip("health"))
    }

    /// Against limbo.health's rules (a fetch of an id that does not exist yet answers 403), a
    /// binder never synced is pushed first, under a new id nobody else can have; a fetch of an
    /// unknown id is "not there"; the phone's `scan-*` staging copies are not listed.
    func testAFirstSyncPushesFirstUnderANewIdAgainstALimboLikeServer() throws {
        let proxy = try FaultProxy(upstream: server, ["--limbo"])
        defer { proxy.stop() }
        let laptop = try Device(nsec: nsec), phone = try Device(nsec: nsec)
        try laptop.binder(["login", "--server", proxy.url])
        try laptop.binder(["create", "health"])
        let synced = try laptop.binder(["sync", "health"]).stdout
        let id = try laptop.git("health", "config binder.repoid")
        XCTAssertNotNil(id.range(of: #"^binder-[0-9]{13}-[0-9a-f]{16}$"#, options: .regularExpression), id)
        XCTAssertTrue(synced.contains("created \(id) on \(proxy.url)"), synced)
        let gitRequests = proxy.requests.filter { $0.count == 4 && $0[2].hasPrefix("/api/mgit/repos/") }
        XCTAssertEqual(gitRequests.first?[2], "/api/mgit/repos/\(id)/info/refs?service=git-receive-pack",
                       "the first git request is the push's: \(gitRequests)")
        XCTAssertFalse(gitRequests.contains { $0[2].contains("upload-pack") }, "no fetch before the first push")
        XCTAssertEqual(try gitOnServer(id, "rev-parse main"), try laptop.tip("health"))
        try laptop.binder(["create", "other"])
        try laptop.binder(["sync", "other"])
        let otherId = try laptop.git("other", "config binder.repoid")
        XCTAssertTrue(otherId.hasPrefix("binder-") && otherId != id, "each binder gets an id of its own: \(otherId)")

        // The id is someone's only once pushed: a clone of an unknown one is refused cleanly
        // (403 from the limbo-like server), and leaves nothing.
        try phone.binder(["login", "--server", proxy.url])
        assertFails(try phone.binder(["clone", "binder-1-0000000000000000"], expectFailure: true), mentioning: "has no repository")
        try phone.binder(["clone", id, "--name", "health"])
        XCTAssertEqual(try phone.tip("health"), try laptop.tip("health"))

        // A staging copy for a doctor (the phone's scan-<hex> ids) is not a binder to list. (Put
        // on the server as the phone's share would: `binder sync` refuses scan-* ids, which
        // servers delete as staging copies.)
        try laptop.binder(["create", "staging"])
        assertFails(try laptop.binder(["sync", "staging", "--repo-id", "scan-19b2f3c4d5e"], expectFailure: true), mentioning: "staging copies")
        let staging = "\(server.repos)/scan-19b2f3c4d5e.git"
        let placed = try shell("git clone -q --bare '\(try laptop.git("staging", "rev-parse --absolute-git-dir"))' '\(staging)' && cp '\(server.repos)/\(id).git/binder-owner' '\(staging)/'")
        XCTAssertEqual(placed.status, 0, placed.stderr)
        let listing = try laptop.binder(["list"]).stdout
        let onServer = try XCTUnwrap(listing.components(separatedBy: "On \(proxy.url):").last)
        XCTAssertTrue(onServer.contains(id), listing)
        XCTAssertFalse(onServer.contains("scan-19b2f3c4d5e"), listing)
    }

    /// A mount started before any server was set starts syncing when `binder sync` names one,
    /// without a remount; `binder status` shows what the running mount is doing. The server
    /// answers like limbo.health (403 to a fetch of an unknown id) and fails every 4th request.
    func testARunningMountStartsSyncingWhenAServerIsSetLater() throws {
        let proxy = try FaultProxy(upstream: server, ["--limbo", "--fail-every", "4"])
        defer { proxy.stop() }
        let laptop = try Device(nsec: nsec)
        defer { laptop.unmount() }
        try laptop.binder(["create", "health"])
        try laptop.mount("health", ["--sync-interval", "1"])
        let pid = try XCTUnwrap(daemonPID(laptop.mountpoint))
        XCTAssertEqual(laptop.status()["sync"], "not configured")
        let before = try laptop.binder(["status", "health"]).stdout
        XCTAssertTrue(before.contains("mount sync (pid \(pid)): not configured"), before)
        XCTAssertEqual(try mountJSON(laptop)?.sync, "not configured")
        XCTAssertEqual(try mountJSON(laptop)?.pid, pid)
        try laptop.write("visits/before.md", "# Before\n")

        try laptop.binder(["login", "--server", proxy.url])
        let synced = try laptop.binder(["sync", "health"]).stdout
        XCTAssertTrue(synced.contains("(by its mount at \(laptop.mountpoint))") && synced.contains("created binder-"), synced)
        let id = try laptop.git("health", "config binder.repoid")
        XCTAssertTrue(id.hasPrefix("binder-"), id)
        XCTAssertEqual(try gitOnServer(id, "rev-parse main"), try laptop.tip("health"))

        // From now on the mount syncs by itself.
        try laptop.write("visits/after.md", "# After\n")
        eventually(30, "the mount pushes the next save by itself", diagnostics: { laptop.diagnostics() }) {
            (try? self.gitOnServer(id, "rev-parse main")) == (try? laptop.tip("health")) && laptop.status()["sync"] == "synced"
        }
        XCTAssertEqual(daemonPID(laptop.mountpoint), pid, "the same mount goes on serving")
        let after = try laptop.binder(["status", "health"]).stdout
        XCTAssertTrue(after.contains("mount sync (pid \(pid)): synced"), after)
        XCTAssertTrue(after.contains("mount syncs with: \(proxy.url) as \(id)"), after)
        XCTAssertTrue(after.contains("mount last error: none"), after)
        let status = laptop.status()
        XCTAssertEqual(status["repository"], id)
        XCTAssertNotEqual(status["last_sync"], "never")
        // `--json` carries the same: what the mount knows of its sync.
        let mount = try XCTUnwrap(try mountJSON(laptop))
        XCTAssertEqual(mount.pid, pid)
        XCTAssertEqual(mount.mountpoint, laptop.mountpoint)
        XCTAssertEqual(mount.sync, "synced")
        XCTAssertEqual(mount.server, proxy.url)
        XCTAssertEqual(mount.repoId, id)
        XCTAssertEqual(mount.pendingCommits, 0)
        XCTAssertNotNil(mount.lastSync)
        XCTAssertNil(mount.lastError)
        XCTAssertNil(mount.error)
        laptop.unmount()
        // (The daemon exits just after the unmount.)
        try eventually(30, "status shows no mount once the daemon is gone") { try self.mountJSON(laptop) == nil }
    }

    /// `binder status --json`'s `mount` object (nil when it is null).
    struct MountJSON: Decodable {
        let pid: Int32?, mountpoint: String?, error: String?, sync: String?, server: String?, repoId: String?
        let lastSync: String?, pendingCommits: Int?, lastError: String?
    }

    func mountJSON(_ device: Device) throws -> MountJSON? {
        struct Status: Decodable { let mount: MountJSON? }
        let run = try device.binder(["status", "health", "--json"])
        return try JSONDecoder().decode(Status.self, from: Data(run.stdout.utf8)).mount
    }

    /// A server that answers 503 with `Retry-After: 1` is asked again no sooner than that (the
    /// proxy answers a request that comes back early, and logs it "early"), however short
    /// binder's own backoff (50 ms in these tests): a login gets through; the mount's sync,
    /// asked to wait past its tries, says so (`binder sync`, `.binder/status`, the log) and
    /// gets through on its next pass.
    func testAServerThatAsksToWaitIsLeftAloneThatLong() throws {
        let busyFile = serverRoot.root.appendingPathComponent("busy").path
        let proxy = try FaultProxy(upstream: server, ["--busy-first", "2", "--retry-after", "1", "--busy-file", busyFile])
        defer { proxy.stop() }
        let laptop = try Device(nsec: nsec)
        defer { laptop.unmount() }
        try laptop.binder(["login", "--server", proxy.url])
        XCTAssertEqual(proxy.requests.map { $0.last ?? "" }.prefix(3), ["503", "503", "200"], "\(proxy.requests)")

        try laptop.binder(["create", "health"])
        try laptop.mount("health", ["--sync-interval", "1"])
        try laptop.write("visits/a.md", "# A\n")
        // Ten busy answers: the mount's first pass gives up after its five tries of a request.
        try "10".write(toFile: busyFile, atomically: true, encoding: .utf8)
        let refused = try laptop.binder(["sync", "health", "--repo-id", "health"], expectFailure: true)
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("the server answered 503") && refused.stderr.contains("(it asked to wait 1 s)"), refused.stderr)
        let status = laptop.status()
        XCTAssertEqual(status["sync"], "error", laptop.diagnostics())
        XCTAssertTrue(status["last_error"]?.contains("(it asked to wait 1 s)") == true, laptop.diagnostics())
        XCTAssertNotNil(status["next_retry"], laptop.diagnostics())

        eventually(60, "the mount syncs once the server stops asking to wait", diagnostics: { laptop.diagnostics() }) {
            (try? self.gitOnServer("health", "rev-parse main")) == (try? laptop.tip("health")) && laptop.status()["sync"] == "synced"
        }
        let statuses = proxy.requests.map { $0.last ?? "" }
        XCTAssertEqual(statuses.filter { $0 == "503" }.count, 12, "\(proxy.requests)")
        XCTAssertFalse(statuses.contains("early"), "no request came back before the server's Retry-After: \(proxy.requests)")
        let log = try String(contentsOfFile: laptop.sandbox.home.appendingPathComponent("logs/health.log").path, encoding: .utf8)
        XCTAssertTrue(log.contains("sync failed; the server asked to wait, retrying"), log)
    }
}
