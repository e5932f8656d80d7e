import Foundation
import XCTest
@testable import BinderGit

/// A save's pack and index written to files made ahead with no name (`SparePackFiles`): the
/// packs are git's, nothing made ahead ever shows in `objects/pack`, and a closed instance
/// hands out nothing.
final class SparePackFilesTests: XCTestCase {
    private func waitUntil(_ condition: () -> Bool, file: StaticString = #filePath, line: UInt = #line) {
        let deadline = Date().addingTimeInterval(10)
        while !condition() && Date() < deadline { usleep(2_000) }
        XCTAssertTrue(condition(), "not within 10 s", file: file, line: line)
    }

    /// Saves take the spares (the first starts the thread, and may or may not find them made):
    /// every pack complete and named by its checksum, no temporary file in the folder, git's
    /// fsck clean.
    func testSavesWriteTheirPacksToFilesMadeAhead() throws {
        let tmp = try TemporaryDirectory()
        let made = try bareRepositoryWithOneCommit(in: tmp, file: "visits/first.json", content: "first", message: "Start")
        func save(_ i: Int, onto tip: ObjectID) throws -> ObjectID {
            let record = Array("record \(i)".utf8)
            return try made.repo.commits.commitChanges(onto: tip, changes: [.write(path: "visits/r\(i % 5).json", blob: try GitObjects.blobID(of: record))],
                                                       message: "Save", author: testAuthor, blobs: [record])
        }
        var tip = try save(0, onto: made.tip)
        let spares = try XCTUnwrap(made.repo.sparePackFiles)
        waitUntil { spares.ready == 2 }
        let takenBefore = spares.takenCount
        for i in 1..<20 {
            tip = try save(i, onto: tip)
            waitUntil { spares.ready == 2 }
        }
        XCTAssertEqual(spares.takenCount - takenBefore, 2 * 19, "each save with its spares ready wrote its pack and index to them")
        let names = try FileManager.default.contentsOfDirectory(atPath: made.path + "/objects/pack")
        XCTAssertFalse(names.contains { $0.hasPrefix("tmp_") }, "\(names)")
        XCTAssertEqual(names.filter { $0.hasSuffix(".pack") }.count, names.filter { $0.hasSuffix(".idx") }.count)
        XCTAssertTrue(names.allSatisfy { $0.hasPrefix("pack-") }, "\(names)")
        try assertRepositoryComplete(made.path, tip: tip, commits: 21)
    }

    /// Spares ready and waiting have no name: the folder shows nothing. Closed, the instance
    /// hands out nothing more, and the saves name their own files again.
    func testSparesHaveNoNameAndAClosedInstanceHandsOutNone() throws {
        let tmp = try TemporaryDirectory()
        let folder = tmp.sub("pack")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let spares = SparePackFiles(directory: folder)
        waitUntil { spares.ready == 2 }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder), [])

        let blob = Array("a blob".utf8)
        let objects = [PackObject(id: try GitObjects.blobID(of: blob), kind: .blob, content: blob)]
        let index = try PackWriter.write(objects, into: folder, spares: spares)
        XCTAssertEqual(spares.takenCount, 2)
        XCTAssertEqual(Set(try FileManager.default.contentsOfDirectory(atPath: folder)),
                       [(index as NSString).lastPathComponent, ((index as NSString).deletingPathExtension as NSString).lastPathComponent + ".pack"])
        XCTAssertEqual(try git("verify-pack", index), "")

        waitUntil { spares.ready == 2 }
        spares.close()
        XCTAssertEqual(spares.ready, 0)
        XCTAssertNil(spares.take(.pack))
        let other = Array("another blob".utf8)
        _ = try PackWriter.write([PackObject(id: try GitObjects.blobID(of: other), kind: .blob, content: other)], into: folder, spares: spares)
        XCTAssertEqual(spares.takenCount, 2)
        XCTAssertFalse(try FileManager.default.contentsOfDirectory(atPath: folder).contains { $0.hasPrefix("tmp_") })
    }
}
