@testable import BinderCore
import BinderCrypto
import BinderFormat
import BinderGit
import Foundation
import Logging
import XCTest

/// Saves patch the listing of their folder in place (`ListingPatch`) and the snapshot's
/// entries (`Snapshot.advanced`) instead of building them again: each row makes a binder,
/// lists its folders, makes one change through the view, and checks that the listings shown
/// equal what a fresh view (a full build) shows, and whether the folder was patched or built
/// again. (Debug builds also check every patch against a full build inside the committer.)
final class ListingPatchTests: XCTestCase {
    var directory: URL!
    var repository: GitRepository!
    var key: NIP44.ConversationKey!
    let logger = Logger(label: "test")
    let author = Signature(name: "t", email: "t@t")

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("binder-patch-\(UUID().uuidString)")
        key = try NIP44.ConversationKey(selfOf: try SecretKey.generate())
        _ = try BinderCreator.create(at: directory.path, key: key, patientName: "Test Patient", dateOfBirth: nil, author: author)
        repository = try GitRepository.open(path: directory.path)
    }

    override func tearDown() { try? FileManager.default.removeItem(at: directory) }

    func record(_ title: String) -> [UInt8] {
        Array("---\ncreated: \"2025-01-02T03:04:05.000Z\"\n---\n# \(title)\n\nText.\n".utf8)
    }

    /// Commits `files` (git path → bytes, stored as given) straight into the repository, as
    /// another writer would: for states the view itself never writes.
    func commitRaw(_ files: [String: [UInt8]]) throws {
        let parent = try repository.refs.branchTip()
        var changes: [TreeChange] = []
        for (path, bytes) in files { changes.append(.write(path: path, blob: try repository.objects.writeBlob(bytes))) }
        _ = try repository.commits.commitChanges(onto: parent, changes: changes, message: "raw", author: author)
    }

    func encrypted(_ json: String) throws -> [UInt8] {
        Array(try NIP44.encrypt(Array(json.utf8), key: key).utf8)
    }

    /// What `view` shows of `folder`: names, kinds, sizes, times.
    func shown(_ view: BinderView, _ folder: String) throws -> [String] {
        try view.list(folder).map { "\($0.name) \($0.attributes.kind) \($0.attributes.size) \($0.attributes.modified.seconds)" }
    }

    struct Row {
        let name: String
        /// Made before the view opens (through a first view, or raw commits).
        let setUp: (ListingPatchTests) throws -> Void
        /// Folders listed before the change.
        let listed: [String]
        let change: (BinderView) throws -> Void
        /// Folders whose listing must survive the commit (patched), and those that must not.
        let patched: [String]
        let rebuilt: [String]
    }

    func testSavesPatchTheirFolderOrBuildItAgain() throws {
        let rows: [Row] = [
            Row(name: "save over a plain record", setUp: { t in
                let v = try t.newView()
                try v.makeDirectory("visits")
                for i in 0..<5 { try v.store("visits/r\(i).md", content: t.record("R\(i)")) }
            }, listed: ["", "visits"], change: { v in
                try v.store("visits/r2.md", content: Array("---\ncreated: \"2025-01-02T03:04:05.000Z\"\n---\n# R2 again, longer\n".utf8))
            }, patched: ["", "visits"], rebuilt: []),
            Row(name: "new record", setUp: { t in
                let v = try t.newView()
                try v.makeDirectory("visits")
                try v.store("visits/a.md", content: t.record("A"))
            }, listed: ["", "visits"], change: { v in try v.store("visits/b.md", content: Array("# B\n".utf8)) },
                patched: ["", "visits"], rebuilt: []),
            Row(name: "atomic save: a scratch file renamed over the record", setUp: { t in
                let v = try t.newView()
                try v.makeDirectory("visits")
                try v.store("visits/a.md", content: t.record("A"))
            }, listed: ["visits"], change: { v in
                let handle = try v.create("visits/.goutputstream-AB12CD")
                let bytes = Array("# A, saved\n".utf8)
                _ = try bytes.withUnsafeBytes { try v.write(handle: handle, offset: 0, $0) }
                try v.flush(handle: handle, closing: true)
                _ = v.release(handle: handle)
                try v.rename("visits/.goutputstream-AB12CD", to: "visits/a.md")
            }, patched: ["visits"], rebuilt: []),
            Row(name: "a subfolder's record: its folder and the folders above are patched", setUp: { t in
                let v = try t.newView()
                try v.makeDirectory("visits")
                try v.makeDirectory("visits/2024")
                try v.store("visits/2024/a.md", content: t.record("A"))
                try v.store("visits/b.md", content: t.record("B"))
            }, listed: ["", "visits", "visits/2024"], change: { v in try v.store("visits/2024/a.md", content: Array("# A2\n".utf8)) },
                patched: ["", "visits", "visits/2024"], rebuilt: []),
            Row(name: "a raw file and a file that cannot be decrypted take the new commit's time", setUp: { t in
                let v = try t.newView()
                try v.makeDirectory("visits")
                try v.store("visits/a.md", content: t.record("A"))
                try t.commitRaw(["visits/notes.txt": Array("plain".utf8), "visits/bad.json": Array("not ciphertext".utf8)])
            }, listed: ["visits"], change: { v in
                Thread.sleep(forTimeInterval: 1.1)  // a commit time of its own (times are whole seconds)
                try v.store("visits/a.md", content: Array("# A2\n".utf8))
            }, patched: ["visits"], rebuilt: []),
            Row(name: "a new record beside a raw file of a name like it", setUp: { t in
                let v = try t.newView()
                try v.makeDirectory("visits")
                try t.commitRaw(["visits/c.md": Array("raw".utf8)])
            }, listed: ["visits"], change: { v in try v.store("visits/c-new.md", content: Array("# C\n".utf8)) },
                patched: ["visits"], rebuilt: []),
            Row(name: "a record without a date of its own: the folder is built again", setUp: { t in
                let v = try t.newView()
                try v.makeDirectory("visits")
                try v.store("visits/a.md", content: t.record("A"))
                try t.commitRaw(["visits/undated.json": try t.encrypted(#"{"value":"x","metadata":{"type":"note"},"children":[]}"#)])
            }, listed: ["visits"], change: { v in try v.store("visits/a.md", content: Array("# A2\n".utf8)) },
                patched: [], rebuilt: ["visits"]),
            Row(name: "a record with children: built again", setUp: { t in
                let v = try t.newView()
                try v.makeDirectory("visits")
                try v.store("visits/p.md", content: t.record("P"))
                try v.makeDirectory("visits/p.children")
                try v.store("visits/p.children/01-note.md", content: t.record("child"))
            }, listed: ["visits", "visits/p.children"], change: { v in try v.store("visits/p.md", content: Array("# P2\n".utf8)) },
                patched: [], rebuilt: ["visits"]),
            Row(name: "children of another record are kept with the patched folder", setUp: { t in
                let v = try t.newView()
                try v.makeDirectory("visits")
                try v.store("visits/p.md", content: t.record("P"))
                try v.makeDirectory("visits/p.children")
                try v.store("visits/p.children/01-note.md", content: t.record("child"))
                try v.store("visits/q.md", content: t.record("Q"))
            }, listed: ["visits", "visits/p.children"], change: { v in try v.store("visits/q.md", content: Array("# Q2\n".utf8)) },
                patched: ["visits", "visits/p.children"], rebuilt: []),
            Row(name: "an attachment: built again", setUp: { t in
                let v = try t.newView()
                try v.makeDirectory("visits")
            }, listed: ["visits"], change: { v in try v.store("visits/scan.pdf", content: Array("%PDF-1.4 x".utf8)) },
                patched: [], rebuilt: ["visits"]),
            Row(name: "a delete: built again", setUp: { t in
                let v = try t.newView()
                try v.makeDirectory("visits")
                try v.store("visits/a.md", content: t.record("A"))
                try v.store("visits/b.md", content: t.record("B"))
            }, listed: ["visits"], change: { v in try v.remove("visits/a.md") }, patched: [], rebuilt: ["visits"]),
            Row(name: "a new folder: the folder above is built again", setUp: { t in
                let v = try t.newView()
                try v.makeDirectory("visits")
            }, listed: ["", "visits"], change: { v in try v.makeDirectory("labs") }, patched: [], rebuilt: [""]),
        ]
        for row in rows {
            try tearDown_setUp()
            try row.setUp(self)
            let view = try newView()
            for folder in row.listed { _ = try view.list(folder) }
            try row.change(view)
            let built = view.reader.listings.builtListings
            for folder in row.patched { XCTAssertNotNil(built[folder], "\(row.name): \(folder) was not patched") }
            for folder in row.rebuilt { XCTAssertNil(built[folder], "\(row.name): \(folder) was kept") }
            let fresh = try newView()
            for folder in row.listed where (try? fresh.list(folder)) != nil {
                XCTAssertEqual(try shown(view, folder), try shown(fresh, folder), "\(row.name): \(folder)")
            }
        }
    }

    func newView() throws -> BinderView {
        try BinderView(repository: try GitRepository.open(path: directory.path), key: key, logger: logger)
    }

    func tearDown_setUp() throws {
        tearDown()
        try setUpWithError()
    }

    func testTheFoldersOfAChange() {
        let blob = ObjectID(hex: String(repeating: "ab", count: 20))!
        let changes: [TreeChange] = [.write(path: "a/b/x.json", blob: blob), .write(path: "a/y.json", blob: blob), .delete(path: "c/z.json"),
                                     .write(path: "a/b/.meta.json", blob: blob), .write(path: "d/p.enc", blob: blob), .write(path: "e/q.json", blob: blob)]
        let folders = FolderChange.of(changes)
        XCTAssertEqual(Set(folders.keys), ["", "a", "a/b", "c", "d", "e"])
        XCTAssertNil(folders["a/b"]?.written, "a folder's metadata is not a document")
        XCTAssertEqual(folders["a"]?.written, ["y.json": blob])
        XCTAssertEqual(folders["a"]?.subfolders, ["a/b"])
        XCTAssertEqual(folders[""]?.subfolders, ["a", "c", "d", "e"])
        XCTAssertEqual(folders[""]?.written, [:])
        XCTAssertNil(folders["c"]?.written, "a delete")
        XCTAssertNil(folders["d"]?.written, "a sidecar")
        XCTAssertEqual(folders["e"]?.written, ["q.json": blob])
    }

    /// Folders git would write back otherwise than they are are never patched in place.
    func testRegularFolders() {
        let id = ObjectID(hex: String(repeating: "cd", count: 20))!
        func blob(_ name: String, mode: UInt32 = 0o100644, exact: Bool = true) -> TreeEntry {
            TreeEntry(path: "v/" + name, id: id, kind: mode == 0o040000 ? .tree : .blob, mode: mode, nameIsExact: exact)
        }
        let rows: [([TreeEntry], Bool, String)] = [
            ([blob("a.json"), blob("b.json"), blob("w", mode: 0o040000), blob("w0.json")], true, "git's order"),
            ([blob("a.json"), blob("w.json"), blob("w", mode: 0o040000)], true, "'w.json' before the folder 'w/'"),
            ([blob("b.json"), blob("a.json")], false, "out of order"),
            ([blob("a.json"), blob("a.json")], false, "repeated"),
            ([blob(".."), blob("a.json")], false, "'..'"),
            ([blob(".GIT")], false, "'.git'"),
            ([blob(".gIt")], false, "'.git' in mixed case"),
            ([blob(".")], false, "'.'"),
            ([blob("..."), blob(".git0")], true, "'...' and '.git0'"),
            ([blob(".g\u{131}t")], true, "'.gıt' (a dotless i, not ASCII)"),
            ([blob("a\u{0}b")], false, "a NUL"),
            ([blob(".gitx"), blob(".gi")], false, "out of order, near '.git'"),
            ([blob(".gi"), blob(".gitx")], true, "near '.git'"),
            ([blob("a\u{FFFD}b", exact: false)], false, "a name that is not exact"),
            ([blob("a.json", mode: 0o100664)], false, "a mode git normalises"),
            ([], true, "empty"),
            ([blob("a"), blob("ab")], true, "a prefix first"),
            ([blob("ab"), blob("a", mode: 0o040000)], false, "the folder 'a/' after 'ab'"),
            ([blob("a", mode: 0o040000), blob("a0")], true, "'a/' before 'a0'"),
            ([blob("z"), blob("é")], true, "bytes, not characters"),
        ]
        for (entries, regular, why) in rows { XCTAssertEqual(Snapshot.isRegular(entries), regular, why) }
    }

    /// The order compared in place is the order of git's keys: the name's bytes, and a '/'
    /// after a folder's.
    func testGitOrderWithoutKeys() {
        func key(_ entry: TreeEntry) -> [UInt8] { Array(entry.name.utf8) + (entry.kind == .tree ? [UInt8(ascii: "/")] : []) }
        let id = ObjectID(hex: String(repeating: "cd", count: 20))!
        let names = ["a", "ab", "a.b", "a0", "a-", "a\u{0}", "a\u{7F}", "b", "é", "e\u{301}", "名前", ""]
        for a in names {
            for b in names {
                for (aTree, bTree) in [(false, false), (false, true), (true, false), (true, true)] {
                    let left = TreeEntry(path: "v/" + a, id: id, kind: aTree ? .tree : .blob, mode: aTree ? 0o040000 : 0o100644)
                    let right = TreeEntry(path: "v/" + b, id: id, kind: bTree ? .tree : .blob, mode: bTree ? 0o040000 : 0o100644)
                    XCTAssertEqual(Snapshot.gitOrderPrecedes(left, right),
                                   key(left).lexicographicallyPrecedes(key(right)), "\(a) \(aTree) \(b) \(bTree)")
                }
            }
        }
    }

    /// The snapshot patched in place after a commit equals a full read, in git's order.
    func testSnapshotAdvancedEqualsAFullRead() throws {
        let blob = { (text: String) throws -> ObjectID in try self.repository.objects.writeBlob(Array(text.utf8)) }
        let steps: [[TreeChange]] = [
            [.write(path: "v/m.json", blob: try blob("1")), .write(path: "v/a.json", blob: try blob("2"))],
            [.write(path: "v/b.json", blob: try blob("3"))],                       // between two
            [.write(path: "v/z.json", blob: try blob("4"))],                       // at the end
            [.write(path: "v/a.json", blob: try blob("5"))],                       // replaced
            [.write(path: "v/w/x.json", blob: try blob("6"))],                     // a new folder
            [.write(path: "v/w.json", blob: try blob("7"))],                       // before the folder "w" ("w/": '.' < '/')
            [.write(path: "v/w0.json", blob: try blob("8"))],                      // after it ('0' > '/')
            [.write(path: "v/w/y.json", blob: try blob("9"))],                     // into the new folder
            [.delete(path: "v/w")],
            [.write(path: "top.json", blob: try blob("10"))],
        ]
        var snapshot = try Snapshot.load(repository, commit: try repository.refs.branchTip())
        for changes in steps {
            let commit = try repository.commits.commitChanges(onto: snapshot.commit, changes: changes, message: "step", author: author)
            snapshot = try snapshot.advanced(to: commit, changes: changes, repository: repository)
            let full = try Snapshot.load(repository, commit: commit)
            XCTAssertEqual(snapshot.gitFolders, full.gitFolders, "\(changes)")
            XCTAssertEqual(snapshot.commitTime, full.commitTime)
        }
    }
}
