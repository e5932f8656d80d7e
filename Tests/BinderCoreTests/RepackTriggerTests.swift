@testable import BinderCore
import BinderCrypto
import BinderFormat
import BinderGit
import Foundation
import Logging
import XCTest

/// The committer packs in the background: a binder holding thousands of loose objects is
/// repacked after its next save, packs are folded so that they stay few however fast saves
/// come, and saves go on meanwhile.
final class RepackTriggerTests: XCTestCase {
    /// A new binder in a temporary folder (the caller removes it), its key and repository.
    private func makeBinder() throws -> (directory: URL, key: NIP44.ConversationKey, repository: GitRepository) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("binder-packing-\(UUID().uuidString)")
        let key = try NIP44.ConversationKey(selfOf: try SecretKey.generate())
        _ = try BinderCreator.create(at: directory.path, key: key, patientName: "Test Patient", dateOfBirth: nil,
                                     author: Signature(name: "t", email: "t@t"))
        return (directory, key, try GitRepository.open(path: directory.path))
    }

    /// Stock git finds the repository sound.
    private func assertGitFsckClean(_ gitDirectory: String, line: UInt = #line) throws {
        let fsck = Process()
        fsck.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        fsck.arguments = ["git", "--git-dir=\(gitDirectory)", "fsck", "--strict", "--no-progress", "--no-dangling"]
        try fsck.run()
        fsck.waitUntilExit()
        XCTAssertEqual(fsck.terminationStatus, 0, "git fsck", line: line)
    }

    /// 3,000 saves as fast as the committer takes them (spread over ten folders, as an import
    /// writes): the folds keep up, so the pack count stays low all along, not only at the end.
    /// (Folding only small packs and repacking everything every 1,000 commits left 1,599 packs
    /// after 10,000 saves: the repack took longer than the saves it waited for.)
    func testThousandsOfFastSavesLeaveFewPacks() throws {
        let (directory, key, repository) = try makeBinder()
        defer { try? FileManager.default.removeItem(at: directory) }
        let view = try BinderView(repository: repository, key: key, logger: Logger(label: "test"))
        for folder in 0..<10 { try view.makeDirectory("folder\(folder)") }
        var most = 0
        for i in 0..<3_000 {
            let body = "# Record \(i)\n\n" + String(repeating: "Line \(i) of a record.\n", count: 20)
            try view.store("folder\(i % 10)/record-\(i).md", content: Array(body.utf8))
            if i % 50 == 0 { most = max(most, repository.packs.packCount()) }
        }
        // The last folds may still run; they end on their own, and git reads the packs after.
        var waited = 0
        while !view.writer.committer.isPackingIdle && waited < 600 {
            Thread.sleep(forTimeInterval: 0.1)
            waited += 1
        }
        most = max(most, repository.packs.packCount())
        XCTAssertLessThan(most, 100, "packs piled up during the saves")
        // Geometric folds leave about log2(objects) packs, plus the saves since the last fold.
        XCTAssertLessThanOrEqual(repository.packs.packCount(), 45)
        XCTAssertEqual(try view.list("folder3").filter { $0.name.hasSuffix(".md") }.count, 300)
        // Each pack folded away was let go: the view's instance keeps none open or mapped
        // (libgit2 alone kept all of them, and searched them on every save), once the databases
        // it replaced are freed.
        GitRepository.waitForReplacedDatabases()
        let removedPacks = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").compactMap {
            try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0)
        } + String(decoding: try Data(contentsOf: URL(fileURLWithPath: "/proc/self/maps")), as: UTF8.self).split(separator: "\n").map(String.init)
        // (`objects/pack/pack-*`: the files a save's next pack is written to, made ahead with no
        // name, show as `objects/pack/#<inode> (deleted)`: `SparePackFiles`.)
        XCTAssertEqual(removedPacks.filter { $0.contains(directory.path + "/objects/pack/pack-") && $0.hasSuffix("(deleted)") }, [])

        try assertGitFsckClean(repository.gitDirectory)
    }

    /// Mounts that each end before their fold comes due leave their saves' packs unfolded; the
    /// next mount folds them at once, before any save, in steps of `packsPerFold` packs, until
    /// they are few again (each save's pack in a large folder holds the folder's whole tree:
    /// 312 such packs were 2.4 GB in a binder of 100,000 records, and 0.5 GB once folded).
    func testPacksLeftByShortMountsAreFoldedAtTheNextMount() throws {
        let (directory, key, repository) = try makeBinder()
        defer { try? FileManager.default.removeItem(at: directory) }
        try BinderView(repository: repository, key: key, logger: Logger(label: "test")).makeDirectory("visits")
        // 180 saves, each its own pack, none folded: what mounts that each ended before their
        // fold came due left (saves written as the committer writes them).
        var tip = try XCTUnwrap(try repository.refs.branchTip())
        for save in 0..<180 {
            let document = MedicalDocument(type: "visit", value: "# Record \(save % 20)\n\nSave \(save).\n")
            let blob = Array(try NIP44.encrypt(document.serializedBytes(), key: key).utf8)
            tip = try repository.commits.commitChanges(onto: tip, changes: [.write(path: "visits/record-\(save % 20).json",
                                                                          blob: try GitObjects.blobID(of: blob))],
                                               message: "Update entry", author: Signature(name: "t", email: "t@t"), blobs: [blob])
        }
        let piledUp = repository.packs.packCount()
        XCTAssertGreaterThan(piledUp, Committer.packsPerFold * 2)

        let view = try BinderView(repository: try GitRepository.open(path: directory.path), key: key, logger: Logger(label: "test"))
        view.packIfDue()
        var waited = 0
        while (!view.writer.committer.isPackingIdle || repository.packs.packCount() >= Committer.foldEvery) && waited < 1_200 {
            Thread.sleep(forTimeInterval: 0.1)
            waited += 1
        }
        XCTAssertLessThan(repository.packs.packCount(), Committer.foldEvery, "the piled-up packs stayed (\(piledUp) before)")
        let handle = try view.open("visits/record-19.md")
        defer { view.release(handle: handle) }
        var out = [UInt8](repeating: 0, count: try view.attributes("visits/record-19.md").size)
        _ = try out.withUnsafeMutableBytes { try view.read(handle: handle, offset: 0, into: $0) }
        XCTAssertTrue(String(decoding: out, as: UTF8.self).hasSuffix("Save 179.\n"))
        try assertGitFsckClean(repository.gitDirectory)
        XCTAssertEqual(try repository.history.versions(of: "visits/record-19.json", from: tip).count, 9)

        // A binder whose packs are few starts no fold at mount.
        let calm = try BinderView(repository: try GitRepository.open(path: directory.path), key: key, logger: Logger(label: "test"))
        let before = try FileManager.default.contentsOfDirectory(atPath: repository.gitDirectory + "/objects/pack").sorted()
        calm.packIfDue()
        XCTAssertTrue(calm.writer.committer.isPackingIdle)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: repository.gitDirectory + "/objects/pack").sorted(), before)
    }

    func testASaveInABinderFullOfLooseObjectsStartsARepack() throws {
        let (directory, key, repository) = try makeBinder()
        defer { try? FileManager.default.removeItem(at: directory) }
        // 8,000 loose objects (unreachable, as a crashed import could leave), written the way
        // git writes them; about 31 land in each objects/xx folder.
        let script = """
        import hashlib, os, sys, zlib
        root = sys.argv[1] + "/objects"
        for i in range(8000):
            body = b"loose %d\\n" % i
            data = b"blob %d\\0" % len(body) + body
            name = hashlib.sha1(data).hexdigest()
            os.makedirs(root + "/" + name[:2], exist_ok=True)
            with open(root + "/" + name[:2] + "/" + name[2:], "wb") as f:
                f.write(zlib.compress(data))
        """
        let python = Process()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        python.arguments = ["python3", "-c", script, repository.gitDirectory]
        try python.run()
        python.waitUntilExit()
        XCTAssertEqual(python.terminationStatus, 0)
        XCTAssertEqual(repository.packs.packCount(), 1, "the creation's commit is one pack")

        let view = try BinderView(repository: repository, key: key, logger: Logger(label: "test"))
        try view.makeDirectory("visits")
        // The repack runs on its own thread; saves do not wait for it. The save wrote a second
        // pack; the repack leaves one.
        var waited = 0
        while repository.packs.packCount() != 1 && waited < 600 {
            Thread.sleep(forTimeInterval: 0.1)
            waited += 1
        }
        XCTAssertEqual(repository.packs.packCount(), 1, "no repack after the save")
        try view.store("visits/2026-02-09.md", content: Array("# Visit\n\nAfter the repack.\n".utf8))

        let fresh = try BinderView(repository: try GitRepository.open(path: directory.path), key: key, logger: Logger(label: "test"))
        let handle = try fresh.open("visits/2026-02-09.md")
        defer { fresh.release(handle: handle) }
        var out = [UInt8](repeating: 0, count: try fresh.attributes("visits/2026-02-09.md").size)
        _ = try out.withUnsafeMutableBytes { try fresh.read(handle: handle, offset: 0, into: $0) }
        XCTAssertTrue(String(decoding: out, as: UTF8.self).contains("After the repack."))

        // The repack removes the loose objects after its pack is in place: fsck once it ended.
        var settled = 0
        while !view.writer.committer.isPackingIdle && settled < 600 {
            Thread.sleep(forTimeInterval: 0.1)
            settled += 1
        }
        try assertGitFsckClean(repository.gitDirectory)
    }
}
