import BinderCrypto
import BinderFormat
import Foundation
import XCTest

/// Test fixtures shared by path (Tests/Fixtures): the apps' sample binder and its manifest.
enum Fixtures {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures")
    static var bundle: String { directory.appendingPathComponent("sample-binder.bundle").path }
    static var nsec: String {
        (try? String(contentsOf: directory.appendingPathComponent("sample-binder.nsec"), encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
    }

    static func manifest() throws -> [String: Any] {
        let data = try Data(contentsOf: directory.appendingPathComponent("sample-binder.manifest.json"))
        return try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? [String: Any])
    }
}

/// Runs a shell command; returns status and output.
@discardableResult
func shell(_ command: String, in directory: String? = nil, environment: [String: String] = [:]) throws -> BinderRun {
    let script = directory.map { "cd '\($0)' || exit 1\n\(command)" } ?? command
    return try BinderSandbox.run(executable: "/bin/bash", ["-c", script], environment: environment)
}

/// A sandbox with a key imported and a binder cloned from the fixture (or made by a test),
/// and a mount point; always unmounted at the end.
final class MountedBinder {
    let sandbox: BinderSandbox
    let passphraseFile: String
    let mountpoint: String
    var repository: String
    private(set) var mounted = false

    /// With the fixture's key imported; `repository` is a fresh clone of the fixture bundle.
    init(nsec: String = Fixtures.nsec, cloneFixture: Bool = true) throws {
        sandbox = try BinderSandbox()
        passphraseFile = try sandbox.file("passphrase", "test passphrase\n")
        mountpoint = sandbox.root.appendingPathComponent("mnt").path
        repository = sandbox.root.appendingPathComponent("sample-binder").path
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let imported = try sandbox.run(["key", "import", "--passphrase-file", passphraseFile, "--log-n", "8"], stdin: nsec + "\n")
        XCTAssertEqual(imported.status, 0, imported.stderr)
        if cloneFixture {
            let clone = try shell("git clone -q '\(Fixtures.bundle)' '\(repository)'")
            XCTAssertEqual(clone.status, 0, clone.stderr)
        }
    }

    deinit { unmount() }

    func mount(_ extra: [String] = [], environment: [String: String] = [:]) throws {
        let run = try sandbox.run(["mount", repository, mountpoint, "--passphrase-file", passphraseFile] + extra, environment: environment)
        XCTAssertEqual(run.status, 0, "mount failed: \(run.stderr)")
        mounted = run.status == 0
    }

    func unmount() {
        guard mounted else { return }
        unmountQuietly(sandbox, mountpoint)
        mounted = false
    }

    /// For a test that ran `binder mount` itself: unmount at the end.
    func markMounted() { mounted = true }

    func path(_ relative: String) -> String { mountpoint + "/" + relative }

    /// Makes `repository` a git work tree holding `files` (git path -> bytes) in one commit on `main`.
    func commitRepository(_ files: [String: [UInt8]]) throws {
        for (path, bytes) in files {
            let url = URL(fileURLWithPath: repository).appendingPathComponent(path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(bytes).write(to: url)
        }
        let commit = try shell("git init -q -b main . && git add -A && git -c user.name=t -c user.email=t@t commit -qm 'Add entries'", in: repository)
        XCTAssertEqual(commit.status, 0, commit.stderr)
    }

    func read(_ relative: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: path(relative))))
    }

    /// Every regular file under the mount, relative paths, sorted.
    func files() throws -> [String] {
        let run = try shell("find . -type f | sed 's|^\\./||' | LC_ALL=C sort", in: mountpoint)
        XCTAssertEqual(run.status, 0, run.stderr)
        return run.stdout.split(separator: "\n").map(String.init)
    }

    func statusValue(_ key: String) throws -> Int {
        let text = String(decoding: try read(".binder/status"), as: UTF8.self)
        let line = try XCTUnwrap(text.split(separator: "\n").first { $0.hasPrefix(key + ": ") })
        return try XCTUnwrap(Int(line.dropFirst(key.count + 2)))
    }
}

/// `binder unmount`, and a lazy detach if that failed (a test must never leave a mount behind).
func unmountQuietly(_ sandbox: BinderSandbox, _ mountpoint: String) {
    _ = try? sandbox.run(["unmount", mountpoint])
    _ = try? shell("fusermount3 -u -z '\(mountpoint)' 2>/dev/null")
}

func sha256Hex(_ bytes: [UInt8]) -> String { Hex.encode(sha256(bytes)) }

/// A test case with the fixture binder cloned and mounted read-write for each test, and ways
/// to look at its repository without the mount.
class MountedFixtureTestCase: XCTestCase {
    var binder: MountedBinder!
    var key: NIP44.ConversationKey!

    override func setUpWithError() throws {
        binder = try MountedBinder()
        key = try NIP44.ConversationKey(selfOf: try SecretKey(nsec: Fixtures.nsec))
        try binder.mount()
    }

    override func tearDown() {
        binder?.unmount()
        binder = nil
    }

    var mnt: String { binder.mountpoint }

    /// `git -C REPOSITORY arguments` (the mounted binder's unless another is given); its output.
    func git(_ arguments: String, in repository: String? = nil) throws -> String {
        try shell("git -C '\(repository ?? binder.repository)' \(arguments)").stdout
    }

    func commits() throws -> Int { Int(try git("rev-list --count main").trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1 }

    /// The document stored at `gitPath` on main, read by git and the crypto core alone.
    func stored(_ gitPath: String) throws -> MedicalDocument {
        let payload = try shell("git -C '\(binder.repository)' show 'main:\(gitPath)'")
        XCTAssertEqual(payload.status, 0, "\(gitPath) not in git: \(payload.stderr)")
        return try MedicalDocument(plaintext: try NIP44.decrypt(payload: payload.stdout, key: key).copyBytes())
    }
}
