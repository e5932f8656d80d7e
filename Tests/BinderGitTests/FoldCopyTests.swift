@testable import BinderGit
import Foundation
import XCTest

/// A fold copies whole blobs byte for byte into a pack of its own (`FoldCopy`): the copy is a
/// pack stock git reads, a damaged source stops the fold before anything is removed, and
/// deltas a pack holds (as stock git writes similar files) are copied with their bases.
/// (Trees: `TreeDeltaTests`.)
final class FoldCopyTests: XCTestCase {
    private func save(_ repo: GitRepository, _ i: Int, _ content: String, onto parent: ObjectID?) throws -> ObjectID {
        let bytes = Array(content.utf8)
        return try repo.commits.commitChanges(onto: parent, changes: [.write(path: "visits/r\(i).json", blob: try GitObjects.blobID(of: bytes))],
                                      message: "Save \(i)", author: testAuthor, blobs: [bytes])
    }

    /// Small and large, compressible (deflated at the save) and not (stored): every blob comes
    /// through the fold with the bytes its commit pack held, and git verifies the copy.
    func testCopiedBlobsAreThoseOfTheSourcePacks() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        var tip: ObjectID?
        var random = SystemRandomNumberGenerator()
        var contents: [String] = []
        for i in 0..<12 {
            let noise = (0..<(i % 3 == 0 ? 90_000 : 300)).map { _ in String(UInt8.random(in: 0...255, using: &random), radix: 16) }.joined()
            contents.append(i % 2 == 0 ? noise : "{\"v\":\"" + String(repeating: "record \(i) ", count: 400) + "\"}")
            tip = try save(repo, i, contents[i], onto: tip)
        }
        /// Each blob's id and the CRC-32 of its entry, over the packs there are.
        func blobEntries() throws -> [String: UInt32] {
            var found: [String: UInt32] = [:]
            for index in GitPacks.packIndexes(in: path + "/objects/pack") {
                let crcs = Dictionary(uniqueKeysWithValues: try XCTUnwrap(PackOrder.entriesInPackOrder(ofIndex: index)).map { ($0.id.hex, $0.crc) })
                for line in lines(try git("verify-pack", "-v", index, in: path)) {
                    let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                    if fields.count >= 5, fields[1] == "blob" { found[String(fields[0])] = crcs[String(fields[0])] }
                }
            }
            return found
        }
        let before = try blobEntries()
        XCTAssertEqual(before.count, 12)
        XCTAssertEqual(try GitRepository.open(path: path).packs.foldPacks().packsRemoved, 12)
        let packs = GitPacks.packIndexes(in: path + "/objects/pack")
        XCTAssertEqual(packs.count, 1)
        for index in packs { XCTAssertNoThrow(try git("verify-pack", index, in: path)) }
        // The blobs' entries are the very bytes the commit packs held (the same CRC-32s).
        XCTAssertEqual(try blobEntries(), before)
        for (i, content) in contents.enumerated() {
            XCTAssertEqual(try git("cat-file", "blob", "main:visits/r\(i).json", in: path), content)
        }
        try assertRepositoryComplete(path, tip: tip!, commits: 12)
    }

    /// A save deflates a blob only when that gains a tenth: a document's base64 payload is, an
    /// attachment's ciphertext (judged by its first 16 KB) and a tiny blob are stored.
    func testASaveDeflatesOnlyWhatCompresses() {
        var random = SystemRandomNumberGenerator()
        let noise = (0..<300_000).map { _ in UInt8.random(in: 0...255, using: &random) }
        XCTAssertNil(PackWriter.deflatedIfSmaller(noise, as: .ciphertext))
        XCTAssertNil(PackWriter.deflatedIfSmaller(Array(noise.prefix(4_000)), as: .ciphertext))
        XCTAssertNil(PackWriter.deflatedIfSmaller(Array("{\"a\":1}".utf8), as: .ciphertext))
        let base64 = Array(Data(noise.prefix(3_000)).base64EncodedString().utf8)
        XCTAssertLessThan(PackWriter.deflatedIfSmaller(base64, as: .ciphertext)?.count ?? .max, base64.count * 9 / 10)
        // Compressible after its first 16 KB only: judged by the sample, stored.
        XCTAssertNil(PackWriter.deflatedIfSmaller(Array(noise.prefix(20_000)) + Array(repeating: 0x41, count: 200_000), as: .ciphertext))
    }

    /// A blob entry whose bytes no longer match its index's CRC-32 fails the fold: no pack is
    /// removed, and the repository is as it was.
    func testADamagedSourceStopsTheFoldAndRemovesNothing() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        var tip: ObjectID?
        for i in 0..<4 { tip = try save(repo, i, "{\"v\":\"" + String(repeating: "record \(i) ", count: 50) + "\"}", onto: tip) }
        let packs = GitPacks.packIndexes(in: path + "/objects/pack")
        // The last byte of the first commit's blob entry (the commit pack writes blobs first).
        let index = try XCTUnwrap(packs.first)
        let entries = try XCTUnwrap(PackOrder.entriesInPackOrder(ofIndex: index))
        let pack = String(index.dropLast(4)) + ".pack"
        let at = Int(entries[1].offset) - 1
        chmod(pack, 0o644)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: pack))
        bytes[at] ^= 0xFF
        try bytes.write(to: URL(fileURLWithPath: pack))
        XCTAssertThrowsError(try GitRepository.open(path: path).packs.foldPacks())
        XCTAssertTrue(Set(GitPacks.packIndexes(in: path + "/objects/pack")).isSuperset(of: packs), "a pack was removed")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: path + "/objects/pack").filter { $0.hasPrefix("tmp_") }, [])
        XCTAssertEqual(try repo.refs.branchTip(), tip)
    }

    /// A pack stock git wrote with blob deltas (similar records; git writes OFS_DELTA entries):
    /// the deltas are copied, naming their bases by id, with the bases; nothing is lost.
    func testDeltasAreCopiedWithTheirBases() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        var tip: ObjectID?
        let base = (0..<300).map { "line \($0) of a long record that repeats\n" }.joined()
        for i in 0..<10 { tip = try save(repo, i, base + "edit \(i)\n", onto: tip) }
        try git("repack", "-a", "-d", "-f", "-q", "--window=10", in: path)
        let listing: [String] = try GitPacks.packIndexes(in: path + "/objects/pack").flatMap { lines(try git("verify-pack", "-v", $0, in: path)) }
        // verify-pack -v: "<id> <type> <size> <size in pack> <offset>", then "<depth> <base>" for a delta.
        let deltas = listing.filter { $0.contains(" blob ") && $0.split(separator: " ", omittingEmptySubsequences: true).count >= 7 }
        XCTAssertGreaterThan(deltas.count, 0, "git stored some blobs as deltas")
        for i in 10..<14 { tip = try save(repo, i, base + "edit \(i)\n", onto: tip) }
        let packs = GitPacks.packIndexes(in: path + "/objects/pack")
        XCTAssertEqual(try GitRepository.open(path: path).packs.fold(FoldPlan(packs: packs, loose: [])).packsRemoved, packs.count)
        // The deltas git found are still there, each naming its base by id now.
        let folded: [String] = try GitPacks.packIndexes(in: path + "/objects/pack").flatMap { lines(try git("verify-pack", "-v", $0, in: path)) }
        XCTAssertEqual(folded.filter { $0.contains(" blob ") && $0.split(separator: " ", omittingEmptySubsequences: true).count >= 7 }.count,
                       deltas.count)
        // (`git` drops the final line break of what it prints.)
        for i in 0..<14 { XCTAssertEqual(try git("cat-file", "blob", "main:visits/r\(i).json", in: path), base + "edit \(i)") }
        try assertRepositoryComplete(path, tip: tip!, commits: 14)
    }
}
