import Foundation
import XCTest
@testable import BinderGit

/// A save's pack is fsynced on a thread of its own while its index is written and fsynced
/// (`BackgroundFsync`, `PackWriter.write`): what that fsync reports reaches the save, and a pack
/// whose fsync failed is never renamed into place, so no commit can name it.
final class PackFsyncTests: XCTestCase {
    func testBackgroundFsyncReportsTheErrnoOfItsFsync() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("file")
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data("bytes".utf8)))
        let file = open(path, O_RDWR)
        XCTAssertGreaterThanOrEqual(file, 0)
        defer { close(file) }
        XCTAssertEqual(BackgroundFsync(file).wait(), 0)
        var ends: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&ends), 0)
        defer { close(ends[0]); close(ends[1]) }
        XCTAssertEqual(BackgroundFsync(ends[1]).wait(), EINVAL, "a pipe cannot be fsynced")
        XCTAssertEqual(BackgroundFsync(-1).wait(), EBADF)
    }

    /// The pack's fsync failing (EIO here) fails the install with that errno, after the index
    /// was written, and leaves neither file: not under a temporary name, not under the pack's.
    func testAPackWhoseFsyncFailedIsNotInstalled() throws {
        let tmp = try TemporaryDirectory()
        let directory = tmp.sub("pack")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let blob = Array("a blob".utf8)
        let objects = [PackObject(id: try GitObjects.blobID(of: blob), kind: .blob, content: blob)]
        let pack = try PackWriter.writeTemporaryPack(objects: objects.count, in: directory) { stream throws(GitError) in
            let offset = stream.written
            stream.beginEntry()
            try stream.appendEntryHeader(type: PackObject.Kind.blob.rawValue, size: blob.count)
            try stream.appendStored(blob)
            return [(objects[0].id, offset, stream.endEntry())]
        }
        var askedAfterTheIndex = false
        XCTAssertThrowsError(try PackWriter.install(packTemporary: pack.path, index: PackWriter.index(of: pack.entries, packChecksum: pack.checksum),
                                                    checksum: pack.checksum, in: directory) {
            askedAfterTheIndex = (try? FileManager.default.contentsOfDirectory(atPath: directory))?.contains { $0.hasPrefix("tmp_idx_") } ?? false
            return EIO
        }) { error in
            XCTAssertEqual((error as? GitError)?.posixErrno, EIO)
        }
        XCTAssertTrue(askedAfterTheIndex, "the pack's fsync is waited for once the index is written")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory), [])
    }

    /// Saves made one after another through the writer that fsyncs beside the index: every
    /// pack complete and named by its checksum, no temporary file left, git's fsck clean.
    func testManyWrittenPacksAreCompleteAndNoTemporaryFileStays() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        let first = Array("first".utf8)
        var tip = try repo.commits.commitChanges(onto: nil, changes: [.write(path: "visits/first.json", blob: try GitObjects.blobID(of: first))],
                                                 message: "Start", author: testAuthor, blobs: [first])
        for i in 0..<40 {
            let record = Array("record \(i)".utf8)
            tip = try repo.commits.commitChanges(onto: tip, changes: [.write(path: "visits/r\(i % 7).json", blob: try GitObjects.blobID(of: record))],
                                                 message: "Save", author: testAuthor, blobs: [record])
        }
        XCTAssertGreaterThan(repo.splicedCommitCount, 30)
        let names = try FileManager.default.contentsOfDirectory(atPath: path + "/objects/pack")
        XCTAssertFalse(names.contains { $0.hasPrefix("tmp_") }, "\(names)")
        XCTAssertEqual(names.filter { $0.hasSuffix(".pack") }.count, names.filter { $0.hasSuffix(".idx") }.count)
        try assertRepositoryComplete(path, tip: tip, commits: 41)
    }
}
