import Foundation
import XCTest
@testable import BinderGit

/// The save path's own pack writer and its checksums, against stock git and coreutils:
/// `git index-pack` for the index (byte for byte), `git verify-pack` and
/// `fsck --strict` for the pack; and the spliced commit against libgit2's general path (the
/// same commit ids for the same changes).
final class PackWriterTests: XCTestCase {
    func testCRC32AndAdler32KnownValues() {
        let digits = Array("123456789".utf8)
        XCTAssertEqual(digits.withUnsafeBytes { Checksum.crc32($0) }, 0xCBF4_3926)
        XCTAssertEqual(Array("Wikipedia".utf8).withUnsafeBytes { Checksum.adler32($0) }, 0x11E6_0398)
        // Long input (zlib takes the modulo before 32 bits overflow).
        let ones = [UInt8](repeating: 0xFF, count: 100_000)
        var a: UInt64 = 1, b: UInt64 = 0
        for byte in ones { a = (a + UInt64(byte)) % 65_521; b = (b + a) % 65_521 }
        XCTAssertEqual(ones.withUnsafeBytes { Checksum.adler32($0) }, UInt32(b << 16 | a))
    }

    /// Our Adler-32 (16 bytes at a time) agrees with zlib's at every length around its chunk
    /// and block sizes, at every alignment, on random and on all-0xFF bytes (the largest sums).
    func testAdler32AgreesWithZlib() {
        var random = SystemRandomNumberGenerator()
        let noise = (0..<40_000).map { _ in UInt8.random(in: 0...255, using: &random) }
        let ones = [UInt8](repeating: 0xFF, count: 40_000)
        for bytes in [noise, ones] {
            bytes.withUnsafeBytes { all in
                for length in Array(0..<70) + [5_551, 5_552, 5_553, 5_552 * 2 + 15, 11_111, 39_990] {
                    for start in 0..<3 {
                        let part = UnsafeRawBufferPointer(rebasing: all[start..<start + length])
                        XCTAssertEqual(Checksum.adler32(part), Checksum.zlibAdler32(part), "length \(length) at \(start)")
                    }
                }
            }
        }
    }

