@testable import BinderGit
import Foundation
import XCTest

/// Tree deltas (`TreeDelta`): what a fold writes for an older version of a folder's tree. Each
/// delta must rebuild its target byte for byte; for two versions of one folder it must hold
/// little more than the entries that changed; and stock git must read the packs that hold them.
final class TreeDeltaTests: XCTestCase {
    /// A tree's bytes from (mode, name, content the id is made of) rows, in the order given.
    private func tree(_ entries: [(String, String, String)]) -> [UInt8] {
        entries.flatMap { mode, name, content in
            Array("\(mode) \(name)".utf8) + [0] + (try! GitObjects.blobID(of: Array(content.utf8))).bytes
        }
    }

    private func records(_ range: Range<Int>, version: (Int) -> String = { _ in "" }) -> [(String, String, String)] {
        range.map { ("100644", "2024-\(1000 + $0)-visit.md", "record \($0) \(version($0))") }
    }

    /// A row per case: base, target, and the most bytes the delta may take. Add one for a case
    /// you meet.
    func testDeltasRebuildTheirTargets() throws {
        let many = records(0..<5_000)
        let rows: [(name: String, base: [(String, String, String)], target: [(String, String, String)], atMost: Int)] = [
            ("same", many, many, 64),
            ("one record changed", many, records(0..<5_000) { $0 == 2_500 ? "v2" : "" }, 200),
            ("three changed, far apart", many, records(0..<5_000) { [0, 2_500, 4_999].contains($0) ? "v2" : "" }, 400),
            ("one added at the front", many, [("100644", "2023-a.md", "new")] + many, 200),
            ("one added at the end", many, many + [("100644", "2025-a.md", "new")], 200),
            ("one removed from the middle", many, Array(many[..<2_000] + many[2_001...]), 100),
            ("all but one removed", many, [many[7]], 100),
            ("from one entry to many", [many[7]], many, many.count * 49 + many.count * 49 / 127 + 64),
            ("a folder beside files of its prefix", [("100644", "a.b", "1"), ("40000", "a", "2"), ("100644", "a0", "3")],
             [("100644", "a.b", "1"), ("40000", "a", "2x"), ("100644", "a0", "3")], 64),
            ("a file becomes a folder", [("100644", "a", "1"), ("100644", "b", "2")], [("40000", "a", "1"), ("100644", "b", "2")], 64),
            ("unrelated", records(0..<50), records(50..<100), 50 * 49 + 64),
        ]
        for row in rows {
            let base = tree(row.base), target = tree(row.target)
            let delta = try XCTUnwrap(base.withUnsafeBytes { b in target.withUnsafeBytes { TreeDelta.encode(from: b, to: $0) } }, row.name)
            XCTAssertEqual(base.withUnsafeBytes { TreeDelta.apply(delta, to: $0) }, target, row.name)
            XCTAssertTrue(base.withUnsafeBytes { b in target.withUnsafeBytes { TreeDelta.rebuilds(delta, from: b, exactly: $0) } }, row.name)
            if target.count > 1 {
                let other = Array(target.dropLast()) + [target.last! ^ 1]
                XCTAssertFalse(base.withUnsafeBytes { b in other.withUnsafeBytes { TreeDelta.rebuilds(delta, from: b, exactly: $0) } }, row.name)
            }
            XCTAssertLessThanOrEqual(delta.count, row.atMost, row.name)
        }
    }

    /// Bytes that are not a tree give no delta, never a crash. An entry with an empty name (a
    /// crafted tree, which a save keeps as it is) is an entry: its delta rebuilds it exactly.
    func testMalformedTreesGiveNoDelta() {
        let good = tree(records(0..<3))
        for bad in [Array(good.dropLast()), Array("100644 name-without-nul".utf8), Array("nospace\0".utf8) + [UInt8](repeating: 1, count: 20)] {
            XCTAssertNil(good.withUnsafeBytes { g in bad.withUnsafeBytes { TreeDelta.encode(from: g, to: $0) } })
            XCTAssertNil(bad.withUnsafeBytes { b in good.withUnsafeBytes { TreeDelta.encode(from: b, to: $0) } })
        }
        let crafted = Array("100644 \0".utf8) + [UInt8](repeating: 1, count: 20) + good
        let delta = good.withUnsafeBytes { g in crafted.withUnsafeBytes { TreeDelta.encode(from: g, to: $0) } }
        XCTAssertEqual(delta.flatMap { delta in good.withUnsafeBytes { TreeDelta.apply(delta, to: $0) } }, crafted)
    }

