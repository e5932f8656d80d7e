@testable import BinderCrypto
import BinderFormat
import Foundation
import Synchronization
import XCTest

/// A real binder plus tree entries that stock git refuses to make (crafted with
/// Tests/interop/craft_tree.py): names that lead out of a folder or into git's, names that are
/// not file names, links, a gitlink, a git folder where the view shows a document's children,
/// entries that want one name, tampered and truncated sidecars, references that leave their
/// folder. The mount shows each safely or not at all, `binder verify` names each with why, and
/// nothing written through the mount lands outside the repository.
final class HostileTreeTests: XCTestCase {
    var binder: MountedBinder!
    var own: NIP44.ConversationKey!
    /// A folder beside the repository that links in the tree point at.
    var outside: String!

    static let craftTool = Fixtures.directory.deletingLastPathComponent().appendingPathComponent("interop/craft_tree.py").path
    static let longName = String(repeating: "l", count: 300) + ".json"
    /// 250 + ".json": fits in git and as `.md`, but its `.children` folder would be 259 bytes.
    static let longStem = String(repeating: "s", count: 250)

    override func setUpWithError() throws {
        binder = try MountedBinder(cloneFixture: false)
        own = try NIP44.ConversationKey(selfOf: try SecretKey(nsec: Fixtures.nsec))
        outside = binder.sandbox.root.appendingPathComponent("outside").path
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try "untouched".write(toFile: outside + "/victim.txt", atomically: true, encoding: .utf8)

        func encrypted(_ document: MedicalDocument) throws -> [UInt8] { Array(try NIP44.encrypt(document.serializedBytes(), key: own).utf8) }
        func note(_ type: String, _ value: String) throws -> [UInt8] { try encrypted(MedicalDocument(type: type, value: value)) }
        func reference(_ sidecar: String) throws -> [UInt8] {
            try encrypted(MedicalDocument(value: sidecar, metadata: ["type": "attachment_ref", "format": "pdf",
                                                                    "created": "2025-01-02T03:04:05.000Z"]))
        }
        var parent = MedicalDocument(type: "visit", value: "# Parent\n")
        parent.children = [MedicalDocument(type: "note", value: "child note")]
        let attachment = Array("attachment bytes ".utf8) + [UInt8](repeating: 42, count: 3000)
        var dekMiddle = try Sidecar.encrypt(attachment, key: own)
        dekMiddle[dekMiddle.count / 2] ^= 0x01
        var dekTail = try Sidecar.encrypt(attachment, key: own)
        dekTail[dekTail.count - 1] ^= 0x01
        let dekTruncated = Array(try Sidecar.encrypt(attachment, key: own).prefix(1500))
        // Legacy sidecars are base64 text: swap one base64 character for another.
        func flipBase64(_ bytes: [UInt8], at index: Int) -> [UInt8] {
            var out = bytes
            out[index] = out[index] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            return out
        }
        let legacy = Sidecar.encryptLegacy(attachment, key: own)
        // Decrypts; its size cannot be read off its length (base64 broken into lines).
        let wrapped = Self.lines(legacy)
        // Decrypts (line breaks in the encrypted base64 are allowed); its length says it is larger.
        var text = Self.lines(Base64.encode(attachment))
        text.removeLast()  // no line feed at the end: the last two characters keep the padding
        while text.count % 4 != 0 { text.insert(0x0A, at: 76) }  // a length base64 text could have
        let linesInside = try Self.legacySidecar(text: text, key: own)
        let files: [String: [UInt8]] = [
            "patient-info.json": try note("patient-info", "# Test Patient\n"),
            "secret.pdf.enc": try Sidecar.encrypt(Array("root attachment".utf8), key: own),
            "visits/a.json": try note("visit", "# Visit A\n"),
            "visits/a.md": Array("a raw file that wants the name of a.json's view\n".utf8),
            "visits/P.json": try encrypted(parent),
            "visits/Q.json": try note("visit", "# Visit Q\n"),
            "visits/b.json": try note("visit", "# Visit B\n"),
            "visits/back\\slash.json": try note("visit", "# Backslash\n"),
            "visits/\(Self.longStem).json": try encrypted(parent),
            "visits/.meta.json": Array(try NIP44.encrypt(Array("not json".utf8), key: own).utf8),
            "labs/.meta.json": Array("garbage, not even encrypted".utf8),
            "labs/lipids.json": try note("lab", "# Lipids\n"),
            "imaging/scan.json": try reference("scan.pdf.enc"),
            "imaging/scan.pdf.enc": try Sidecar.encrypt(attachment, key: own),
            "imaging/second-claim.json": try reference("scan.pdf.enc"),
            "imaging/legacy.json": try reference("legacy.png.enc"),
            "imaging/legacy.png.enc": legacy,
            "imaging/escape.json": try reference("../secret.pdf.enc"),
            "imaging/slash.json": try reference("sub/inner.pdf.enc"),
            "imaging/sub/inner.pdf.enc": try Sidecar.encrypt(Array("inner".utf8), key: own),
            "imaging/dek-middle.bin.enc": dekMiddle,
            "imaging/dek-tail.bin.enc": dekTail,
            "imaging/dek-truncated.bin.enc": dekTruncated,
            "imaging/legacy-middle.bin.enc": flipBase64(legacy, at: legacy.count / 2),
            "imaging/legacy-tail.bin.enc": flipBase64(legacy, at: legacy.count - 3),
            "imaging/wrapped.bin.enc": wrapped,
            "imaging/lines-inside.bin.enc": linesInside,
        ]
        try binder.commitRepository(files)

        func add(_ folder: String, _ name: [UInt8], mode: String = "100644", _ object: [String: String]) -> [String: String] {
            object.merging(["add": folder, "name_hex": Hex.encode(name), "mode": mode]) { a, _ in a }
        }
        func link(_ folder: String, _ name: String, to target: String) -> [String: String] {
            add(folder, Array(name.utf8), mode: "120000", ["blob_b64": Data(target.utf8).base64EncodedString()])
        }
        try craft([
            add("", Array("..".utf8), mode: "40000", ["tree_of": "visits"]),
            add("", Array(".git".utf8), mode: "40000", ["tree_of": "labs"]),
            add("", Array(".binder".utf8), mode: "40000", ["tree_of": "labs"]),
            add("visits", Array("..".utf8), mode: "40000", ["tree_of": "labs"]),
            add("visits", Array(".".utf8), mode: "40000", ["tree_of": "labs"]),
            add("visits", Array(".GIT".utf8), mode: "40000", ["tree_of": "labs"]),
            add("visits", Array(Self.longName.utf8), ["blob_at": "visits/a.json"]),
            add("visits", [0xFF, 0xFE] + Array(".json".utf8), ["blob_at": "visits/a.json"]),
            add("visits", Array("Q.children/smuggled.md".utf8), ["blob_at": "visits/a.md"]),
            add("visits", Array("a.json".utf8), ["blob_at": "visits/Q.json"]),  // a second a.json
            link("visits", "passwd", to: "/etc/passwd"),
            link("visits", "up.json", to: "../../"),
            link("visits", "outlink", to: outside),
            link("imaging", "linked.pdf.enc", to: "scan.pdf.enc"),
            add("visits", Array("sub".utf8), mode: "160000", ["oid": String(repeating: "1", count: 40)]),
            add("visits/P.children", Array("smuggled.json".utf8), ["blob_at": "visits/a.json"]),
            add("visits/Q.children", Array("inside.json".utf8), ["blob_at": "visits/a.json"]),
        ])
    }

