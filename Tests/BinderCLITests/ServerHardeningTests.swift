import BinderCrypto
import Foundation
import Synchronization
import XCTest

/// `binder serve` against what an attacker sends (Tests/interop/server_attacks.py): each test
/// runs a real server on loopback and checks one promise of SECURITY.md, "The server".
/// `ServerHardeningOnDatabaseTests` runs them against a replica on PostgreSQL.
class ServerHardeningTests: XCTestCase {
    var root: BinderSandbox!
    var server: TestServer!

    override func setUpWithError() throws {
        root = try BinderSandbox()
    }

    override func tearDown() {
        server?.stop()
        server = nil; root = nil
    }

    func start(_ options: [String] = []) throws {
        server = try TestServer(root: root.root, options: options)
    }

    static let attacks = URL(fileURLWithPath: MgitClient.script).deletingLastPathComponent()
        .appendingPathComponent("server_attacks.py").path

    func attack(_ arguments: [String]) throws -> String {
        try attacks([arguments])[0]
    }

    /// Several attacks at once, each on its own connections (the server judges each connection
    /// by itself): what each printed, in order. Runs as long as the slowest, not all of them.
    func attacks(_ list: [[String]]) throws -> [String] {
        let runs = Mutex([Int: Result<BinderRun, any Error>]())
        DispatchQueue.concurrentPerform(iterations: list.count) { index in
            let run = Result { try BinderSandbox.run(executable: "/usr/bin/env", ["python3", Self.attacks] + list[index]) }
            runs.withLock { $0[index] = run }
        }
        return try list.indices.map { index in
            let run = try runs.withLock { try XCTUnwrap($0[index]) }.get()
            XCTAssertEqual(run.status, 0, run.stderr)
            return run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    /// A fresh key's token (file path) from the independent client.
    func user(_ name: String) throws -> (token: String, tokenFile: String, pubkey: String) {
        let key = try SecretKey.generate()
        let nsec = try root.file("\(name).nsec", String(decoding: try key.nsec().copyBytes(), as: UTF8.self))
        let run = try MgitClient.run(["login", server.url, nsec])
        XCTAssertEqual(run.status, 0, run.stderr)
        let token = run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        return (token, try root.file("\(name).token", token), key.publicKey.hex)
    }

    func get(_ path: String, tokenFile: String?) throws -> (status: Int, body: String) {
        let run = try MgitClient.run(["get", server.url, path] + (tokenFile.map { [$0] } ?? []))
        let parts = run.stdout.split(separator: " ", maxSplits: 1)
        return (Int(parts.first ?? "") ?? -1, parts.count > 1 ? String(parts[1]) : "")
    }

    /// A work tree with one commit holding `bytes` random bytes (or a small text).
    func workTree(_ name: String, bytes: Int = 0) throws -> String {
        try makeWorkTree(root.root.appendingPathComponent(name).path, bytes: bytes)
    }

    func push(_ work: String, to id: String, tokenFile: String) throws -> BinderRun {
        try shell("git -c http.extraHeader=\"Authorization: Bearer $(cat '\(tokenFile)')\" -C '\(work)' push -q '\(server.url)/api/mgit/repos/\(id)' main")
    }

    /// Where repository `id`'s main points on the server (with git's newline).
    func serverTip(_ id: String) throws -> String { try server.git(id, "rev-parse main") }

    /// The owner the server keeps for `id` (with a newline, as in `binder-owner`).
    func serverOwner(_ id: String) throws -> String {
        try String(contentsOfFile: server.repos + "/\(id).git/binder-owner", encoding: .utf8)
    }

    /// The server's folder, less its own `.binder-serve`.
    func repositoryFolders() throws -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: server.repos)) ?? []).filter { $0 != ".binder-serve" }.sorted()
    }

    /// The server process's resident set (current and peak), in MiB, from /proc.
    func serverMemory() throws -> (rss: Int, peak: Int) {
        let status = try String(contentsOfFile: "/proc/\(server.pid)/status", encoding: .utf8)
        func field(_ name: String) -> Int {
            let line = status.split(separator: "\n").first { $0.hasPrefix(name + ":") } ?? ""
            return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) / 1024
        }
        return (field("VmRSS"), field("VmHWM"))
    }

    // MARK: - Bodies

    /// An `Authorization` header that is not a valid token does not raise the body limit: the
    /// login endpoint still refuses 200 KB, and git's endpoints answer 401 without reading.
    func testABogusAuthorizationDoesNotRaiseTheBodyLimit() throws {
        try start()
        let alice = try user("alice")
        XCTAssertEqual(try push(try workTree("w"), to: "alices", tokenFile: alice.tokenFile).status, 0)
        let before = try serverTip("alices")
        XCTAssertEqual(try attack(["post", server.url + "/api/auth/nostr/verify", "200000", "bogus"]), "413")
        XCTAssertEqual(try attack(["post", server.url + "/api/auth/nostr/verify", "200000", "bogus", "gzip"]), "413")
        XCTAssertEqual(try attack(["post", server.url + "/api/mgit/repos/alices/git-upload-pack", "3000000", "bogus"]), "401")
        XCTAssertEqual(try attack(["post", server.url + "/api/mgit/repos/alices/git-receive-pack", "3000000", "bogus"]), "401")
        XCTAssertEqual(try attack(["post", server.url + "/api/mgit/repos/alices/git-receive-pack", "3000000", "none"]), "401")
        XCTAssertEqual(try serverTip("alices"), before)
        XCTAssertEqual(try get("/api/mgit/user/repositories", tokenFile: alice.tokenFile).status, 200, "the server still serves")
    }

    /// Four gzip bombs at once (each 1 GiB of zeros in about 1 MB), anonymous, with a forged
    /// token and with a real one: each is cut at its endpoint's limit counted after inflating
    /// (or, past 1 MiB, as it inflates more than 100 times), and the server's peak memory stays
    /// far below one bomb.
    func testGzipBombsAreCutAtTheLimitAndMemoryStaysBounded() throws {
        try start(["--max-push-bytes", "\(16 << 20)"])
        let alice = try user("alice")
        XCTAssertEqual(try push(try workTree("w"), to: "alices", tokenFile: alice.tokenFile).status, 0)
        let base = server.url
        let bombs = [
            ("\(base)/api/auth/nostr/verify", "none", "git-upload-pack", "413"),
            ("\(base)/api/mgit/repos/alices/git-upload-pack", "bogus", "git-upload-pack", "401"),
            ("\(base)/api/mgit/repos/alices/git-upload-pack", alice.tokenFile, "git-upload-pack", "413"),
            ("\(base)/api/mgit/repos/alices/git-receive-pack", alice.tokenFile, "git-receive-pack", "413"),
        ]
        let script = bombs.enumerated().map { index, bomb in
            "python3 '\(Self.attacks)' bomb '\(bomb.0)' 1024 '\(bomb.1)' \(bomb.2) > '\(root.root.path)/bomb-\(index)' &"
        }.joined(separator: "\n") + "\nwait"
        let run = try shell(script)
        XCTAssertEqual(run.status, 0, run.stderr)
        for (index, bomb) in bombs.enumerated() {
            let answer = try String(contentsOfFile: root.root.path + "/bomb-\(index)", encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            XCTAssertEqual(answer, bomb.3, "bomb \(index) at \(bomb.0)")
        }
        let memory = try serverMemory()
        print("server memory after 4 gzip bombs: \(memory.rss) MiB resident, \(memory.peak) MiB peak")
        XCTAssertLessThan(memory.peak, 200, "peak resident MiB of the server")
        XCTAssertEqual(try get("/api/mgit/user/repositories", tokenFile: alice.tokenFile).status, 200, "the server still serves")
        XCTAssertEqual(try repositoryFolders(), ["alices.git"])
    }

    // MARK: - Creation

    /// limbo.health's answers for an id that does not exist (receive-pack advertisement 200 with
    /// no refs, upload-pack 403), but nothing is created until a push brings a branch: an
    /// empty or pack-less receive-pack POST creates nothing.
    func testAnUnknownIdIsAdvertisedEmptyAndOnlyAPackCreatesIt() throws {
        try start()
        let alice = try user("alice")
        let advertised = try get("/api/mgit/repos/fresh/info/refs?service=git-receive-pack", tokenFile: alice.tokenFile)
        XCTAssertEqual(advertised.status, 200)
        XCTAssertTrue(advertised.body.contains("# service=git-receive-pack"), advertised.body)
        XCTAssertTrue(advertised.body.contains("capabilities^{}"), "no refs: \(advertised.body)")
        XCTAssertEqual(try get("/api/mgit/repos/fresh/info/refs?service=git-upload-pack", tokenFile: alice.tokenFile).status, 403)
        XCTAssertEqual(try attack(["post", server.url + "/api/mgit/repos/fresh/git-upload-pack", "100", alice.tokenFile]), "403")
        XCTAssertEqual(try attack(["post", server.url + "/api/mgit/repos/fresh/git-receive-pack", "0", alice.tokenFile]), "400")
        XCTAssertEqual(try attack(["post", server.url + "/api/mgit/repos/fresh/git-receive-pack", "100", alice.tokenFile]), "400")
        // git's probe before a large push (a bare flush) is answered, and creates nothing either.
        XCTAssertEqual(try attack(["post", server.url + "/api/mgit/repos/fresh/git-receive-pack", "text:0000", alice.tokenFile]), "200")
        XCTAssertEqual(try repositoryFolders(), [], "nothing created")
        XCTAssertEqual(try get("/api/mgit/user/repositories", tokenFile: alice.tokenFile).body.trimmingCharacters(in: .whitespacesAndNewlines), "[]")

        // A push that brings a branch creates it, owned by the pusher.
        let work = try workTree("w")
        XCTAssertEqual(try push(work, to: "fresh", tokenFile: alice.tokenFile).status, 0)
        XCTAssertEqual(try repositoryFolders(), ["fresh.git"])
        XCTAssertEqual(try serverOwner("fresh"), alice.pubkey + "\n")
        XCTAssertEqual(try serverTip("fresh"), try shell("git -C '\(work)' rev-parse main").stdout)

        // A first push larger than git's post buffer (1 MiB) is probed, then sent chunked.
        let large = try workTree("large", bytes: 3 << 20)
        let pushed = try push(large, to: "large", tokenFile: alice.tokenFile)
        XCTAssertEqual(pushed.status, 0, pushed.stderr)
        XCTAssertEqual(try serverTip("large"), try shell("git -C '\(large)' rev-parse main").stdout)
    }

    /// Push-to-create never applies to a repository that exists: another user's push, fetch and
    /// advertisement of it are refused (403) and it is left as it was.
    func testAnotherUserCannotPushToMyRepository() throws {
        try start()
        let alice = try user("alice"), bob = try user("bob")
        XCTAssertEqual(try push(try workTree("alice-work"), to: "alices", tokenFile: alice.tokenFile).status, 0)
        let before = try serverTip("alices")
        let bobsWork = try workTree("bob-work")
        let intrusion = try push(bobsWork, to: "alices", tokenFile: bob.tokenFile)
        XCTAssertNotEqual(intrusion.status, 0)
        XCTAssertTrue(intrusion.stderr.contains("403"), intrusion.stderr)
        XCTAssertEqual(try shell("git -c http.extraHeader=\"Authorization: Bearer $(cat '\(bob.tokenFile)')\" -C '\(bobsWork)' push -q --force '\(server.url)/api/mgit/repos/alices' main").status == 0, false)
        XCTAssertEqual(try serverTip("alices"), before)
        XCTAssertEqual(try get("/api/mgit/repos/alices/info/refs?service=git-receive-pack", tokenFile: bob.tokenFile).status, 403)
        XCTAssertEqual(try attack(["post", server.url + "/api/mgit/repos/alices/git-receive-pack", "100", bob.tokenFile]), "403")
        XCTAssertEqual(try serverOwner("alices"), alice.pubkey + "\n")
        // Bob's own id is his.
        XCTAssertEqual(try push(bobsWork, to: "bobs", tokenFile: bob.tokenFile).status, 0)
        XCTAssertEqual(try repositoryFolders(), ["alices.git", "bobs.git"])
    }

    /// Each user may own at most --max-repos-per-user repositories taking --max-bytes-per-user.
    func testQuotasLimitRepositoriesAndBytesPerUser() throws {
        try start(["--max-repos-per-user", "2", "--max-bytes-per-user", "400000"])
        let alice = try user("alice"), bob = try user("bob")
        let small = try workTree("small")
        XCTAssertEqual(try push(small, to: "one", tokenFile: alice.tokenFile).status, 0)
        XCTAssertEqual(try push(small, to: "two", tokenFile: alice.tokenFile).status, 0)
        let third = try push(small, to: "three", tokenFile: alice.tokenFile)
        XCTAssertNotEqual(third.status, 0, "a third repository is over the quota")
        XCTAssertEqual(try get("/api/mgit/repos/three/info/refs?service=git-receive-pack", tokenFile: alice.tokenFile).status, 403)
        XCTAssertEqual(try repositoryFolders(), ["one.git", "two.git"])

        let before = try serverTip("one")
        let big = try workTree("big", bytes: 600_000)
        XCTAssertEqual(try shell("cd '\(small)' && git -c user.name=t -c user.email=t@t pull -q --no-rebase --allow-unrelated-histories '\(big)' main").status, 0)
        let tooBig = try push(small, to: "one", tokenFile: alice.tokenFile)
        XCTAssertNotEqual(tooBig.status, 0, "600 KB do not fit in what is left of 400 KB")
        XCTAssertTrue(tooBig.stderr.contains("413"), tooBig.stderr)
        XCTAssertEqual(try serverTip("one"), before)

        // Quotas are per user: Bob still has his.
        XCTAssertEqual(try push(try workTree("bob-work"), to: "bobs", tokenFile: bob.tokenFile).status, 0)
        XCTAssertEqual(try repositoryFolders(), ["bobs.git", "one.git", "two.git"])
    }

    // MARK: - Connections and rates

    /// The "open N closed M" lines `server_attacks.py slowloris` has written to `report` so far.
    func slowlorisProgress(_ report: String) -> [(open: Int, closed: Int)] {
        ((try? String(contentsOfFile: report, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { line in
            let words = line.split(separator: " ")
            guard words.count == 4, words[0] == "open", words[2] == "closed", let open = Int(words[1]), let closed = Int(words[3]) else { return nil }
            return (open, closed)
        }
    }

    /// 1,000 slowloris connections (headers never finished, reconnected as the server drops
    /// them) from 20 addresses, and one address trying more than its cap: a legitimate login
    /// and `binder clone` from another address complete meanwhile.
    func testSlowlorisConnectionsDoNotStopAClone() throws {
        try start(["--header-timeout", "3", "--connections-per-address", "50"])
        let nsec = String(decoding: try SecretKey.generate().nsec().copyBytes(), as: UTF8.self)
        let laptop = try Device(nsec: nsec), phone = try Device(nsec: nsec)
        try laptop.binder(["create", "health"])
        let token = try MgitClient.run(["login", server.url, laptop.nsecFile]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let tokenFile = try root.file("laptop.token", token)
        XCTAssertEqual(try push(laptop.repository("health"), to: "health", tokenFile: tokenFile).status, 0)

        // Past the cap (50) and the queue (as many again): of 130 silent connections from one
        // address, 30 are answered 503 at once (an HTTP answer, not a reset or a close).
        XCTAssertEqual(try attack(["cap", "127.0.0.1", "\(server.port)", "130", "127.0.0.99"]), "30")

        let report = root.root.appendingPathComponent("slowloris").path
        let sources = (2...21).map { "127.0.0.\($0)" }
        let flood = Process()
        flood.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        flood.arguments = ["python3", Self.attacks, "slowloris", "127.0.0.1", "\(server.port)", "1000", "40", report] + sources
        flood.standardOutput = FileHandle.nullDevice
        try flood.run()
        defer { if flood.isRunning { flood.terminate() } }
        eventually(60, "1,000 slow connections are open") { slowlorisProgress(report).contains { $0.open >= 1000 } }

        try phone.binder(["login", "--server", server.url])
        let cloned = try phone.binder(["clone", "health"])
        XCTAssertTrue(cloned.stdout.contains("Cloned health"), cloned.stdout)
        XCTAssertEqual(try phone.tip("health"), try laptop.tip("health"))
        XCTAssertTrue(flood.isRunning, "the clone completed while the flood was on")

        // The flood goes on until the server has cut more than all of it once (then it stops
        // and reports, SIGTERM), not for all of its 40 s.
        eventually(60, "the server cuts the slow connections") { slowlorisProgress(report).contains { $0.closed > 1000 } }
        flood.terminate()
        flood.waitBounded(label: "flood")
        let summaryLine = try XCTUnwrap((try String(contentsOfFile: report, encoding: .utf8)).split(separator: "\n").last)
        let summary = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(summaryLine.utf8)) as? [String: Int])
        XCTAssertGreaterThanOrEqual(summary["max_open"] ?? 0, 1000, "\(summary)")
        XCTAssertGreaterThan(summary["closed_by_server"] ?? 0, 1000, "slow headers are cut: \(summary)")
    }

    /// A body that trickles in (under 1 KiB per --body-timeout window) is cut, with a token or
    /// without one; a connection that never finishes its headers is cut after --header-timeout
    /// (the slow headers stop once 20 are cut, else after 30 s).
    func testSlowBodiesAndSlowHeadersAreCut() throws {
        try start(["--body-timeout", "2", "--header-timeout", "2"])
        let alice = try user("alice")
        XCTAssertEqual(try push(try workTree("w"), to: "alices", tokenFile: alice.tokenFile).status, 0)
        XCTAssertEqual(try attacks([["slowbody", server.url + "/api/mgit/repos/alices/git-upload-pack", alice.tokenFile, "30"],
                                    ["slowbody", server.url + "/api/auth/nostr/verify", "none", "30", "1000"]]), ["closed", "closed"])
        // Slow headers: 20 connections that never end their head are all cut.
        let report = root.root.appendingPathComponent("slow-headers").path
        _ = try attack(["slowloris", "127.0.0.1", "\(server.port)", "20", "30", report, "--until-closed", "20", "127.0.0.5"])
        let summaryLine = try XCTUnwrap((try String(contentsOfFile: report, encoding: .utf8)).split(separator: "\n").last)
        let summary = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(summaryLine.utf8)) as? [String: Int])
        XCTAssertGreaterThanOrEqual(summary["closed_by_server"] ?? 0, 20, "\(summary)")
        XCTAssertEqual(try get("/api/mgit/user/repositories", tokenFile: alice.tokenFile).status, 200, "the server still serves")
    }

    /// A body that keeps coming, but trickles (700 bytes a second: above the old 1 KiB per
    /// window), is cut once it falls below 1 KiB/s on average past the first --body-timeout; a
    /// slow link that keeps moving is not: 4 KiB/s, and a real push through a relay passing
    /// 24 KiB/s that drops out for a second on the way.
    func testATrickledBodyIsCutAndASlowLinkIsNot() throws {
        try start(["--body-timeout", "2"])
        let alice = try user("alice")
        XCTAssertEqual(try push(try workTree("w"), to: "alices", tokenFile: alice.tokenFile).status, 0)
        // The three at once: the trickles are cut at about 6 s (700 t < 1024 (t - 2)), the
        // 4 KiB/s body takes 4 s.
        XCTAssertEqual(try attacks([["trickle", server.url + "/api/auth/nostr/verify", "none", "16000", "350", "0.5", "60"],
                                    ["trickle", server.url + "/api/mgit/repos/alices/git-upload-pack", alice.tokenFile,
                                     "100000", "350", "0.5", "60"],
                                    ["trickle", server.url + "/api/auth/nostr/verify", "none", "16000", "2048", "0.5", "60"]]),
                       ["closed", "closed", "400"], "the trickles are cut; the whole 4 KiB/s body came, and was answered")

        let portFile = root.root.appendingPathComponent("relay-port").path
        let relay = Process()
        relay.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        relay.arguments = ["python3", Self.attacks, "throttle", "\(server.port)", portFile, "\(24 << 10)", "\(64 << 10)", "1", "120"]
        try relay.run()
        defer { if relay.isRunning { relay.terminate() } }
        eventually(20, "the relay listens") { FileManager.default.fileExists(atPath: portFile) }
        let port = try String(contentsOfFile: portFile, encoding: .utf8)
        let work = try workTree("slow-link", bytes: 100_000)
        let pushed = try shell("git -c http.extraHeader=\"Authorization: Bearer $(cat '\(alice.tokenFile)')\" -C '\(work)' push -q 'http://127.0.0.1:\(port)/api/mgit/repos/slow' main")
        XCTAssertEqual(pushed.status, 0, pushed.stderr)
        XCTAssertEqual(try serverTip("slow"), try shell("git -C '\(work)' rev-parse main").stdout)
    }

    /// A flood of login challenges, more than the server keeps (10,000), does not push out the
    /// pending challenge of a user at another address: from one address (which holds at most
    /// 32), nor from 320 addresses together (the address holding the most loses its oldest).
    func testAFloodOfChallengesDoesNotPushOutAnotherUsersPendingOne() throws {
        try start(["--logins-per-minute", "1000000"])
        let nsec = try root.file("nsec", String(decoding: try SecretKey.generate().nsec().copyBytes(), as: UTF8.self))
        XCTAssertEqual(try attack(["challenge-flood", server.url, nsec, "127.0.0.2", "10050", "127.0.0.3"]), "10050 200")
        let crowd = (0..<320).map { "127.0.\(1 + $0 / 250).\(1 + $0 % 250)" }
        XCTAssertEqual(try attack(["challenge-flood", server.url, nsec, "127.0.0.2", "10400"] + crowd), "10400 200")
        let memory = try serverMemory()
        XCTAssertLessThan(memory.rss, 200, "MiB")
    }

    /// A request's cost does not grow with the repositories on the server: with 2,000 other
    /// users' repositories there, a listing and a push's quota check read only their owner's
    /// (counted in read system calls, from /proc: no clock involved).
    func testARequestReadsOnlyItsOwnersRepositories() throws {
        try start()
        let alice = try user("alice")
        XCTAssertEqual(try push(try workTree("w"), to: "alices", tokenFile: alice.tokenFile).status, 0)
        server.stop()
        let fm = FileManager.default
        for i in 0..<2_000 {
            let folder = server.repos + "/others-\(i).git"
            try fm.createDirectory(atPath: folder, withIntermediateDirectories: false)
            try Data("ref: refs/heads/main\n".utf8).write(to: URL(fileURLWithPath: folder + "/HEAD"))
            try Data((String(repeating: "\(i % 10)", count: 64) + "\n").utf8).write(to: URL(fileURLWithPath: folder + "/binder-owner"))
        }
        try server.start()
        func readCalls() throws -> Int {
            let io = try String(contentsOfFile: "/proc/\(server.pid)/io", encoding: .utf8)
            return Int(io.split(separator: "\n").first { $0.hasPrefix("syscr:") }?.split(separator: " ").last ?? "") ?? -1
        }
        let before = try readCalls()
        for i in 0..<5 {
            let listed = try get("/api/mgit/user/repositories", tokenFile: alice.tokenFile)
            XCTAssertEqual(listed.status, 200)
            XCTAssertTrue(listed.body.contains(#""repoId":"alices""#) && !listed.body.contains("others-"), listed.body)
            XCTAssertEqual(try get("/api/mgit/repos/new-\(i)/info/refs?service=git-receive-pack", tokenFile: alice.tokenFile).status, 200)
        }
        let reads = try readCalls() - before
        XCTAssertLessThan(reads, 10 * 200, "read calls for 10 requests with 2,000 repositories on the server")
        // The quotas still count: a push to Alice's repository, then one creating another.
        XCTAssertEqual(try push(try workTree("w2"), to: "second", tokenFile: alice.tokenFile).status, 0)
        XCTAssertTrue(try get("/api/mgit/user/repositories", tokenFile: alice.tokenFile).body.contains(#""repoId":"second""#))
    }

    /// The login endpoints answer 429 past --logins-per-minute from one address; other
    /// addresses are not affected.
    func testLoginRequestsAreRateLimitedPerAddress() throws {
        try start(["--logins-per-minute", "5"])
        let statuses = try attack(["logins", "127.0.0.1", "\(server.port)", "8", "127.0.0.1"]).split(separator: " ")
        XCTAssertEqual(statuses, ["200", "200", "200", "200", "200", "429", "429", "429"])
        let nsec = try root.file("nsec", String(decoding: try SecretKey.generate().nsec().copyBytes(), as: UTF8.self))
        let refused = try MgitClient.run(["login", server.url, nsec])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("429"), refused.stderr)
        XCTAssertEqual(try attack(["logins", "127.0.0.1", "\(server.port)", "1", "127.0.0.2"]), "200", "another address")
        let verifies = try attack(["logins", "127.0.0.1", "\(server.port)", "7", "127.0.0.3", "/api/auth/nostr/verify"])
        XCTAssertEqual(verifies.split(separator: " "), ["400", "400", "400", "400", "400", "429", "429"])
    }

    // MARK: - Repository ids

    /// Ids are checked where they enter: an option-like, hidden, upper-case, percent-encoded,
    /// dotted or overlong id is refused (400) by every endpoint and no folder is made.
    func testHostileRepositoryIdsAreRefused() throws {
        try start()
        let alice = try user("alice")
        let hostile = ["-upload", ".x", "ARepo", "%61repo", "a%2Fb", "..", "x.git", "x.lock", "a..b", "%2D%2Dupload-pack=x",
                       String(repeating: "a", count: 101)]
        for id in hostile {
            XCTAssertEqual(try get("/api/mgit/repos/\(id)/info/refs?service=git-receive-pack", tokenFile: alice.tokenFile).status, 400, id)
            XCTAssertEqual(try attack(["post", server.url + "/api/mgit/repos/\(id)/git-receive-pack", "100", alice.tokenFile]), "400", id)
            XCTAssertEqual(try get("/api/mgit/qr/clone/\(id)", tokenFile: alice.tokenFile).status, 400, id)
        }
        let work = try workTree("w")
        XCTAssertNotEqual(try push(work, to: "-upload", tokenFile: alice.tokenFile).status, 0)
        XCTAssertNotEqual(try push(work, to: "ARepo", tokenFile: alice.tokenFile).status, 0)
        XCTAssertEqual(try repositoryFolders(), [])
        // The lowercase id is fine, and its upper-case twin stays refused.
        XCTAssertEqual(try push(work, to: "arepo", tokenFile: alice.tokenFile).status, 0)
        XCTAssertNotEqual(try push(work, to: "ARepo", tokenFile: alice.tokenFile).status, 0)
        XCTAssertEqual(try repositoryFolders(), ["arepo.git"])
    }
}
