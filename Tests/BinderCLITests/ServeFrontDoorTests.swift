import BinderCrypto
import Foundation
import XCTest

/// `binder serve`'s front door and operations (issue 42), each against a real server on
/// loopback driven by Tests/interop/front_door.py (raw sockets, so that a reset or an empty
/// reply is seen as one): the cap's queue and its 503, `--trusted-proxy`, the probes and
/// `/metrics`, SIGTERM, `--log-format json`.
final class ServeFrontDoorTests: XCTestCase {
    var root: BinderSandbox!
    var server: TestServer!

    override func setUpWithError() throws {
        root = try BinderSandbox()
    }

    override func tearDown() {
        server?.stop()
        server = nil; root = nil
    }

    static let script = URL(fileURLWithPath: MgitClient.script).deletingLastPathComponent().appendingPathComponent("front_door.py").path

    func frontDoor(_ arguments: [String], port: Int? = nil) throws -> String {
        let run = try BinderSandbox.run(executable: "/usr/bin/env",
                                        ["python3", Self.script, arguments[0], "127.0.0.1", "\(port ?? server.port)"]
                                            + arguments.dropFirst())
        XCTAssertEqual(run.status, 0, run.stderr)
        return run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The outcomes of many clients: {"200": n, "503": m, "reset": …}.
    func outcomes(_ arguments: [String]) throws -> [String: Int] {
        let text = try frontDoor(arguments)
        return try XCTUnwrap(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Int], text)
    }

