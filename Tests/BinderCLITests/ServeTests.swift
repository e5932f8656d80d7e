import BinderCrypto
import Foundation
import XCTest

/// `binder serve` against clients that are not binder: rust-nostr + urllib for logins, and
/// command-line git for Smart HTTP.
final class ServeTests: XCTestCase {
    var root: BinderSandbox!
    var server: TestServer!

    override func setUpWithError() throws {
        root = try BinderSandbox()
        server = try TestServer(root: root.root)
    }

    override func tearDown() {
        server?.stop()
        server = nil; root = nil
    }

    func nsecFile(_ name: String) throws -> (file: String, key: SecretKey) {
        let key = try SecretKey.generate()
        return (try root.file(name, String(decoding: try key.nsec().copyBytes(), as: UTF8.self)), key)
    }

    func login(_ nsec: String, _ encoding: String = "plain") throws -> String {
        let run = try MgitClient.run(["login", server.url, nsec, encoding])
        XCTAssertEqual(run.status, 0, run.stderr)
        return run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func get(_ path: String, token: String?) throws -> (status: Int, body: String) {
        var arguments = ["get", server.url, path]
        if let token { arguments.append(try root.file("token-\(UUID().uuidString)", token)) }
        let run = try MgitClient.run(arguments)
        let parts = run.stdout.split(separator: " ", maxSplits: 1)
        return (Int(parts.first ?? "") ?? -1, parts.count > 1 ? String(parts[1]).trimmingCharacters(in: .newlines) : "")
    }

    func git(_ command: String, token: String) throws -> BinderRun {
        let tokenFile = try root.file("git-token", token)
        return try shell("git -c http.extraHeader=\"Authorization: Bearer $(cat '\(tokenFile)')\" \(command)", in: root.root.path)
    }

    func testLoginAcceptsPlainGzipAndChunkedBodiesAndRefusesEveryBadEvent() throws {
        let (nsec, key) = try nsecFile("nsec")
        for encoding in ["plain", "gzip", "chunked"] {
            let token = try login(nsec, encoding)
            XCTAssertEqual(token.split(separator: ".").count, 3, "a JWT")
            let payload = try XCTUnwrap(Base64URL.decode(token.split(separator: ".")[1]))
            let claims = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any])
            XCTAssertEqual(claims["pubkey"] as? String, key.publicKey.hex)
            XCTAssertEqual((claims["exp"] as? Int).map { $0 - (claims["iat"] as! Int) }, 86_400, "24 hours")
        }
        for bad in ["wrong-kind", "stale", "reused", "bad-signature", "wrong-challenge", "unknown-challenge"] {
            let run = try MgitClient.run(["verify-bad", server.url, nsec, bad])
            XCTAssertEqual(run.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "401", "\(bad): \(run.stderr)")
        }
        XCTAssertFalse(server.log.contains("eyJ"), "no token in the server's log")

