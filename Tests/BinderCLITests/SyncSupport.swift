import BinderCrypto
import Foundation
import XCTest

/// `binder serve` on loopback, started detached (its own session, no inherited descriptors) so
/// that it can be stopped and restarted on the same port in the middle of a test.
final class TestServer {
    let root: URL
    var repos: String { root.appendingPathComponent("srv").path }
    var logPath: String { root.appendingPathComponent("serve.log").path }
    private(set) var pid: Int32 = 0
    private(set) var port = 0
    var url: String { "http://127.0.0.1:\(port)" }
    private var options: [String]

    init(root: URL, options: [String] = []) throws {
        self.root = root
        self.options = options
        try start()
    }

    deinit { stop() }

    /// Starts it (again: on the same port) with `options`, or the last ones.
    func start(_ options: [String]? = nil) throws {
        if let options { self.options = options }
        let before = (try? String(contentsOfFile: logPath, encoding: .utf8))?.count ?? 0
        let spawn = """
        import subprocess, sys
        log = open(sys.argv[1], "ab")
        p = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=log, stderr=log, close_fds=True, start_new_session=True)
        print(p.pid)
        """
        let run = try BinderSandbox.run(executable: "/usr/bin/env", ["python3", "-c", spawn, logPath, BinderSandbox.binary, "serve",
                                                                     "--repos", repos, "--listen", "127.0.0.1:\(port)"] + self.options
                                                                    + Self.engineOptions)
        pid = try XCTUnwrap(Int32(run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), run.stderr)
        for _ in 0..<1_200 {  // up to a minute: a debug binary's first start on a loaded machine
            let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            let fresh = String(log.dropFirst(before))
            if let range = fresh.range(of: #"on http://127\.0\.0\.1:[0-9]+"#, options: .regularExpression) {
                port = Int(fresh[range].split(separator: ":").last!)!
                return
            }
            usleep(50_000)
        }
        XCTFail("binder serve did not start: \((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "")")
    }

    func stop() {
        guard pid > 0 else { return }
        kill(pid, SIGTERM)
        for _ in 0..<100 where kill(pid, 0) == 0 { usleep(50_000) }
        if kill(pid, 0) == 0 { kill(pid, SIGKILL) }
        pid = 0
    }

    /// SIGKILL, as a crash or a pulled plug would stop it: nothing runs on the way out.
    func kill9() {
        guard pid > 0 else { return }
        kill(pid, SIGKILL)
        for _ in 0..<100 where kill(pid, 0) == 0 { usleep(20_000) }
        pid = 0
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// `BINDER_TEST_GIT_ENGINE=binder` runs every test server with binder's own git engine
    /// (`--git-engine`, issue 42), so that the server suites can be run against it.
    static let engineOptions = ProcessInfo.processInfo.environment["BINDER_TEST_GIT_ENGINE"].map { ["--git-engine", $0] } ?? []

    /// `git -C <server repo>` output.
    func git(_ repoId: String, _ arguments: String) throws -> String {
        try shell("git -C '\(repos)/\(repoId).git' \(arguments)").stdout
    }
}

/// A test against a real `binder serve` of its own (in a sandbox), with one key for its devices.
class ServerTestCase: XCTestCase {
    var serverRoot: BinderSandbox!
    var server: TestServer!
    var nsec: String!

    override func setUpWithError() throws {
        serverRoot = try BinderSandbox()
        server = try TestServer(root: serverRoot.root)
        nsec = String(decoding: try SecretKey.generate().nsec().copyBytes(), as: UTF8.self)
    }

    override func tearDown() {
        server?.stop()
        server = nil; serverRoot = nil
    }
}

/// One of the patient's devices: its own BINDER_HOME with the same key, unlocked.
final class Device {
    let sandbox: BinderSandbox
    let passphraseFile: String
    let nsecFile: String
    let mountpoint: String
    private(set) var mounted = false

    init(nsec: String) throws {
        sandbox = try BinderSandbox()
        passphraseFile = try sandbox.file("passphrase", "device passphrase\n")
        nsecFile = try sandbox.file("nsec", nsec + "\n")
        mountpoint = sandbox.root.appendingPathComponent("mnt").path
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let imported = try sandbox.run(["key", "import", "--passphrase-file", passphraseFile, "--log-n", "8"], stdin: nsec + "\n")
        XCTAssertEqual(imported.status, 0, imported.stderr)
        let unlocked = try sandbox.run(["unlock", "--timeout", "10m", "--passphrase-file", passphraseFile])
        XCTAssertEqual(unlocked.status, 0, unlocked.stderr)
    }

    deinit { unmount() }

    /// Runs `binder ARGS`; asserts success unless `expectFailure`.
    @discardableResult
    func binder(_ arguments: [String], stdin: String? = nil, expectFailure: Bool = false,
                file: StaticString = #filePath, line: UInt = #line) throws -> BinderRun {
        let run = try sandbox.run(arguments, stdin: stdin)
        if !expectFailure { XCTAssertEqual(run.status, 0, "binder \(arguments.joined(separator: " ")): \(run.stderr)", file: file, line: line) }
        return run
    }

