import Foundation
import XCTest
@testable import BinderGit

/// Reads the sample binder with BinderGit and compares with command-line git.
final class FixtureReadTests: XCTestCase {
    private var tmp: TemporaryDirectory!
    private var path: String!

    override func setUpWithError() throws {
        tmp = try TemporaryDirectory()
        path = tmp.sub("sample-binder")
        try cloneFixture(into: path)
    }

    override func tearDown() { tmp = nil }

    /// An entry's name and folder, split at the last '/' by bytes (names in any script).
    func testEntryNameAndFolder() {
        let id = ObjectID(hex: String(repeating: "ab", count: 20))!
        let rows: [(path: String, folder: String, name: String)] = [
            ("a.json", "", "a.json"),
            ("visits/a.json", "visits", "a.json"),
            ("ü/名前/e\u{301}.json", "ü/名前", "e\u{301}.json"),
            ("d1/d2/d3", "d1/d2", "d3"),
        ]
        for row in rows {
            let entry = TreeEntry(path: row.path, id: id, kind: .blob, mode: 0o100644)
            XCTAssertEqual(String(entry.folder), row.folder, row.path)
            XCTAssertEqual(String(entry.name), row.name, row.path)
            let listed = TreeEntry(prefix: row.folder.isEmpty ? "" : row.folder + "/", name: row.name, id: id, kind: .blob,
                                   mode: 0o100644, nameIsExact: true)
            XCTAssertEqual(listed, entry, row.path)
            XCTAssertEqual(String(listed.folder), row.folder, row.path)
        }
    }

    func testListTreeMatchesLsTree() throws {
        let repo = try GitRepository.open(path: path)
        let tip = try XCTUnwrap(try repo.refs.branchTip())
        XCTAssertEqual(tip.hex, try git("rev-parse", "main", in: path))

        let entries = try repo.trees.listTree(commit: tip)
        XCTAssertEqual(entries.map(\.path), lines(try git("ls-tree", "-r", "-t", "--name-only", "main", in: path)))

        // Same modes, types and ids as `git ls-tree -r -t` ("<mode> <type> <id>\t<path>").
        let expected = lines(try git("ls-tree", "-r", "-t", "main", in: path))
        let actual = entries.map { entry -> String in
            let type: String
            switch entry.kind {
            case .tree, .unreadable: type = "tree"
            case .blob, .link: type = "blob"
            case .submodule: type = "commit"
            }
            let mode = String(entry.mode, radix: 8)
            return "\(String(repeating: "0", count: 6 - mode.count))\(mode) \(type) \(entry.id)\t\(entry.path)"
        }
        XCTAssertEqual(actual, expected)
        XCTAssertTrue(entries.contains { $0.path == "conditions/back-acne" && $0.kind == .tree })
        XCTAssertTrue(entries.contains { $0.path == "patient-info.json" && $0.kind == .blob && $0.mode == 0o100644 })
        XCTAssertEqual(entries.first { $0.path == "conditions/back-acne/.meta.json" }?.name, ".meta.json")

        // listTree(tree:) agrees.
        XCTAssertEqual(try repo.trees.listTree(tree: try repo.commits.commit(tip).tree), entries)

        // listFolders: the same entries grouped by folder, in the same order, every folder a key.
        var grouped: [String: [TreeEntry]] = ["": []]
        for entry in entries {
            grouped[String(entry.folder), default: []].append(entry)
            if entry.kind == .tree, grouped[entry.path] == nil { grouped[entry.path] = [] }
        }
        XCTAssertEqual(try repo.trees.listFolders(commit: tip), grouped)
        XCTAssertGreaterThan(grouped.count, 3)
    }

    func testBlobsMatchCatFile() throws {
        let repo = try GitRepository.open(path: path)
        let tip = try XCTUnwrap(try repo.refs.branchTip())
        let blobs = try repo.trees.listTree(commit: tip).filter { $0.kind == .blob }
        XCTAssertGreaterThan(blobs.count, 50)

        // One `git cat-file --batch` for all blobs: "<id> blob <size>\n<bytes>\n" each.
        let request = Data(blobs.map { $0.id.hex + "\n" }.joined().utf8)
        let output = [UInt8](try gitData(["cat-file", "--batch"], in: path, input: request))
        var offset = 0
        for blob in blobs {
            let newline = try XCTUnwrap(output[offset...].firstIndex(of: UInt8(ascii: "\n")))
            let header = String(decoding: output[offset..<newline], as: UTF8.self).split(separator: " ")
            XCTAssertEqual(header.count, 3)
            XCTAssertEqual(String(header[0]), blob.id.hex)
            XCTAssertEqual(String(header[1]), "blob")
            let size = try XCTUnwrap(Int(header[2]))
            let content = Array(output[(newline + 1)..<(newline + 1 + size)])
            offset = newline + 1 + size + 1

            XCTAssertEqual(try repo.objects.blobSize(blob.id), size, blob.path)
            XCTAssertEqual(try repo.objects.readBlob(blob.id), content, blob.path)
            XCTAssertTrue(repo.objects.objectExists(blob.id))
        }
        XCTAssertEqual(offset, output.count)
    }

