import BinderCrypto
import BinderFormat
import Foundation
import XCTest

/// The apps' sample binder, mounted for real: every document, child, attachment and folder is
/// shown as the product describes, byte for byte against the manifest's plaintext.
final class FixtureMountTests: XCTestCase {
    var binder: MountedBinder!
    var manifest: [String: Any]!

    override func setUpWithError() throws {
        binder = try MountedBinder()
        manifest = try Fixtures.manifest()
        try binder.mount()
    }

    override func tearDown() {
        binder?.unmount()
        binder = nil
    }

    /// View path -> expected bytes, built from the manifest by the rules in docs/DESIGN.md.
    /// `.md` files are checked by parsing them (see `assertDocument`), so they map to nil here.
    func expectedFiles() throws -> [String: [UInt8]?] {
        let documents = try XCTUnwrap(manifest["documents"] as? [String: [String: Any]])
        let sidecars = try XCTUnwrap(manifest["sidecars"] as? [String: [String: Any]])
        var expected: [String: [UInt8]?] = [:]
        for (path, entry) in documents {
            let json = try XCTUnwrap(entry["json"] as? [String: Any])
            let metadata = json["metadata"] as? [String: Any] ?? [:]
            let stem = String(path.dropLast(5))
            let folder = (path as NSString).deletingLastPathComponent
            if metadata["type"] as? String == "attachment_ref" {
                let sidecar = json["value"] as! String
                expected[join(folder, String(sidecar.dropLast(4)))] = .some(nil)
                continue
            }
            expected[stem + ".md"] = .some(nil)
            addChildren(json["children"] as? [[String: Any]] ?? [], under: stem + ".children", folder: folder, into: &expected)
        }
        _ = sidecars
        return expected
    }

    func addChildren(_ children: [[String: Any]], under directory: String, folder: String, into expected: inout [String: [UInt8]?]) {
        for (index, child) in children.enumerated() {
            let metadata = child["metadata"] as? [String: Any] ?? [:]
            let type = metadata["type"] as? String ?? "note"
            let number = String(format: "%02d", index + 1)
            if type == "attachment_ref" {
                var name = String((child["value"] as! String).dropLast(4))
                if !name.contains(".") { name += "." + (metadata["format"] as? String == "jpeg" ? "jpg" : metadata["format"] as! String) }
                expected[directory + "/\(number)-\(name)"] = .some(nil)
            } else if type == "attachment" {
                let ext = metadata["format"] as? String == "jpeg" ? "jpg" : (metadata["format"] as? String ?? "bin")
                expected[directory + "/\(number)-attachment.\(ext)"] = .some(Base64.decode(child["value"] as! String))
            } else {
                let base = "\(number)-" + type.replacingOccurrences(of: "_", with: "-")
                expected[directory + "/\(base).md"] = .some(nil)
                addChildren(child["children"] as? [[String: Any]] ?? [], under: directory + "/\(base).children", folder: folder, into: &expected)
            }
        }
    }

    func join(_ a: String, _ b: String) -> String { a.isEmpty ? b : a + "/" + b }

    func testEveryFileIsShownAndNothingElse() throws {
        let expected = try expectedFiles()
        let shown = try binder.files()
        XCTAssertEqual(Set(shown), Set(expected.keys), "files differ")
        XCTAssertEqual(shown.count, 65)
    }

    func testFoldersMatchManifest() throws {
        let run = try shell("find . -mindepth 1 -type d | sed 's|^\\./||' | grep -v '\\.children' | LC_ALL=C sort", in: binder.mountpoint)
        let folders = Set(run.stdout.split(separator: "\n").map(String.init))
        XCTAssertEqual(folders, Set(try XCTUnwrap(manifest["folders"] as? [String])))
    }

    func testDocumentsRoundTripToManifestPlaintext() throws {
        let documents = try XCTUnwrap(manifest["documents"] as? [String: [String: Any]])
        var checked = 0
        for (path, entry) in documents {
            let plaintext = try XCTUnwrap(entry["plaintext"] as? String)
            let document = try MedicalDocument(plaintext: Array(plaintext.utf8))
            if document.type == "attachment_ref" { continue }
            let stem = String(path.dropLast(5))
            try assertRendered(stem + ".md", matches: document)
            try assertChildren(document.children, directory: stem + ".children")
            checked += 1
        }
        XCTAssertEqual(checked, 44)
    }

