import Foundation
import Glibc
import XCTest
@testable import BinderGit

/// A storage failure carries the errno of the system call that failed (`GitError.posixErrno`),
/// so that the mount answers ENOSPC for a full disk and EROFS for a read-only one, never
/// guessing from libgit2's message.
final class StorageErrnoTests: XCTestCase {
    /// Runs a shell command as root would; returns its exit status.
    @discardableResult
    private func sh(_ command: String) -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return -1 }
        process.waitUntilExit()
        return process.terminationStatus
    }

    private func storageFailure(_ body: () throws -> Void, file: StaticString = #filePath, line: UInt = #line) -> GitError? {
        do {
            try body()
            XCTFail("expected a storage failure", file: file, line: line)
            return nil
        } catch let error as GitError {
            return error
        } catch {
            XCTFail("expected a GitError, got \(error)", file: file, line: line)
            return nil
        }
    }

    func testFullDiskIsENOSPCAndReadOnlyDiskIsEROFS() throws {
        let tmp = try TemporaryDirectory()
        let small = tmp.sub("small")
        try FileManager.default.createDirectory(atPath: small, withIntermediateDirectories: true)
        guard sh("mount -t tmpfs -o size=1m tmpfs '\(small)'") == 0 else { throw XCTSkip("cannot mount a tmpfs here") }
        defer { sh("umount -l '\(small)'") }
        let repo = try GitRepository.create(path: small + "/r.git", bare: true)
        let before = try repo.objects.writeBlob(Array("stored before the disk filled".utf8))

        // Fill the disk (dd stops at ENOSPC); a new blob (incompressible) cannot be written.
        sh("dd if=/dev/zero of='\(small)/filler' bs=64k")
        var random = [UInt8](repeating: 0, count: 300_000)
        for i in random.indices { random[i] = UInt8.random(in: 0...255) }
        let full = storageFailure { _ = try repo.objects.writeBlob(random) }
        XCTAssertEqual(full?.posixErrno, ENOSPC, "\(String(describing: full))")
        XCTAssertEqual(try repo.objects.readBlob(before), Array("stored before the disk filled".utf8))

        // A read-only file system: EROFS.
        XCTAssertEqual(sh("rm '\(small)/filler' && mount -o remount,ro '\(small)'"), 0)
        let readOnly = storageFailure { _ = try repo.objects.writeBlob(Array("after remount".utf8)) }
        XCTAssertEqual(readOnly?.posixErrno, EROFS, "\(String(describing: readOnly))")

        // Git-level failures carry none.
        let missing = storageFailure { _ = try repo.objects.readBlob(ObjectID(hex: String(repeating: "ab", count: 20))!) }
        XCTAssertNil(missing?.posixErrno)
        XCTAssertEqual(missing?.code, .notFound)
    }
}