    override func tearDown() {
        binder?.unmount()
        binder = nil
    }

    /// `bytes` broken into lines of 76 (each line ending with a line feed).
    static func lines(_ bytes: [UInt8]) -> [UInt8] {
        stride(from: 0, to: bytes.count, by: 76).flatMap { bytes[$0..<min($0 + 76, bytes.count)] + [0x0A] }
    }

    /// A legacy (0xFF) sidecar holding `text` as its encrypted base64, exactly as given.
    static func legacySidecar(text: [UInt8], key: NIP44.ConversationKey) throws -> [UInt8] {
        let nonce = randomBytes(32)
        let keys = try NIP44.messageKeys(key, nonce: nonce)
        var ciphertext = [UInt8](repeating: 0, count: text.count)
        keys.chachaKey.withUnsafeBytes { k in
            keys.chachaNonce.withUnsafeBytes { n in
                text.withUnsafeBytes { t in ciphertext.withUnsafeMutableBytes { chacha20XOR(t, key: k, nonce: n, into: $0) } }
            }
        }
        let body = nonce + ciphertext
        let mac = try keys.hmacKey.withUnsafeBytes { k in try body.withUnsafeBytes { try hmacSHA256(key: k, [$0]) } }
        return Base64.encode([0xFF] + body + mac.copyBytes())
    }

    func craft(_ operations: [[String: String]]) throws {
        let ops = binder.sandbox.root.appendingPathComponent("ops.json")
        try JSONSerialization.data(withJSONObject: operations).write(to: ops)
        let run = try shell("python3 '\(Self.craftTool)' '\(binder.repository)' '\(ops.path)'")
        XCTAssertEqual(run.status, 0, run.stderr)
    }

    /// `ls -a` of a folder of the mount.
    func names(_ folder: String) throws -> [String] {
        let run = try shell("ls -a1 -- '\(binder.path(folder))'")
        XCTAssertEqual(run.status, 0, run.stderr)
        return run.stdout.split(separator: "\n").map(String.init)
    }

