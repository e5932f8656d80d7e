@_spi(Fuzzing) import BinderCrypto
import Foundation
import XCTest

/// `binder key rotate`: every local binder re-encrypted to a new key, the key files swapped
/// last; a kill -9 after each durable step (and inside the engine) leaves every binder whole
/// under exactly one of the two keys, and the next run finishes the rotation.
final class KeyRotateTests: XCTestCase {
    /// A state folder with the fixture's key, two binders (a work-tree clone and a bare one),
    /// and a new key to rotate to.
    final class Setup {
        let sandbox: BinderSandbox
        let oldPassphrase: String
        let newPassphrase: String
        let oldKey: SecretKey
        let newKey: SecretKey
        let newNsec: String
        let names = ["alpha", "beta"]
        /// Path -> plaintext of every document and sidecar on `main`, read with the old key.
        var original: [String: [String: [UInt8]]] = [:]

        /// `historyCut`: both binders' `main` set that many commits back (13 commits and one
        /// sidecar are left of 58 at 45), for tests that repeat whole rotations: every step of
        /// the command is the same, the engine's work a quarter.
        init(historyCut: Int? = nil) throws {
            sandbox = try BinderSandbox()
            oldPassphrase = try sandbox.file("old-passphrase", "test passphrase\n")
            newPassphrase = try sandbox.file("new-passphrase", "a new passphrase\n")
            oldKey = try SecretKey(nsec: Fixtures.nsec)
            newKey = try SecretKey.generate()
            newNsec = try newKey.nsec().withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
            let imported = try sandbox.run(["key", "import", "--passphrase-file", oldPassphrase, "--log-n", "8"], stdin: Fixtures.nsec + "\n")
            XCTAssertEqual(imported.status, 0, imported.stderr)
            let binders = sandbox.home.appendingPathComponent("binders").path
            let cloned = try shell("mkdir -p '\(binders)' && git clone -q '\(Fixtures.bundle)' '\(binders)/alpha' && git clone -q --bare '\(Fixtures.bundle)' '\(binders)/beta'")
            XCTAssertEqual(cloned.status, 0, cloned.stderr)
            if let historyCut {
                let cut = try shell("git -C '\(binders)/alpha' reset -q --hard main~\(historyCut) && git -C '\(binders)/beta' update-ref refs/heads/main main~\(historyCut)")
                XCTAssertEqual(cut.status, 0, cut.stderr)
            }
            for name in names { original[name] = try XCTUnwrap(try Self.contents(path(name), key: oldKey)) }
        }

        func path(_ name: String) -> String { sandbox.home.appendingPathComponent("binders/\(name)").path }

        func rotate(_ extra: [String] = [], environment: [String: String] = [:]) throws -> BinderRun {
            try sandbox.run(["key", "rotate", "--import", "--passphrase-file", oldPassphrase, "--new-passphrase-file", newPassphrase,
                             "--log-n", "8"] + extra, stdin: newNsec + "\n", environment: environment)
        }

        var recordExists: Bool { FileManager.default.fileExists(atPath: sandbox.home.appendingPathComponent("key-rotation.json").path) }

        /// Every binder at its path, whole, under exactly one key: the one returned.
        func keyOfEachBinder(file: StaticString = #filePath, line: UInt = #line) throws -> [String: String] {
            var keys: [String: String] = [:]
            for name in names {
                let byOld = try Self.contents(path(name), key: oldKey), byNew = try Self.contents(path(name), key: newKey)
                XCTAssertTrue((byOld == nil) != (byNew == nil), "\(name) must open with exactly one key", file: file, line: line)
                XCTAssertEqual(byOld ?? byNew, original[name], "\(name)'s documents changed", file: file, line: line)
                keys[name] = byOld != nil ? "old" : "new"
                // No blob of the whole history opens with the other key.
                let other = byOld != nil ? newKey : oldKey
                XCTAssertEqual(try Self.blobsOpening(path(name), key: other), 0, "\(name) holds blobs the other key opens", file: file, line: line)
            }
            return keys
        }