    /// A delta that is cut, names another base size, copies past the base or writes past the
    /// target is refused whole; random bytes never crash it.
    func testApplyRefusesMalformedDeltas() throws {
        let base = tree(records(0..<100)), target = tree(records(0..<100) { $0 == 50 ? "v2" : "" })
        let delta = try XCTUnwrap(base.withUnsafeBytes { b in target.withUnsafeBytes { TreeDelta.encode(from: b, to: $0) } })
        base.withUnsafeBytes { base in
            for cut in 0..<delta.count {
                XCTAssertNil(TreeDelta.apply(Array(delta[..<cut]), to: base), "cut at \(cut)")
                target.withUnsafeBytes { XCTAssertFalse(TreeDelta.rebuilds(Array(delta[..<cut]), from: base, exactly: $0), "cut at \(cut)") }
            }
            XCTAssertNil(TreeDelta.apply(delta, to: UnsafeRawBufferPointer(rebasing: base.dropLast())))
            // Copy 16 bytes from offset 0xFFFF: past a base of this size.
            var header: [UInt8] = []
            TreeDelta.appendVarint(base.count, to: &header)
            TreeDelta.appendVarint(16, to: &header)
            XCTAssertNil(TreeDelta.apply(header + [0x93, 0xFF, 0xFF, 16], to: base))
            XCTAssertNil(TreeDelta.apply(header + [0x00], to: base), "instruction 0 is reserved")
            XCTAssertNil(TreeDelta.apply(header + [17] + [UInt8](repeating: 0, count: 17), to: base), "more than the target's size")
            var random = SystemRandomNumberGenerator()
            for _ in 0..<2_000 {
                var mutated = delta
                for _ in 0..<3 { mutated[Int.random(in: 0..<mutated.count, using: &random)] = UInt8.random(in: 0...255, using: &random) }
                if let rebuilt = TreeDelta.apply(mutated, to: base) { XCTAssertLessThan(rebuilt.count, 1 << 24) }
            }
        }
    }

    /// A bare repository with one large folder (`visits/`, `records` files) and, beside it,
    /// `others` (single files in folders of their own), then saves into the folder, each onto
    /// the last (the committer's spliced path: a pack of its own).
    private final class FolderHistory {
        let path: String
        let repo: GitRepository
        let records: Int
        private(set) var tip: ObjectID
        private(set) var commits = 1

        init(in tmp: TemporaryDirectory, records: Int, others: [String]) throws {
            path = tmp.sub("r.git")
            repo = try GitRepository.create(path: path, bare: true)
            self.records = records
            let blobs = (0..<records).map { Array("{\"v\":\"record \($0)\"}".utf8) }
            tip = try repo.commits.commitChanges(onto: nil, changes: try blobs.enumerated().map { i, bytes in
                .write(path: "visits/r\(1000 + i).json", blob: try GitObjects.blobID(of: bytes))
            } + others.map { .write(path: $0, blob: try GitObjects.blobID(of: blobs[0])) }, message: "Import", author: testAuthor, blobs: blobs)
        }

        /// The record save `i` writes.
        func record(_ i: Int) -> String { "visits/r\(1000 + (i * 37) % records).json" }

        func save(_ i: Int) throws {
            let bytes = Array("{\"v\":\"save \(i)\"}".utf8)
            tip = try repo.commits.commitChanges(onto: tip, changes: [.write(path: record(i), blob: try GitObjects.blobID(of: bytes))],
                                         message: "Save \(i)", author: testAuthor, blobs: [bytes])
            commits += 1
        }