    func testTheMountShowsWhatIsSafeAndNothingElse() throws {
        try binder.mount()
        // Whole-tree walks succeed: nothing listed fails.
        XCTAssertEqual(try shell("ls -laR . > /dev/null", in: binder.mountpoint).status, 0)
        XCTAssertEqual(try shell("find . -type f ! -path './imaging/*' -exec cat {} + > /dev/null", in: binder.mountpoint).status, 0)

        let root = try names("")
        XCTAssertEqual(root, [".", "..", "imaging", "labs", "patient-info.md", "secret.pdf", "visits"])
        // `.binder` is still binder's own status folder, not the crafted one.
        XCTAssertTrue(String(decoding: try binder.read(".binder/status"), as: UTF8.self).contains("commit:"))

        let visits = try names("visits")
        XCTAssertEqual(visits.filter { $0 == "." || $0 == ".." }.count, 2, "\(visits)")
        for hidden in [".GIT", "sub", Self.longName, "P-2.children", "smuggled.md"] {
            XCTAssertFalse(visits.contains(hidden), "\(hidden) listed: \(visits)")
        }
        XCTAssertFalse(visits.contains { $0.unicodeScalars.contains("\u{FFFD}") || $0.utf8.count > 255 }, "\(visits)")
        XCTAssertTrue(visits.contains("back\\slash.md"), "\(visits)")
        XCTAssertTrue(visits.contains(Self.longStem + ".md"), "\(visits)")
        XCTAssertFalse(visits.contains { $0.hasPrefix(Self.longStem) && $0.hasSuffix(".children") }, "\(visits)")
        // a.json is the document; the raw a.md that wants its name is shown as a-2.md.
        XCTAssertTrue(String(decoding: try binder.read("visits/a.md"), as: UTF8.self).hasSuffix("# Visit A\n"))
        XCTAssertEqual(String(decoding: try binder.read("visits/a-2.md"), as: UTF8.self), "a raw file that wants the name of a.json's view\n")

        // P.children is P's children only; the git folder of that name is not shown.
        XCTAssertEqual(try names("visits/P.children"), [".", "..", "01-note.md"])
        XCTAssertEqual(try names("visits/Q.children"), [".", "..", "inside.md"])

        // Links are never followed: read-only files holding their target.
        for (name, target) in ["passwd": "/etc/passwd", "up.json": "../../", "outlink": outside!] {
            XCTAssertEqual(String(decoding: try binder.read("visits/" + name), as: UTF8.self), target, name)
            let attributes = try FileManager.default.attributesOfItem(atPath: binder.path("visits/" + name))
            XCTAssertEqual(attributes[.type] as? FileAttributeType, .typeRegular, name)
            XCTAssertEqual(attributes[.posixPermissions] as? Int, 0o400, name)
        }
        XCTAssertEqual(String(decoding: try binder.read("imaging/linked.pdf.enc"), as: UTF8.self), "scan.pdf.enc")

        // References that leave their folder are not followed: the documents are notes.
        let imaging = try names("imaging")
        XCTAssertTrue(imaging.contains("escape.md") && imaging.contains("slash.md"), "\(imaging)")
        XCTAssertEqual(try binder.read("secret.pdf"), Array("root attachment".utf8))
        XCTAssertEqual(try binder.read("imaging/sub/inner.pdf"), Array("inner".utf8))
        XCTAssertEqual(try binder.read("imaging/legacy.png").count, 3017)

        // Tampered and truncated sidecars: listed, but reading fails with EIO (or shown as stored).
        for name in ["dek-middle.bin", "legacy-middle.bin"] {
            let read = try shell("cat 'imaging/\(name)' > /dev/null", in: binder.mountpoint)
            XCTAssertNotEqual(read.status, 0, name)
            XCTAssertTrue(read.stderr.contains("Input/output error"), "\(name): \(read.stderr)")
        }
        for stem in ["dek-tail.bin", "dek-truncated.bin", "legacy-tail.bin"] {
            let shown = imaging.contains(stem) ? stem : stem + ".enc"
            XCTAssertTrue(imaging.contains(shown), "\(stem): \(imaging)")
            let read = try shell("cat 'imaging/\(shown)'", in: binder.mountpoint)
            XCTAssertFalse(read.status == 0 && read.stdout.contains("attachment bytes"), "\(shown) read as if intact")
        }
        let log = try String(contentsOfFile: binder.sandbox.home.appendingPathComponent("logs/sample-binder.log").path, encoding: .utf8)
        for path in ["visits/..", "visits/sub", "visits/P.children", "visits/passwd"] {
            XCTAssertTrue(log.contains(path), "\(path) not in the log")
        }
        XCTAssertFalse(log.contains("Visit A"))
    }

