import Foundation
import XCTest
@testable import BinderGit

final class CommitChangesTests: XCTestCase {
    private func blob(_ repo: GitRepository, _ text: String) throws -> ObjectID {
        try repo.objects.writeBlob(Array(text.utf8))
    }

    private func paths(_ repo: GitRepository, _ commit: ObjectID) throws -> [String] {
        try repo.trees.listTree(commit: commit).map(\.path)
    }

    private func fsck(_ path: String) throws {
        // Exits non-zero (throws) on any problem; prints nothing when clean.
        // (Blobs written but never committed are dangling, which is fine.)
        XCTAssertEqual(try git("fsck", "--strict", "--no-progress", "--no-dangling", in: path), "")
    }

    func testWriteBlobMatchesGitHashObject() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        let text = "{\"content\":\"ciphertext\"}\n"
        let id = try blob(repo, text)
        let input = Data(text.utf8)
        XCTAssertEqual(id.hex, String(decoding: try gitData(["hash-object", "--stdin"], in: path, input: input),
                                      as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        XCTAssertEqual(try git("cat-file", "blob", id.hex, in: path), String(text.dropLast()))
        XCTAssertEqual(try repo.objects.blobSize(id), text.utf8.count)

        let empty = try repo.objects.writeBlob([])
        XCTAssertEqual(empty.hex, "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391")
        XCTAssertEqual(try repo.objects.readBlob(empty), [])
        XCTAssertEqual(try repo.objects.blobSize(empty), 0)

        var big = [UInt8](repeating: 0, count: 3_000_000)
        for i in big.indices { big[i] = UInt8(truncatingIfNeeded: i &* 31 &+ i >> 7) }
        let bigID = try repo.objects.writeBlob(big)
        XCTAssertEqual(try repo.objects.blobSize(bigID), big.count)
        XCTAssertEqual(try repo.objects.readBlob(bigID), big)
        XCTAssertEqual(try git("cat-file", "-s", bigID.hex, in: path), "3000000")
    }

    func testFirstCommitInEmptyRepositoryCreatesMain() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        XCTAssertNil(try repo.refs.branchTip())

        let info = try blob(repo, "patient")
        let first = try repo.commits.commitChanges(onto: nil, changes: [.write(path: "patient-info.json", blob: info)],
                                           message: "Initialize binder", author: testAuthor)
        XCTAssertEqual(try repo.refs.branchTip(), first)
        XCTAssertEqual(try git("rev-parse", "HEAD", in: path), first.hex)
        XCTAssertEqual(try git("log", "-1", "--format=%an <%ae>|%cn <%ce>|%s|%P", "main", in: path),
                       "Limbo Health <app@limbo.health>|Limbo Health <app@limbo.health>|Initialize binder|")
        XCTAssertEqual(try git("cat-file", "-p", "main:patient-info.json", in: path), "patient")
        XCTAssertEqual(try repo.commits.commit(first).message, "Initialize binder\n")
        try fsck(path)
    }