    /// `binder serve` as a child of this test (its exit status is read), on a free port: the
    /// process, the port, and its log's path.
    func spawnServe(_ options: [String]) throws -> (Process, Int, String) {
        let log = root.root.appendingPathComponent("serve-\(UUID().uuidString).log").path
        FileManager.default.createFile(atPath: log, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: BinderSandbox.binary)
        process.arguments = ["serve", "--repos", root.root.appendingPathComponent("srv").path, "--listen", "127.0.0.1:0"] + options
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        process.standardOutput = output
        process.standardError = output
        try process.run()
        var port: Int?
        eventually(60, "the server listens") {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            if let range = text.range(of: #"on https?://127\.0\.0\.1:[0-9]+"#, options: .regularExpression) {
                port = Int(text[range].split(separator: ":").last!)
            }
            return port != nil || !process.isRunning
        }
        return (process, try XCTUnwrap(port, (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""), log)
    }

    // MARK: - Past the cap: a queue, then 503

    /// The issue's case: 200 clients at once from one address (the cap 32, as many queued).
    /// Every one gets an HTTP status, 200 or 503 with Retry-After; none a reset or an empty
    /// reply (before, the connections past the cap were closed on arrival).
    func testTwoHundredClientsFromOneAddressAllGetAnHTTPAnswer() throws {
        server = try TestServer(root: root.root)
        let summary = try outcomes(["burst", "200", "/healthz"])
        XCTAssertEqual(Set(summary.keys).subtracting(["200", "503"]), [], "every client an HTTP status: \(summary)")
        XCTAssertEqual(summary.values.reduce(0, +), 200)
        XCTAssertGreaterThanOrEqual(summary["200"] ?? 0, 32, "the cap's and the queue's are served: \(summary)")
        XCTAssertGreaterThanOrEqual(summary["503"] ?? 0, 1, "past the queue, 503: \(summary)")
        // The server serves on.
        XCTAssertEqual(try frontDoor(["one", "GET", "/healthz"]), "200")
    }

    /// Behind a trusted proxy every client has its own cap, counted per request: 40 clients at
    /// once through one proxy connection each all pass a cap of 4; 40 requests of one client
    /// (each with a different forged address on the left) pass only as its cap lets them.
    func testBehindATrustedProxyEachClientHasItsOwnCap() throws {
        server = try TestServer(root: root.root, options: ["--trusted-proxy", "127.0.0.1", "::1",
                                                           "--connections-per-address", "4", "--queue-wait", "1"])
        // Each request holds its slot 3 s (its body comes late); the queue waits 1 s.
        let distinct = try outcomes(["hold", "40", "/api/auth/nostr/verify", "3", "1.2.3.4, 198.51.100.{i}"])
        XCTAssertEqual(distinct, ["400": 40], "40 clients, none past its cap")
        let forged = try outcomes(["hold", "40", "/api/auth/nostr/verify", "3", "{i}.0.0.1, 198.51.100.77"])
        XCTAssertEqual(Set(forged.keys).subtracting(["400", "503"]), [], "\(forged)")
        XCTAssertGreaterThanOrEqual(forged["400"] ?? 0, 4, "\(forged)")
        XCTAssertGreaterThanOrEqual(forged["503"] ?? 0, 28, "one client behind forged left-hand addresses: \(forged)")
    }

    /// The login rate limit counts the forwarded client behind a trusted proxy, and the peer
    /// when the peer is not trusted, whatever its header says.
    func testLoginRateLimitsCountTheForwardedClientOnlyFromATrustedProxy() throws {
        server = try TestServer(root: root.root, options: ["--trusted-proxy", "127.0.0.0/8", "--logins-per-minute", "2"])
        func challenge(_ forwardedFor: String) throws -> String {
            try frontDoor(["one", "POST", "/api/auth/nostr/challenge", "X-Forwarded-For: \(forwardedFor)"])
        }
        XCTAssertEqual(try challenge("6.6.6.1, 198.51.100.1"), "200")
        XCTAssertEqual(try challenge("6.6.6.2, 198.51.100.1"), "200")
        XCTAssertEqual(try challenge("6.6.6.3, 198.51.100.1"), "429", "one client, whatever it writes on the left")
        XCTAssertEqual(try challenge("198.51.100.2"), "200", "another client has its own allowance")
        server.stop()

        // Not from a trusted proxy: the header is a forgery, and the peer is what counts.
        server = try TestServer(root: root.root, options: ["--trusted-proxy", "10.0.0.0/8", "--logins-per-minute", "2"])
        XCTAssertEqual(try challenge("198.51.100.1"), "200")
        XCTAssertEqual(try challenge("198.51.100.2"), "200")
        XCTAssertEqual(try challenge("198.51.100.3"), "429", "forged addresses from an untrusted peer share its allowance")
    }

    func testABadTrustedProxyIsRefusedAtStart() throws {
        for (arguments, expected) in [(["--trusted-proxy", "10.0.0.0/33"], "--trusted-proxy: '10.0.0.0/33'"),
                                      (["--trusted-proxy", "proxy.example"], "--trusted-proxy: 'proxy.example'"),
                                      (["--forwarded-header", "x-real-ip"], "--forwarded-header: 'x-real-ip'"),
                                      (["--log-format", "xml"], "--log-format: 'xml'"),
                                      (["--tls-cert", "/nonexistent.pem"], "--tls-cert and --tls-key go together"),
                                      (["--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key"],
                                       "cannot serve TLS with it")] {
            let run = try BinderSandbox.run(executable: BinderSandbox.binary,
                                            ["serve", "--repos", root.root.appendingPathComponent("r").path, "--listen", "127.0.0.1:0"]
                                                + arguments)
            XCTAssertNotEqual(run.status, 0)
            XCTAssertTrue(run.stderr.contains(expected), run.stderr)
        }
    }

    // MARK: - Operations

    /// /healthz and /readyz answer anyone; /metrics only the scrape token's bearer, labelled
    /// by route template and status, never with a repository id; without the option, 404.
    func testProbesAndMetrics() throws {
        let tokenFile = try root.file("metrics.token", "0123456789abcdef0123456789abcdef\n")
        server = try TestServer(root: root.root, options: ["--metrics-token-file", tokenFile])
        XCTAssertEqual(try frontDoor(["one", "GET", "/healthz"]), "200")
        XCTAssertEqual(try frontDoor(["one", "GET", "/readyz"]), "200")
        XCTAssertEqual(try frontDoor(["one", "GET", "/api/mgit/repos/secret-repo-4711/info/refs?service=git-upload-pack"]), "401")
        XCTAssertEqual(try frontDoor(["one", "GET", "/metrics"]), "401")
        XCTAssertEqual(try frontDoor(["one", "GET", "/metrics", "Authorization: Bearer wrong-token-wrong-token"]), "401")
        _ = try outcomes(["burst", "100", "/healthz"])

        let scrape = try shell("curl -s -H \"Authorization: Bearer $(cat '\(tokenFile)')\" \(server.url)/metrics")
        let text = scrape.stdout
        XCTAssertTrue(text.contains(#"binder_http_requests_total{route="/api/mgit/repos/{repoId}/info/refs",method="GET",status="401"} 1"#),
                      text)
        XCTAssertTrue(text.contains(#"binder_http_request_duration_seconds_bucket{route="/healthz",status="200""#), text)
        XCTAssertTrue(text.contains("binder_open_connections "), text)
        XCTAssertTrue(text.contains("binder_http_requests_in_progress 1"), "this scrape alone: \(text)")
        XCTAssertTrue(text.contains("binder_http_sent_bytes_total "), text)
        XCTAssertFalse(text.contains("secret-repo-4711"), "no repository id in the metrics")
        XCTAssertFalse(text.contains("127.0.0.1"), "no address in the metrics")
        server.stop()

        server = try TestServer(root: root.root)
        XCTAssertEqual(try frontDoor(["one", "GET", "/metrics"]), "404")
    }

    /// SIGTERM: the requests in progress finish and are answered, new connections are
    /// refused at once, and the process exits 0.
    func testSIGTERMLetsRequestsInProgressFinishAndExitsZero() throws {
        let (process, bound, log) = try spawnServe(["--shutdown-grace", "20"])
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

        // Three requests whose bodies come 4 s after their heads: in progress at the signal.
        let slow = Process()
        slow.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        slow.arguments = ["python3", Self.script, "hold", "127.0.0.1", "\(bound)", "3", "/api/auth/nostr/verify", "4", "198.51.100.1"]
        let slowOutput = Pipe()
        slow.standardOutput = slowOutput
        try slow.run()
        eventually(10, "the slow requests are in progress") {
            (try? shell("ss -Htn state established '( sport = :\(bound) )' | wc -l").stdout
                .trimmingCharacters(in: .whitespacesAndNewlines)) == "3"
        }
        kill(process.processIdentifier, SIGTERM)
        eventually(10, "the listener is closed") { (try? self.frontDoor(["connect"], port: bound)) == "refused" }
        XCTAssertTrue(process.isRunning, "the process waits for the requests in progress")

        slow.waitBounded(label: "slow")
        let summary = String(decoding: slowOutput.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(summary.trimmingCharacters(in: .whitespacesAndNewlines), #"{"400": 3}"#,
                       "each request in progress was answered")
        eventually(20, "the process exits") { !process.isRunning }
        XCTAssertEqual(process.terminationReason, .exit)
        XCTAssertEqual(process.terminationStatus, 0, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
        XCTAssertTrue(((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("shutting down"))
    }

    /// SIGTERM in the middle of a real `git push` (its pack trickling in through a throttled
    /// relay, 40 KB/s): the push completes and is stored, the process exits 0.
    func testSIGTERMLetsAGitPushInProgressFinish() throws {
        let metricsToken = "0123456789abcdef0123456789abcdef"
        let (process, bound, log) = try spawnServe(["--shutdown-grace", "60",
                                                    "--metrics-token-file", try root.file("metrics.token", metricsToken + "\n")])
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        let nsecFile = try root.file("user.nsec", String(decoding: try SecretKey.generate().nsec().copyBytes(), as: UTF8.self))
        let login = try MgitClient.run(["login", "http://127.0.0.1:\(bound)", nsecFile])
        XCTAssertEqual(login.status, 0, login.stderr)
        let tokenFile = try root.file("user.token", login.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        let work = root.root.appendingPathComponent("work").path
        let made = try shell("git init -q -b main '\(work)' && cd '\(work)' && head -c 200000 /dev/urandom > blob.bin && git add -A "
                             + "&& git -c user.name=t -c user.email=t@t commit -q -m first")
        XCTAssertEqual(made.status, 0, made.stderr)

        let portFile = root.root.appendingPathComponent("relay.port").path
        let relay = Process()
        relay.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        relay.arguments = ["python3", ServerHardeningTests.attacks, "throttle", "\(bound)", portFile, "40000", "1000000000", "0", "60"]
        try relay.run()
        defer { if relay.isRunning { relay.terminate() } }
        eventually(10, "the relay listens") { FileManager.default.fileExists(atPath: portFile) }
        let relayPort = try String(contentsOfFile: portFile, encoding: .utf8)

        let push = Process()
        push.executableURL = URL(fileURLWithPath: "/bin/sh")
        push.arguments = ["-c", "git -c http.extraHeader=\"Authorization: Bearer $(cat '\(tokenFile)')\" -C '\(work)' "
                          + "push -q http://127.0.0.1:\(relayPort)/api/mgit/repos/slowpush main"]
        let pushErrors = Pipe()
        push.standardError = pushErrors
        try push.run()
        // The push's POST is in progress once a scrape sees a request besides itself.
        eventually(20, "the push is in progress") {
            let scrape = (try? shell("curl -s -H 'Authorization: Bearer \(metricsToken)' http://127.0.0.1:\(bound)/metrics").stdout) ?? ""
            return scrape.split(separator: "\n").contains { $0.hasPrefix("binder_http_requests_in_progress ") && !$0.hasSuffix(" 1.0") }
        }
        kill(process.processIdentifier, SIGTERM)
        eventually(10, "the listener is closed") { (try? self.frontDoor(["connect"], port: bound)) == "refused" }
        XCTAssertTrue(push.isRunning, "the push was still sending when the signal came")

        push.waitBounded(label: "push")
        XCTAssertEqual(push.terminationStatus, 0, String(decoding: pushErrors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
        eventually(30, "the process exits") { !process.isRunning }
        XCTAssertEqual(process.terminationStatus, 0, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
        let stored = try shell("git -C '\(root.root.path)/srv/slowpush.git' rev-parse main").stdout
        XCTAssertEqual(stored, try shell("git -C '\(work)' rev-parse main").stdout, "the push is stored whole")
    }

    /// `--log-format json`: every log line is one JSON object with time, level and message,
    /// and says no more than the text lines do: no token, no nsec.
    func testJSONLogLinesAreObjectsWithoutSecrets() throws {
        server = try TestServer(root: root.root, options: ["--log-format", "json"])
        let key = try SecretKey.generate()
        let nsec = String(decoding: try key.nsec().copyBytes(), as: UTF8.self)
        let nsecFile = try root.file("user.nsec", nsec)
        let login = try MgitClient.run(["login", server.url, nsecFile])
        XCTAssertEqual(login.status, 0, login.stderr)
        let token = login.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(try frontDoor(["one", "GET", "/api/mgit/user/repositories", "Authorization: Bearer \(token)"]), "200")
        XCTAssertEqual(try frontDoor(["one", "GET", "/nowhere"]), "404")

        let lines = server.log.split(separator: "\n").filter { !$0.hasPrefix("Serving ") }
        XCTAssertGreaterThanOrEqual(lines.count, 4, server.log)
        for line in lines {
            let object = try XCTUnwrap(try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not JSON: \(line)")
            XCTAssertNotNil(object["time"] as? String, String(line))
            XCTAssertNotNil(object["level"] as? String, String(line))
            XCTAssertNotNil(object["message"] as? String, String(line))
        }
        XCTAssertTrue(lines.contains { $0.contains(#""message":"GET /api/mgit/user/repositories 200""#) }, server.log)
        XCTAssertFalse(server.log.contains(token), "no token in the log")
        XCTAssertFalse(server.log.contains(nsec), "no key in the log")
    }

    // MARK: - Native TLS

    /// `--tls-cert`/`--tls-key`: https with the first certificate; after the files are replaced
    /// and SIGHUP sent, new connections get the second; a broken file on the next SIGHUP
    /// keeps the second serving.
    func testTLSCertificateIsReloadedOnSIGHUP() throws {
        let folder = root.root.path
        for name in ["one", "two"] {
            let made = try shell("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=binder-\(name) "
                                 + "-addext subjectAltName=IP:127.0.0.1 -keyout '\(folder)/\(name).key' -out '\(folder)/\(name).crt'")
            XCTAssertEqual(made.status, 0, made.stderr)
        }
        func install(_ name: String) throws {
            _ = try shell("cp '\(folder)/\(name).crt' '\(folder)/cert.pem' && cp '\(folder)/\(name).key' '\(folder)/key.pem'")
        }
        try install("one")
        let (process, port, log) = try spawnServe(["--tls-cert", folder + "/cert.pem", "--tls-key", folder + "/key.pem"])
        defer { if process.isRunning { kill(process.processIdentifier, SIGTERM); process.waitBounded(label: "process") } }
        XCTAssertTrue(((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("on https://127.0.0.1:"))
        func served() throws -> String {
            try shell("echo | openssl s_client -connect 127.0.0.1:\(port) 2>/dev/null | openssl x509 -noout -subject").stdout
        }
        func healthz(trusting name: String) throws -> String {
            try shell("curl -s --cacert '\(folder)/\(name).crt' https://127.0.0.1:\(port)/healthz").stdout
        }
        XCTAssertTrue(try served().contains("binder-one"))
        XCTAssertEqual(try healthz(trusting: "one"), "ok\n")
        XCTAssertEqual(try healthz(trusting: "two"), "", "not the second certificate yet")

        try install("two")
        kill(process.processIdentifier, SIGHUP)
        eventually(10, "new connections get the second certificate") { (try? served())?.contains("binder-two") == true }
        XCTAssertEqual(try healthz(trusting: "two"), "ok\n")

        _ = try shell("echo broken > '\(folder)/cert.pem'")
        kill(process.processIdentifier, SIGHUP)
        eventually(10, "the failed reload is logged") {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("TLS certificate not reloaded")
        }
        XCTAssertTrue(try served().contains("binder-two"), "the old certificate serves on")
        XCTAssertTrue(process.isRunning)
        XCTAssertFalse(((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("PRIVATE KEY"))
    }
}