    func testWritesGoWhereTheViewShowsThem() throws {
        try binder.mount()
        let mnt = binder.mountpoint
        // P's children folder is the view's; the hidden `P.children` git folder beside it
        // receives nothing.
        let before = try shell("git -C '\(binder.repository)' ls-tree -r --name-only main visits/P.children").stdout
        let wrote = try shell("echo '# Note' > visits/P.children/new.md", in: mnt)
        XCTAssertEqual(wrote.status, 0, wrote.stderr)
        XCTAssertTrue(try names("visits/P.children").contains("new.md"))
        XCTAssertEqual(try shell("git -C '\(binder.repository)' ls-tree -r --name-only main visits/P.children").stdout, before)
        // A folder holding entries the view hides is not moved piece by piece (they would be
        // lost or refused by git): EPERM, and nothing changes.
        let tip = try shell("git -C '\(binder.repository)' rev-parse main").stdout
        let moved = try shell("mv visits visits2", in: mnt)
        XCTAssertTrue(moved.stderr.contains("Operation not permitted"), moved.stderr)
        XCTAssertEqual(try shell("git -C '\(binder.repository)' rev-parse main").stdout, tip)
        XCTAssertTrue(FileManager.default.fileExists(atPath: mnt + "/visits/P.md"))
        // Attachments whose base64 is broken into lines list the size a read returns.
        for name in ["imaging/wrapped.bin", "imaging/lines-inside.bin"] {
            let sizes = try shell("stat -c %s \(name) && cat \(name) | wc -c", in: mnt).stdout.split(separator: "\n")
            XCTAssertEqual(sizes.count, 2, name)
            XCTAssertEqual(sizes.first, sizes.last, name)
        }
    }

    func testVerifyNamesEveryEntryTheMountCannotShowAsStored() throws {
        let run = try binder.sandbox.run(["verify", binder.repository, "--passphrase-file", binder.passphraseFile])
        XCTAssertNotEqual(run.status, 0)
        let problems = run.stdout.split(separator: "\n").filter { $0.hasPrefix("problem: ") }.map(String.init)
        func expect(_ path: String, _ words: String..., line: UInt = #line) {
            let found = problems.filter { $0.hasPrefix("problem: \(path): ") }
            XCTAssertFalse(found.isEmpty, "\(path) not reported:\n\(run.stdout)", line: line)
            for word in words {
                XCTAssertTrue(found.contains { $0.contains(word) }, "\(path): no \"\(word)\" in \(found)", line: line)
            }
        }
        expect("..", "leads out of its folder")
        expect(".git", "git's own folder")
        expect(".binder", "binder's status folder")
        expect("visits/..", "leads out of its folder")
        expect("visits/.", "leads out of its folder")
        expect("visits/.GIT", "git's own folder")
        expect("visits/" + Self.longName, "305 bytes", "255")
        expect("visits/\u{FFFD}\u{FFFD}.json", "not valid UTF-8")
        expect("visits/Q.children\u{FFFD}smuggled.md", "holds '/'")
        expect("visits/a.json", "second entry")
        expect("visits/a.md", "shown as a-2.md", "visits/a.json")
        expect("visits/passwd", "symbolic link", "never followed")
        expect("visits/up.json", "symbolic link")
        expect("visits/outlink", "symbolic link")
        expect("imaging/linked.pdf.enc", "symbolic link")
        expect("visits/sub", "submodule")
        expect("visits/P.children", "not shown", "children", "visits/P.json")
        expect("visits/Q.children", "children of Q.json")
        expect("visits/\(Self.longStem).json", "259 bytes")
        expect("visits/.meta.json", "folder metadata")
        expect("labs/.meta.json", "folder metadata")
        expect("imaging/escape.json", "must be a file name in the same folder")
        expect("imaging/slash.json", "must be a file name in the same folder")
        expect("imaging/second-claim.json", "imaging/scan.json refers to as well", "shown as scan-2.pdf")
        // Nothing below a folder that is not shown is looked at.
        XCTAssertFalse(problems.contains { $0.hasPrefix("problem: ../") || $0.hasPrefix("problem: .git/") }, run.stdout)
        for tampered in ["dek-middle", "dek-tail", "dek-truncated", "legacy-middle", "legacy-tail"] {
            expect("imaging/\(tampered).bin.enc")
        }
        // What is fine is not a problem: sidecars whose base64 is broken into lines (outside or
        // inside the encryption) are sized by decrypting them whole.
        for fine in ["visits/b.json", "visits/back\\slash.json", "imaging/scan.json", "imaging/scan.pdf.enc",
                     "imaging/legacy.png.enc", "labs/lipids.json", "patient-info.json",
                     "imaging/wrapped.bin.enc", "imaging/lines-inside.bin.enc"] {
            XCTAssertFalse(problems.contains { $0.hasPrefix("problem: \(fine): ") }, "\(fine) reported:\n\(run.stdout)")
        }
        XCTAssertTrue(run.stderr.contains("\(problems.count) problems"), run.stderr)
    }

