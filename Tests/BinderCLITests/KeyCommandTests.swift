import BinderCrypto
import BinderSystem
import Foundation
import XCTest

final class KeyCommandTests: XCTestCase {
    var sandbox: BinderSandbox!
    var passphrase: String!

    override func setUpWithError() throws {
        sandbox = try BinderSandbox()
        passphrase = try sandbox.file("pass", "correct horse battery staple\n")
    }

    // XCTest keeps every test case object until the process ends: let go of the sandbox here
    // so that its folder is removed now, not never.
    override func tearDown() { sandbox = nil }

    /// `binder key generate` with a cheap scrypt cost so tests stay fast.
    func generate() throws -> (npub: String, nsec: String) {
        let run = try sandbox.run(["key", "generate", "--passphrase-file", passphrase, "--log-n", "8"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let npub = try XCTUnwrap(run.stdout.split(whereSeparator: \.isWhitespace).first { $0.hasPrefix("npub1") })
        let nsec = try XCTUnwrap(run.stdout.split(whereSeparator: \.isWhitespace).first { $0.hasPrefix("nsec1") })
        XCTAssertTrue(run.stdout.contains("Write it down"), run.stdout)
        return (String(npub), String(nsec))
    }

    func testGenerateStoresEncryptedKeyAndShowsNsecOnce() throws {
        let (npub, nsec) = try generate()
        let keyFile = sandbox.home.appendingPathComponent("key.ncryptsec").path
        let attributes = try FileManager.default.attributesOfItem(atPath: keyFile)
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        let stored = try String(contentsOfFile: keyFile, encoding: .utf8)
        XCTAssertTrue(stored.hasPrefix("ncryptsec1"))
        XCTAssertFalse(stored.contains(nsec))
        // The nsec that was shown belongs to the npub.
        XCTAssertEqual(try SecretKey(nsec: nsec).publicKey.npub, npub)
        // No plaintext secret anywhere in the state folder.
        for file in try FileManager.default.subpathsOfDirectory(atPath: sandbox.home.path) {
            let text = (try? String(contentsOfFile: sandbox.home.appendingPathComponent(file).path, encoding: .utf8)) ?? ""
            XCTAssertFalse(text.contains(nsec), "\(file) holds the nsec")
            XCTAssertFalse(text.contains(try SecretKey(nsec: nsec).hexSecret().copyBytes().map { String(UnicodeScalar($0)) }.joined()))
        }

        let show = try sandbox.run(["key", "show"])
        XCTAssertEqual(show.status, 0)
        XCTAssertTrue(show.stdout.contains("npub: \(npub)"))
        XCTAssertTrue(show.stdout.contains("hex:  \(try PublicKey(npub: npub).hex)"))

        // A second generate refuses to overwrite.
        assertFails(try sandbox.run(["key", "generate", "--passphrase-file", passphrase]), mentioning: "already exists")
    }

    func testExport() throws {
        let (npub, nsec) = try generate()
        let exported = try sandbox.run(["key", "export"])
        XCTAssertEqual(exported.status, 0)
        let ncryptsec = exported.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertTrue(ncryptsec.hasPrefix("ncryptsec1"))
        let (key, _) = try NIP49.decrypt(ncryptsec, passphrase: try SecureBytes(copyingUTF8: "correct horse battery staple"))
        XCTAssertEqual(key.publicKey.npub, npub)

        assertFails(try sandbox.run(["key", "export", "--nsec"]), mentioning: "--confirm-plaintext")
        let plain = try sandbox.run(["key", "export", "--nsec", "--confirm-plaintext", "--passphrase-file", passphrase])
        XCTAssertEqual(plain.status, 0, plain.stderr)
        XCTAssertEqual(plain.stdout, nsec + "\n")

        let wrong = try sandbox.file("wrong", "nope\n")
        assertFails(try sandbox.run(["key", "export", "--nsec", "--confirm-plaintext", "--passphrase-file", wrong]),
                    mentioning: "wrong passphrase")
        // Without a terminal or a passphrase file, a locked key says how to proceed.
        assertFails(try sandbox.run(["key", "export", "--nsec", "--confirm-plaintext"]), mentioning: "the key is locked")
    }

    func testImportForms() throws {
        let key = try SecretKey.generate()
        let nsec = String(decoding: try key.nsec().copyBytes(), as: UTF8.self)
        let hexKey = String(decoding: try key.hexSecret().copyBytes(), as: UTF8.self)
        for (input, label) in [(nsec + "\n", "nsec"), (hexKey, "hex"), ("  " + hexKey.uppercased() + "\n", "upper hex")] {
            let box = try BinderSandbox()
            let pass = try box.file("p", "pw\n")
            let run = try box.run(["key", "import", "--passphrase-file", pass, "--log-n", "8"], stdin: input)
            XCTAssertEqual(run.status, 0, "\(label): \(run.stderr)")
            XCTAssertTrue(run.stdout.contains(key.publicKey.npub), label)
            XCTAssertFalse(run.stdout.contains(nsec), "\(label): import must not echo the secret")
            let show = try box.run(["key", "show"])
            XCTAssertTrue(show.stdout.contains(key.publicKey.hex), label)
        }
        // An ncryptsec is kept as it is, with its own passphrase.
        let ncryptsec = try NIP49.encrypt(key, passphrase: try SecureBytes(copyingUTF8: "theirs"), logN: 8)
        let box = try BinderSandbox()
        let theirs = try box.file("p", "theirs")
        let imported = try box.run(["key", "import", "--passphrase-file", theirs], stdin: ncryptsec + "\n")
        XCTAssertEqual(imported.status, 0, imported.stderr)
        XCTAssertEqual(try box.run(["key", "export"]).stdout, ncryptsec + "\n")

        let wrongBox = try BinderSandbox()
        assertFails(try wrongBox.run(["key", "import", "--passphrase-file", try wrongBox.file("p", "mine")], stdin: ncryptsec),
                    mentioning: "wrong passphrase")
        assertFails(try wrongBox.run(["key", "import", "--passphrase-file", try wrongBox.file("q", "x")], stdin: "nsec1qqqqq\n"),
                    mentioning: "malformed")
        assertFails(try wrongBox.run(["key", "import", "--passphrase-file", try wrongBox.file("r", "x")], stdin: "hello\n"),
                    mentioning: "malformed key")
        assertFails(try wrongBox.run(["key", "import", "--passphrase-file", try wrongBox.file("s", "x")], stdin: ""),
                    mentioning: "nothing on standard input")
    }

    /// A key typed off a printed sheet comes in groups and lines: ASCII whitespace anywhere in
    /// it is dropped, and a mistyped character is still refused by the bech32 checksum.
    func testTypedImportIgnoresSpacesAndLineBreaksInside() throws {
        let key = try SecretKey.generate()
        let ncryptsec = try NIP49.encrypt(key, passphrase: try SecureBytes(copyingUTF8: "paper"), logN: 8)
        let grouped = stride(from: 0, to: ncryptsec.count, by: 6).map { start -> String in
            let from = ncryptsec.index(ncryptsec.startIndex, offsetBy: start)
            return String(ncryptsec[from..<(ncryptsec.index(from, offsetBy: 6, limitedBy: ncryptsec.endIndex) ?? ncryptsec.endIndex)])
        }.enumerated().map { $0.offset % 6 == 5 ? $0.element + "\r\n" : $0.element + " \t" }.joined()
        let box = try BinderSandbox()
        let pass = try box.file("p", "paper\n")
        let imported = try box.run(["key", "import", "--passphrase-file", pass], stdin: "  " + grouped + "\n\n")
        XCTAssertEqual(imported.status, 0, imported.stderr)
        XCTAssertTrue(imported.stdout.contains(key.publicKey.npub), imported.stdout)
        XCTAssertEqual(try box.run(["key", "export"]).stdout, ncryptsec + "\n")

        let nsec = String(decoding: try key.nsec().copyBytes(), as: UTF8.self)
        let spacedNsec = try BinderSandbox()
        let run = try spacedNsec.run(["key", "import", "--passphrase-file", try spacedNsec.file("p", "x\n"), "--log-n", "8"],
                                     stdin: nsec.prefix(20) + "\n " + nsec.dropFirst(20) + "\n")
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains(key.publicKey.npub), run.stdout)

        // One character changed (q <-> p, both in bech32's alphabet): the checksum refuses it.
        var typo = Array(grouped)
        let at = typo.indices.first { $0 > 20 && (typo[$0] == "q" || typo[$0] == "p") }!
        typo[at] = typo[at] == "q" ? "p" : "q"
        let wrongBox = try BinderSandbox()
        assertFails(try wrongBox.run(["key", "import", "--passphrase-file", try wrongBox.file("p", "paper\n")], stdin: String(typo)),
                    mentioning: "malformed")
        XCTAssertFalse(FileManager.default.fileExists(atPath: wrongBox.home.appendingPathComponent("key.ncryptsec").path))
    }

    func testNoKeyYetAndNoTerminal() throws {
        assertFails(try sandbox.run(["key", "show"]), mentioning: "no key yet")
        assertFails(try sandbox.run(["key", "export"]), mentioning: "no key yet")
        assertFails(try sandbox.run(["unlock", "--passphrase-file", passphrase]), mentioning: "no key yet")
        assertFails(try sandbox.run(["key", "generate"]), mentioning: "no terminal")
        assertFails(try sandbox.run(["key", "generate", "--passphrase-file", try sandbox.file("empty", "\n")]),
                    mentioning: "empty")
        assertFails(try sandbox.run(["key", "generate", "--passphrase-file", "/nonexistent/pass"]),
                    mentioning: "cannot read passphrase file")
    }

    func testUnlockAndLock() throws {
        let (_, nsec) = try generate()
        assertFails(try sandbox.run(["unlock", "--passphrase-file", try sandbox.file("bad", "bad\n")]), mentioning: "wrong passphrase")
        assertFails(try sandbox.run(["unlock", "--timeout", "soon", "--passphrase-file", passphrase]), mentioning: "--timeout")

        let unlock = try sandbox.run(["unlock", "--timeout", "5m", "--passphrase-file", passphrase])
        XCTAssertEqual(unlock.status, 0, unlock.stderr)
        // Unlocked: the secret is available with no passphrase and no terminal.
        let export = try sandbox.run(["key", "export", "--nsec", "--confirm-plaintext"])
        XCTAssertEqual(export.status, 0, export.stderr)
        XCTAssertEqual(export.stdout, nsec + "\n")

        let lock = try sandbox.run(["lock"])
        XCTAssertEqual(lock.status, 0, lock.stderr)
        XCTAssertTrue(lock.stdout.contains("Locked"))
        assertFails(try sandbox.run(["key", "export", "--nsec", "--confirm-plaintext"]), mentioning: "the key is locked")
        XCTAssertTrue(try sandbox.run(["lock"]).stdout.contains("Already locked"))
        // `key show` works while locked.
        XCTAssertEqual(try sandbox.run(["key", "show"]).status, 0)
    }

    func testUnlockTimeoutExpires() throws {
        _ = try generate()
        XCTAssertEqual(try sandbox.run(["unlock", "--timeout", "1s", "--passphrase-file", passphrase]).status, 0)
        Thread.sleep(forTimeInterval: 2.5)
        assertFails(try sandbox.run(["key", "export", "--nsec", "--confirm-plaintext"]), mentioning: "the key is locked")
    }

    func testHelpListsCommands() throws {
        let help = try sandbox.run(["--help"])
        XCTAssertEqual(help.status, 0)
        for word in ["key", "unlock", "lock"] { XCTAssertTrue(help.stdout.contains(word), word) }
        XCTAssertEqual(try sandbox.run(["key", "export", "--help"]).status, 0)
    }

    /// Reading a passphrase or a key being imported needs secret memory: without it, a typed
    /// error that says so (the command prints it and exits 1), and the same read works after.
    func testPassphraseAndKeyInputReportExhaustedSecretMemory() throws {
        defer { SecureBytes.limitForTesting(nil) }
        SecureBytes.limitForTesting(SecureBytes.bytesInUseForTesting)
        XCTAssertThrowsError(try PassphraseSource.file(passphrase).read(prompt: "")) { error in
            guard case PassphraseSource.Error.secretMemory(let exhausted) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(exhausted.description.hasPrefix("out of secret memory"), exhausted.description)
        }
        let input = try FileHandle(forReadingFrom: URL(fileURLWithPath: passphrase))
        XCTAssertThrowsError(try SecretInput.read(fd: input.fileDescriptor, upTo: 64)) { error in
            XCTAssertTrue(error is SecureMemoryError, "\(error)")
        }
        SecureBytes.limitForTesting(nil)
        let read = try PassphraseSource.file(passphrase).read(prompt: "")
        XCTAssertEqual(String(decoding: read.copyBytes(), as: UTF8.self), "correct horse battery staple")
    }
}
