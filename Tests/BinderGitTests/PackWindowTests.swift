import Foundation
import XCTest
@testable import BinderGit

/// Reading a pack larger than `LibGit2.packMappedLimit` keeps at most about that much of it
/// mapped (issue 13: the daemon's memory stays flat at any binder size; with libgit2's
/// 64-bit defaults every page of a pack read once stayed mapped and resident).
final class PackWindowTests: XCTestCase {
    /// Resident kilobytes of this process's mappings of the file named `name` (/proc/self/smaps;
    /// by name: the temporary folder's path may be spelt differently there).
    private func residentKiB(ofMappingsOf name: String) throws -> Int {
        var resident = 0
        var inFile = false
        // Read to the end: String(contentsOfFile:) stops after the first read of a /proc file.
        let smaps = try XCTUnwrap(FileHandle(forReadingAtPath: "/proc/self/smaps")).readToEnd() ?? Data()
        for line in String(decoding: smaps, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if let first = fields.first, first.contains("-"), fields.count >= 5, first.allSatisfy({ $0.isHexDigit || $0 == "-" }) {
                inFile = fields.count >= 6 && fields[5...].joined(separator: " ").hasSuffix("/" + name)
            } else if inFile, fields.first == "Rss:", fields.count >= 2, let kib = Int(fields[1]) {
                resident += kib
            }
        }
        return resident
    }

    func testReadingABigPackKeepsAtMostTheLimitMapped() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        // 48 MiB of blobs that do not compress (so the pack is as big), in one pack by stock git.
        let random = try XCTUnwrap(FileHandle(forReadingAtPath: "/dev/urandom"))
        var blobs: [ObjectID] = []
        for _ in 0..<96 {
            blobs.append(try repo.objects.writeBlob(Array(try XCTUnwrap(random.read(upToCount: 512 << 10)))))
        }
        _ = try repo.commits.commitChanges(onto: nil, changes: blobs.enumerated().map { .write(path: "b\($0.offset)", blob: $0.element) },
                                   message: "Blobs", author: Signature(name: "T", email: "t@example.com"))
        _ = try git("repack", "-a", "-d", "-q", in: path)
        let packs = try FileManager.default.contentsOfDirectory(atPath: path + "/objects/pack").filter { $0.hasSuffix(".pack") }
        XCTAssertEqual(packs.count, 1)
        let pack = path + "/objects/pack/" + packs[0]
        let packBytes = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: pack)[.size] as? Int)
        XCTAssertGreaterThan(packBytes, 3 * LibGit2.packMappedLimit, "the pack must be bigger than the limit for the test to mean anything")

        let reader = try GitRepository.open(path: path)
        var largest = 0
        for id in blobs {
            XCTAssertEqual(try reader.objects.readBlob(id).count, 512 << 10)
            largest = max(largest, try residentKiB(ofMappingsOf: packs[0]))
        }
        // libgit2 may exceed the limit by the window it is mapping when it evicts.
        XCTAssertLessThanOrEqual(largest * 1024, LibGit2.packMappedLimit + LibGit2.packWindowSize)
        XCTAssertGreaterThan(largest, 0, "the pack is read through mapped windows (else this test measures nothing)")
    }
}