    /// Names that are one text in two Unicode forms (NFC "é", NFD "e" + U+0301) are one name to
    /// the mount, as on macOS: either form finds the record. A tree holding both (another
    /// program made it) shows one, `binder verify` names the other, and writes through either
    /// name lose neither.
    func testNamesThatDifferOnlyInUnicodeFormAreOneName() throws {
        let composed = "caf\u{E9}", decomposed = "cafe\u{301}"
        // Swift's String compares these equal; git and the kernel see different bytes.
        XCTAssertNotEqual(Array(composed.utf8), Array(decomposed.utf8))
        func stored() throws -> [[UInt8]] {
            let run = try shell("git ls-tree -z --name-only main visits/", in: binder.repository)
            XCTAssertEqual(run.status, 0, run.stderr)
            return Array(run.stdout.utf8).split(separator: 0).map(Array.init).filter { $0.starts(with: Array("visits/caf".utf8)) }
        }
        func listed() throws -> [[UInt8]] { try names("visits").map { Array($0.utf8) }.filter { $0.starts(with: Array("caf".utf8)) } }

        try binder.mount()
        let mnt = binder.mountpoint
        let wrote = try shell("printf '# Composed\\n' > 'visits/\(composed).md' && printf '# Decomposed\\n' > 'visits/\(decomposed).md'", in: mnt)
        XCTAssertEqual(wrote.status, 0, wrote.stderr)
        XCTAssertEqual(try listed(), [Array("\(composed).md".utf8)])
        XCTAssertTrue(String(decoding: try binder.read("visits/\(composed).md"), as: UTF8.self).hasSuffix("# Decomposed\n"))
        XCTAssertEqual(try stored(), [Array("visits/\(composed).json".utf8)])
        binder.unmount()

        // Both forms in the tree: one is shown, and writing through either keeps both.
        try craft([["add": "visits", "name_hex": Hex.encode(Array("\(decomposed).json".utf8)), "mode": "100644", "blob_at": "visits/b.json"]])
        XCTAssertEqual(try stored().count, 2)
        try binder.mount()
        XCTAssertEqual(try listed().count, 1)
        for name in [composed, decomposed] {
            let edit = try shell("printf '# Edited through %s\\n' '\(name)' > 'visits/\(name).md'", in: mnt)
            XCTAssertEqual(edit.status, 0, edit.stderr)
        }
        XCTAssertEqual(try listed().count, 1)
        binder.unmount()
        XCTAssertEqual(try stored().count, 2)
        let verify = try binder.sandbox.run(["verify", binder.repository, "--passphrase-file", binder.passphraseFile])
        XCTAssertNotEqual(verify.status, 0)
        XCTAssertTrue(verify.stdout.contains("problem: visits/caf") && verify.stdout.contains("second entry"), verify.stdout)
    }

    func testVerifyEscapesControlCharactersInNames() throws {
        try craft([["add": "labs", "name_hex": Hex.encode(Array("evil\n\u{1b}[2Jname.txt".utf8)), "mode": "100644",
                    "blob_b64": Data("x".utf8).base64EncodedString()]])
        let run = try binder.sandbox.run(["verify", binder.repository, "--passphrase-file", binder.passphraseFile])
        XCTAssertFalse(run.stdout.contains("\u{1b}"), run.stdout)
        XCTAssertTrue(run.stdout.contains("labs/evil\\u{a}\\u{1b}[2Jname.txt: not part of the binder format"), run.stdout)
    }

    /// A bare clone of the hostile binder: the same view, the same report, and saves stay in it.
    func testABareCloneMountsTheSameAndStaysInside() throws {
        let bare = binder.sandbox.root.appendingPathComponent("bare.git").path
        XCTAssertEqual(try shell("git clone -q --bare '\(binder.repository)' '\(bare)'").status, 0)
        binder.repository = bare
        let before = try shell("ls -laR '\(outside!)'; ls -1A '\(binder.sandbox.root.path)'").stdout
        try binder.mount()
        XCTAssertEqual(try names("visits/P.children"), [".", "..", "01-note.md"])
        XCTAssertEqual(String(decoding: try binder.read("visits/outlink"), as: UTF8.self), outside)
        XCTAssertEqual(try shell("printf '# New\\n' > visits/new.md && printf 'x\\n' >> visits/a.md && rm visits/passwd", in: binder.mountpoint).status, 0)
        XCTAssertTrue(String(decoding: try binder.read("visits/new.md"), as: UTF8.self).hasSuffix("# New\n"))
        XCTAssertEqual(try shell("ls -laR '\(outside!)'; ls -1A '\(binder.sandbox.root.path)'").stdout, before)
        binder.unmount()
        let verify = try binder.sandbox.run(["verify", bare, "--passphrase-file", binder.passphraseFile])
        XCTAssertNotEqual(verify.status, 0)
        XCTAssertTrue(verify.stdout.contains("problem: visits/..: not shown"), verify.stdout)
    }