    /// A pack of a blob larger than one stored block, an empty blob, a tree and a commit:
    /// git verifies it, builds the same index from it byte for byte, and reads the objects.
    func testPackAndIndexAreWhatGitMakes() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        _ = try GitRepository.create(path: path, bare: true)
        var generator = SystemRandomNumberGenerator()
        let big = (0..<150_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let small = Array("hello\n".utf8)
        let bigID = try GitObjects.blobID(of: big), smallID = try GitObjects.blobID(of: small)
        let emptyID = try GitObjects.blobID(of: [])
        var tree: [UInt8] = []
        for (name, id) in [("a.bin", bigID), ("b.txt", smallID), ("c", emptyID)].sorted(by: { $0.0 < $1.0 }) {
            tree += Array("100644 \(name)".utf8) + [0] + id.bytes
        }
        let treeID = try oid(String(decoding: try gitData(["hash-object", "-t", "tree", "--stdin"], in: path, input: Data(tree)), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines))
        let commit = Array("tree \(treeID.hex)\nauthor A <a@example.com> 1700000000 +0000\ncommitter A <a@example.com> 1700000000 +0000\n\nm\n".utf8)
        let commitID = try oid(String(decoding: try gitData(["hash-object", "-t", "commit", "--stdin"], in: path, input: Data(commit)), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines))
        let objects = [PackObject(id: bigID, kind: .blob, content: big), PackObject(id: smallID, kind: .blob, content: small),
                       PackObject(id: emptyID, kind: .blob, content: []), PackObject(id: treeID, kind: .tree, content: tree),
                       PackObject(id: commitID, kind: .commit, content: commit)]
        let index = try PackWriter.write(objects, into: path + "/objects/pack")
        let pack = String(index.dropLast(4)) + ".pack"
        XCTAssertTrue(FileManager.default.fileExists(atPath: pack))
        XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: pack)[.posixPermissions] as? Int, 0o444)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: path + "/objects/pack").filter { $0.hasPrefix("tmp_") }, [])

        let verified = try git("verify-pack", "-v", index, in: path)
        for id in objects.map(\.id) { XCTAssertTrue(verified.contains(id.hex), "verify-pack lists \(id)") }
        // git builds the same index from the pack.
        try git("index-pack", "-o", tmp.sub("git.idx"), pack, in: path)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: tmp.sub("git.idx"))), try Data(contentsOf: URL(fileURLWithPath: index)))
        // And reads every object.
        try git("update-ref", "refs/heads/main", commitID.hex, in: path)
        try assertRepositoryComplete(path, tip: commitID, commits: 1)
        XCTAssertEqual(try gitData(["cat-file", "blob", bigID.hex], in: path), Data(big))
        XCTAssertEqual(try git("cat-file", "-p", "main:b.txt", in: path), "hello")
        XCTAssertEqual(try git("cat-file", "-s", emptyID.hex, in: path), "0")
    }

    /// Blobs deflated by `BlobDeflater` (Huffman coding only, one stream reused from blob to
    /// blob and pack to pack) read back byte for byte through stock git. Base64 of 3 KB and up
    /// is stored at most nine tenths of its size (verify-pack's size in the pack); noise and a
    /// blob too small to gain are stored whole.
    func testDeflatedBlobsReadBackByteForByte() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        _ = try GitRepository.create(path: path, bare: true)
        var generator = SystemRandomNumberGenerator()
        func noise(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) } }
        func base64(_ count: Int) -> [UInt8] { Array(Data(noise(count * 3 / 4)).base64EncodedString().utf8) }
        // (content, deflated?) in the order written; the second pack repeats the sizes with
        // new content, through the stream the first pack left in the pool.
        var rows: [(content: [UInt8], deflated: Bool)] = []
        for _ in 0..<2 {
            rows += [(base64(60), false), (base64(3_000), true), (noise(4_000), false), (base64(40_000), true),
                     (base64(300_000), true), (Array(repeating: 0x41, count: 500) + base64(8_000), true)]
        }
        var indexes: [String] = []
        for half in [rows[..<6], rows[6...]] {
            let objects = try half.map { PackObject(id: try GitObjects.blobID(of: $0.content), kind: .blob, content: $0.content) }
            indexes.append(try PackWriter.write(objects, into: path + "/objects/pack"))
        }
        var sizeInPack: [String: (size: Int, stored: Int)] = [:]
        for index in indexes {
            for line in lines(try git("verify-pack", "-v", index, in: path)) {
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                guard fields.count >= 5, fields[0].count == 40, let size = Int(fields[2]), let stored = Int(fields[3]) else { continue }
                sizeInPack[String(fields[0])] = (size, stored)
            }
        }
        for (i, row) in rows.enumerated() {
            let id = try GitObjects.blobID(of: row.content)
            XCTAssertEqual(try gitData(["cat-file", "blob", id.hex], in: path), Data(row.content), "row \(i)")
            let entry = try XCTUnwrap(sizeInPack[id.hex], "row \(i) in a pack")
            if row.deflated {
                XCTAssertLessThanOrEqual(entry.stored, row.content.count * 9 / 10, "row \(i) deflated")
            } else {
                XCTAssertGreaterThan(entry.stored, row.content.count, "row \(i) stored whole")
            }
        }
    }

    /// The same changes through the spliced path and through libgit2's: the same commits,
    /// tree by tree, including names that sort around a folder of a similar name ("a" < "a-b"
    /// < "a/" < "a0"), a replaced file, a file written into the root, and two folders at once.
    func testSplicedCommitsEqualLibgit2Commits() throws {
        let tmp = try TemporaryDirectory()
        let spliced = try GitRepository.create(path: tmp.sub("s.git"), bare: true)
        let general = try GitRepository.create(path: tmp.sub("g.git"), bare: true)
        general.splicedCommitsEnabled = false
        let time = Signature(name: " Ann Example ", email: "ann@example.com", seconds: 1_700_000_000, timeZoneOffsetMinutes: -90)
        var tips: [ObjectID?] = [nil, nil]
        func commit(_ changes: [(String, String)], message: String = "Save") throws {
            let blobs = changes.map { Array($0.1.utf8) }
            let tree = try changes.map { change throws -> TreeChange in .write(path: change.0, blob: try GitObjects.blobID(of: Array(change.1.utf8))) }
            for (index, repo) in [spliced, general].enumerated() {
                tips[index] = try repo.commits.commitChanges(onto: tips[index], changes: tree, message: message, author: time, blobs: blobs)
            }
            XCTAssertEqual(tips[0], tips[1], "after \(changes.map(\.0))")
        }
        // Folders made by the general path (both), then saves into them.
        try commit([("a/x.json", "1"), ("a0", "f"), ("a-b", "f"), ("z/deep/er/r.json", "d"), ("m.json", "m")], message: "Start")
        let packsBefore = spliced.packs.packCount()
        try commit([("a/x.json", "2")])
        try commit([("a/y.json", "3"), ("a/0.json", "0"), ("a/~.json", "tilde: general path")])
        try commit([("m.json", "m2"), ("n.json", "root")])
        try commit([("z/deep/er/r.json", "d2"), ("z/deep/s.json", "s"), ("a/x.json", "2")])
        try commit([("a/x.json", "2")], message: "Same content, new commit")
        try commit([(String(repeating: "é", count: 40) + ".json", "unicode"), ("a/b c.json", "space")])
        XCTAssertEqual(spliced.packs.packCount(), packsBefore + 6, "one pack a commit")
        // All but the one with "~" (not a plain name) were spliced; the general path was used where turned off.
        XCTAssertEqual(spliced.splicedCommitCount, 5)
        XCTAssertEqual(general.splicedCommitCount, 0)
        // A big blob, over one stored block: base64, as a document's ciphertext is.
        var generator = SystemRandomNumberGenerator()
        let big = Data((0..<108_000).map { _ in UInt8.random(in: 0...255, using: &generator) }).base64EncodedString()
        try commit([("a/big.bin", big)])
        for repo in [spliced, general] {
            try assertRepositoryComplete(repo.gitDirectory, tip: tips[0]!, commits: 8)
        }
        XCTAssertEqual(try git("cat-file", "-p", "main:a/y.json", in: spliced.gitDirectory), "3")
        // Deflated in the save's pack (a blob folds copy as it is), and still so after a fold.
        let bigID = try XCTUnwrap(try spliced.trees.entry(at: "a/big.bin", commit: tips[0]!)).id
        func sizeInPack() throws -> Int {
            for index in GitPacks.packIndexes(in: spliced.gitDirectory + "/objects/pack") {
                // verify-pack -v: "<id> <type> <size> <size-in-pack> <offset>"
                if let line = lines(try git("verify-pack", "-v", index, in: spliced.gitDirectory)).first(where: { $0.hasPrefix(bigID.hex) }) {
                    return Int(line.split(separator: " ", omittingEmptySubsequences: true)[3])!
                }
            }
            return -1
        }
        let deflatedSize = try sizeInPack()
        XCTAssertGreaterThan(deflatedSize, 0)
        XCTAssertLessThan(deflatedSize, big.utf8.count * 9 / 10)
        XCTAssertGreaterThan(try GitRepository.open(path: spliced.gitDirectory).packs.foldPacks().packsRemoved, 1)
        XCTAssertEqual(try sizeInPack(), deflatedSize, "a fold copies the deflated blob as it is")
        // A file where a folder is, and a blob the repository lacks, are refused as before.
        let blob = try GitObjects.blobID(of: Array("x".utf8))
        XCTAssertThrowsError(try spliced.commits.commitChanges(onto: tips[0], changes: [.write(path: "z/deep", blob: blob)], message: "m",
                                                       author: time, blobs: [Array("x".utf8)]))
        XCTAssertThrowsError(try spliced.commits.commitChanges(onto: tips[0], changes: [.write(path: "a/q.json", blob: blob)], message: "m",
                                                       author: time))
        XCTAssertEqual(try spliced.refs.branchTip(), tips[0])
        // A new instance, and git, commit on top of the spliced commits.
        let other = try GitRepository.open(path: spliced.gitDirectory)
        let next = try other.commits.commitChanges(onto: tips[0], changes: [.write(path: "a/x.json", blob: blob)], message: "m",
                                           author: time, blobs: [Array("x".utf8)])
        try git("gc", "--quiet", in: spliced.gitDirectory)
        try assertRepositoryComplete(spliced.gitDirectory, tip: next, commits: 9)
    }

    /// kill -9 of a process making spliced commits in a loop, at many points (in the pack's
    /// write, its renames, the folder's fsync, the ref's move): every commit it acknowledged
    /// is on `main`, and stock git finds the repository sound; leftover temporary files do not
    /// stop the next commit.
    func testKillDuringSplicedCommitsLosesNoAcknowledgedCommit() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        // Forty folders of records, made by the general path; saves into them are spliced.
        let start = (0..<40).map { folder in ("visits/\(folder)/first.json", Array("first \(folder)".utf8)) }
        let startChanges = try start.map { entry throws -> TreeChange in .write(path: entry.0, blob: try GitObjects.blobID(of: entry.1)) }
        var tip: ObjectID? = try repo.commits.commitChanges(onto: nil, changes: startChanges, message: "Start", author: testAuthor,
                                                    blobs: start.map(\.1))
        let (end, total) = try killDuringCommits(path: path, from: tip!, rounds: 10, in: tmp,
                                                 acknowledgements: { 2 + $0 }, delay: { UInt32(397 * ($0 * 7 % 13)) }) { child, round, i, parent in
            let record = Array("record \(round) \(i) \(String(repeating: "y", count: i % 300))".utf8)
            return try child.commits.commitChanges(onto: parent, changes: [.write(path: "visits/\(i % 40)/r\(round)-\(i).json",
                                                                          blob: try GitObjects.blobID(of: record))],
                                           message: "Save", author: testAuthor, blobs: [record])
        }
        tip = end
        // The saves were spliced, and the next one is too, beside whatever the kills left.
        let last = try GitRepository.open(path: path)
        let record = Array("after".utf8)
        tip = try last.commits.commitChanges(onto: tip, changes: [.write(path: "visits/3/after.json", blob: try GitObjects.blobID(of: record))],
                                     message: "Save", author: testAuthor, blobs: [record])
        XCTAssertEqual(last.splicedCommitCount, 1)
        try assertRepositoryComplete(path, tip: tip!, commits: total + 1)
        XCTAssertGreaterThan(total, 20)
        try git("gc", "--quiet", in: path)
        try assertRepositoryComplete(path, tip: tip!, commits: total + 1)
    }

    /// A crafted folder is spliced as it is: entries out of git's order and a second entry of
    /// one name (which libgit2 would sort and drop) stay, byte for byte, through a write and a
    /// deletion beside them; a write of the repeated name replaces the first (the one the view
    /// shows). A merge commit is spliced too.
    func testCraftedFolderIsSplicedAsItIs() throws {
        let tmp = try TemporaryDirectory()
        let repo = try GitRepository.create(path: tmp.sub("r.git"), bare: true)
        let path = repo.gitDirectory
        func hashObject(_ type: String, _ bytes: [UInt8]) throws -> ObjectID {
            try oid(String(decoding: try gitData(["hash-object", "-t", type, "--literally", "-w", "--stdin"], in: path, input: Data(bytes)),
                           as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        }
        let blob = try repo.objects.writeBlob(Array("x".utf8)), other = try repo.objects.writeBlob(Array("y".utf8))
        let crafted = Array("100644 b".utf8) + [0] + blob.bytes + Array("100644 a".utf8) + [0] + blob.bytes
            + Array("100644 a".utf8) + [0] + other.bytes
        let folder = try hashObject("tree", crafted)
        let root = try hashObject("tree", Array("40000 f".utf8) + [0] + folder.bytes)
        let commit = try oid(try git("commit-tree", root.hex, "-m", "crafted", in: path))
        try git("update-ref", "refs/heads/main", commit.hex, in: path)
        func folderBytes(_ tip: ObjectID) throws -> [UInt8] { [UInt8](try gitData(["cat-file", "tree", tip.hex + ":f"], in: path, input: Data())) }
        let record = Array("c".utf8), recordID = try GitObjects.blobID(of: record)
        let tip = try repo.commits.commitChanges(onto: commit, changes: [.write(path: "f/c.json", blob: recordID)],
                                         message: "Save", author: testAuthor, blobs: [record])
        XCTAssertEqual(repo.splicedCommitCount, 1)
        XCTAssertEqual(try folderBytes(tip), crafted + Array("100644 c.json".utf8) + [0] + recordID.bytes)
        let deleted = try repo.commits.commitChanges(onto: tip, changes: [.delete(path: "f/c.json"), .delete(path: "f/missing.json")],
                                             message: "Delete", author: testAuthor)
        XCTAssertEqual(repo.splicedCommitCount, 2)
        XCTAssertEqual(try folderBytes(deleted), crafted)
        let replaced = try repo.commits.commitChanges(onto: deleted, changes: [.write(path: "f/a", blob: recordID)], message: "Save",
                                              author: testAuthor, blobs: [record])
        XCTAssertEqual(try folderBytes(replaced), Array("100644 b".utf8) + [0] + blob.bytes + Array("100644 a".utf8) + [0] + recordID.bytes
                       + Array("100644 a".utf8) + [0] + other.bytes)
        let merge = try repo.commits.commitChanges(onto: replaced, changes: [.write(path: "f/m.json", blob: recordID)], message: "Merge",
                                           author: testAuthor, mergedParents: [tip])
        XCTAssertEqual(repo.splicedCommitCount, 4)
        XCTAssertEqual(lines(try git("rev-list", "--parents", "-n", "1", merge.hex, in: path)), ["\(merge.hex) \(replaced.hex) \(tip.hex)"])
        XCTAssertEqual(try git("cat-file", "-p", merge.hex + ":f/m.json", in: path), "c")
        // A fold of those packs keeps the crafted folder's bytes.
        XCTAssertGreaterThan(try GitRepository.open(path: path).packs.foldPacks().packsRemoved, 1)
        XCTAssertEqual(try folderBytes(deleted), crafted)
        // A new folder, and a deletion that empties its folder, take the general path (which
        // makes and removes the folder).
        let added = try repo.commits.commitChanges(onto: merge, changes: [.write(path: "g/only.json", blob: recordID)], message: "New folder",
                                           author: testAuthor, blobs: [record])
        let emptied = try repo.commits.commitChanges(onto: added, changes: [.delete(path: "g/only.json")], message: "Empty", author: testAuthor)
        XCTAssertEqual(repo.splicedCommitCount, 4)
        XCTAssertEqual(lines(try git("ls-tree", "--name-only", emptied.hex, in: path)), ["f"])
    }

    func testPlainNames() {
        for name in ["r1.json", "2024-01-01 visit.json", "é", "a-b"] { XCTAssertTrue(GitCommits.isPlainName(name[...]), name) }
        for name in [".git", ".binder", "GIT~1", "a:b", "a\\b", "dot.", "space ", "tab\t"] {
            XCTAssertFalse(GitCommits.isPlainName(name[...]), name)
        }
    }
}