    func testFirstCommitInEmptyCLIRepository() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("cli")
        try git("init", "--quiet", "-b", "main", path)
        let repo = try GitRepository.open(path: path)
        XCTAssertNil(try repo.refs.branchTip())
        XCTAssertEqual(try repo.history.log(), [])
        let id = try repo.commits.commitChanges(onto: nil, changes: [.write(path: "a/b.json", blob: try blob(repo, "x"))],
                                        message: "Add a entry", author: testAuthor)
        XCTAssertEqual(try git("rev-parse", "main", in: path), id.hex)
        XCTAssertEqual(try git("ls-tree", "-r", "-t", "--name-only", "main", in: path), "a\na/b.json")
        try fsck(path)
    }

    func testAddUpdateDeleteNestedPaths() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        let time = Date(timeIntervalSince1970: 1_750_000_000.7)
        let author = Signature(name: "Limbo Health", email: "app@limbo.health", time: time)

        let c1 = try repo.commits.commitChanges(onto: nil, changes: [
            .write(path: "patient-info.json", blob: try blob(repo, "p1")),
            .write(path: "visits/2026-02-09-follow-up.json", blob: try blob(repo, "v1")),
            .write(path: "conditions/back-acne/.meta.json", blob: try blob(repo, "m1")),
            .write(path: "conditions/back-acne/2026-02-10-photo.json", blob: try blob(repo, "ph")),
            .write(path: "conditions/back-acne/2026-02-10-photo.jpg.enc", blob: try blob(repo, "enc")),
            .write(path: "labs/2024/deep/er/x.json", blob: try blob(repo, "deep")),
        ], message: "Add entries", author: author)
        XCTAssertEqual(try paths(repo, c1), lines(try git("ls-tree", "-r", "-t", "--name-only", "main", in: path)))
        XCTAssertEqual(try git("log", "-1", "--format=%at %an <%ae> %s", in: path),
                       "1750000000 Limbo Health <app@limbo.health> Add entries")
        try fsck(path)

        let c2 = try repo.commits.commitChanges(onto: c1, changes: [
            .write(path: "visits/2026-02-09-follow-up.json", blob: try blob(repo, "v2")),   // update
            .delete(path: "conditions/back-acne/2026-02-10-photo.json"),                    // delete file
            .delete(path: "conditions/back-acne/2026-02-10-photo.jpg.enc"),
            .delete(path: "labs/2024/deep/er/x.json"),                                     // last file: folders go
            .write(path: "visits/2026-02-10-new.json", blob: try blob(repo, "v3")),         // add
            .delete(path: "visits/never-existed.json"),                                    // no-op
        ], message: "Update entry", author: testAuthor)
        XCTAssertEqual(try repo.commits.commit(c2).parents, [c1])
        XCTAssertEqual(try paths(repo, c2), [
            "conditions", "conditions/back-acne", "conditions/back-acne/.meta.json",
            "patient-info.json",
            "visits", "visits/2026-02-09-follow-up.json", "visits/2026-02-10-new.json",
        ])
        XCTAssertEqual(try paths(repo, c2), lines(try git("ls-tree", "-r", "-t", "--name-only", "main", in: path)))
        XCTAssertEqual(try git("cat-file", "-p", "main:visits/2026-02-09-follow-up.json", in: path), "v2")
        XCTAssertEqual(try git("cat-file", "-p", "main~1:visits/2026-02-09-follow-up.json", in: path), "v1")
        XCTAssertEqual(try git("log", "--format=%s", in: path), "Update entry\nAdd entries")
        try fsck(path)

        // Deleting a folder removes its subtree; a folder holding only a hidden file stays listed.
        let c3 = try repo.commits.commitChanges(onto: c2, changes: [.delete(path: "visits")],
                                        message: "Delete entry", author: testAuthor)
        XCTAssertEqual(try paths(repo, c3), ["conditions", "conditions/back-acne", "conditions/back-acne/.meta.json",
                                             "patient-info.json"])
        try fsck(path)

        // Deleting everything leaves a commit of the empty tree.
        let c4 = try repo.commits.commitChanges(onto: c3, changes: [.delete(path: "conditions"), .delete(path: "patient-info.json")],
                                        message: "Delete entry", author: testAuthor)
        XCTAssertEqual(try paths(repo, c4), [])
        XCTAssertEqual(try repo.commits.commit(c4).tree.hex, "4b825dc642cb6eb9a060e54bf8d69288fbee4904")
        try fsck(path)
        XCTAssertEqual(try repo.history.log().map(\.id), [c4, c3, c2, c1])
    }

    func testChangesApplyInOrder() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        let c1 = try repo.commits.commitChanges(onto: nil, changes: [
            .write(path: "a/old.json", blob: try blob(repo, "old")),
            .write(path: "f", blob: try blob(repo, "file")),
        ], message: "Add", author: testAuthor)

        let c2 = try repo.commits.commitChanges(onto: c1, changes: [
            .delete(path: "a"),                                        // then re-create a/ with new content
            .write(path: "a/new.json", blob: try blob(repo, "new")),
            .write(path: "b.json", blob: try blob(repo, "b1")),       // written twice: last wins
            .write(path: "b.json", blob: try blob(repo, "b2")),
            .write(path: "c.json", blob: try blob(repo, "c")),        // written then deleted: absent
            .delete(path: "c.json"),
            .delete(path: "f"),                                        // a file replaced by a folder
            .write(path: "f/inner.json", blob: try blob(repo, "inner")),
        ], message: "Reorder entries", author: testAuthor)
        XCTAssertEqual(try paths(repo, c2), ["a", "a/new.json", "b.json", "f", "f/inner.json"])
        XCTAssertEqual(try git("cat-file", "-p", "main:b.json", in: path), "b2")
        try fsck(path)

        // A file cannot be written over a folder without deleting it first,
        // nor below a file; nothing is committed then.
        XCTAssertThrowsError(try repo.commits.commitChanges(onto: c2, changes: [.write(path: "a", blob: try blob(repo, "x"))],
                                                    message: "Update entry", author: testAuthor))
        XCTAssertThrowsError(try repo.commits.commitChanges(onto: c2, changes: [.write(path: "b.json/x", blob: try blob(repo, "x"))],
                                                    message: "Update entry", author: testAuthor))
        XCTAssertEqual(try repo.refs.branchTip(), c2)
    }

    func testInvalidPathsAreRejected() throws {
        let tmp = try TemporaryDirectory()
        let repo = try GitRepository.create(path: tmp.sub("r.git"), bare: true)
        let id = try blob(repo, "x")
        for bad in ["", "/abs", "a//b", "a/", "./a", "a/../b", "a/.."] {
            XCTAssertThrowsError(try repo.commits.commitChanges(onto: nil, changes: [.write(path: bad, blob: id)],
                                                        message: "Add", author: testAuthor), bad) { error in
                guard case .invalidPath = error as? GitError else { return XCTFail("\(bad): \(error)") }
            }
        }
        // libgit2 itself refuses `.git` components.
        XCTAssertThrowsError(try repo.commits.commitChanges(onto: nil, changes: [.write(path: ".git/config", blob: id)],
                                                    message: "Add", author: testAuthor))
        XCTAssertNil(try repo.refs.branchTip())
    }

    func testCompareAndSwapFailsWhenBranchMoved() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        let a = try repo.commits.commitChanges(onto: nil, changes: [.write(path: "a.json", blob: try blob(repo, "a"))],
                                       message: "Add", author: testAuthor)
        let b = try repo.commits.commitChanges(onto: a, changes: [.write(path: "b.json", blob: try blob(repo, "b"))],
                                       message: "Add", author: testAuthor)

        // A stale writer (based on `a`) loses.
        XCTAssertThrowsError(try repo.commits.commitChanges(onto: a, changes: [.write(path: "c.json", blob: try blob(repo, "c"))],
                                                    message: "Add", author: testAuthor)) { error in
            XCTAssertEqual(error as? GitError, .branchMoved(branch: "main", expected: a, actual: b))
            XCTAssertTrue((error as? GitError)?.isConcurrentUpdate == true)
        }
        XCTAssertEqual(try repo.refs.branchTip(), b)

        // A writer that believes the repository is empty loses too.
        XCTAssertThrowsError(try repo.commits.commitChanges(onto: nil, changes: [], message: "Add", author: testAuthor)) { error in
            XCTAssertEqual(error as? GitError, .branchMoved(branch: "main", expected: nil, actual: b))
        }

        // Another process (command-line git) moves the branch.
        let other = tmp.sub("other")
        try git("clone", "--quiet", path, other)
        try "d".write(toFile: other + "/d.json", atomically: true, encoding: .utf8)
        try git("add", "d.json", in: other)
        try git("commit", "--quiet", "-m", "Add d", in: other)
        try git("push", "--quiet", "origin", "main", in: other)
        let d = try oid(try git("rev-parse", "main", in: path))
        XCTAssertNotEqual(d, b)
        XCTAssertThrowsError(try repo.commits.commitChanges(onto: b, changes: [.delete(path: "a.json")],
                                                    message: "Delete entry", author: testAuthor)) { error in
            XCTAssertEqual(error as? GitError, .branchMoved(branch: "main", expected: b, actual: d))
        }
        XCTAssertEqual(try repo.refs.branchTip(), d)
        XCTAssertEqual(try git("rev-parse", "main", in: path), d.hex)

        // Retrying on the new tip works.
        let e = try repo.commits.commitChanges(onto: d, changes: [.delete(path: "a.json")], message: "Delete entry", author: testAuthor)
        XCTAssertEqual(try repo.commits.commit(e).parents, [d])
        XCTAssertEqual(try paths(repo, e), ["b.json", "d.json"])
        try fsck(path)
    }

    func testRefLockedByConcurrentWriter() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        let a = try repo.commits.commitChanges(onto: nil, changes: [.write(path: "a.json", blob: try blob(repo, "a"))],
                                       message: "Add", author: testAuthor)
        // What command-line git holds while it updates the branch.
        let lock = path + "/refs/heads/main.lock"
        _ = FileManager.default.createFile(atPath: lock, contents: Data())
        XCTAssertThrowsError(try repo.commits.commitChanges(onto: a, changes: [.delete(path: "a.json")],
                                                    message: "Delete entry", author: testAuthor)) { error in
            XCTAssertTrue((error as? GitError)?.isConcurrentUpdate == true, "\(error)")
        }
        XCTAssertEqual(try repo.refs.branchTip(), a)
        try FileManager.default.removeItem(atPath: lock)
        _ = try repo.commits.commitChanges(onto: a, changes: [.delete(path: "a.json")], message: "Delete entry", author: testAuthor)
    }

    func testOtherBranchAndConcurrentThreads() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        let base = try repo.commits.commitChanges(onto: nil, changes: [], message: "Initialize binder", author: testAuthor)
        XCTAssertEqual(try repo.trees.listTree(commit: base), [])

        // Threads race to commit on one branch: each retries on branchMoved until it lands.
        let threads = 4, perThread = 5
        DispatchQueue.concurrentPerform(iterations: threads) { t in
            for i in 0..<perThread {
                while true {
                    do {
                        let tip = try repo.refs.branchTip()
                        let id = try repo.objects.writeBlob(Array("\(t)-\(i)".utf8))
                        _ = try repo.commits.commitChanges(onto: tip, changes: [.write(path: "t\(t)/\(i).json", blob: id)],
                                                   message: "Add entry", author: testAuthor)
                        break
                    } catch let error as GitError where error.isConcurrentUpdate {
                        continue
                    } catch {
                        XCTFail("\(error)")
                        return
                    }
                }
            }
        }
        let tip = try XCTUnwrap(try repo.refs.branchTip())
        XCTAssertEqual(try repo.history.log().count, 1 + threads * perThread)
        XCTAssertEqual(try repo.trees.listTree(commit: tip).filter { $0.kind == .blob }.count, threads * perThread)
        try fsck(path)

        // Branches other than main.
        let side = try repo.commits.commitChanges(onto: nil, changes: [.write(path: "s", blob: try blob(repo, "s"))],
                                          message: "Side", author: testAuthor, branch: "side")
        XCTAssertEqual(try repo.refs.branchTip("side"), side)
        XCTAssertEqual(try repo.refs.branchTip("main"), tip)
        XCTAssertEqual(try git("rev-parse", "side", in: path), side.hex)
    }
}