    /// The repository is a work tree, kept in sync after each save. Links the tree once had
    /// are still in it (a stale checkout, or stock git made them) where HEAD now has a folder
    /// and a file: saves through the mount replace them and write nothing outside.
    func testWritesThroughTheMountStayInTheRepository() throws {
        try craft([["remove": "visits/outlink"],
                   ["add": "visits/outlink", "name_hex": Hex.encode(Array("inner.json".utf8)), "mode": "100644", "blob_at": "visits/a.json"]])
        let work = binder.repository + "/visits/"
        try FileManager.default.createSymbolicLink(atPath: work + "outlink", withDestinationPath: outside)
        try FileManager.default.removeItem(atPath: work + "b.json")
        try FileManager.default.createSymbolicLink(atPath: work + "b.json", withDestinationPath: outside + "/victim.txt")
        let before = try shell("ls -la; cat victim.txt", in: outside).stdout
        try binder.mount()

        XCTAssertEqual(try shell("printf '# New\\n' > visits/outlink/new.md", in: binder.mountpoint).status, 0)
        XCTAssertEqual(try shell("printf 'more\\n' >> visits/b.md", in: binder.mountpoint).status, 0)
        XCTAssertEqual(try shell("printf '# Q again\\n' > visits/Q.children/more.md", in: binder.mountpoint).status, 0)
        XCTAssertEqual(try shell("printf '# P child\\n' > visits/P.children/02-note.md", in: binder.mountpoint).status, 0)
        XCTAssertEqual(try shell("rm visits/passwd visits/up.json", in: binder.mountpoint).status, 0)

        XCTAssertEqual(try shell("ls -la; cat victim.txt", in: outside).stdout, before)
        XCTAssertEqual(try shell("cat /etc/passwd | head -c 5").stdout, "root:")
        // What was written is stored in the repository and shown.
        XCTAssertTrue(String(decoding: try binder.read("visits/b.md"), as: UTF8.self).hasSuffix("more\n"))
        XCTAssertTrue(String(decoding: try binder.read("visits/outlink/new.md"), as: UTF8.self).hasSuffix("# New\n"))
        let tree = try shell("git ls-tree -r --name-only main visits", in: binder.repository).stdout
        XCTAssertTrue(tree.contains("visits/outlink/new.json") && tree.contains("visits/b.json"), tree)
        XCTAssertFalse(tree.contains("visits/passwd") || tree.contains("visits/up.json"), tree)
        // The work tree holds real files where HEAD has them, no link into `outside`.
        XCTAssertNil(try? FileManager.default.destinationOfSymbolicLink(atPath: work + "outlink"))
        XCTAssertNil(try? FileManager.default.destinationOfSymbolicLink(atPath: work + "b.json"))
        XCTAssertTrue(FileManager.default.fileExists(atPath: work + "outlink/new.json"))
    }
}

/// One bad entry in a crafted tree does not take the binder with it: the mount shows the rest,
/// the bad entry is hidden or read-only, saves beside it keep it byte for byte, and
/// `binder verify` names it by its path and fails. A new kind of bad entry is a new row.
final class BadTreeEntryTests: XCTestCase {
    struct Row {
        /// What is wrong with the entry.
        let kind: String
        /// Its name (bytes) in the git folder `visits`.
        let name: [UInt8]
        let mode: String
        /// Its object, as `craft_tree.py` takes it ("blob_at", "tree_of", "oid").
        let object: [String: String]
        /// The path `binder verify` names it by.
        let verifyPath: String
        /// The bytes of a tree object to write first (its id then goes in as "oid").
        var rawTree: [UInt8]? = nil
    }

    static let missing = String(repeating: "3", count: 40)
    /// A tree whose second entry's name swallowed the NUL meant to end it: it does not parse.
    static let nulInName = Array("100644 a\0b.json\0".utf8) + [UInt8](repeating: 7, count: 20)

