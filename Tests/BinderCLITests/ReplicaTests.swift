import BinderCrypto
import BinderTestPostgres
import Foundation
import XCTest

/// Two `binder serve` replicas on one PostgreSQL database and one token secret file, each with
/// its own pack cache, driven by stock git and binder (issue 42, "Proof").
final class ReplicaTests: XCTestCase {
    /// A binder made and synced through replica A is cloned through replica B; a login
    /// challenge B issued is answered at A, and the token works at both.
    func testABinderPushedThroughOneReplicaIsClonedThroughTheOther() throws {
        let replicas = try ReplicaSet()
        let nsec = String(decoding: try SecretKey.generate().nsec().copyBytes(), as: UTF8.self)
        let laptop = try Device(nsec: nsec), phone = try Device(nsec: nsec)
        try laptop.binder(["login", "--server", replicas[0].url])
        try laptop.binder(["create", "health"])
        try laptop.binder(["sync", "health", "--repo-id", "health"])
        try phone.binder(["login", "--server", replicas[1].url])
        let cloned = try phone.binder(["clone", "health"])
        XCTAssertTrue(cloned.stdout.contains("Cloned health"), cloned.stdout + replicas.logs)
        XCTAssertEqual(try phone.tip("health"), try laptop.tip("health"))

        let across = try MgitClient.run(["login-across", replicas[1].url, laptop.nsecFile, replicas[0].url])
        XCTAssertEqual(across.status, 0, across.stderr + replicas.logs)
        let tokenFile = try replicas.sandbox.file("across.token", across.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        for replica in replicas.replicas {
            XCTAssertEqual(try replicas.refs("health", through: replica, tokenFile: tokenFile)["refs/heads/main"], try laptop.tip("health"))
        }
        // A challenge is consumed once, whichever replica it is answered at.
        XCTAssertEqual(try MgitClient.run(["verify-bad", replicas[1].url, laptop.nsecFile, "reused"]).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines), "401")
    }