    var binders: String { sandbox.home.appendingPathComponent("binders").path }
    func repository(_ name: String) -> String { binders + "/" + name }

    func git(_ name: String, _ arguments: String) throws -> String {
        try shell("git -C '\(repository(name))' \(arguments)").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func tip(_ name: String) throws -> String { try git(name, "rev-parse main") }

    func mount(_ name: String, _ extra: [String]) throws {
        try binder(["mount", name, mountpoint] + extra)
        mounted = true
    }

    func unmount() {
        guard mounted else { return }
        unmountQuietly(sandbox, mountpoint)
        mounted = false
    }

    func path(_ relative: String) -> String { mountpoint + "/" + relative }

    func write(_ relative: String, _ text: String) throws {
        let run = try shell("mkdir -p \"$(dirname '\(relative)')\" && printf '%s' \"$TEXT\" > '\(relative)'", in: mountpoint,
                            environment: ["TEXT": text])
        XCTAssertEqual(run.status, 0, run.stderr)
    }

    func read(_ relative: String) -> String? {
        (try? Data(contentsOf: URL(fileURLWithPath: path(relative)))).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The mount's status file and the last lines of the daemon's log, for failure messages.
    func diagnostics(_ name: String = "health") -> String {
        let log = (try? String(contentsOfFile: sandbox.home.appendingPathComponent("logs/\(name).log").path, encoding: .utf8)) ?? ""
        return "status:\n\(read(".binder/status") ?? "(none)")\nlog:\n" + log.split(separator: "\n").suffix(30).joined(separator: "\n")
    }

    func status() -> [String: String] {
        var values: [String: String] = [:]
        for line in (read(".binder/status") ?? "").split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            values[String(line[..<colon])] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return values
    }

    /// A document's decrypted `value`, read from git with the crypto core (not the mount).
    func storedValue(_ name: String, _ gitPath: String, at revision: String = "main") throws -> String? {
        let payload = try shell("git -C '\(repository(name))' show '\(revision):\(gitPath)'")
        guard payload.status == 0 else { return nil }
        let key = try NIP44.ConversationKey(selfOf: try SecretKey(nsec: try String(contentsOfFile: nsecFile, encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)))
        let plaintext = try NIP44.decrypt(payload: payload.stdout, key: key)
        let object = try JSONSerialization.jsonObject(with: Data(plaintext.copyBytes())) as? [String: Any]
        return object?["value"] as? String
    }
}

/// Polls `condition` until it holds or `seconds` pass; on a timeout the failure carries
/// `diagnostics()` (a mount's status and log, say).
func eventually(_ seconds: Double = 30, _ what: String, diagnostics: () -> String = { "" },
                file: StaticString = #filePath, line: UInt = #line, _ condition: () throws -> Bool) rethrows {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return }
        usleep(100_000)
    }
    XCTFail("timed out after \(seconds) s waiting for: \(what)\n\(diagnostics())", file: file, line: line)
}

/// The independent protocol client (`Tests/interop/mgit_client.py`, rust-nostr + urllib).
enum MgitClient {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("interop/mgit_client.py").path

    static func run(_ arguments: [String]) throws -> BinderRun {
        try BinderSandbox.run(executable: "/usr/bin/env", ["python3", script] + arguments)
    }
}

/// `Tests/interop/fault_proxy.py` on loopback in front of a `TestServer`: forwards everything,
/// but fails or resets every Nth request, or answers like limbo.health, as `options` say.
/// Started detached, like the server; its log has one line per request ("N METHOD PATH STATUS").
final class FaultProxy {
    let root: URL
    private(set) var pid: Int32 = 0
    private(set) var port = 0
    var url: String { "http://127.0.0.1:\(port)" }
    /// Each proxy's own log (several may run in front of one server).
    let logPath: String

    init(upstream: TestServer, _ options: [String]) throws {
        root = upstream.root
        logPath = root.appendingPathComponent("proxy-\(UUID().uuidString).log").path
        let script = URL(fileURLWithPath: MgitClient.script).deletingLastPathComponent().appendingPathComponent("fault_proxy.py").path
        let portFile = root.appendingPathComponent("proxy.port").path
        try? FileManager.default.removeItem(atPath: portFile)
        let spawn = """
        import subprocess, sys
        p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             close_fds=True, start_new_session=True)
        print(p.pid)
        """
        let run = try BinderSandbox.run(executable: "/usr/bin/env", ["python3", "-c", spawn, "python3", script, "--upstream", upstream.url,
                                                                     "--port-file", portFile, "--log", logPath] + options)
        pid = try XCTUnwrap(Int32(run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), run.stderr)
        for _ in 0..<1_200 {  // up to a minute
            if let text = try? String(contentsOfFile: portFile, encoding: .utf8), let value = Int(text) {
                port = value
                return
            }
            usleep(50_000)
        }
        XCTFail("the fault proxy did not start")
    }

    deinit { stop() }

    func stop() {
        guard pid > 0 else { return }
        kill(pid, SIGTERM)
        pid = 0
    }

    /// The log's lines, each split in its four fields.
    var requests: [[String]] {
        ((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "").split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
    }
}
