import Foundation
import BinderSystem
import XCTest
@testable import BinderGit

/// `GitRepository.openForWalk`: an instance for one walk over history whose packs are its own.
/// libgit2 shares an open pack, and the delta bases it caches, between all the instances of a
/// process by the pack's name: a walk on a second, ordinary instance left its caches in the
/// packs the first one keeps open (35 MiB in the mount's daemon after `.binder/deleted` at
/// 10,000 records). Each pack struct maps its index once, so the mappings of an index tell
/// how many pack structs the process holds for it.
final class WalkerPackTests: XCTestCase {
    /// How many times this process maps the file called `name` (/proc/self/maps, by name: the
    /// temporary folder's path may be spelt differently there).
    private func mappings(of name: String) throws -> Int {
        let maps = try XCTUnwrap(FileHandle(forReadingAtPath: "/proc/self/maps")).readToEnd() ?? Data()
        return String(decoding: maps, as: UTF8.self).split(separator: "\n").filter { $0.hasSuffix("/" + name) }.count
    }

    /// A repository of 40 commits, each rewriting one record, in one pack by stock git.
    private func packedHistory(_ path: String) throws -> (tip: ObjectID, index: String) {
        let repo = try GitRepository.create(path: path, bare: true)
        var parent: ObjectID?
        for i in 0..<40 {
            let blob = try repo.objects.writeBlob(Array("{\"value\":\"version \(i) \(String(repeating: "y", count: 200))\"}\n".utf8))
            var changes: [TreeChange] = [.write(path: "visits/record.json", blob: blob)]
            if i == 20 { changes.append(.write(path: "labs/gone.json", blob: blob)) }
            if i == 30 { changes.append(.delete(path: "labs/gone.json")) }
            parent = try repo.commits.commitChanges(onto: parent, changes: changes, message: "Save \(i)",
                                                    author: Signature(name: "T", email: "t@example.com"))
        }
        _ = try git("repack", "-a", "-d", "-q", in: path)
        let index = try XCTUnwrap(FileManager.default.contentsOfDirectory(atPath: path + "/objects/pack").first { $0.hasSuffix(".idx") })
        return (try XCTUnwrap(parent), index)
    }

    func testAWalkersPacksAreItsOwnAndGoWithIt() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let (tip, index) = try packedHistory(path)
        let view = try GitRepository.open(path: path)
        XCTAssertEqual(try view.history.commits(from: tip).count, 40)
        XCTAssertEqual(try mappings(of: index), 1, "the view's instance maps the pack's index once")

