import Foundation
import XCTest
@testable import BinderGit

/// A bulk import's blobs go to disk as one pack written while they are made (`BlobPack`), not
/// as a loose object and an fsync each; the pack is durable before any commit names its
/// blobs, and one nothing refers to (a kill before the branch moved) is harmless.
final class BlobPackTests: XCTestCase {
    /// Blobs like an import's: NIP-44-like base64 documents and incompressible attachments.
    private func blobs(_ count: Int) -> [[UInt8]] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { i in
            if i % 5 == 4 { return (0..<(20_000 + i * 700)).map { _ in UInt8.random(in: 0...255, using: &generator) } }
            let raw = (0..<(300 + i * 37)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            return Array(Data(raw).base64EncodedString().utf8)
        }
    }

    private func packIndexes(_ path: String) -> Set<String> { Set(GitPacks.packIndexes(in: path + "/objects/pack")) }

    private func looseObjects(_ path: String) throws -> Int {
        let text = lines(try git("count-objects", "-v", in: path))
        return Int(text.first { $0.hasPrefix("count: ") }!.dropFirst(7))!
    }

    private func objectsIn(index: String, of path: String) throws -> Set<String> {
        let data = try Data(contentsOf: URL(fileURLWithPath: index))
        let text = String(decoding: try gitData(["show-index"], in: path, input: data), as: UTF8.self)
        return Set(lines(text).filter { !$0.isEmpty }.map { String($0.split(separator: " ")[1]) })
    }

    private func temporaryFiles(_ path: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: path + "/objects/pack").filter { $0.hasPrefix("tmp_") }
    }

    /// A repository with one commit, and its tip.
    private func repository(in tmp: TemporaryDirectory) throws -> (String, GitRepository, ObjectID) {
        try bareRepositoryWithOneCommit(in: tmp, file: "a.json", content: "first\n", message: "First")
    }

    func testAnImportsBlobsAreOnePackAndItsCommitAddsOnlyTreesAndNoLooseObjects() throws {
        let tmp = try TemporaryDirectory()
        let (path, repo, tip) = try repository(in: tmp)
        let contents = blobs(40)
        let packsBefore = packIndexes(path)
        let pack = try repo.objects.blobPack(objects: contents.count)
        let ids = try contents.map { bytes throws(GitError) in try pack.add(bytes) }
        XCTAssertEqual(ids, try contents.map { bytes throws(GitError) in try GitObjects.blobID(of: bytes) })
        try pack.install()
        let blobPack = packIndexes(path).subtracting(packsBefore)
        XCTAssertEqual(blobPack.count, 1, "one pack for every blob")
        XCTAssertEqual(try objectsIn(index: try XCTUnwrap(blobPack.first), of: path), Set(ids.map(\.hex)))
        XCTAssertEqual(try temporaryFiles(path), [])
        // New folders: the commit (libgit2's trees, its pack builder) adds a pack of its trees and itself only.
        let changes = ids.enumerated().map { TreeChange.write(path: "folder\($0.offset % 3)/r\($0.offset).json", blob: $0.element) }
        let commit = try repo.commits.commitChanges(onto: tip, changes: changes, message: "Import", author: testAuthor)
        let commitPack = packIndexes(path).subtracting(packsBefore).subtracting(blobPack)
        XCTAssertEqual(commitPack.count, 1)
        XCTAssertEqual(try objectsIn(index: try XCTUnwrap(commitPack.first), of: path).count, 5, "3 folders, the root, the commit")
        XCTAssertEqual(try looseObjects(path), 0)
        try assertRepositoryComplete(path, tip: commit, commits: 2)
        for (id, bytes) in zip(ids, contents) {
            XCTAssertEqual(try repo.objects.readBlob(id), bytes)
        }
        // A new instance reads them too.
        let other = try GitRepository.open(path: path)
        XCTAssertEqual(try other.objects.readBlob(ids[4]), contents[4])
    }

    func testAKillAfterThePackBeforeTheBranchMovesLeavesTheOldCommitAndAHarmlessPack() throws {
        let tmp = try TemporaryDirectory()
        let (path, repo, tip) = try repository(in: tmp)
        let contents = blobs(12)
        let packsBefore = packIndexes(path)
        let pid = fork()
        if pid == 0 {
            // The child writes the pack, then dies the way kill -9 kills, before any commit.
            guard let child = try? GitRepository.open(path: path), let pack = try? child.objects.blobPack(objects: contents.count) else { _exit(2) }
            for bytes in contents { guard (try? pack.add(bytes)) != nil else { _exit(3) } }
            guard (try? pack.install()) != nil else { _exit(4) }
            kill(getpid(), SIGKILL)
            _exit(5)
        }
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        XCTAssertEqual(status & 0x7F, SIGKILL, "the child was killed (status \(status))")
        XCTAssertEqual(try repo.refs.branchTip(), tip, "the branch did not move")
        let added = packIndexes(path).subtracting(packsBefore)
        XCTAssertEqual(added.count, 1, "the pack is there, durable and whole")
        XCTAssertEqual(try objectsIn(index: try XCTUnwrap(added.first), of: path).count, contents.count)
        try assertRepositoryComplete(path, tip: tip, commits: 1)
        // Nothing refers to it; the binder goes on: a commit on top, and a second pack of the same blobs.
        let again = try repo.objects.blobPack(objects: 1)
        let id = try again.add(contents[0])
        try again.install()
        let next = try repo.commits.commitChanges(onto: tip, changes: [.write(path: "b/c.json", blob: id)], message: "Next", author: testAuthor)
        try assertRepositoryComplete(path, tip: next, commits: 2)
    }

    func testAPackOfAnotherCountThanAnnouncedOrDroppedLeavesNothing() throws {
        let tmp = try TemporaryDirectory()
        let (path, repo, _) = try repository(in: tmp)
        let packsBefore = packIndexes(path)
        let short = try repo.objects.blobPack(objects: 3)
        _ = try short.add([1, 2, 3])
        XCTAssertThrowsError(try short.install())
        XCTAssertThrowsError(try short.add([4]), "closed after a failure")
        let full = try repo.objects.blobPack(objects: 1)
        _ = try full.add([1])
        XCTAssertThrowsError(try full.add([2]), "more than announced")
        XCTAssertThrowsError(try full.install(), "discarded after the refusal")
        do { _ = try repo.objects.blobPack(objects: 2) }  // dropped without install
        XCTAssertThrowsError(try repo.objects.blobPack(objects: 0))
        XCTAssertEqual(packIndexes(path), packsBefore)
        XCTAssertEqual(try temporaryFiles(path), [])
        XCTAssertEqual(try looseObjects(path), 0)
    }
}
