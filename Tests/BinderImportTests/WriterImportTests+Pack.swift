import BinderCore
import BinderCrypto
import BinderFormat
import BinderGit
@testable import BinderImport
import Foundation
import XCTest

/// An import stores its blobs as one pack made durable before its commit (`BinderWriter.packBlobs`),
/// not as a fsynced loose object each: the binder gains that pack and its commit's small pack of
/// trees, no loose object, and stock git finds it whole.
extension WriterImportTests {
    var gitDirectory: String { repository.gitDirectory }

    func packIndexes() throws -> Set<String> {
        Set(try FileManager.default.contentsOfDirectory(atPath: gitDirectory + "/objects/pack").filter { $0.hasSuffix(".idx") })
    }

    func looseObjects() throws -> Set<String> {
        let objects = gitDirectory + "/objects"
        var found = Set<String>()
        for folder in try FileManager.default.contentsOfDirectory(atPath: objects) where folder.count == 2 {
            for name in try FileManager.default.contentsOfDirectory(atPath: objects + "/" + folder) { found.insert(folder + name) }
        }
        return found
    }

    @discardableResult
    func git(_ arguments: String..., input: Data? = nil) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["git", "--git-dir", gitDirectory] + arguments
        var environment = ProcessInfo.processInfo.environment
        environment["GIT_CONFIG_NOSYSTEM"] = "1"
        environment["HOME"] = directory.path
        process.environment = environment
        let output = Pipe(), errors = Pipe(), feed = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = feed
        try process.run()
        if let input { feed.fileHandleForWriting.write(input) }
        try feed.fileHandleForWriting.close()
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "git \(arguments): \(String(decoding: err, as: UTF8.self))")
        return String(decoding: out + err, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func objects(inIndex name: String) throws -> Set<String> {
        let data = try Data(contentsOf: URL(fileURLWithPath: gitDirectory + "/objects/pack/" + name))
        return Set(try git("show-index", input: data).split(separator: "\n").map { String($0.split(separator: " ")[1]) })
    }

    func testAnImportIsOnePackOfItsBlobsAndOneOfItsTreesWithNoLooseObject() throws {
                let looseBefore = try looseObjects()
        let packsBefore = try packIndexes()
        let tipBefore = try XCTUnwrap(try repository.refs.branchTip())
        let outcome = try WriterImport.run(try request(), importer: importer) { body in try body(try repository.refs.branchTip()) }
        let commit = try XCTUnwrap(outcome.commit)
        XCTAssertEqual(try looseObjects(), looseBefore, "no loose object")
        let added = try packIndexes().subtracting(packsBefore)
        XCTAssertEqual(added.count, 2, "the blobs' pack and the commit's")
        // Every new blob of the commit is in one of them, the blobs' pack holds blobs only, one per
        // document, sidecar and folder of the plan.
        let plan = outcome.plan
        let blobCount = plan.newFolders.count + plan.created.reduce(0) { $0 + 1 + $1.attachments.count } + plan.updated.count
        let contents = try added.map { name throws -> Set<String> in try objects(inIndex: name) }
        let blobPack = try XCTUnwrap(contents.first { $0.count == blobCount })
        XCTAssertEqual(try git("cat-file", "--batch-check=%(objecttype)", input: Data(blobPack.joined(separator: "\n").utf8 + [10]))
            .split(separator: "\n").filter { $0 != "blob" }, [])
        let newBlobs = Set(try git("rev-list", "--objects", "--no-object-names", commit, "^" + tipBefore.hex).split(separator: "\n").map(String.init))
            .subtracting(try contents.first { $0 != blobPack }.map { Array($0) } ?? [])
        XCTAssertEqual(newBlobs, blobPack, "the commit's new objects are in the two packs")
        // Stock git finds the repository whole and reads every object.
        XCTAssertEqual(try git("fsck", "--strict", "--no-progress", "--no-dangling", "--full"), "")
        XCTAssertEqual(try git("rev-parse", "main"), commit)
        let all = try git("rev-list", "--objects", "--no-object-names", "main")
        XCTAssertFalse(try git("cat-file", "--batch-check", input: Data(all.utf8 + [10])).contains("missing"))
        // binder reads each record back.
        let existing = try importer.existingRecords()
        for record in plan.created {
            XCTAssertEqual(existing.first { $0.gitPath == record.gitPath }?.document.value, record.document.value, record.gitPath)
        }
        // A second import adds nothing: no pack, no loose object, no commit.
        let second = try WriterImport.run(try request(), importer: importer) { body in try body(try repository.refs.branchTip()) }
        XCTAssertNil(second.commit)
        XCTAssertEqual(try packIndexes().subtracting(packsBefore), added)
        XCTAssertEqual(try looseObjects(), looseBefore)
    }
}