    static let rows: [Row] = [
        Row(kind: "a folder mode on a blob", name: Array("bad".utf8), mode: "40000", object: ["blob_at": "visits/a.json"],
            verifyPath: "visits/bad"),
        Row(kind: "an empty name", name: [], mode: "100644", object: ["blob_at": "visits/a.json"], verifyPath: "visits/"),
        Row(kind: "a file mode on a tree", name: Array("bad.json".utf8), mode: "100644", object: ["tree_of": "labs"],
            verifyPath: "visits/bad.json"),
        Row(kind: "a file mode on a tree, a name not binder's", name: Array("notes".utf8), mode: "100644", object: ["tree_of": "labs"],
            verifyPath: "visits/notes"),
        Row(kind: "a submodule (gitlink)", name: Array("sub".utf8), mode: "160000", object: ["oid": String(repeating: "1", count: 40)],
            verifyPath: "visits/sub"),
        Row(kind: "a symbolic link", name: Array("link.json".utf8), mode: "120000", object: ["blob_at": "visits/a.json"],
            verifyPath: "visits/link.json"),
        Row(kind: "a name holding '/'", name: Array("x/y.json".utf8), mode: "100644", object: ["blob_at": "visits/a.json"],
            verifyPath: "visits/x\u{FFFD}y.json"),
        Row(kind: "a second entry of one name", name: Array("a.json".utf8), mode: "100644", object: ["blob_at": "visits/b.json"],
            verifyPath: "visits/a.json"),
        Row(kind: "a file naming a missing object", name: Array("ghost.json".utf8), mode: "100644", object: ["oid": missing],
            verifyPath: "visits/ghost.json"),
        Row(kind: "a folder naming a missing object", name: Array("gone".utf8), mode: "40000", object: ["oid": missing],
            verifyPath: "visits/gone"),
        Row(kind: "a folder whose tree does not parse (a NUL in a name)", name: Array("broken".utf8), mode: "40000", object: [:],
            verifyPath: "visits/broken", rawTree: nulInName),
    ]

    func testEachBadEntryKeepsTheRestUsableAndItselfIntact() throws {
        // The rows share nothing (each its own binder, sandbox and mount): one per processor at
        // a time. A row's failures name its kind.
        let thrown = Mutex([String]())
        DispatchQueue.concurrentPerform(iterations: Self.rows.count) { index in
            let row = Self.rows[index]
            do { try Self.check(row) } catch { thrown.withLock { $0.append("\(row.kind): \(error)") } }
        }
        XCTAssertEqual(thrown.withLock { $0 }, [])
    }