        /// The finished state: both binders under the new key only, the key files the new key's.
        func assertRotated(file: StaticString = #filePath, line: UInt = #line) throws {
            XCTAssertEqual(try keyOfEachBinder(file: file, line: line), ["alpha": "new", "beta": "new"], file: file, line: line)
            XCTAssertFalse(recordExists, file: file, line: line)
            XCTAssertTrue(try sandbox.run(["key", "show"]).stdout.contains(newKey.publicKey.npub), file: file, line: line)
            let exported = try sandbox.run(["key", "export", "--nsec", "--confirm-plaintext", "--passphrase-file", newPassphrase])
            XCTAssertEqual(exported.stdout, newNsec + "\n", exported.stderr, file: file, line: line)
            for name in names {
                let verified = try sandbox.run(["verify", name, "--passphrase-file", newPassphrase])
                XCTAssertEqual(verified.status, 0, verified.stdout + verified.stderr, file: file, line: line)
                XCTAssertFalse(FileManager.default.fileExists(atPath: path(name) + "/binder-rotation"), file: file, line: line)
            }
            XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.home.appendingPathComponent("rotation").path), file: file, line: line)
        }

        /// Path -> plaintext of `main`'s documents (`.json`) and sidecars (`.enc`) under `key`;
        /// nil when the key opens none of them.
        static func contents(_ repository: String, key: SecretKey) throws -> [String: [UInt8]]? {
            let blobs = try allBlobs(repository)
            let listing = try shell("git -C '\(repository)' ls-tree -r main")
            XCTAssertEqual(listing.status, 0, listing.stderr)
            let conversationKey = try NIP44.ConversationKey(selfOf: key)
            var result: [String: [UInt8]] = [:]
            for line in listing.stdout.split(separator: "\n") {
                let parts = line.split(separator: "\t", maxSplits: 1)
                let fields = parts[0].split(separator: " ")
                guard parts.count == 2, fields.count == 3, let bytes = blobs[String(fields[2])] else { continue }
                let path = String(parts[1])
                if path.hasSuffix(".json") {
                    guard let plain = try? NIP44.decrypt(payload: bytes, key: conversationKey) else { return nil }
                    result[path] = plain.copyBytes()
                } else if path.hasSuffix(".enc") {
                    guard let plain = try? Sidecar.decrypt(bytes, key: conversationKey) else { return nil }
                    result[path] = plain.copyBytes()
                }
            }
            return result
        }

        /// How many blobs of the whole repository (every version) `key` opens.
        static func blobsOpening(_ repository: String, key: SecretKey) throws -> Int {
            let conversationKey = try NIP44.ConversationKey(selfOf: key)
            return try allBlobs(repository).values.filter { bytes in
                (try? NIP44.decrypt(payload: bytes, key: conversationKey)) != nil || (try? Sidecar.decrypt(bytes, key: conversationKey)) != nil
            }.count
        }

        /// Every blob in the repository, by id (git cat-file --batch-all-objects).
        static func allBlobs(_ repository: String) throws -> [String: [UInt8]] {
            let out = FileManager.default.temporaryDirectory.appendingPathComponent("blobs-\(UUID().uuidString)").path
            defer { try? FileManager.default.removeItem(atPath: out) }
            let run = try shell("git -C '\(repository)' cat-file --batch-all-objects --batch > '\(out)'")
            XCTAssertEqual(run.status, 0, run.stderr)
            let data = [UInt8](try Data(contentsOf: URL(fileURLWithPath: out)))
            var blobs: [String: [UInt8]] = [:], index = 0
            while index < data.count {
                guard let end = data[index...].firstIndex(of: UInt8(ascii: "\n")) else { break }
                let header = String(decoding: data[index..<end], as: UTF8.self).split(separator: " ")
                guard header.count == 3, let size = Int(header[2]) else { break }
                let body = Array(data[(end + 1)..<(end + 1 + size)])
                if header[1] == "blob" { blobs[String(header[0])] = body }
                index = end + 1 + size + 1
            }
            return blobs
        }
    }

    func testRotateReencryptsEveryBinderAndRetiresTheOldKey() throws {
        let setup = try Setup()
        let sandbox = setup.sandbox
        let run = try setup.rotate()
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("Re-encrypted 'alpha'") && run.stdout.contains("Re-encrypted 'beta'"), run.stdout)
        XCTAssertTrue(run.stdout.contains("binder key backup --sheet"), run.stdout)
        XCTAssertFalse(run.stdout.contains(setup.newNsec), "an imported key is not shown")
        try setup.assertRotated()
        // The old key is retired, under its old passphrase, and still opens an old backup.
        let retired = try sandbox.run(["key", "show", "--retired"])
        XCTAssertTrue(retired.stdout.contains(setup.oldKey.publicKey.npub), retired.stdout)
        let retiredFile = sandbox.home.appendingPathComponent("key.retired").path
        XCTAssertEqual((try FileManager.default.attributesOfItem(atPath: retiredFile)[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        let old = try sandbox.run(["key", "export", "--retired", setup.oldKey.publicKey.npub, "--nsec", "--confirm-plaintext",
                                   "--passphrase-file", setup.oldPassphrase])
        XCTAssertEqual(old.stdout, Fixtures.nsec + "\n", old.stderr)
        // The old passphrase no longer opens the key; no rotation is left to finish.
        assertFails(try sandbox.run(["key", "export", "--nsec", "--confirm-plaintext", "--passphrase-file", setup.oldPassphrase]),
                    mentioning: "wrong passphrase")
        assertFails(try sandbox.run(["key", "rotate", "--abandon"]), mentioning: "no key rotation is in progress")
        // The work-tree clone is now laid out as binder makes binders: bare.
        XCTAssertFalse(FileManager.default.fileExists(atPath: setup.path("alpha") + "/.git"))
    }

    /// A kill -9 after each durable step of the command: every binder stays whole under one
    /// key, commands refuse while the record exists, and a second run finishes it.
    func testKillAfterEveryStepThenRotateAgainFinishes() throws {
        var step = 1
        while true {
            let setup = try Setup(historyCut: 45)
            let killed = try setup.rotate(environment: ["BINDER_TEST_ROTATION_KILL_AFTER": "\(step)"])
            if killed.status == 0 {
                XCTAssertGreaterThan(step, 12, "fewer steps than the design names")
                try setup.assertRotated()
                break
            }
            XCTAssertEqual(killed.status, SIGKILL, "step \(step): \(killed.stderr)")
            let keys = try setup.keyOfEachBinder()
            if !setup.recordExists && keys == ["alpha": "new", "beta": "new"] {
                // Killed after its last step (the record removed): nothing is left to do.
                XCTAssertGreaterThan(step, 12, "fewer steps than the design names")
                try setup.assertRotated()
                break
            }
            if setup.recordExists {
                assertFails(try setup.sandbox.run(["status", "alpha"]), mentioning: "a key rotation is in progress: run 'binder key rotate' to finish it")
                assertFails(try setup.sandbox.run(["sync", "beta"]), mentioning: "a key rotation is in progress")
                assertFails(try setup.sandbox.run(["mount", "alpha", setup.sandbox.root.path]), mentioning: "a key rotation is in progress")
                assertFails(try setup.sandbox.run(["create", "gamma", "--patient-name", "-"], stdin: "Pat\n"), mentioning: "a key rotation is in progress")
            } else {
                XCTAssertEqual(keys, ["alpha": "old", "beta": "old"], "step \(step): no record, yet a binder was changed")
            }
            let again = try setup.rotate()
            XCTAssertEqual(again.status, 0, "step \(step): \(again.stdout) \(again.stderr)")
            try setup.assertRotated()
            step += 1
            XCTAssertLessThan(step, 40)
            if step >= 40 { break }
        }
    }

    /// A kill inside the engine's copy of a history (after a few blobs, later after many).
    func testKillInsideTheEngineThenRotateAgainFinishes() throws {
        for steps in [1, 5, 30] {
            let setup = try Setup(historyCut: 45)
            let killed = try setup.rotate(environment: ["BINDER_TEST_ROTATION_ENGINE_STEPS": "\(steps)"])
            XCTAssertEqual(killed.status, SIGKILL, killed.stderr)
            XCTAssertEqual(try setup.keyOfEachBinder(), ["alpha": "old", "beta": "old"])
            let again = try setup.rotate()
            XCTAssertEqual(again.status, 0, again.stderr)
            try setup.assertRotated()
        }
    }

    /// A file system without `RENAME_EXCHANGE` (forced): the swap is two renames and a third.
    /// A kill -9 between the first two (the binder's path empty) is undone by `--abandon`; one
    /// between the last two (the old repository aside) is finished by the next run: every
    /// binder whole under one key either way.
    func testSwapWithoutExchangeKilledBetweenRenamesIsUndoneOrFinished() throws {
        let twoRenames = ["BINDER_TEST_ROTATION_NO_EXCHANGE": "1"]
        let setup = try Setup(historyCut: 45)
        let aside = setup.sandbox.home.appendingPathComponent("rotation/alpha.old").path
        // Steps: the new key file, the record, 'alpha' and 'beta' rotated; then alpha's renames.
        let first = try setup.rotate(environment: twoRenames.merging(["BINDER_TEST_ROTATION_KILL_AFTER": "5"]) { $1 })
        XCTAssertEqual(first.status, SIGKILL, first.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: setup.path("alpha")), "killed with alpha's path empty")
        XCTAssertTrue(FileManager.default.fileExists(atPath: aside))
        assertFails(try setup.sandbox.run(["status", "alpha"]), mentioning: "a key rotation is in progress")
        let undone = try setup.sandbox.run(["key", "rotate", "--abandon", "--passphrase-file", setup.oldPassphrase,
                                            "--new-passphrase-file", setup.newPassphrase], environment: twoRenames)
        XCTAssertEqual(undone.status, 0, undone.stderr)
        XCTAssertEqual(try setup.keyOfEachBinder(), ["alpha": "old", "beta": "old"])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: setup.sandbox.home.path).sorted(),
                       ["binders", "key.ncryptsec", "key.npub"])

        let second = try setup.rotate(environment: twoRenames.merging(["BINDER_TEST_ROTATION_KILL_AFTER": "6"]) { $1 })
        XCTAssertEqual(second.status, SIGKILL, second.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: setup.sandbox.home.appendingPathComponent("rotation/alpha").path))
        XCTAssertTrue(FileManager.default.fileExists(atPath: aside), "killed with the old alpha aside")
        let finished = try setup.rotate(environment: twoRenames)
        XCTAssertEqual(finished.status, 0, finished.stderr)
        try setup.assertRotated()
    }

    /// `--abandon` after a kill once a binder was swapped: the old binders and key back.
    func testAbandonUndoesAnInterruptedRotation() throws {
        let setup = try Setup(historyCut: 45)
        let killed = try setup.rotate(environment: ["BINDER_TEST_ROTATION_KILL_AFTER": "6"])
        XCTAssertEqual(killed.status, SIGKILL, killed.stderr)
        XCTAssertEqual(try setup.keyOfEachBinder(), ["alpha": "new", "beta": "new"])
        let undone = try setup.sandbox.run(["key", "rotate", "--abandon", "--passphrase-file", setup.oldPassphrase,
                                            "--new-passphrase-file", setup.newPassphrase])
        XCTAssertEqual(undone.status, 0, undone.stderr)
        XCTAssertEqual(try setup.keyOfEachBinder(), ["alpha": "old", "beta": "old"])
        XCTAssertFalse(setup.recordExists)
        XCTAssertTrue(try setup.sandbox.run(["key", "show"]).stdout.contains(setup.oldKey.publicKey.npub))
        XCTAssertEqual(try setup.sandbox.run(["verify", "beta", "--passphrase-file", setup.oldPassphrase]).status, 0)
    }

    /// A binder whose history holds a document the old key does not open: the rotation stops
    /// naming it before anything is swapped, every binder stays on the old key, and
    /// `--abandon` leaves no trace.
    func testABinderTheEngineRefusesStopsTheRotationBeforeAnySwap() throws {
        let setup = try Setup()
        let alpha = setup.path("alpha")
        let committed = try shell("printf 'not a NIP-44 payload' > stray.json && git add stray.json && git -c user.name=t -c user.email=t@t commit -qm stray", in: alpha)
        XCTAssertEqual(committed.status, 0, committed.stderr)
        let run = try setup.rotate()
        XCTAssertEqual(run.status, 1)
        XCTAssertTrue(run.stderr.contains("stray.json") && run.stderr.contains("nothing was swapped"), run.stderr)
        XCTAssertEqual(try Setup.blobsOpening(alpha, key: setup.newKey), 0)
        XCTAssertEqual(try Setup.contents(setup.path("beta"), key: setup.oldKey), setup.original["beta"])
        assertFails(try setup.sandbox.run(["status", "beta"]), mentioning: "a key rotation is in progress")
        let undone = try setup.sandbox.run(["key", "rotate", "--abandon", "--passphrase-file", setup.oldPassphrase,
                                            "--new-passphrase-file", setup.newPassphrase])
        XCTAssertEqual(undone.status, 0, undone.stderr)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: setup.sandbox.home.path).sorted(),
                       ["binders", "key.ncryptsec", "key.npub"])
        XCTAssertEqual(try setup.sandbox.run(["verify", "beta", "--passphrase-file", setup.oldPassphrase]).status, 0)
    }

    /// A damaged record is never taken for "no rotation": rotate says so, binders stay refused.
    func testADamagedRecordIsRefusedNotIgnored() throws {
        let setup = try Setup()
        try Data("{\"oldNpub\": 1".utf8).write(to: setup.sandbox.home.appendingPathComponent("key-rotation.json"))
        assertFails(try setup.rotate(), mentioning: "is damaged")
        assertFails(try setup.sandbox.run(["status", "alpha"]), mentioning: "a key rotation is in progress")
        assertFails(try setup.sandbox.run(["key", "export", "--retired", "npub1nothing"]), mentioning: "no retired key")
        XCTAssertEqual(try setup.keyOfEachBinder(), ["alpha": "old", "beta": "old"])
    }

    func testForgetOldKeepsNoRetiredKey() throws {
        let setup = try Setup(historyCut: 45)
        let run = try setup.rotate(["--forget-old"])
        XCTAssertEqual(run.status, 0, run.stderr)
        try setup.assertRotated()
        XCTAssertFalse(FileManager.default.fileExists(atPath: setup.sandbox.home.appendingPathComponent("key.retired").path))
        XCTAssertEqual(try setup.sandbox.run(["key", "show", "--retired"]).stdout, "No retired keys.\n")
    }

    /// A generated key is shown once; an imported ncryptsec keeps its own passphrase.
    func testGeneratedKeyIsShownOnceAndAnImportedNcryptsecIsKept() throws {
        let setup = try Setup(historyCut: 45)
        let generated = try setup.sandbox.run(["key", "rotate", "--passphrase-file", setup.oldPassphrase,
                                               "--new-passphrase-file", setup.newPassphrase, "--log-n", "8"])
        XCTAssertEqual(generated.status, 0, generated.stderr)
        XCTAssertTrue(generated.stdout.contains("shown this once"), generated.stdout)
        let nsec = try XCTUnwrap(generated.stdout.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .first { $0.hasPrefix("nsec1") })
        let exported = try setup.sandbox.run(["key", "export", "--nsec", "--confirm-plaintext", "--passphrase-file", setup.newPassphrase])
        XCTAssertEqual(exported.stdout, nsec + "\n")

        let second = try Setup(historyCut: 45)
        let ncryptsec = try NIP49.encrypt(second.newKey, passphrase: try SecureBytes(copyingUTF8: "a new passphrase"), logN: 8)
        let imported = try second.sandbox.run(["key", "rotate", "--import", "--passphrase-file", second.oldPassphrase,
                                               "--new-passphrase-file", second.newPassphrase], stdin: ncryptsec + "\n")
        XCTAssertEqual(imported.status, 0, imported.stderr)
        try second.assertRotated()
        let stored = try String(contentsOfFile: second.sandbox.home.appendingPathComponent("key.ncryptsec").path, encoding: .utf8)
        XCTAssertEqual(stored.trimmingCharacters(in: .whitespacesAndNewlines), ncryptsec)
        // Malformed input changes nothing.
        let third = try Setup(historyCut: 45)
        assertFails(try third.sandbox.run(["key", "rotate", "--import", "--passphrase-file", third.oldPassphrase,
                                           "--new-passphrase-file", third.newPassphrase], stdin: "nsec1garbage\n"), mentioning: "malformed key")
        XCTAssertEqual(try third.keyOfEachBinder(), ["alpha": "old", "beta": "old"])
        XCTAssertFalse(third.recordExists)
    }

    /// A mounted binder is refused, by name, before anything changes; unmounted, the rotation
    /// goes through and the binder mounts with the new key, showing the same files.
    func testMountedBinderIsRefusedBeforeAnythingChanges() throws {
        let binder = try MountedBinder(cloneFixture: false)
        let sandbox = binder.sandbox
        let home = sandbox.home
        let path = home.appendingPathComponent("binders/alpha").path
        let cloned = try shell("mkdir -p '\(home.path)/binders' && git clone -q --bare '\(Fixtures.bundle)' '\(path)'")
        XCTAssertEqual(cloned.status, 0, cloned.stderr)
        binder.repository = path
        try binder.mount()
        let files = try binder.files()
        XCTAssertFalse(files.isEmpty)
        let keyFile = home.appendingPathComponent("key.ncryptsec")
        let before = try Data(contentsOf: keyFile)
        let newPassphrase = try sandbox.file("new", "a new passphrase\n")
        let refused = try sandbox.run(["key", "rotate", "--passphrase-file", binder.passphraseFile, "--new-passphrase-file", newPassphrase, "--log-n", "8"])
        assertFails(refused, mentioning: "binder unmount \(binder.mountpoint)")
        XCTAssertTrue(refused.stderr.contains("'alpha' is mounted"), refused.stderr)
        XCTAssertEqual(try Data(contentsOf: keyFile), before)
        for leftover in ["key-rotation.json", "key.ncryptsec.rotating", "rotation"] {
            XCTAssertFalse(FileManager.default.fileExists(atPath: home.appendingPathComponent(leftover).path), leftover)
        }
        binder.unmount()
        let run = try sandbox.run(["key", "rotate", "--passphrase-file", binder.passphraseFile, "--new-passphrase-file", newPassphrase, "--log-n", "8"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let remounted = try sandbox.run(["mount", "alpha", binder.mountpoint, "--passphrase-file", newPassphrase])
        XCTAssertEqual(remounted.status, 0, remounted.stderr)
        binder.markMounted()
        XCTAssertEqual(try binder.files(), files)
        binder.unmount()
        assertFails(try sandbox.run(["mount", "alpha", binder.mountpoint, "--passphrase-file", binder.passphraseFile]), mentioning: "wrong passphrase")
    }

    /// The shares' book and the login tokens are sealed to the new key.
    func testShareBookAndTokensFollowTheKey() throws {
        let setup = try Setup(historyCut: 45)
        let home = setup.sandbox.home
        let oldConversation = try NIP44.ConversationKey(selfOf: setup.oldKey)
        let secrets = #"{"ephemeralPrivkey":"\#(String(repeating: "1", count: 64))","sessionToken":"s","label":"Dr Test","paths":["visits"],"records":1}"#
        let sealed = try NIP44.encrypt(Array(secrets.utf8), key: oldConversation)
        let now = Int64(Date().timeIntervalSince1970)
        let book = #"[{"id":"staging-1","server":"http://127.0.0.1:9","binder":"\#(setup.path("alpha"))","created":\#(now),"expiresAt":\#(now + 86_400),"snapshot":"\#(String(repeating: "0", count: 40))","sealed":"\#(sealed)"}]"#
        try Data(book.utf8).write(to: home.appendingPathComponent("shares.json"))
        let token = try NIP44.encrypt(Array("a.jwt.token".utf8), key: oldConversation)
        let accounts = #"{"servers":{"http://127.0.0.1:9":{"pubkey":"\#(setup.oldKey.publicKey.hex)","token":"\#(token)","loggedInAt":1}}}"#
        try Data(accounts.utf8).write(to: home.appendingPathComponent("accounts.json"))
        let before = try setup.sandbox.run(["share", "--list", "--passphrase-file", setup.oldPassphrase])
        XCTAssertTrue(before.stdout.contains("for Dr Test"), before.stdout + before.stderr)

        let run = try setup.rotate()
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("1 share(s)") && run.stdout.contains("1 login token(s)"), run.stdout)
        let after = try setup.sandbox.run(["share", "--list", "--passphrase-file", setup.newPassphrase])
        XCTAssertEqual(after.stdout, before.stdout, after.stderr)
        let stored = try Data(contentsOf: home.appendingPathComponent("accounts.json"))
        let servers = try XCTUnwrap((try JSONSerialization.jsonObject(with: stored) as? [String: Any])?["servers"] as? [String: [String: Any]])
        let storedToken = try XCTUnwrap(servers["http://127.0.0.1:9"]?["token"] as? String)
        XCTAssertEqual(try NIP44.decrypt(payload: String(storedToken), key: NIP44.ConversationKey(selfOf: setup.newKey)).copyBytes(),
                       Array("a.jwt.token".utf8))
        XCTAssertNil(try? NIP44.decrypt(payload: String(storedToken), key: oldConversation))
    }

    /// The Limbo apps' side: rust-nostr (Tests/interop/nostr_check.py) decrypts documents of a
    /// rotated binder with the new nsec, and not with the old.
    func testRustNostrOpensTheRotatedBinderWithTheNewKeyOnly() throws {
        let probe = try BinderSandbox.run(executable: "/usr/bin/env", ["python3", InteropTests.script, "pubkey", "/dev/null"])
        guard !probe.stderr.contains("No module named") else { throw XCTSkip("nostr-sdk is not installed (scripts/setup installs it)") }
        let setup = try Setup()
        XCTAssertEqual(try setup.rotate().status, 0)
        let newNsec = try setup.sandbox.file("new-nsec", setup.newNsec + "\n")
        let oldNsec = try setup.sandbox.file("old-nsec", Fixtures.nsec + "\n")
        let listing = try shell("git -C '\(setup.path("beta"))' ls-tree -r main | grep '\\.json$'")
        var documents = 0
        // A few documents (each check starts Python and rust-nostr): patient-info.json and the first others.
        let lines = listing.stdout.split(separator: "\n")
        for line in lines.filter({ $0.hasSuffix("\tpatient-info.json") }) + lines.prefix(3) {
            let fields = line.split(separator: "\t")[0].split(separator: " ")
            let path = String(line.split(separator: "\t")[1])
            let payload = try shell("git -C '\(setup.path("beta"))' cat-file blob \(fields[2])").stdout
            let payloadFile = try setup.sandbox.file("payload", payload)
            let theirs = try BinderSandbox.run(executable: "/usr/bin/env", ["python3", InteropTests.script, "nip44-decrypt", newNsec, payloadFile])
            XCTAssertEqual(theirs.status, 0, "\(path): \(theirs.stderr)")
            XCTAssertEqual(Array(theirs.stdout.utf8), setup.original["beta"]?[path], path)
            let old = try BinderSandbox.run(executable: "/usr/bin/env", ["python3", InteropTests.script, "nip44-decrypt", oldNsec, payloadFile])
            XCTAssertNotEqual(old.status, 0, "\(path) opens with the old nsec in rust-nostr")
            documents += 1
        }
        XCTAssertEqual(documents, 4)
    }

    /// A binder with a server: not pushed by the rotation, said so; `binder sync` moves it to a
    /// new id (RotationSyncTests), never under the old one: with the server down, the new id
    /// is chosen and kept, and the binder still names the old one.
    func testBinderWithAServerIsNotPushedByTheRotationAndSyncChoosesANewId() throws {
        let setup = try Setup()
        let configured = try shell("git -C '\(setup.path("beta"))' config binder.server http://127.0.0.1:9 && git -C '\(setup.path("beta"))' config binder.repoid binder-1")
        XCTAssertEqual(configured.status, 0, configured.stderr)
        let run = try setup.rotate()
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("Not pushed yet: 'beta'") && run.stdout.contains("binder-1"), run.stdout)
        XCTAssertFalse(run.stdout.contains("Not pushed yet: 'alpha'"), run.stdout)
        let config = try shell("git -C '\(setup.path("beta"))' config binder.repoid")
        XCTAssertEqual(config.stdout, "binder-1\n")
        let status = try setup.sandbox.run(["status", "beta"])
        XCTAssertTrue(status.stdout.contains("key rotation: re-encrypted to your new key"), status.stdout + status.stderr)
        XCTAssertFalse(try setup.sandbox.run(["status", "alpha"]).stdout.contains("key rotation"))
        let sync = try setup.sandbox.run(["sync", "beta", "--passphrase-file", setup.newPassphrase, "--deadline", "1"])
        XCTAssertNotEqual(sync.status, 0)
        XCTAssertTrue(sync.stderr.contains("offline"), sync.stderr)
        let newId = try shell("git -C '\(setup.path("beta"))' config binder.newrepoid").stdout
        XCTAssertTrue(newId.hasPrefix("binder-") && newId != "binder-1\n", newId)
        XCTAssertEqual(try shell("git -C '\(setup.path("beta"))' config binder.repoid").stdout, "binder-1\n")
        XCTAssertEqual(try shell("git -C '\(setup.path("beta"))' config binder.oldrepoid").stdout, "binder-1\n")
        // A second rotation while beta's move is under way is refused, by name, before anything changes.
        let second = try setup.sandbox.run(["key", "rotate", "--passphrase-file", setup.newPassphrase,
                                            "--new-passphrase-file", setup.oldPassphrase, "--log-n", "8"])
        assertFails(second, mentioning: "binder 'beta' is still moving off the key of an earlier rotation")
        XCTAssertTrue(second.stderr.contains("run 'binder sync beta' first"), second.stderr)
        XCTAssertFalse(setup.recordExists)
        XCTAssertEqual(try setup.keyOfEachBinder(), ["alpha": "new", "beta": "new"])
    }
}

