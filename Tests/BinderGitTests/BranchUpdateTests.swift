import Foundation
import XCTest
@testable import BinderGit

/// A save's branch move (`BranchUpdate`): git's ref lock taken and the new id flushed beside the
/// pack, the ref renamed into place after it. The lock is git's (another writer holding it is
/// told apart, and its lock left alone), the compare-and-swap happens under it, nothing is left
/// when the commit fails, and repositories that keep reflogs keep getting them from libgit2.
final class BranchUpdateTests: XCTestCase {
    private func bareRepository(_ tmp: TemporaryDirectory) throws -> (GitRepository, String, ObjectID) {
        let made = try bareRepositoryWithOneCommit(in: tmp, file: "visits/first.json", content: "first", message: "Start")
        return (made.repo, made.path, made.tip)
    }

    private func save(_ repo: GitRepository, onto tip: ObjectID, _ text: String) throws -> ObjectID {
        let record = Array(text.utf8)
        return try repo.commits.commitChanges(onto: tip, changes: [.write(path: "visits/r.json", blob: try GitObjects.blobID(of: record))],
                                              message: "Save", author: testAuthor, blobs: [record])
    }

    func testSavesMoveTheBranchThroughGitsLockFile() throws {
        let tmp = try TemporaryDirectory()
        let (repo, path, first) = try bareRepository(tmp)
        var tip = first
        for i in 0..<20 { tip = try save(repo, onto: tip, "record \(i)") }
        XCTAssertEqual(repo.branchUpdateCount, 20)
        XCTAssertEqual(try String(contentsOfFile: path + "/refs/heads/main", encoding: .utf8), tip.hex + "\n")
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + "/refs/heads/main.lock"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + "/logs/refs/heads/main"), "a bare repository keeps no reflog")
        try assertRepositoryComplete(path, tip: tip, commits: 21)

        // A branch command-line git packed (no loose ref) is moved the same way.
        try git("pack-refs", "--all", in: path)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + "/refs/heads/main"))
        tip = try save(repo, onto: tip, "after pack-refs")
        XCTAssertEqual(repo.branchUpdateCount, 21)
        try assertRepositoryComplete(path, tip: tip, commits: 22)
    }

    /// Another writer's lock: the save fails as a concurrent update, the branch and the other
    /// writer's lock file are as they were.
    func testALockHeldByAnotherWriterIsReportedAndLeftInPlace() throws {
        let tmp = try TemporaryDirectory()
        let (repo, path, tip) = try bareRepository(tmp)
        let lock = path + "/refs/heads/main.lock"
        XCTAssertTrue(FileManager.default.createFile(atPath: lock, contents: Data("theirs\n".utf8)))
        XCTAssertThrowsError(try save(repo, onto: tip, "blocked")) { error in
            XCTAssertEqual((error as? GitError)?.code, .locked, "\(error)")
            XCTAssertTrue((error as? GitError)?.isConcurrentUpdate == true)
        }
        XCTAssertEqual(try String(contentsOfFile: lock, encoding: .utf8), "theirs\n")
        XCTAssertEqual(try repo.refs.branchTip(), tip)
    }

    /// The compare-and-swap under the lock: a branch that moved since the caller looked (another
    /// process's commit) is refused, and the lock is released.
    func testABranchMovedUnderTheLockIsRefusedAndTheLockReleased() throws {
        let tmp = try TemporaryDirectory()
        let (repo, path, tip) = try bareRepository(tmp)
        let other = try GitRepository.open(path: path)
        let moved = try save(other, onto: tip, "theirs")
        XCTAssertThrowsError(try repo.locked { () throws(GitError) in
            _ = try BranchUpdate.begin(repo, branch: "main", from: tip, to: moved)
        }) { error in
            guard case .branchMoved(_, let expected, let actual)? = error as? GitError else { return XCTFail("\(error)") }
            XCTAssertEqual(expected, tip)
            XCTAssertEqual(actual, moved)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + "/refs/heads/main.lock"))
        XCTAssertEqual(try repo.refs.branchTip(), moved)
    }

    /// Begun and dropped (the pack failed): no lock file, the branch unchanged; begun and
    /// finished: the branch names the commit.
    func testAnUpdateDroppedBeforeItsFinishLeavesNothing() throws {
        let tmp = try TemporaryDirectory()
        let (repo, path, tip) = try bareRepository(tmp)
        let elsewhere = try save(repo, onto: tip, "a commit to point at")
        try repo.locked { () throws(GitError) in
            let update = try BranchUpdate.begin(repo, branch: "main", from: elsewhere, to: tip)
            XCTAssertNotNil(update)
            XCTAssertTrue(FileManager.default.fileExists(atPath: path + "/refs/heads/main.lock"))
            withExtendedLifetime(update) {}
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + "/refs/heads/main.lock"))
        XCTAssertEqual(try repo.refs.branchTip(), elsewhere)
        let finished = try repo.locked { () throws(GitError) -> Bool in
            guard let update = try BranchUpdate.begin(repo, branch: "main", from: elsewhere, to: tip) else { return false }
            try update.finish()
            return true
        }
        XCTAssertTrue(finished)
        XCTAssertEqual(try git("rev-parse", "main", in: path), tip.hex)
    }

    /// Where libgit2 would write a reflog (the config asks for them), it still moves the branch
    /// and writes it.
    func testRepositoriesThatKeepReflogsStillGetThem() throws {
        let rows: [(String, (String) throws -> Void)] = [
            ("core.logAllRefUpdates = true", { path in try git("config", "core.logAllRefUpdates", "true", in: path) }),
            ("core.logAllRefUpdates = always", { path in try git("config", "core.logAllRefUpdates", "always", in: path) }),
        ]
        for (what, setUp) in rows {
            let tmp = try TemporaryDirectory()
            let (_, path, first) = try bareRepository(tmp)
            var tip = first
            try setUp(path)
            // Opened afresh: libgit2 reads a config value such as this one once per handle.
            let repo = try GitRepository.open(path: path)
            for i in 0..<3 { tip = try save(repo, onto: tip, "record \(i)") }
            XCTAssertEqual(repo.branchUpdateCount, 0, what)
            let reflog = try String(contentsOfFile: path + "/logs/refs/heads/main", encoding: .utf8)
            XCTAssertGreaterThanOrEqual(lines(reflog).filter { !$0.isEmpty }.count, 3, what)
            try assertRepositoryComplete(path, tip: tip, commits: 4)
        }
    }
}