    func testBlobSizeOfPackedObjectsMatches() throws {
        // A bare clone keeps everything in a pack (deltas included).
        let bare = tmp.sub("bare.git")
        try cloneFixture(into: bare, bare: true)
        let repo = try GitRepository.open(path: bare)
        XCTAssertTrue(repo.isBare)
        let all = lines(try git("rev-list", "--objects", "--all", in: bare)).map { String($0.prefix(40)) }
        XCTAssertEqual(all.count, 58 + 141 + 72)
        let request = Data(all.map { $0 + "\n" }.joined().utf8)
        let checks = lines(String(decoding: try gitData(["cat-file", "--batch-check"], in: bare, input: request),
                                  as: UTF8.self).trimmingCharacters(in: .newlines))
        var blobCount = 0
        for line in checks {
            let parts = line.split(separator: " ")
            let id = try oid(String(parts[0]))
            XCTAssertTrue(repo.objects.objectExists(id))
            guard parts[1] == "blob" else {
                XCTAssertThrowsError(try repo.objects.blobSize(id)) { XCTAssertTrue(($0 as? GitError)?.isNotFound == true) }
                continue
            }
            blobCount += 1
            XCTAssertEqual(try repo.objects.blobSize(id), Int(parts[2]), line)
            XCTAssertEqual(try repo.objects.readBlob(id).count, Int(parts[2]), line)
        }
        XCTAssertGreaterThan(blobCount, 50)
    }

    func testMissingObjects() throws {
        let repo = try GitRepository.open(path: path)
        let missing = try oid("0123456789abcdef0123456789abcdef01234567")
        XCTAssertFalse(repo.objects.objectExists(missing))
        for attempt in [{ _ = try repo.objects.readBlob(missing) }, { _ = try repo.objects.blobSize(missing) },
                        { _ = try repo.commits.commit(missing) }, { _ = try repo.trees.listTree(commit: missing) }] {
            XCTAssertThrowsError(try attempt()) { error in
                XCTAssertTrue((error as? GitError)?.isNotFound == true, "\(error)")
            }
        }
        // A tree id is not a commit.
        let tip = try XCTUnwrap(try repo.refs.branchTip())
        let tree = try repo.commits.commit(tip).tree
        XCTAssertThrowsError(try repo.commits.commit(tree))
        XCTAssertThrowsError(try repo.objects.readBlob(tree))
    }

    func testEntryAtPath() throws {
        let repo = try GitRepository.open(path: path)
        let tip = try XCTUnwrap(try repo.refs.branchTip())
        let entry = try XCTUnwrap(try repo.trees.entry(at: "conditions/back-acne/.meta.json", commit: tip))
        XCTAssertEqual(entry.kind, .blob)
        XCTAssertEqual(entry.id.hex, try git("rev-parse", "main:conditions/back-acne/.meta.json", in: path))
        XCTAssertEqual(try repo.trees.entry(at: "conditions", commit: tip)?.kind, .tree)
        XCTAssertNil(try repo.trees.entry(at: "conditions/nope.json", commit: tip))
        XCTAssertThrowsError(try repo.trees.entry(at: "/conditions", commit: tip)) { error in
            guard case .invalidPath = error as? GitError else { return XCTFail("\(error)") }
        }
    }

    func testLogMatchesGitLog() throws {
        let repo = try GitRepository.open(path: path)
        let format = "%H%x00%T%x00%P%x00%an%x00%ae%x00%at%x00%B%x01"
        let text = try git("log", "--first-parent", "--format=\(format)", "main", in: path)
        let records = text.split(separator: "\u{01}").map { $0.trimmingPrefix("\n") }.filter { !$0.isEmpty }
        let history = try repo.history.log(branch: "main", limit: 1000)
        XCTAssertEqual(history.count, records.count)
        XCTAssertEqual(history.count, 58)
        for (info, record) in zip(history, records) {
            let fields = record.split(separator: "\u{00}", omittingEmptySubsequences: false).map(String.init)
            XCTAssertEqual(info.id.hex, fields[0])
            XCTAssertEqual(info.tree.hex, fields[1])
            XCTAssertEqual(info.parents.map(\.hex).joined(separator: " "), fields[2])
            XCTAssertEqual(info.author.name, fields[3])
            XCTAssertEqual(info.author.email, fields[4])
            XCTAssertEqual(String(info.author.seconds), fields[5])
            XCTAssertEqual(info.message, fields[6])
        }
        XCTAssertEqual(try repo.history.log(limit: 3).map(\.id), Array(history.prefix(3)).map(\.id))
        XCTAssertEqual(try repo.history.log(from: history[5].id, limit: 2).map(\.id), [history[5].id, history[6].id])
        XCTAssertEqual(history.last?.parents, [])
    }
}