    func assertRendered(_ viewPath: String, matches document: MedicalDocument, file: StaticString = #filePath, line: UInt = #line) throws {
        let bytes = try binder.read(viewPath)
        let parsed = try FrontMatter.parse(bytes)
        XCTAssertEqual(parsed.metadata, document.metadata, "\(viewPath): metadata", file: file, line: line)
        XCTAssertEqual(Array(parsed.value.utf8), Array(document.value.utf8), "\(viewPath): value", file: file, line: line)
        // stat tells the truth.
        let size = try FileManager.default.attributesOfItem(atPath: binder.path(viewPath))[.size] as? Int
        XCTAssertEqual(size, bytes.count, "\(viewPath): st_size", file: file, line: line)
    }

    func assertChildren(_ children: [MedicalDocument], directory: String) throws {
        for (index, child) in children.enumerated() where child.type != "attachment_ref" && child.type != "attachment" {
            let base = String(format: "%02d-", index + 1) + child.type.replacingOccurrences(of: "_", with: "-")
            try assertRendered(directory + "/" + base + ".md", matches: child)
            try assertChildren(child.children, directory: directory + "/" + base + ".children")
        }
    }

    func testAttachmentsMatchManifestHashes() throws {
        let sidecars = try XCTUnwrap(manifest["sidecars"] as? [String: [String: Any]])
        let documents = try XCTUnwrap(manifest["documents"] as? [String: [String: Any]])
        XCTAssertEqual(sidecars.count, 5)
        for (sidecarPath, info) in sidecars {
            let referrer = try XCTUnwrap(info["referenced_by"] as? String)
            let json = try XCTUnwrap(documents[referrer]?["json"] as? [String: Any])
            let folder = (sidecarPath as NSString).deletingLastPathComponent
            let sidecarName = (sidecarPath as NSString).lastPathComponent
            let viewPath: String
            if (json["metadata"] as? [String: Any])?["type"] as? String == "attachment_ref" {
                viewPath = join(folder, String(sidecarName.dropLast(4)))
            } else {
                let children = json["children"] as! [[String: Any]]
                let index = try XCTUnwrap(children.firstIndex { $0["value"] as? String == sidecarName })
                var name = String(sidecarName.dropLast(4))
                if !name.contains(".") { name += ".jpg" }
                viewPath = String(referrer.dropLast(5)) + ".children/" + String(format: "%02d-", index + 1) + name
            }
            let bytes = try binder.read(viewPath)
            XCTAssertEqual(bytes.count, info["size"] as? Int, viewPath)
            XCTAssertEqual(sha256Hex(bytes), info["sha256"] as? String, viewPath)
            let size = try FileManager.default.attributesOfItem(atPath: binder.path(viewPath))[.size] as? Int
            XCTAssertEqual(size, bytes.count, "\(viewPath): st_size")
        }
        // The inline base64 child.
        let inline = try binder.read("labs/2025-02-25-lipid-panel.children/01-attachment.png")
        XCTAssertEqual(Array(inline.prefix(8)), [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
    }

    func testStatIsExactAndStable() throws {
        // st_size equals the bytes read for every file; modes and owner as promised.
        let run = try shell("find . -type f -printf '%s %m %U %p\\n' | while read size mode uid path; do actual=$(wc -c < \"$path\"); echo \"$size $actual $mode $uid $path\"; done", in: binder.mountpoint)
        XCTAssertEqual(run.status, 0, run.stderr)
        let lines = run.stdout.split(separator: "\n")
        XCTAssertEqual(lines.count, 65)
        for line in lines {
            let parts = line.split(separator: " ", maxSplits: 4)
            XCTAssertEqual(parts[0], parts[1], "size of \(parts[4])")
            XCTAssertEqual(parts[2], "600", "mode of \(parts[4])")
            XCTAssertEqual(String(parts[3]), String(getuid()))
        }
        let dirs = try shell("find . -mindepth 1 -type d -printf '%m\\n' | sort -u", in: binder.mountpoint)
        XCTAssertEqual(dirs.stdout, "700\n")
        // mtime is the document's `updated`.
        let mtime = try shell("stat -c %Y visits/2025-02-25-annual-physical.md", in: binder.mountpoint)
        XCTAssertEqual(mtime.stdout.trimmingCharacters(in: .newlines), "1741566452")  // 2025-03-10T00:27:32Z
        // Listings are sorted and stable across remounts, and so are mtimes.
        let before = try shell("ls -lR --time-style=+%s .", in: binder.mountpoint).stdout
        binder.unmount()
        try binder.mount()
        XCTAssertEqual(try shell("ls -lR --time-style=+%s .", in: binder.mountpoint).stdout, before)
    }

    func testShellToolsOverTheMount() throws {
        let mnt = binder.mountpoint
        // grep -r: the count of a marker equals the truth (files whose plaintext contains it).
        let grep = try shell("grep -rl 'Dr. Łukasz Wróbel' . | LC_ALL=C sort", in: mnt)
        XCTAssertEqual(grep.status, 0, grep.stderr)
        let expectedMatches = try binder.files().filter { path in
            (try? binder.read(path)).map { String(decoding: $0, as: UTF8.self).contains("Dr. Łukasz Wróbel") } ?? false
        }
        XCTAssertEqual(grep.stdout.split(separator: "\n").count, expectedMatches.count)
        XCTAssertGreaterThan(expectedMatches.count, 2)
        // Every canary of the manifest is found by grep over the mount.
        for canary in try XCTUnwrap(manifest["canaries"] as? [String]) {
            XCTAssertEqual(try shell("grep -rqF -- '\(canary)' .", in: mnt).status, 0, "canary \(canary) not found")
        }

        // cp -r and rsync -a to a plain folder: byte-identical; a second rsync copies nothing.
        let copy = binder.sandbox.root.appendingPathComponent("copy").path
        XCTAssertEqual(try shell("cp -r '\(mnt)' '\(copy)' && diff -r '\(mnt)' '\(copy)'").status, 0)
        let mirror = binder.sandbox.root.appendingPathComponent("mirror").path
        XCTAssertEqual(try shell("rsync -a '\(mnt)/' '\(mirror)/'").status, 0)
        XCTAssertEqual(try shell("diff -r '\(mnt)' '\(mirror)'").status, 0)
        let second = try shell("rsync -ai '\(mnt)/' '\(mirror)/'")
        XCTAssertEqual(second.status, 0)
        XCTAssertEqual(second.stdout, "", "second rsync copied: \(second.stdout)")

        // tar, du, file, head -c, ls -lR, find.
        let tar = try shell("tar cf - . | tar tf - | grep -c 'annual-physical.md'", in: mnt)
        XCTAssertEqual(tar.stdout.trimmingCharacters(in: .newlines), "1")
        XCTAssertEqual(try shell("du -s . >/dev/null", in: mnt).status, 0)
        XCTAssertTrue(try shell("file -b conditions/back-acne/2025-03-03-photo-2.jpg", in: mnt).stdout.hasPrefix("JPEG image data"))
        XCTAssertTrue(try shell("file -b visits/2025-03-03-recording.m4a", in: mnt).stdout.contains("Media"))
        XCTAssertEqual(try shell("head -c 4 patient-info.md", in: mnt).stdout, "---\n")
        XCTAssertEqual(try shell("less -F patient-info.md | head -n 1", in: mnt, environment: ["TERM": "dumb"]).stdout, "---\n")
        XCTAssertEqual(try shell("ls -lR . | grep -c '^-'", in: mnt).stdout.trimmingCharacters(in: .newlines), "65")
        XCTAssertEqual(try shell("find . -name '*.md' | wc -l", in: mnt).stdout.trimmingCharacters(in: .whitespacesAndNewlines), "59")
    }

    func testRandomOffsetReadsAndBlockSizes() throws {
        let path = "conditions/back-acne/2025-03-03-photo-2.jpg"
        let whole = try binder.read(path)
        let handle = try XCTUnwrap(FileHandle(forReadingAtPath: binder.path(path)))
        defer { try? handle.close() }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let offset = Int.random(in: 0..<(whole.count + 10), using: &generator)
            let length = Int.random(in: 0..<70_000, using: &generator)
            try handle.seek(toOffset: UInt64(offset))
            let chunk = [UInt8](try handle.read(upToCount: length) ?? Data())
            let end = min(whole.count, offset + length)
            XCTAssertEqual(chunk, offset < whole.count ? Array(whole[offset..<end]) : [], "offset \(offset) length \(length)")
        }
        for blockSize in ["1", "7", "4096", "1M"] {
            let run = try shell("dd if='\(binder.path(path))' bs=\(blockSize) status=none | sha256sum | cut -c1-64")
            XCTAssertEqual(run.stdout.trimmingCharacters(in: .newlines), sha256Hex(whole), "bs=\(blockSize)")
        }
    }

    func testSecondGrepReadsNoGitObject() throws {
        XCTAssertEqual(try shell("grep -r -c f2ed66ff . >/dev/null", in: binder.mountpoint).status, 0)
        let afterFirst = try binder.statusValue("git_object_reads")
        XCTAssertEqual(try shell("grep -r -c f2ed66ff . >/dev/null", in: binder.mountpoint).status, 0)
        XCTAssertEqual(try binder.statusValue("git_object_reads"), afterFirst)
        // The documents (38 KB); the attachments' pages are the kernel's to keep.
        XCTAssertGreaterThan(try binder.statusValue("cached_bytes"), 30_000)
    }

    /// An attachment is decrypted when it is read, not when it is opened, and the plaintext
    /// cache never holds it (the kernel keeps its pages; docs/BENCHMARKS.md, memory): an open
    /// that reads nothing reads no git object, a whole read reads one and shows every byte, and
    /// the cache holds as much after as before.
    func testAttachmentIsDecryptedAtItsFirstReadAndNeverCached() throws {
        let path = "conditions/back-acne/2025-03-03-photo-2.jpg"
        let sidecars = try XCTUnwrap(manifest["sidecars"] as? [String: [String: Any]])
        let info = try XCTUnwrap(sidecars.first { $0.key.hasPrefix(path) }?.value)
        XCTAssertGreaterThan(try XCTUnwrap(info["size"] as? Int), 100_000)
        XCTAssertEqual(try shell("ls -l conditions/back-acne >/dev/null", in: binder.mountpoint).status, 0)
        let reads = try binder.statusValue("git_object_reads"), cached = try binder.statusValue("cached_bytes")
        XCTAssertEqual(try shell(": < '\(path)'", in: binder.mountpoint).status, 0)
        XCTAssertEqual(try binder.statusValue("git_object_reads"), reads, "an open that reads nothing decrypts nothing")
        XCTAssertEqual(sha256Hex(try binder.read(path)), info["sha256"] as? String)
        XCTAssertEqual(try binder.statusValue("git_object_reads"), reads + 1)
        XCTAssertEqual(try binder.statusValue("cached_bytes"), cached, "the attachment is not in the cache")
    }

    func testListingDoesNotDecryptAttachments() throws {
        XCTAssertEqual(try shell("ls -l conditions/back-acne >/dev/null", in: binder.mountpoint).status, 0)
        // Documents are rendered for their size; the 150 KB photo is not in the cache.
        XCTAssertLessThan(try binder.statusValue("cached_bytes"), 10_000)
    }

    func testWritesAreRefusedOnReadOnlyMount() throws {
        binder.unmount()
        try binder.mount(["--read-only"])
        let write = try shell("echo x >> patient-info.md", in: binder.mountpoint)
        XCTAssertNotEqual(write.status, 0)
        XCTAssertTrue(write.stderr.contains("Read-only file system"), write.stderr)
        XCTAssertNotEqual(try shell("touch new.md", in: binder.mountpoint).status, 0)
        XCTAssertNotEqual(try shell("mkdir newdir", in: binder.mountpoint).status, 0)
    }

    func testExtendedAttributesAndStatfsAnswer() throws {
        let python = try shell("""
            python3 -c "
            import errno, os
            print(os.listxattr('patient-info.md'))
            for _ in range(2):  # the second answered by the kernel
                try:
                    os.getxattr('patient-info.md', 'security.selinux')
                except OSError as e:
                    print(e.errno == errno.EOPNOTSUPP)
            s = os.statvfs('.')
            print(s.f_namemax, s.f_bsize)
            "
            """, in: binder.mountpoint)
        XCTAssertEqual(python.status, 0, python.stderr)
        XCTAssertEqual(python.stdout, "[]\nTrue\nTrue\n255 4096\n")
        XCTAssertEqual(try shell("df . >/dev/null", in: binder.mountpoint).status, 0)
    }
}

/// The view read by an independent YAML implementation (PyYAML).
final class IndependentReaderTests: XCTestCase {
    func testPyYAMLReadsEveryDocumentBack() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        try binder.mount()
        let script = Fixtures.directory.deletingLastPathComponent().appendingPathComponent("interop/check_front_matter.py").path
        let manifest = Fixtures.directory.appendingPathComponent("sample-binder.manifest.json").path
        let run = try BinderSandbox.run(executable: "/usr/bin/env", ["python3", script, binder.mountpoint, manifest])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains(" passed, 0 failed"), run.stdout + run.stderr)
    }
}