        // Without a token, a request body may not be large (only a login comes anonymously).
        let flood = try shell("head -c 200000 /dev/zero | python3 -c 'import sys, urllib.request, urllib.error\ntry:\n  urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=sys.stdin.buffer.read()))\nexcept urllib.error.HTTPError as e:\n  print(e.code)' '\(server.url)/api/auth/nostr/verify'")
        XCTAssertEqual(flood.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "413", flood.stderr)
    }

    /// Found by fuzzing the server's parsing: a query piece `=` trapped the request parser, and a
    /// login event's `created_at` of Int64.min overflowed the freshness check; either stopped the
    /// server for everyone. Both now get an answer and the server keeps serving.
    func testHostileRequestsAreAnsweredAndTheServerLives() throws {
        let script = try root.file("hostile.py", """
            import json, sys, urllib.request, urllib.error
            base = sys.argv[1]
            def call(path, body=None):
                data = None if body is None else json.dumps(body).encode()
                try:
                    with urllib.request.urlopen(urllib.request.Request(base + path, data=data)) as r:
                        return r.status, r.read()
                except urllib.error.HTTPError as e:
                    return e.code, e.read()
            print(call("/api/mgit/repos/r/info/refs?=&service=git-upload-pack")[0])
            challenge = json.loads(call("/api/auth/nostr/challenge", {})[1])["challenge"]
            event = {"id": "", "pubkey": "", "created_at": -9223372036854775808, "kind": 22242,
                     "tags": [["challenge", challenge]], "content": challenge, "sig": ""}
            print(call("/api/auth/nostr/verify", {"signedEvent": event, "challenge": challenge})[0])
            print(call("/api/auth/nostr/challenge", {})[0])
            """)
        let run = try shell("python3 '\(script)' '\(server.url)'")
        XCTAssertEqual(run.stdout.split(separator: "\n"), ["401", "401", "200"], run.stderr)
    }

    func testTokensAndOwnershipGuardEveryRepository() throws {
        let (aliceFile, alice) = try nsecFile("alice")
        let (bobFile, _) = try nsecFile("bob")
        let aliceToken = try login(aliceFile), bobToken = try login(bobFile)

        // Alice pushes a repository into existence with plain git.
        let work = root.root.appendingPathComponent("work").path
        XCTAssertEqual(try shell("git init -q -b main '\(work)' && cd '\(work)' && echo ciphertext > a.json && git add a.json && git -c user.name=t -c user.email=t@t commit -q -m 'Initialize binder'").status, 0)
        let push = try git("-C '\(work)' push -q '\(server.url)/api/mgit/repos/alices' main", token: aliceToken)
        XCTAssertEqual(push.status, 0, push.stderr)
        XCTAssertEqual(try String(contentsOfFile: server.repos + "/alices.git/binder-owner", encoding: .utf8), alice.publicKey.hex + "\n")

        XCTAssertEqual(try get("/api/mgit/user/repositories", token: nil).status, 401)
        XCTAssertEqual(try get("/api/mgit/user/repositories", token: "not.a.token").status, 401)
        XCTAssertEqual(try get("/api/mgit/user/repositories", token: String(aliceToken.dropLast(2)) + "xx").status, 401)
        let aliceList = try get("/api/mgit/user/repositories", token: aliceToken)
        XCTAssertEqual(aliceList.status, 200)
        XCTAssertTrue(aliceList.body.contains(#""repoId":"alices""#), aliceList.body)
        XCTAssertEqual(try get("/api/mgit/user/repositories", token: bobToken).body, "[]")

        XCTAssertEqual(try get("/api/mgit/repos/alices/info/refs?service=git-upload-pack", token: nil).status, 401)
        XCTAssertEqual(try get("/api/mgit/repos/alices/info/refs?service=git-upload-pack", token: bobToken).status, 403)
        XCTAssertEqual(try get("/api/mgit/repos/alices/info/refs?service=git-receive-pack", token: bobToken).status, 403)
        XCTAssertEqual(try get("/api/mgit/qr/clone/alices", token: bobToken).status, 403)
        // As limbo.health: upload-pack of an id that does not exist is refused like one of someone else's.
        XCTAssertEqual(try get("/api/mgit/repos/nobody/info/refs?service=git-upload-pack", token: bobToken).status, 403)
        XCTAssertEqual(try get("/api/mgit/repos/..%2Fescape/info/refs?service=git-receive-pack", token: bobToken).status, 400)
        XCTAssertEqual(try get("/api/mgit/repos/.hidden/info/refs?service=git-receive-pack", token: bobToken).status, 400)
        XCTAssertEqual(try get("/api/mgit/repos/alices/info/refs", token: aliceToken).status, 400, "dumb HTTP is not served")
        let bobClone = try git("clone -q '\(server.url)/api/mgit/repos/alices' bobs-copy", token: bobToken)
        XCTAssertNotEqual(bobClone.status, 0)

        // History on the server is never rewritten: a forced push and a branch deletion are refused.
        XCTAssertEqual(try shell("cd '\(work)' && git -c user.name=t -c user.email=t@t commit -q --amend -m 'rewritten'").status, 0)
        let forced = try git("-C '\(work)' push -q --force '\(server.url)/api/mgit/repos/alices' main", token: aliceToken)
        XCTAssertNotEqual(forced.status, 0)
        let deleted = try git("-C '\(work)' push -q '\(server.url)/api/mgit/repos/alices' :main", token: aliceToken)
        XCTAssertNotEqual(deleted.status, 0)
        XCTAssertEqual(try server.git("alices", "log --format=%s main"), "Initialize binder\n")
    }

    /// `DELETE /api/mgit/repos/ID` (limbo.health's shape): its owner only; afterwards the id
    /// answers 410 `deleted-by-owner` to its owner's clone, fetch and push (never created again
    /// by a push), 403 to anyone else as before; its place in the quota is free; the server
    /// keeps a tombstone of the owner's public key and the time, nothing else.
    func testTheOwnerDeletesARepositoryAndItsIdAnswersGone() throws {
        server.stop()
        server = try TestServer(root: root.root, options: ["--max-repos-per-user", "1"])
        let (aliceFile, alice) = try nsecFile("alice")
        let (bobFile, _) = try nsecFile("bob")
        let aliceToken = try login(aliceFile), bobToken = try login(bobFile)
        let work = root.root.appendingPathComponent("work").path
        XCTAssertEqual(try shell("git init -q -b main '\(work)' && cd '\(work)' && echo ciphertext > a.json && git add a.json && git -c user.name=t -c user.email=t@t commit -q -m 'Initialize binder'").status, 0)
        XCTAssertEqual(try git("-C '\(work)' push -q '\(server.url)/api/mgit/repos/alices' main", token: aliceToken).status, 0)
        // The quota is full: a second repository is refused.
        XCTAssertNotEqual(try git("-C '\(work)' push -q '\(server.url)/api/mgit/repos/alices-second' main", token: aliceToken).status, 0)

        let delete = { (id: String, token: String) throws -> (status: Int, body: String) in
            let run = try MgitClient.run(["delete", self.server.url, "/api/mgit/repos/" + id, try self.root.file("token-\(UUID().uuidString)", token)])
            let parts = run.stdout.split(separator: " ", maxSplits: 1)
            return (Int(parts.first ?? "") ?? -1, parts.count > 1 ? String(parts[1]).trimmingCharacters(in: .newlines) : "")
        }
        let bobs = try delete("alices", bobToken)
        XCTAssertEqual(bobs.status, 403)
        XCTAssertEqual(bobs.body, #"{"reason":"Not authorized to delete this repository","status":"error"}"#)
        XCTAssertEqual(try delete("nobody", aliceToken).status, 404)
        XCTAssertEqual(try server.git("alices", "log --format=%s main"), "Initialize binder\n", "refusals delete nothing")

        let deleted = try delete("alices", aliceToken)
        XCTAssertEqual(deleted.status, 200, deleted.body)
        XCTAssertEqual(deleted.body, #"{"repoId":"alices","status":"OK"}"#)
        XCTAssertFalse(FileManager.default.fileExists(atPath: server.repos + "/alices.git"))
        let tombstone = try String(contentsOfFile: server.repos + "/.binder-serve/deleted/alices", encoding: .utf8)
        let fields = tombstone.split(separator: " ")
        XCTAssertEqual(fields.count, 2, tombstone)
        XCTAssertEqual(String(fields[0]), alice.publicKey.hex)
        XCTAssertLessThanOrEqual(abs((Int64(fields[1].trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) - Int64(Date().timeIntervalSince1970)), 120)
        XCTAssertEqual(try get("/api/mgit/user/repositories", token: aliceToken).body, "[]")

        // Its owner is told it is gone, by status and reason; anyone else sees what they saw before.
        for service in ["git-upload-pack", "git-receive-pack"] {
            let answer = try get("/api/mgit/repos/alices/info/refs?service=" + service, token: aliceToken)
            XCTAssertEqual(answer.status, 410, service)
            XCTAssertEqual(try get("/api/mgit/repos/alices/info/refs?service=" + service, token: bobToken).status, 403, service)
        }
        let again = try delete("alices", aliceToken)
        XCTAssertEqual(again.status, 410)
        XCTAssertTrue(again.body.contains(#""reason":"deleted-by-owner""#), again.body)
        XCTAssertEqual(try get("/api/mgit/qr/clone/alices", token: aliceToken).status, 404)
        // git shows the server's words; a push does not create the id again, whoever makes it.
        let clone = try git("clone -q '\(server.url)/api/mgit/repos/alices' alices-copy", token: aliceToken)
        XCTAssertNotEqual(clone.status, 0)
        XCTAssertTrue(clone.stderr.contains("410") && clone.stderr.contains("deleted by its owner"), clone.stderr)
        let fetch = try git("-C '\(work)' fetch -q '\(server.url)/api/mgit/repos/alices'", token: aliceToken)
        XCTAssertNotEqual(fetch.status, 0)
        XCTAssertTrue(fetch.stderr.contains("deleted by its owner"), fetch.stderr)
        let push = try git("-C '\(work)' push -q '\(server.url)/api/mgit/repos/alices' main", token: aliceToken)
        XCTAssertNotEqual(push.status, 0)
        XCTAssertTrue(push.stderr.contains("deleted by its owner"), push.stderr)
        XCTAssertNotEqual(try git("-C '\(work)' push -q '\(server.url)/api/mgit/repos/alices' main", token: bobToken).status, 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: server.repos + "/alices.git"))

        // Its place in the quota is free again; a restart keeps the tombstone.
        XCTAssertEqual(try git("-C '\(work)' push -q '\(server.url)/api/mgit/repos/alices-second' main", token: aliceToken).status, 0)
        server.stop()
        try server.start()
        XCTAssertEqual(try get("/api/mgit/repos/alices/info/refs?service=git-upload-pack", token: aliceToken).status, 410)
    }

    /// The clone QR's token (issue 43) fetches the one repository it was issued for, as the Limbo
    /// app's clone does (upload-pack only), and nothing else: no other repository, no push, no
    /// listing, no share, and no new QR (so it cannot renew itself). Its clone URL is the
    /// server's own, whatever `Host` the request named.
    func testTheCloneQRTokenOnlyFetchesItsRepository() throws {
        let (aliceFile, alice) = try nsecFile("alice")
        let aliceToken = try login(aliceFile)
        let work = root.root.appendingPathComponent("work").path
        XCTAssertEqual(try shell("git init -q -b main '\(work)' && cd '\(work)' && echo ciphertext > a.json && git add a.json && git -c user.name=t -c user.email=t@t commit -q -m 'Initialize binder'").status, 0)
        for id in ["health", "other"] {
            XCTAssertEqual(try git("-C '\(work)' push -q '\(server.url)/api/mgit/repos/\(id)' main", token: aliceToken).status, 0)
        }
        let qr = try get("/api/mgit/qr/clone/health", token: aliceToken)
        XCTAssertEqual(qr.status, 200, qr.body)
        let payload = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(qr.body.utf8)) as? [String: String])
        XCTAssertEqual(payload["clone_url"], server.url + "/api/mgit/repos/health")
        let cloneToken = try XCTUnwrap(payload["jwt_token"])
        let claims = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(try XCTUnwrap(Base64URL.decode(cloneToken.split(separator: ".")[1])))) as? [String: Any])
        XCTAssertEqual(claims["pubkey"] as? String, alice.publicKey.hex)
        XCTAssertEqual(claims["scope"] as? String, "clone")
        XCTAssertEqual(claims["repoId"] as? String, "health")
        XCTAssertEqual((claims["exp"] as? Int).map { $0 - (claims["iat"] as! Int) }, 600, "10 minutes")

        let cloned = try git("clone -q '\(server.url)/api/mgit/repos/health' copy && git -C copy rev-parse HEAD", token: cloneToken)
        XCTAssertEqual(cloned.status, 0, cloned.stderr)
        XCTAssertEqual(cloned.stdout.trimmingCharacters(in: .whitespacesAndNewlines), try server.git("health", "rev-parse main").trimmingCharacters(in: .whitespacesAndNewlines))

        XCTAssertEqual(try get("/api/mgit/repos/other/info/refs?service=git-upload-pack", token: cloneToken).status, 403, "another repository")
        XCTAssertNotEqual(try git("clone -q '\(server.url)/api/mgit/repos/other' other-copy", token: cloneToken).status, 0)
        XCTAssertEqual(try get("/api/mgit/repos/health/info/refs?service=git-receive-pack", token: cloneToken).status, 403, "a push")
        XCTAssertEqual(try get("/api/mgit/repos/fresh/info/refs?service=git-receive-pack", token: cloneToken).status, 403, "a creation")
        XCTAssertEqual(try get("/api/mgit/user/repositories", token: cloneToken).status, 403, "the listing")
        XCTAssertEqual(try get("/api/mgit/qr/clone/health", token: cloneToken).status, 403, "a new QR token: no renewal")
        let share = try MgitClient.run(["post", server.url, "/api/auth/scan/session", try root.file("share.json", #"{"stagingRepoId":"scan-1"}"#),
                                        try root.file("clone-token", cloneToken)])
        XCTAssertTrue(share.stdout.hasPrefix("403 "), share.stdout)
        XCTAssertEqual(try shell("cd '\(work)' && echo more > b.json && git add b.json && git -c user.name=t -c user.email=t@t commit -q -m more").status, 0)
        XCTAssertNotEqual(try git("-C '\(work)' push -q '\(server.url)/api/mgit/repos/health' main", token: cloneToken).status, 0)
        XCTAssertNotEqual(try git("-C '\(work)' push -q '\(server.url)/api/mgit/repos/fresh' main", token: cloneToken).status, 0)
        XCTAssertEqual(try server.git("health", "log --format=%s main"), "Initialize binder\n")
        XCTAssertFalse(FileManager.default.fileExists(atPath: server.repos + "/fresh.git"))

        // The account's own token still does everything.
        XCTAssertEqual(try get("/api/mgit/user/repositories", token: aliceToken).status, 200)
        // The payload's URL is where the server listens, not what the request's Host says.
        let forged = try shell("""
            python3 -c 'import sys, urllib.request; r = urllib.request.Request(sys.argv[1], headers={"Host": "evil.example", "Authorization": "Bearer " + open(sys.argv[2]).read().strip()}); print(urllib.request.urlopen(r).read().decode())' \
            '\(server.url)/api/mgit/qr/clone/health' '\(try root.file("alice-token", aliceToken))'
            """)
        XCTAssertTrue(forged.stdout.contains(#""clone_url":"\#(server.url)/api/mgit/repos/health""#), forged.stdout + forged.stderr)
    }

    /// Without --public-url the server cannot tell which server a login was signed for: it
    /// refuses to listen beyond loopback without it, naming the option (loopback works as before).
    func testListeningBeyondLoopbackNeedsThePublicURL() throws {
        let repos = root.root.appendingPathComponent("elsewhere").path
        for listen in ["0.0.0.0:0", "[::]:0", "192.0.2.7:0"] {
            let run = try shell("timeout 60 '\(BinderSandbox.binary)' serve --repos '\(repos)' --listen '\(listen)'")
            XCTAssertEqual(run.status, 1, "\(listen): \(run.stdout) \(run.stderr)")
            XCTAssertTrue(run.stderr.contains("--public-url is required when listening on"), "\(listen): \(run.stderr)")
            XCTAssertFalse(run.stdout.contains("Serving"), listen)
        }
        // The usual loopback server of these tests runs without it.
        XCTAssertEqual(try get("/api/mgit/user/repositories", token: nil).status, 401)
    }

    func testTheClientRefusesPlainHTTPBeyondLoopbackAndReportsADeadServer() throws {
        let device = try Device(nsec: String(decoding: try SecretKey.generate().nsec().copyBytes(), as: UTF8.self))
        assertFails(try device.binder(["login", "--server", "http://example.com"], expectFailure: true), mentioning: "refusing plain http")
        assertFails(try device.binder(["login", "--server", "ftp://example.com"], expectFailure: true), mentioning: "only https")
        server.stop()
        assertFails(try device.binder(["login", "--server", server.url], expectFailure: true), mentioning: "offline")
        try device.binder(["create", "health"])
        assertFails(try device.binder(["sync", "health", "--server", server.url], expectFailure: true), mentioning: "offline")
        XCTAssertTrue(try device.binder(["status", "health"]).stdout.contains("sync: local only"),
                      "a binder is tied to a server only once a sync succeeded")
    }
}

/// HTTPS is verified: a server whose certificate no trusted authority signed is refused, by the
/// REST client (URLSession) and by git's transport (libgit2) alike.
final class TLSVerificationTests: XCTestCase {
    func testASelfSignedServerIsRefused() throws {
        let sandbox = try BinderSandbox()
        let script = URL(fileURLWithPath: MgitClient.script).deletingLastPathComponent().appendingPathComponent("tls_server.py").path
        let portFile = sandbox.root.appendingPathComponent("port").path
        let spawn = """
        import subprocess, sys
        out = open(sys.argv[1], "wb")
        p = subprocess.Popen(["python3", sys.argv[2], sys.argv[3]], stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.DEVNULL, close_fds=True, start_new_session=True)
        print(p.pid)
        """
        let started = try BinderSandbox.run(executable: "/usr/bin/env", ["python3", "-c", spawn, portFile, script, sandbox.root.path])
        let pid = try XCTUnwrap(Int32(started.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        defer { kill(pid, SIGTERM) }
        var port = ""
        eventually(20, "the TLS server is up") {
            port = ((try? String(contentsOfFile: portFile, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            return !port.isEmpty
        }
        let server = "https://127.0.0.1:\(port)"

        let device = try Device(nsec: String(decoding: try SecretKey.generate().nsec().copyBytes(), as: UTF8.self))
        let login = try device.binder(["login", "--server", server], expectFailure: true)
        assertFails(login, mentioning: "cannot verify the server's certificate")
        XCTAssertTrue(login.stderr.lowercased().contains("certificate") || login.stderr.lowercased().contains("ssl"), login.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: device.sandbox.home.appendingPathComponent("accounts.json").path))

        // git's transport: a QR payload pointing at that server fails before any token is sent.
        let payload = #"{"action":"mgit_clone","clone_url":"\#(server)/api/mgit/repos/x","jwt_token":"t","repo_name":"x"}"#
        let clone = try device.binder(["clone", "--qr", "-"], stdin: payload, expectFailure: true)
        assertFails(clone, mentioning: "cannot verify the server's certificate")
    }
}
