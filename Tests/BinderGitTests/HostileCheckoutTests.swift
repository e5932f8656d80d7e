import Foundation
import XCTest
@testable import BinderGit

/// Trees that stock git refuses to make (crafted with Tests/interop/craft_tree.py), checked
/// out by `syncWorkTreeToHead` as the mount does after each commit: nothing may be written
/// outside the work tree, nor into `.git`, whatever the tree holds.
final class HostileCheckoutTests: XCTestCase {
    static let craftTool = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("interop/craft_tree.py").path

    /// One `craft_tree.py` operation adding `name` (raw bytes) under `folder`.
    static func add(_ folder: String, _ name: [UInt8], mode: String, blob: [UInt8]) -> [String: String] {
        ["add": folder, "name_hex": name.map { String(format: "%02x", $0) }.joined(), "mode": mode,
         "blob_b64": Data(blob).base64EncodedString()]
    }

    static func add(_ folder: String, _ name: String, mode: String = "100644", blob: String) -> [String: String] {
        add(folder, Array(name.utf8), mode: mode, blob: Array(blob.utf8))
    }

    /// Commits `operations` on top of `main` in the repository at `path`.
    static func craft(_ path: String, _ operations: [[String: String]]) throws {
        let ops = path + ".ops.json"
        try JSONSerialization.data(withJSONObject: operations).write(to: URL(fileURLWithPath: ops))
        defer { try? FileManager.default.removeItem(atPath: ops) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", craftTool, path, ops]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "craft_tree.py failed")
    }

    private func contents(_ path: String) -> String? {
        FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Every file below `path`, relative, with its content (links as "-> target").
    private func snapshot(_ path: String) throws -> [String: String] {
        var result: [String: String] = [:]
        let manager = FileManager.default
        for case let relative as String in manager.enumerator(atPath: path)! {
            let full = path + "/" + relative
            if let target = try? manager.destinationOfSymbolicLink(atPath: full) {
                result[relative] = "-> " + target
            } else if let text = contents(full) {
                result[relative] = text
            }
        }
        return result
    }

    func testCheckoutOfAHostileTreeWritesNothingOutsideTheWorkTree() throws {
        let tmp = try TemporaryDirectory()
        let outside = tmp.sub("outside")
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try "untouched".write(toFile: outside + "/victim.txt", atomically: true, encoding: .utf8)
        let path = tmp.sub("binder")
        let repo = try GitRepository.create(path: path, bare: false)
        _ = try repo.commits.commitChanges(onto: nil, changes: [
            .write(path: "patient-info.json", blob: try repo.objects.writeBlob(Array("p".utf8))),
            .write(path: "visits/a.json", blob: try repo.objects.writeBlob(Array("a".utf8))),
        ], message: "Add entries", author: testAuthor)
        try repo.checkout.syncWorkTreeToHead()
        let gitConfig = contents(path + "/.git/config")
        let before = try snapshot(tmp.path)

        // Names that lead out of the work tree or into .git, links out, a gitlink.
        try Self.craft(path, [
            Self.add("..", "victim.txt", blob: "pwned"),
            Self.add("../outside", "victim.txt", blob: "pwned"),
            Self.add("visits/../..", "victim.txt", blob: "pwned"),
            Self.add(".git", "config", blob: "pwned"),
            Self.add(".git/hooks", "post-checkout", blob: "#!/bin/sh\ntouch \(outside)/hooked\n"),
            Self.add(".GIT", "config", blob: "pwned"),
            Self.add("", "evil", mode: "120000", blob: outside),
            Self.add("", "up", mode: "120000", blob: "../"),
            Self.add("", "a\\..\\..\\victim.txt", blob: "pwned"),
            ["add": "", "name_hex": Array("sub".utf8).map { String(format: "%02x", $0) }.joined(), "mode": "160000",
             "oid": String(repeating: "1", count: 40)],
        ])
        // A refused checkout is fine (the mount logs it); writing outside is not.
        do { try repo.checkout.syncWorkTreeToHead() } catch {}
        do { try repo.checkout.syncWorkTreeToHead(paths: ["..", "../outside/victim.txt", ".git/config", "evil", "up"]) } catch {}
        XCTAssertEqual(contents(outside + "/victim.txt"), "untouched")
        XCTAssertEqual(contents(tmp.path + "/victim.txt"), nil)
        XCTAssertEqual(contents(path + "/.git/config"), gitConfig)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + "/.git/hooks/post-checkout"))

        // Links in the work tree (a checkout of a tree with links made them, or stock git did),
        // then a commit that has files and folders there: the checkout must replace each
        // link, never write or delete through it. Once limited to the changed paths (as after a
        // save), once whole (as after a sync), with the unsafe names gone so that it runs.
        let links = ["evil": outside, "up": "../", "victim-link": outside + "/victim.txt"]
        for (index, limited) in [true, false].enumerated() {
            try Self.craft(path, links.keys.map { ["remove": $0] } + [".." , ".git", ".GIT", "visits/..", "sub"].map { ["remove": $0] }
                           + links.map { Self.add("", $0.key, mode: "120000", blob: $0.value) })
            for (name, target) in links {
                try? FileManager.default.removeItem(atPath: path + "/" + name)
                try FileManager.default.createSymbolicLink(atPath: path + "/" + name, withDestinationPath: target)
            }
            try Self.craft(path, links.keys.map { ["remove": $0] } + [
                Self.add("evil", "victim.txt", blob: "pwned"),
                Self.add("evil", "new.json", blob: "pwned \(index)"),
                Self.add("up/outside", "victim.txt", blob: "pwned"),
                Self.add("", "victim-link", blob: "pwned"),
            ])
            if limited {
                try repo.checkout.syncWorkTreeToHead(paths: ["evil/victim.txt", "evil/new.json", "up/outside/victim.txt", "victim-link"])
            } else {
                try repo.checkout.syncWorkTreeToHead()
            }
            XCTAssertEqual(contents(outside + "/victim.txt"), "untouched")
            XCTAssertFalse(FileManager.default.fileExists(atPath: outside + "/new.json"))
            // The work tree has what the commit has, as real files and folders.
            XCTAssertEqual(contents(path + "/evil/new.json"), "pwned \(index)")
            XCTAssertEqual(contents(path + "/victim-link"), "pwned")
            XCTAssertNil(try? FileManager.default.destinationOfSymbolicLink(atPath: path + "/evil"))
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: outside + "/hooked"))

        // Everything outside the work tree is as it was.
        let after = try snapshot(tmp.path).filter { !$0.key.hasPrefix("binder/") && $0.key != "binder" }
        XCTAssertEqual(after, before.filter { !$0.key.hasPrefix("binder/") && $0.key != "binder" })
        XCTAssertEqual(contents(path + "/.git/config"), gitConfig)
    }
}