        do {
            let walker = try GitRepository.openForWalk(path: path)
            let removals = try walker.history.removals(from: tip)
            XCTAssertEqual(removals.deleted.map(\.path), ["labs/gone.json"])
            XCTAssertEqual(try mappings(of: index), 2, "the walker reads the pack through a pack of its own, not the view's")
            // An ordinary second instance shares the view's: the mapping is not made again.
            let ordinary = try GitRepository.open(path: path)
            _ = try ordinary.history.commits(from: tip)
            XCTAssertEqual(try mappings(of: index), 2)
        }
        XCTAssertEqual(try mappings(of: index), 1, "the walker's pack, and what it cached, went with it")
        XCTAssertEqual(try view.history.commits(from: tip).count, 40, "the view's instance reads on")
    }

    /// A walker whose packs were folded away during its walk opens its database again with
    /// packs of its own, and reads the new pack.
    func testAWalkerReopensItsOwnPacksAfterAFold() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let (tip, _) = try packedHistory(path)
        let walker = try GitRepository.openForWalk(path: path)
        XCTAssertEqual(try walker.history.commits(from: tip).count, 40)
        do {
            let folder = try GitRepository.open(path: path)
            _ = try folder.packs.repack()
        }
        XCTAssertEqual(try walker.history.removals(from: tip).deleted.map(\.path), ["labs/gone.json"])
        let index = try XCTUnwrap(FileManager.default.contentsOfDirectory(atPath: path + "/objects/pack").first { $0.hasSuffix(".idx") })
        XCTAssertEqual(try mappings(of: index), 1)
        let view = try GitRepository.open(path: path)
        XCTAssertEqual(try view.history.commits(from: tip).count, 40)
        XCTAssertEqual(try mappings(of: index), 2, "the walker's new database has packs of its own too")
    }

    /// A walk longer than `commitsPerCacheDrop` drops its packs' caches on the way (a fresh
    /// database of its own, mid-walk) and answers what an ordinary instance answers.
    func testAWalkPastTheCacheDropAnswersTheSame() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        var parent: ObjectID?
        let commits = GitHistory.commitsPerCacheDrop * 2 + 100
        for i in 0..<commits {
            let blob = try repo.objects.writeBlob(Array("{\"value\":\"v\(i)\"}\n".utf8))
            var changes: [TreeChange] = [.write(path: "notes/n\(i % 50).json", blob: blob), .write(path: "visits/record.json", blob: blob)]
            if i % 97 == 0, i > 0 { changes.append(.delete(path: "notes/n\((i - 1) % 50).json")) }
            parent = try repo.commits.commitChanges(onto: parent, changes: changes, message: "Save \(i)",
                                                    author: Signature(name: "T", email: "t@example.com"))
        }
        _ = try git("repack", "-a", "-d", "-q", in: path)
        let tip = try XCTUnwrap(parent)
        let ordinary = try GitRepository.open(path: path)
        let walker = try GitRepository.openForWalk(path: path)
        XCTAssertEqual(try walker.history.removals(from: tip).deleted, try ordinary.history.removals(from: tip).deleted)
        let versions = try walker.history.versions(of: "visits/record.json", from: tip)
        XCTAssertEqual(versions.count, commits)
        XCTAssertEqual(versions.map(\.blob), try ordinary.history.versions(of: "visits/record.json", from: tip).map(\.blob))
    }

    /// Dropping a walker's caches frees the delta bases its packs hold: the new database names
    /// its packs otherwise than the one it replaces (with the same name libgit2 handed the new
    /// database the old one's packs, caches and all, and nothing was freed). Measured as the
    /// bytes the C allocator has handed out (`Allocator.heapBytesInUse`), on a folder whose 600-entry tree is
    /// stored as deltas of its earlier versions.
    func testDroppingAWalkersCachesFreesItsDeltaBases() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        var parent: ObjectID?
        var changes: [TreeChange] = []
        for i in 0..<600 {
            changes.append(.write(path: "visits/record-\(i)-\(String(repeating: "n", count: 40)).json",
                                  blob: try repo.objects.writeBlob(Array("{\"value\":\"r\(i)\"}\n".utf8))))
        }
        parent = try repo.commits.commitChanges(onto: nil, changes: changes, message: "Import", author: Signature(name: "T", email: "t@example.com"))
        for i in 0..<300 {
            let blob = try repo.objects.writeBlob(Array("{\"value\":\"save \(i)\"}\n".utf8))
            parent = try repo.commits.commitChanges(onto: parent, changes: [.write(path: "visits/record-\(i * 2)-\(String(repeating: "n", count: 40)).json", blob: blob)],
                                                    message: "Save \(i)", author: Signature(name: "T", email: "t@example.com"))
        }
        _ = try git("repack", "-a", "-d", "-q", "--depth=50", in: path)
        let tip = try XCTUnwrap(parent)
        let walker = try GitRepository.openForWalk(path: path)
        // Every version of the folder's tree read, as a walk reads them: the bases of their
        // delta chains are cached by the walker's pack.
        for commit in try walker.history.commits(from: tip) {
            _ = try walker.trees.entry(at: "visits/record-0-\(String(repeating: "n", count: 40)).json", commit: commit.id)
        }
        let before = Allocator.heapBytesInUse
        try walker.locked { () throws(GitError) in walker.dropPackCachesLocked() }
        let freed = before - Allocator.heapBytesInUse
        XCTAssertGreaterThan(freed, 1 << 20, "the walker's delta bases stay allocated after its caches were dropped")
        XCTAssertEqual(try walker.history.commits(from: tip).count, 301, "the walker reads on through its new database")
    }
}
