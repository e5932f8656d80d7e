import Foundation
import XCTest
@testable import BinderGit

final class WorkTreeTests: XCTestCase {
    private func read(_ path: String) -> String? {
        FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) }
    }

    func testSyncKeepsWorkTreeClean() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("binder")
        let repo = try GitRepository.create(path: path, bare: false)
        try repo.checkout.syncWorkTreeToHead()  // unborn HEAD: nothing to do

        let c1 = try repo.commits.commitChanges(onto: nil, changes: [
            .write(path: "patient-info.json", blob: try repo.objects.writeBlob(Array("p1".utf8))),
            .write(path: "visits/one.json", blob: try repo.objects.writeBlob(Array("v1".utf8))),
            .write(path: "labs/2024/lipids.json", blob: try repo.objects.writeBlob(Array("l1".utf8))),
        ], message: "Add entries", author: testAuthor)
        // Before the sync, git sees the committed files as deleted.
        XCTAssertNotEqual(try git("status", "--porcelain", in: path), "")
        try repo.checkout.syncWorkTreeToHead()
        XCTAssertEqual(try git("status", "--porcelain", in: path), "")
        XCTAssertEqual(read(path + "/visits/one.json"), "v1")
        XCTAssertEqual(read(path + "/labs/2024/lipids.json"), "l1")

        // Untracked files are left alone.
        try "mine".write(toFile: path + "/notes.txt", atomically: true, encoding: .utf8)

        _ = try repo.commits.commitChanges(onto: c1, changes: [
            .write(path: "visits/one.json", blob: try repo.objects.writeBlob(Array("v2".utf8))),
            .delete(path: "labs"),
            .write(path: "visits/two.json", blob: try repo.objects.writeBlob(Array("w".utf8))),
        ], message: "Update entry", author: testAuthor)
        try repo.checkout.syncWorkTreeToHead()
        XCTAssertEqual(try git("status", "--porcelain", in: path), "?? notes.txt")
        XCTAssertEqual(read(path + "/visits/one.json"), "v2")
        XCTAssertEqual(read(path + "/visits/two.json"), "w")
        XCTAssertNil(read(path + "/labs/2024/lipids.json"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + "/labs"))
        XCTAssertEqual(read(path + "/notes.txt"), "mine")
        XCTAssertEqual(try git("fsck", "--strict", "--no-progress", "--no-dangling", in: path), "")
        // The reflog names the author.
        XCTAssertTrue(try git("reflog", "show", "--format=%gn <%ge> %gs", "main", in: path)
            .hasPrefix("Limbo Health <app@limbo.health> commit: Update entry"))
    }

    func testSyncOnFixtureClone() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("sample")
        try cloneFixture(into: path)
        let repo = try GitRepository.open(path: path)
        let tip = try XCTUnwrap(try repo.refs.branchTip())
        let id = try repo.objects.writeBlob(Array("{}".utf8))
        _ = try repo.commits.commitChanges(onto: tip, changes: [
            .write(path: "visits/2026-03-01-new.json", blob: id),
            .delete(path: "conditions/back-acne"),
        ], message: "Add visits entry", author: testAuthor)
        try repo.checkout.syncWorkTreeToHead()
        XCTAssertEqual(try git("status", "--porcelain", in: path), "")
        XCTAssertEqual(read(path + "/visits/2026-03-01-new.json"), "{}")
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + "/conditions/back-acne"))
    }

    func testSyncIsNoOpForBare() throws {
        let tmp = try TemporaryDirectory()
        let repo = try GitRepository.create(path: tmp.sub("r.git"), bare: true)
        _ = try repo.commits.commitChanges(onto: nil, changes: [.write(path: "a", blob: try repo.objects.writeBlob([1]))],
                                   message: "Add", author: testAuthor)
        try repo.checkout.syncWorkTreeToHead()
    }
}