    /// 60 first pushes at once, spread over both replicas: 20 ids pushed once, 20 ids pushed
    /// twice (unrelated commits, one through each replica). Each id is created by exactly one
    /// push (of the same owner's pushes, none fails on another's lock: SQLSTATE 40P01 did);
    /// read through the other replica, every acknowledged push is there, each id listed once.
    func testConcurrentFirstPushesAreEachThereExactlyOnce() throws {
        // Room for all 60 at once: what is proved here is the store's, not the front door's caps.
        let replicas = try ReplicaSet(options: ["--connections-per-address", "64", "--queue-wait", "60"])
        let user = try replicas.user("alice")
        var pushes: [(id: String, work: String, replica: Int)] = []
        for n in 0..<40 {
            pushes.append(("first-\(n)", try replicas.workTree("work-\(n)-a"), n % 2))
            if n >= 20 { pushes.append(("first-\(n)", try replicas.workTree("work-\(n)-b"), (n + 1) % 2)) }
        }
        let statusFolder = replicas.sandbox.root.appendingPathComponent("status").path
        try FileManager.default.createDirectory(atPath: statusFolder, withIntermediateDirectories: true)
        let script = pushes.enumerated().map { index, push in
            "( timeout 120 git -c http.extraHeader=\"Authorization: Bearer $TOKEN\" -C '\(push.work)' push -q '\(replicas.url(replicas[push.replica], push.id))' main"
                + " >/dev/null 2>'\(statusFolder)/\(index).err'; echo $? > '\(statusFolder)/\(index)' ) &"
        }.joined(separator: "\n") + "\nwait"
        let token = try String(contentsOfFile: user.tokenFile, encoding: .utf8)
        XCTAssertEqual(try shell(script, environment: ["TOKEN": token, "GIT_TERMINAL_PROMPT": "0"]).status, 0)

        var acknowledged = 0
        for (index, push) in pushes.enumerated() {
            let status = try String(contentsOfFile: "\(statusFolder)/\(index)", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            guard status == "0" else { continue }
            acknowledged += 1
            let pushed = try shell("git -C '\(push.work)' rev-parse main").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            let other = replicas[(push.replica + 1) % 2]
            XCTAssertEqual(try replicas.refs(push.id, through: other, tokenFile: user.tokenFile)["refs/heads/main"], pushed,
                           "\(push.id), acknowledged through replica \(push.replica)")
        }
        for id in Set(pushes.map(\.id)) {
            let taken = pushes.indices.filter { pushes[$0].id == id }.filter {
                (try? String(contentsOfFile: "\(statusFolder)/\($0)", encoding: .utf8))?.hasPrefix("0") == true
            }
            XCTAssertLessThanOrEqual(taken.count, 1, "\(id): two unrelated first pushes were both acknowledged")
        }
        let listing = try MgitClient.run(["get", replicas[1].url, "/api/mgit/user/repositories", user.tokenFile])
        let body = try XCTUnwrap(listing.stdout.split(separator: " ", maxSplits: 1).last)
        let listed = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(body.utf8)) as? [[String: Any]]).compactMap { $0["repoId"] as? String }
        XCTAssertEqual(listed.count, Set(listed).count, "each id listed once: \(listed.sorted())")
        let acknowledgedIDs = Set(pushes.indices.filter {
            (try? String(contentsOfFile: "\(statusFolder)/\($0)", encoding: .utf8))?.hasPrefix("0") == true
        }.map { pushes[$0].id })
        XCTAssertEqual(Set(listed), acknowledgedIDs, "the listing through B names every acknowledged id")
        let refusals = Set(pushes.indices.compactMap { try? String(contentsOfFile: "\(statusFolder)/\($0).err", encoding: .utf8) }
            .filter { !$0.isEmpty }.map { $0.split(separator: "\n").first.map(String.init) ?? "" })
        XCTAssertEqual(acknowledgedIDs.count, 40, "each id created once; refusals: \(Array(refusals.prefix(5)))\n" + replicas.logs)
        print("replicas: \(acknowledged) of \(pushes.count) concurrent first pushes acknowledged, to \(acknowledgedIDs.count) ids; \(listed.count) ids listed through replica B; refused: \(Array(refusals.prefix(3)))")
    }

    /// 16 writers commit on one branch through both replicas at once, each fetching, rebasing
    /// and pushing again when told non-fast-forward (at most 40 tries): every acknowledged
    /// commit is in the final history, and a clone of it passes `git fsck --strict`.
    func testRacingWritersThroughBothReplicasLoseNoAcknowledgedCommit() throws {
        let (replicas, user, _) = try ReplicaSet.withRepository("shared")
        let token = try String(contentsOfFile: user.tokenFile, encoding: .utf8)
        let writers = (0..<16).map { n -> String in
            let url = replicas.url(replicas.replica(for: n), "shared")
            let work = replicas.sandbox.root.appendingPathComponent("writer-\(n)").path
            return """
            ( timeout 120 git -c http.extraHeader="Authorization: Bearer $TOKEN" clone -q '\(url)' '\(work)' || exit 1
              cd '\(work)' && echo "writer \(n)" > 'writer-\(n).json' && git add -A && git -c user.name=w -c user.email=w@w commit -q -m 'writer \(n)'
              for try in $(seq 40); do
                if timeout 120 git -c http.extraHeader="Authorization: Bearer $TOKEN" push -q origin main 2>/dev/null; then git rev-parse HEAD > ../acked-\(n); exit 0; fi
                timeout 120 git -c http.extraHeader="Authorization: Bearer $TOKEN" pull -q --rebase origin main 2>/dev/null || git rebase --abort 2>/dev/null
              done ) &
            """
        }.joined(separator: "\n") + "\nwait"
        XCTAssertEqual(try shell(writers, in: replicas.sandbox.root.path, environment: ["TOKEN": token, "GIT_TERMINAL_PROMPT": "0"]).status, 0)

        let final = replicas.sandbox.root.appendingPathComponent("final").path
        let cloned = try replicas.git("clone -q '\(replicas.url(replicas[1], "shared"))' '\(final)'", tokenFile: user.tokenFile)
        XCTAssertEqual(cloned.status, 0, cloned.stderr)
        var acknowledged = 0
        for n in 0..<16 {
            guard let commit = try? String(contentsOfFile: replicas.sandbox.root.appendingPathComponent("acked-\(n)").path, encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines) else { continue }
            acknowledged += 1
            XCTAssertEqual(try shell("git -C '\(final)' merge-base --is-ancestor \(commit) main").status, 0, "writer \(n)'s \(commit)")
        }
        XCTAssertGreaterThanOrEqual(acknowledged, 12, "most writers got through within 40 tries\n" + replicas.logs)
        let fsck = try shell("git -C '\(final)' fsck --strict --no-dangling")
        XCTAssertEqual(fsck.status, 0, fsck.stdout + fsck.stderr)
        print("replicas: \(acknowledged) of 16 racing writers acknowledged")
    }

    /// Replica A is killed (SIGKILL) while a 60 MB push goes through it (held by a relay after
    /// 20 MB, so that the kill lands in the middle): replica B serves on, and the repository is
    /// without that push (and without a pack of it) or with all of it; A started again serves
    /// it the same.
    func testAReplicaKilledInTheMiddleOfALargePushLeavesNothingHalfWritten() throws {
        let (replicas, user, work) = try ReplicaSet.withRepository("big")
        let before = try replicas.refs("big", through: replicas[1], tokenFile: user.tokenFile)["refs/heads/main"]
        let storedBefore = try replicas.query("SELECT count(*) FROM binder_packs WHERE repository = 'big'")
        XCTAssertEqual(try shell("cd '\(work)' && head -c \(60 << 20) /dev/urandom > large.bin && git add -A && git -c user.name=t -c user.email=t@t commit -q -m large").status, 0)
        let large = try shell("git -C '\(work)' rev-parse main").stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        let portFile = replicas.sandbox.root.appendingPathComponent("relay-port").path
        let relay = Process()
        relay.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        relay.arguments = ["python3", ServerHardeningTests.attacks, "throttle", "\(replicas[0].port)", portFile, "\(64 << 20)", "\(20 << 20)", "60", "90"]
        try relay.run()
        defer { if relay.isRunning { relay.terminate() } }
        eventually(20, "the relay listens") { FileManager.default.fileExists(atPath: portFile) }
        let relayPort = try String(contentsOfFile: portFile, encoding: .utf8)
        let token = try String(contentsOfFile: user.tokenFile, encoding: .utf8)
        let push = Process()
        push.executableURL = URL(fileURLWithPath: "/usr/bin/git")
        push.arguments = ["-c", "http.extraHeader=Authorization: Bearer " + token, "-C", work, "push", "-q",
                          "http://127.0.0.1:\(relayPort)/api/mgit/repos/big", "main"]
        push.environment = ProcessInfo.processInfo.environment.merging(["GIT_TERMINAL_PROMPT": "0"]) { $1 }
        push.standardError = FileHandle.nullDevice
        let victim = replicas[0].pid, readBefore = Self.bytesRead(victim)
        try push.run()
        defer { if push.isRunning { push.terminate() } }
        eventually(60, "replica A has read 16 MB of the push") { Self.bytesRead(victim) - readBefore > 16 << 20 }
        replicas[0].kill9()
        XCTAssertTrue(push.waitBounded(seconds: 120, label: "the cut push"), "the cut push ends\n" + replicas.logs)
        XCTAssertNotEqual(push.terminationStatus, 0, "a push cut by the replica's death is not acknowledged")

        let after = try replicas.refs("big", through: replicas[1], tokenFile: user.tokenFile)["refs/heads/main"]
        XCTAssertTrue(after == before || after == large, "main is the old tip or the whole push: \(after ?? "none")")
        if after == before {
            XCTAssertEqual(try replicas.query("SELECT count(*) FROM binder_packs WHERE repository = 'big'"), storedBefore,
                           "the cut push left no pack behind")
        }
        let clone = replicas.sandbox.root.appendingPathComponent("after-kill").path
        let cloned = try replicas.git("clone -q '\(replicas.url(replicas[1], "big"))' '\(clone)'", tokenFile: user.tokenFile)
        XCTAssertEqual(cloned.status, 0, cloned.stderr + replicas.logs)
        XCTAssertEqual(try shell("git -C '\(clone)' fsck --strict --no-dangling").status, 0)
        try replicas[0].start()
        XCTAssertEqual(try replicas.refs("big", through: replicas[0], tokenFile: user.tokenFile)["refs/heads/main"], after)
        print("replicas: after the kill main is \(after == large ? "the whole push" : "the old tip")")
    }

    /// The HTTP status curl gets for `arguments` within `seconds` ("000": no answer in time).
    static func status(of arguments: String, within seconds: Int = 5) throws -> String {
        try shell("curl -s -o /dev/null -w '%{http_code}' --max-time \(seconds) \(arguments)").stdout
    }

    /// Bytes a process has read so far (/proc/PID/io's rchar: sockets included).
    static func bytesRead(_ pid: Int32) -> Int {
        let io = (try? String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8)) ?? ""
        return Int(io.split(separator: "\n").first { $0.hasPrefix("rchar:") }?.split(separator: " ").last ?? "") ?? 0
    }

    /// PostgreSQL (a cluster of this test's own) stopped at once and started again while a
    /// writer pushes through both replicas: meanwhile a login is answered 503 with Retry-After
    /// within seconds, git shows why, and /readyz answers 503;
    /// afterwards both replicas log users in again, the writer (retrying) gets every commit
    /// through, all of them are in the history, and a clone passes `git fsck --strict`.
    func testPostgresRestartedWhileClientsWorkCorruptsNothing() throws {
        let cluster = try PostgresCluster.own()
        defer { cluster.stop() }
        let (replicas, user, seed) = try ReplicaSet.withRepository("busy", cluster: cluster)
        let acked = replicas.sandbox.root.appendingPathComponent("acked").path
        let urls = replicas.replicas.map { replicas.url($0, "busy") }
        let writer = Process()
        writer.executableURL = URL(fileURLWithPath: "/bin/bash")
        writer.arguments = ["-c", """
            cd '\(seed)' || exit 1
            for n in $(seq 12); do
              echo "entry $n" > "entry-$n.json" && git add -A && git -c user.name=w -c user.email=w@w commit -q -m "entry $n"
              for try in $(seq 300); do
                if [ $((try % 2)) = 0 ]; then url='\(urls[0])'; else url='\(urls[1])'; fi
                if timeout 60 git -c http.extraHeader="Authorization: Bearer $TOKEN" push -q "$url" HEAD:main 2>/dev/null; then
                  git rev-parse HEAD >> '\(acked)'; break; fi
                timeout 60 git -c http.extraHeader="Authorization: Bearer $TOKEN" pull -q --rebase "$url" main 2>/dev/null || git rebase --abort 2>/dev/null
              done
            done
            """]
        writer.environment = ProcessInfo.processInfo.environment.merging(
            ["TOKEN": try String(contentsOfFile: user.tokenFile, encoding: .utf8), "GIT_TERMINAL_PROMPT": "0"]) { $1 }
        try writer.run()
        defer { if writer.isRunning { writer.terminate() } }
        func ackedCount() -> Int { ((try? String(contentsOfFile: acked, encoding: .utf8)) ?? "").split(separator: "\n").count }
        eventually(60, "the writer has pushed 3 commits") { ackedCount() >= 3 }

        try cluster.stopImmediately()
        for replica in replicas.replicas {
            // No challenge is issued: 503 with Retry-After once the pool's connection wait (3 s) is over.
            let answer = try shell("curl -s -o /dev/null -D - --max-time 8 -X POST -d '{}' '\(replica.url)/api/auth/nostr/challenge'").stdout
            XCTAssertTrue(answer.hasPrefix("HTTP/1.1 503"), answer)
            XCTAssertTrue(answer.lowercased().contains("retry-after: 10"), answer)
            XCTAssertEqual(try Self.status(of: "'\(replica.url)/readyz'"), "503", "a load balancer takes the replica out")
        }
        let refused = try replicas.git("ls-remote '\(urls[0])'", tokenFile: user.tokenFile)
        XCTAssertTrue(refused.status != 0 && refused.stderr.contains("database is unavailable"), refused.stderr)
        let ackedDuringOutage = ackedCount()
        try cluster.start()
        let restarted = Date()
        for replica in replicas.replicas {
            try eventually(60, "\(replica.url) logs users in again", diagnostics: { replicas.logs }) {
                try Self.status(of: "-X POST -d '{}' '\(replica.url)/api/auth/nostr/challenge'") == "200"
            }
            print("replicas: \(replica.url) issues challenges again \(Int(Date().timeIntervalSince(restarted))) s after the restart")
            XCTAssertEqual(try MgitClient.run(["login", replica.url, user.nsecFile]).status, 0)
            XCTAssertEqual(try Self.status(of: "'\(replica.url)/readyz'"), "200")
        }
        XCTAssertTrue(writer.waitBounded(seconds: 240, label: "the writer"), "the writer ends\n" + replicas.logs)
        let final = replicas.sandbox.root.appendingPathComponent("final").path
        let cloned = try replicas.git("clone -q '\(urls[1])' '\(final)'", tokenFile: user.tokenFile)
        XCTAssertEqual(cloned.status, 0, cloned.stderr)
        let commits = ((try? String(contentsOfFile: acked, encoding: .utf8)) ?? "").split(separator: "\n")
        for commit in commits {
            XCTAssertEqual(try shell("git -C '\(final)' merge-base --is-ancestor \(commit) main").status, 0, "acknowledged \(commit)")
        }
        XCTAssertEqual(commits.count, 12, "the writer got every commit through, retrying\n" + replicas.logs)
        print("replicas: PostgreSQL restarted after 3 commits; \(ackedDuringOutage) acknowledged until it was back, 12 in all")
        XCTAssertEqual(try shell("git -C '\(final)' fsck --strict --no-dangling").status, 0)
    }
}