    static func check(_ row: Row) throws {
        let binder = try MountedBinder(cloneFixture: false)
        defer { binder.unmount() }
        let own = try NIP44.ConversationKey(selfOf: try SecretKey(nsec: Fixtures.nsec))
        func note(_ type: String, _ value: String) throws -> [UInt8] {
            Array(try NIP44.encrypt(MedicalDocument(type: type, value: value).serializedBytes(), key: own).utf8)
        }
        try binder.commitRepository([
            "patient-info.json": try note("patient-info", "# Test Patient\n"),
            "visits/a.json": try note("visit", "# Visit A\n"),
            "visits/b.json": try note("visit", "# Visit B\n"),
            "labs/lipids.json": try note("lab", "# Lipids\n"),
        ])
        var object = row.object
        if let raw = row.rawTree {
            let file = binder.sandbox.root.appendingPathComponent("raw-tree")
            try Data(raw).write(to: file)
            let run = try shell("git hash-object -t tree --literally -w '\(file.path)'", in: binder.repository)
            XCTAssertEqual(run.status, 0, run.stderr)
            object["oid"] = run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let ops = [object.merging(["add": "visits", "name_hex": Hex.encode(row.name), "mode": row.mode]) { a, _ in a }]
        let opsFile = binder.sandbox.root.appendingPathComponent("ops.json")
        try JSONSerialization.data(withJSONObject: ops).write(to: opsFile)
        let crafted = try shell("python3 '\(HostileTreeTests.craftTool)' '\(binder.repository)' '\(opsFile.path)'")
        XCTAssertEqual(crafted.status, 0, "\(row.kind): \(crafted.stderr)")
        let before = try badEntries(row, in: binder)
        XCTAssertFalse(before.isEmpty, "\(row.kind): not crafted")

        // The mount comes up and shows the rest.
        let mount = try binder.sandbox.run(["mount", binder.repository, binder.mountpoint, "--passphrase-file", binder.passphraseFile])
        XCTAssertEqual(mount.status, 0, "\(row.kind): \(mount.stderr)")
        guard mount.status == 0 else { return }
        binder.markMounted()
        let listing = try shell("ls -a1 visits", in: binder.mountpoint)
        XCTAssertEqual(listing.status, 0, "\(row.kind): \(listing.stderr)")
        XCTAssertTrue(String(decoding: try binder.read("visits/a.md"), as: UTF8.self).hasSuffix("# Visit A\n"), row.kind)
        XCTAssertTrue(String(decoding: try binder.read("labs/lipids.md"), as: UTF8.self).hasSuffix("# Lipids\n"), row.kind)
        // Whatever else the folder shows cannot be read, or is read-only.
        for name in listing.stdout.split(separator: "\n").map(String.init) where ![".", "..", "a.md", "b.md"].contains(name) {
            let path = binder.path("visits/" + name)
            let read = try shell("cat -- '\(path)' > /dev/null")
            // (By its mode: the tests run as root, for whom access(2) grants any write.)
            let mode = (try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? 0
            let writable = mode & 0o222 != 0
            XCTAssertTrue(read.status != 0 || !writable, "\(row.kind): visits/\(name) is readable and writable")
        }

        // Saves beside it (an edit, a new record, a deletion) keep it byte for byte.
        let edit = try shell("printf 'more\\n' >> visits/b.md && printf '# New\\n' > visits/new.md", in: binder.mountpoint)
        XCTAssertEqual(edit.status, 0, "\(row.kind): \(edit.stderr)")
        XCTAssertTrue(String(decoding: try binder.read("visits/b.md"), as: UTF8.self).hasSuffix("more\n"), row.kind)
        XCTAssertEqual(try badEntries(row, in: binder), before, "\(row.kind): changed by a save beside it")
        let remove = try shell("rm visits/new.md", in: binder.mountpoint)
        XCTAssertEqual(remove.status, 0, "\(row.kind): \(remove.stderr)")
        binder.unmount()
        XCTAssertEqual(try badEntries(row, in: binder), before, "\(row.kind): changed by a deletion beside it")
        // (Read from the tree's bytes: `git ls-tree` refuses a tree holding an empty name.)
        let names = try visitsEntries(in: binder).map(\.name)
        XCTAssertTrue(names.contains(Array("b.json".utf8)) && !names.contains(Array("new.json".utf8)), "\(row.kind): \(names)")

        // verify names it by its path and fails; --repair leaves it as it is.
        for extra in [[], ["--repair"]] {
            let verify = try binder.sandbox.run(["verify", binder.repository, "--passphrase-file", binder.passphraseFile] + extra)
            XCTAssertNotEqual(verify.status, 0, "\(row.kind) \(extra)")
            XCTAssertTrue(verify.stdout.contains("problem: \(row.verifyPath): "), "\(row.kind) \(extra): \(verify.stdout)\(verify.stderr)")
            XCTAssertEqual(try badEntries(row, in: binder), before, "\(row.kind): changed by verify \(extra)")
        }

        // A second mount (from the listing index the first one left), an export and a record's
        // history read the rest too.
        try binder.mount()
        XCTAssertTrue(String(decoding: try binder.read("visits/b.md"), as: UTF8.self).hasSuffix("more\n"), row.kind)
        XCTAssertEqual(try shell("ls -a1 visits", in: binder.mountpoint).status, 0, row.kind)
        // Emptied of what it shows, the folder is still not removed with the entry in it.
        XCTAssertEqual(try shell("rm visits/a.md visits/b.md", in: binder.mountpoint).status, 0, row.kind)
        XCTAssertNotEqual(try shell("rmdir visits", in: binder.mountpoint).status, 0, row.kind)
        binder.unmount()
        // (Of a repeated name, the first entry was the record deleted; the crafted one stays.)
        XCTAssertTrue(try badEntries(row, in: binder).contains(before.last ?? []), "\(row.kind): changed by emptying its folder")
        let exported = binder.sandbox.root.appendingPathComponent("export.json").path
        let export = try binder.sandbox.run(["export", "--binder", binder.repository, "--format", "fhir", "-o", exported,
                                             "--passphrase-file", binder.passphraseFile])
        XCTAssertEqual(export.status, 0, "\(row.kind): \(export.stderr)")
        XCTAssertTrue((try? String(contentsOfFile: exported, encoding: .utf8))?.contains("Lipids") ?? false, row.kind)
        let log = try binder.sandbox.run(["log", "visits/b.md", "--binder", binder.repository])
        XCTAssertEqual(log.status, 0, "\(row.kind): \(log.stderr)")
        XCTAssertEqual(log.stdout.split(separator: "\n").count, 2, "\(row.kind): \(log.stdout)")
    }

    /// The entries named `row.name` in the raw bytes of `main:visits`, each "<mode> <name>\0<id>".
    static func badEntries(_ row: Row, in binder: MountedBinder) throws -> [[UInt8]] {
        try visitsEntries(in: binder).filter { $0.name == row.name }.map(\.bytes)
    }

    /// The entries of `main:visits`, read from its bytes: each name and "<mode> <name>\0<id>".
    static func visitsEntries(in binder: MountedBinder) throws -> [(name: [UInt8], bytes: [UInt8])] {
        let file = binder.sandbox.root.appendingPathComponent("visits-tree").path
        let run = try shell("git cat-file tree \"$(git rev-parse main:visits)\" > '\(file)'", in: binder.repository)
        XCTAssertEqual(run.status, 0, run.stderr)
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
        var entries: [(name: [UInt8], bytes: [UInt8])] = []
        var position = 0
        while position < bytes.count, let space = bytes[position...].firstIndex(of: 0x20),
              let nul = bytes[space...].firstIndex(of: 0), nul + 21 <= bytes.count {
            entries.append((Array(bytes[(space + 1)..<nul]), Array(bytes[position..<(nul + 21)])))
            position = nul + 21
        }
        return entries
    }
}