        /// A fold of every pack there is.
        var allPacks: FoldPlan { FoldPlan(packs: GitPacks.packIndexes(in: path + "/objects/pack"), loose: []) }
    }

    /// Per kind of tree entry in the packs of the repository at `path`: whole trees and
    /// deltas (verify-pack lists a delta's depth and base after its offset), and the deepest.
    private func treeEntries(_ path: String) throws -> (whole: Int, deltas: Int, deepest: Int) {
        var whole = 0, deltas = 0, deepest = 0
        for index in GitPacks.packIndexes(in: path + "/objects/pack") {
            for line in lines(try git("verify-pack", "-v", index, in: path)) {
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                guard fields.count >= 5, fields[0].count == 40, fields[1] == "tree" else { continue }
                if fields.count >= 7 {
                    deltas += 1
                    deepest = max(deepest, Int(fields[5]) ?? 0)
                } else {
                    whole += 1
                }
            }
        }
        return (whole, deltas, deepest)
    }

    /// Folders that all begin with `.meta.json`, as a binder's may: each folder's versions
    /// still find their own base, and all but the newest are deltas.
    func testFoldersThatBeginAlikeEachGetTheirDeltas() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        let folders = ["conditions", "imaging", "labs", "visits"]
        var changes: [TreeChange] = []
        var blobs: [[UInt8]] = []
        func add(_ path: String, _ text: String) throws {
            blobs.append(Array(text.utf8))
            changes.append(.write(path: path, blob: try GitObjects.blobID(of: blobs.last!)))
        }
        for folder in folders {
            try add("\(folder)/.meta.json", "{\"folder\":\"\(folder)\"}")
            for i in 0..<300 { try add("\(folder)/\(folder)-\(1000 + i).json", "{\"v\":\"\(folder) \(i)\"}") }
        }
        // Files beside the folders, as a binder's root has (in a root of four entries all
        // four change within four saves, and no version is a delta of another).
        for i in 0..<8 { try add("notes-\(i).json", "{\"v\":\"note \(i)\"}") }
        var tip = try repo.commits.commitChanges(onto: nil, changes: changes, message: "Import", author: testAuthor, blobs: blobs)
        for i in 0..<40 {
            let bytes = Array("{\"v\":\"save \(i)\"}".utf8)
            let folder = folders[i % 4]
            tip = try repo.commits.commitChanges(onto: tip, changes: [.write(path: "\(folder)/\(folder)-\(1000 + (i * 7) % 300).json",
                                                                      blob: try GitObjects.blobID(of: bytes))],
                                         message: "Save \(i)", author: testAuthor, blobs: [bytes])
        }
        _ = try GitRepository.open(path: path).packs.fold(FoldPlan(packs: GitPacks.packIndexes(in: path + "/objects/pack"), loose: []))
        try assertRepositoryComplete(path, tip: tip, commits: 41)
        // 41 versions of the root, 11 of each folder (the import's and ten saves'): the newest of
        // each whole, the rest deltas.
        let trees = try treeEntries(path)
        XCTAssertEqual(trees.whole, 1 + 4)
        XCTAssertEqual(trees.deltas, 40 + 4 * 10)
    }

    /// A folder of 2,000 records saved 40 times, folded, saved again and folded again: git finds
    /// the repository whole, the older trees are deltas (one whole tree per folder and fold
    /// pack), and the second fold kept the first one's deltas rather than searching again.
    func testFoldsStoreTreesAsDeltasGitReads() throws {
        let tmp = try TemporaryDirectory()
        // Beside visits/, a few folders and a file, as in a binder (a root tree of one entry is
        // too small for a delta to pay).
        let history = try FolderHistory(in: tmp, records: 2_000, others: ["allergies/a.json", "conditions/c.json", "labs/l.json", "patient-info.json"])
        let path = history.path
        for i in 0..<40 { try history.save(i) }
        _ = try GitRepository.open(path: path).packs.fold(history.allPacks)
        XCTAssertEqual(GitPacks.packIndexes(in: path + "/objects/pack").count, 1, "one pack a fold")
        try assertRepositoryComplete(path, tip: history.tip, commits: history.commits)
        // 41 versions of the root and of visits/: the newest of each whole, the rest deltas
        // (and the three folders of one file, whole).
        var trees = try treeEntries(path)
        XCTAssertEqual(trees.whole, 2 + 3)
        XCTAssertEqual(trees.deltas, 80)
        XCTAssertEqual(trees.deepest, 1)
        let packBytes = GitPacks.packIndexes(in: path + "/objects/pack").reduce(0) { total, index in
            total + ((try? FileManager.default.attributesOfItem(atPath: String(index.dropLast(4)) + ".pack")[.size] as? Int) ?? 0)
        }
        // The 41 versions of a 2,000-entry tree (about 90 KB each) take little more than one.
        XCTAssertLessThan(packBytes, 300_000)

        for i in 40..<60 { try history.save(i) }
        _ = try GitRepository.open(path: path).packs.fold(history.allPacks)
        try assertRepositoryComplete(path, tip: history.tip, commits: history.commits)
        trees = try treeEntries(path)
        // Still one whole tree per folder: the first fold's whole trees became deltas against
        // the newest, and its deltas were kept as they were (one level deeper).
        XCTAssertEqual(trees.whole, 2 + 3)
        XCTAssertEqual(trees.deltas, 120)
        XCTAssertEqual(trees.deepest, 2)
        // Git reads every version back as it was written.
        for i in [0, 20, 39, 59] {
            XCTAssertEqual(try git("cat-file", "blob", "main~\(59 - i):\(history.record(i))", in: path), "{\"v\":\"save \(i)\"}")
        }

    }

    /// kill -9 of a process folding (trees made deltas, deltas copied, packs removed) at
    /// points spread over the fold's length: every commit stays readable and git finds the
    /// repository whole after each kill; a fold that is let finish then leaves two packs.
    func testKillDuringFoldLosesNothing() throws {
        let tmp = try TemporaryDirectory()
        let history = try FolderHistory(in: tmp, records: 3_000, others: ["labs/l.json"])
        let path = history.path
        for i in 0..<60 { try history.save(i) }

        // How long one fold takes here (on a copy).
        try FileManager.default.copyItem(atPath: path, toPath: tmp.sub("probe.git"))
        let started = Date()
        _ = try GitRepository.open(path: tmp.sub("probe.git")).packs.fold(FoldPlan(packs: GitPacks.packIndexes(in: tmp.sub("probe.git") + "/objects/pack"), loose: []))
        let length = max(Date().timeIntervalSince(started), 0.005)

        var killedMidway = 0
        for step in 0..<10 {
            if step % 3 == 2 { for i in (100 + step * 10)..<(110 + step * 10) { try history.save(i) } }
            let plan = history.allPacks
            // The child: a fresh instance folds, and leaves without running anything else.
            if killChild(after: length * Double(step % 5 + 1) / 5, running: {
                if let child = try? GitRepository.open(path: path) { _ = try? child.packs.fold(plan) }
            }) { killedMidway += 1 }
            try assertRepositoryComplete(path, tip: history.tip, commits: history.commits)
        }
        XCTAssertGreaterThan(killedMidway, 0, "no fold was killed before it finished")
        // Temporary packs a kill left are not packs: a fold that finishes takes every real one.
        _ = try GitRepository.open(path: path).packs.fold(history.allPacks)
        XCTAssertEqual(GitPacks.packIndexes(in: path + "/objects/pack").count, 1, "one pack a fold")
        try assertRepositoryComplete(path, tip: history.tip, commits: history.commits)
        XCTAssertEqual(try git("cat-file", "blob", "main:\(history.record(59))", in: path), "{\"v\":\"save 59\"}")
    }
}