extension TerminalTests {
    /// On a terminal: the current passphrase, the new one twice (none echoed), the new nsec
    /// shown once, then the recovery sheet offered and written where the user says.
    func testKeyRotateAsksOnATerminalAndOffersARecoverySheet() throws {
        let setup = try KeyRotateTests.Setup()
        let sheet = setup.sandbox.root.appendingPathComponent("new-sheet.pdf").path
        let session = "krot\(getpid())"
        try startSession(session, script: "BINDER_HOME='\(setup.sandbox.home.path)' '\(BinderSandbox.binary)' key rotate --log-n 8\n", in: setup.sandbox)
        defer { _ = try? tmux("kill-session -t \(session)") }
        try answer(session, after: "Current passphrase", "'test passphrase' Enter")
        try answer(session, after: "New passphrase", "'Third-Secret-3' Enter")
        try answer(session, after: "Repeat the passphrase", "'Third-Secret-3' Enter")
        try answer(session, after: "A recovery sheet of the new key", "'\(sheet)' Enter")
        let shown = try waitForScreen(session, toContain: "Recovery sheet of")
        XCTAssertTrue(shown.contains("shown this once"), shown)
        XCTAssertFalse(shown.contains("test passphrase") || shown.contains("Third-Secret-3"), "a passphrase was echoed:\n\(shown)")
        XCTAssertTrue(try Data(contentsOf: URL(fileURLWithPath: sheet)).starts(with: Data("%PDF".utf8)))
        let newPassphrase = try setup.sandbox.file("third", "Third-Secret-3\n")
        XCTAssertEqual(try setup.sandbox.run(["verify", "alpha", "--passphrase-file", newPassphrase]).status, 0)
    }
}
