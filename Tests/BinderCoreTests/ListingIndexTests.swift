@_spi(Fuzzing) @testable import BinderCore
import BinderCrypto
import BinderFormat
import BinderGit
import Foundation
import Logging
import Synchronization
import XCTest

/// The listing index (`<git dir>/binder/listing-index`) and read-ahead, without a kernel: a
/// cold view lists from the index without decrypting a document, and an index that is gone,
/// damaged, of another key or stale is ignored, costs decryptions only, and is written again.
final class ListingIndexTests: XCTestCase {
    var directory: URL!
    var key: NIP44.ConversationKey!
    let logger = Logger(label: "test")
    static let marker = "CANARY-INDEX-5521"

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("binder-index-\(UUID().uuidString)")
        key = try NIP44.ConversationKey(selfOf: try SecretKey.generate())
        _ = try BinderCreator.create(at: directory.path, key: key, patientName: "Test Patient", dateOfBirth: nil,
                                     author: Signature(name: "t", email: "t@t"))
        let view = try makeView(index: false)
        try view.makeDirectory("visits")
        try view.makeDirectory("labs")
        for i in 0..<12 {
            let body = "# \(Self.marker) visit \(i)\n\n" + String(repeating: "Seen for \(Self.marker) \(i). ", count: i * 20 + 1) + "\n"
            try view.store("visits/visit-\(i).md", content: Array("---\ncreated: 2026-01-0\(i % 9 + 1)T10:00:00Z\ntags: [\(Self.marker)]\n---\n\(body)".utf8))
        }
        try view.store("labs/scan.txt", content: Array("\(Self.marker) attachment".utf8))
        try view.store("labs/panel.md", content: Array("# Panel \(Self.marker)\n\nValues.\n".utf8))
        view.close()
    }

    override func tearDown() { try? FileManager.default.removeItem(at: directory) }

    var indexPath: String { directory.appendingPathComponent("binder/listing-index").path }

    func makeView(index: Bool = true, readAhead: Int = 0, cache: Int = 256 << 20, key: NIP44.ConversationKey? = nil) throws -> BinderView {
        try BinderView(repository: try GitRepository.open(path: directory.path), key: key ?? self.key, logger: logger,
                       options: BinderView.Options(cacheCapacity: cache, listingIndex: index, readAhead: readAhead))
    }

    func walk(_ view: BinderView) throws -> [String] { try Self.walk(view) }

    /// Every folder's entries with their attributes, walked from the root (and the timeline).
    static func walk(_ view: BinderView) throws -> [String] {
        var out: [String] = []
        var folders = [""]
        while let folder = folders.popLast() {
            for entry in try view.list(folder) {
                let path = folder.isEmpty ? entry.name : folder + "/" + entry.name
                out.append("\(path) \(entry.attributes.kind) \(entry.attributes.size) \(entry.attributes.modified.seconds)")
                if entry.attributes.kind == .directory { folders.append(path) }
            }
        }
        out += try view.list(".binder/timeline").map { "timeline/\($0.name)" }
        return out.sorted()
    }

    func read(_ view: BinderView, _ path: String) throws -> [UInt8] { try Self.read(view, path) }

    static func read(_ view: BinderView, _ path: String) throws -> [UInt8] {
        let handle = try view.open(path)
        defer { view.release(handle: handle) }
        var out = [UInt8](repeating: 0, count: try view.attributes(path).size + 10)
        let n = try out.withUnsafeMutableBytes { try view.read(handle: handle, offset: 0, into: $0) }
        return Array(out.prefix(n))
    }

    /// A cold walk with the index in place: what it lists, and how many documents it decrypted.
    func coldWalk(index: Bool = true, key: NIP44.ConversationKey? = nil) throws -> (listing: [String], decrypted: Int) {
        let view = try makeView(index: index, key: key)
        defer { view.close() }
        let listing = try walk(view)
        return (listing, view.statistics.listingDecryptions)
    }

    /// The index is written a second after a change, or twenty times as long as the last
    /// write took when that is longer (a folder of 100,000 records).
    func testWritesWaitLongerAfterLongWrites() {
        XCTAssertEqual(ListingIndexWriter.wait(afterWriteOf: 0), .nanoseconds(1_000_000_000))
        XCTAssertEqual(ListingIndexWriter.wait(afterWriteOf: 20_000_000), .nanoseconds(1_000_000_000))
        XCTAssertEqual(ListingIndexWriter.wait(afterWriteOf: 300_000_000), .nanoseconds(6_000_000_000))
        XCTAssertEqual(ListingIndexWriter.wait(afterWriteOf: UInt64.max), .nanoseconds(Int.max))
        XCTAssertEqual(ListingIndexWriter.wait(afterWriteOf: 1 << 63), .nanoseconds(Int.max))  // 20 x 2^63 wraps to 0
    }

    func testColdListingWithTheIndexDecryptsNoDocument() throws {
        let first = try coldWalk()
        XCTAssertEqual(first.decrypted, 15, "without an index every document is decrypted (12 visits, panel, scan's, patient-info)")
        XCTAssertTrue(FileManager.default.fileExists(atPath: indexPath), "unmount writes the index")
        let second = try coldWalk()
        XCTAssertEqual(second.decrypted, 0)
        XCTAssertEqual(second.listing, first.listing)
        XCTAssertEqual(second.listing, try coldWalk(index: false).listing, "the same listing as without any index")
    }

    /// The index is loaded on a thread of its own from the view's start (`ListingIndexLoad`):
    /// listings asked for at once, from several threads, and the timeline (which reads the
    /// parts), wait for it rather than decrypting.
    func testListingsAskedForWhileTheIndexLoadsWaitForIt() throws {
        let expected = try coldWalk().listing
        for round in 0..<5 {
            let view = try makeView()
            defer { view.close() }
            let walked = Mutex<[[String]]>([])
            let group = DispatchGroup()
            for _ in 0..<3 {
                DispatchQueue.global().async(group: group) {
                    let listing = (try? Self.walk(view)) ?? ["failed"]
                    walked.withLock { $0.append(listing) }
                }
            }
            XCTAssertEqual(group.wait(timeout: .now() + 120), .success, "round \(round): a walk never finished")
            XCTAssertEqual(walked.withLock { $0 }, [expected, expected, expected], "round \(round)")
            XCTAssertEqual(view.statistics.listingDecryptions, 0, "round \(round): a listing was built without the index")
        }
        let timelineFirst = try makeView()
        defer { timelineFirst.close() }
        let timeline = try timelineFirst.list(".binder/timeline").map { "timeline/\($0.name)" }
        XCTAssertEqual(timeline.sorted(), expected.filter { $0.hasPrefix("timeline/") })
        XCTAssertFalse(timeline.isEmpty)
        XCTAssertEqual(timelineFirst.statistics.listingDecryptions, 0)
    }

    /// A mount that changed nothing leaves the index file as it was (no write at unmount).
    func testAnUnchangedIndexIsNotWrittenAgain() throws {
        _ = try coldWalk()
        var before = stat()
        XCTAssertEqual(stat(indexPath, &before), 0)
        let again = try coldWalk()
        XCTAssertEqual(again.decrypted, 0)
        var after = stat()
        XCTAssertEqual(stat(indexPath, &after), 0)
        XCTAssertEqual(after.st_ino, before.st_ino, "the index was written again (a new file renamed into place)")
        XCTAssertEqual(after.st_mtim.tv_sec, before.st_mtim.tv_sec)
        XCTAssertEqual(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec)
    }

    func testADeletedIndexIsRebuilt() throws {
        let first = try coldWalk()
        try FileManager.default.removeItem(atPath: indexPath)
        let rebuilt = try coldWalk()
        XCTAssertEqual(rebuilt.listing, first.listing)
        XCTAssertEqual(rebuilt.decrypted, first.decrypted)
        XCTAssertEqual(try coldWalk().decrypted, 0, "written again")
    }

    /// Folders come in sorted order (the root first), and a load hands each out as soon as it
    /// is decoded (`parts(of:)`), so that a listing does not wait for the decoding of large
    /// folders; a folder the file does not hold is nil. Listing only the root then decrypts
    /// nothing and leaves the index as it was.
    func testFoldersAreHandedOutAsTheyAreDecoded() throws {
        _ = try coldWalk()  // writes the index
        let index = try ListingIndex(gitDirectory: directory.path, key: key)
        var order: [String] = []
        let parts = try index.load { folder, _ in order.append(folder) }
        XCTAssertEqual(order.first, "", "the root first")
        XCTAssertEqual(order, order.sorted(), "in sorted order")
        XCTAssertEqual(Set(order), Set(parts.keys))
        let root = try XCTUnwrap(parts[""])
        XCTAssertTrue(root.keys.contains("patient-info.json"), "\(root.keys)")
        let load = ListingIndexLoad(index: index, logger: logger)
        for folder in order { XCTAssertEqual(load.parts(of: folder).map { Set($0.keys) }, Set(parts[folder]!.keys), folder) }
        XCTAssertNil(load.parts(of: "nothing-here"))
        XCTAssertEqual(Set(load.parts.keys), Set(parts.keys))
        XCTAssertTrue(load.isFinished)
        XCTAssertNil(load.parts(of: "a-folder-before-all"))
        let before = try Data(contentsOf: URL(fileURLWithPath: indexPath))
        let view = try makeView()
        XCTAssertTrue(try view.list("").contains { $0.name == "patient-info.md" })
        XCTAssertEqual(view.statistics.listingDecryptions, 0)
        view.close()
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: indexPath)), before, "not written again")
    }

    func testADamagedOrForeignIndexIsIgnoredAndRebuilt() throws {
        let expected = try coldWalk().listing
        let good = try Data(contentsOf: URL(fileURLWithPath: indexPath))
        var damages: [(String, Data)] = [("truncated", good.prefix(good.count / 2)), ("empty", Data()),
                                         ("tail cut", good.dropLast())]
        for position in [0, 21, 30, good.count / 2, good.count - 1] {
            var flipped = good
            flipped[position] ^= 0x01
            damages.append(("byte \(position) flipped", flipped))
        }
        // Sealed under another binder's key: it never authenticates here.
        let otherKey = try NIP44.ConversationKey(selfOf: try SecretKey.generate())
        let other = try ListingIndex(gitDirectory: directory.path, key: otherKey)
        let parts = try ListingIndex(gitDirectory: directory.path, key: key).load()
        XCTAssertFalse(parts.isEmpty)
        damages.append(("another key", Data(other.encode(parts))))
        for (what, bytes) in damages {
            try bytes.write(to: URL(fileURLWithPath: indexPath))
            XCTAssertThrowsError(try ListingIndex(gitDirectory: directory.path, key: key).load(), what)
            let walked = try coldWalk()
            XCTAssertEqual(walked.listing, expected, what)
            XCTAssertEqual(walked.decrypted, 15, what)
            XCTAssertEqual(try coldWalk().decrypted, 0, "\(what): written again")
        }
    }

    func testAnIndexMadeStaleByAnOutsideCommitCostsOnlyWhatChanged() throws {
        _ = try coldWalk()
        // Another clone changes one record and pushes: the index here knows the old blob.
        let clone = directory.path + "-clone"
        defer { try? FileManager.default.removeItem(atPath: clone) }
        XCTAssertEqual(try run("git clone -q '\(directory.path)' '\(clone)'"), 0)
        let elsewhere = try BinderView(repository: try GitRepository.open(path: clone), key: key, logger: logger)
        try elsewhere.store("visits/visit-3.md", content: Array("# Changed elsewhere\n\nA longer body than before, by far.\n".utf8))
        elsewhere.close()
        XCTAssertEqual(try run("git -C '\(clone)' push -q origin main"), 0)
        let view = try makeView()
        defer { view.close() }
        let listing = try walk(view)
        XCTAssertEqual(listing, try coldWalk(index: false).listing)
        XCTAssertEqual(view.statistics.listingDecryptions, 1, "only the changed record is decrypted")
        let text = try read(view, "visits/visit-3.md")
        XCTAssertEqual(text.count, try view.attributes("visits/visit-3.md").size)
        XCTAssertTrue(String(decoding: text, as: UTF8.self).contains("Changed elsewhere"))
    }

    func testTheIndexHoldsNoPlaintext() throws {
        _ = try coldWalk()
        let bytes = try Data(contentsOf: URL(fileURLWithPath: indexPath))
        for text in [Self.marker, "visit-3", "visits", "Seen for", "Panel"] {
            XCTAssertNil(bytes.range(of: Data(text.utf8)), "\(text) is in the index file")
        }
        // Inside, it does hold the titles (that is what it is for): the seal is what hides them.
        let parts = try ListingIndex(gitDirectory: directory.path, key: key).load()
        XCTAssertEqual(parts["visits"]?["visit-0.json"]?.facts?.title, "\(Self.marker) visit 0")
    }

    /// A record's `created` is kept as its day (as written) and its time, and survives the index
    /// as it was worked out. A row per form of `created`.
    func testCreatedKeepsItsDayAndTimeThroughTheIndex() throws {
        let rows: [(created: String?, day: String?, time: Int64?)] = [
            ("2026-02-09T23:30:00-05:00", "2026-02-09", 1_770_697_800),  // the patient's day, not UTC's
            ("2026-02-09T10:00:00.250Z", "2026-02-09", 1_770_631_200),
            ("2026-02-09", "2026-02-09", 1_770_595_200),
            ("2026-02-09 and more", "2026-02-09", nil),
            ("yesterday", nil, nil),
            (nil, nil, nil),
        ]
        for row in rows {
            let facts = RecordFacts(created: row.created, title: "t")
            XCTAssertEqual(facts.createdDay, row.day, "\(row.created ?? "nil")")
            XCTAssertEqual(facts.createdTime?.seconds, row.time, "\(row.created ?? "nil")")
            let node = Node(source: .document(blob: ObjectID(bytes: [UInt8](repeating: 7, count: 20))!), size: 1,
                            modified: Timestamp(seconds: 5), gitPath: "visits/a.json")
            let part = DocumentPart(blob: ObjectID(bytes: [UInt8](repeating: 7, count: 20))!, name: "a.md", node: node, children: nil,
                                    consumedSidecars: [], sidecarLookups: [:], usesCommitTime: false,
                                    commitTime: Timestamp(seconds: 9), facts: facts)
            let decoded = try ListingIndexCodec.decode(ListingIndexCodec.encode(["visits": ["a.json": part]], limit: 1 << 20))
            XCTAssertEqual(decoded["visits"]?["a.json"]?.facts, facts, "\(row.created ?? "nil")")
        }
    }

    /// A node's git path comes back as it went in, whether or not it is its folder's path joined
    /// with the name its part is kept by (then the decoder shares those two strings).
    func testGitPathsComeBackWhetherOrNotTheyJoinFolderAndName() throws {
        let rows: [(folder: String, key: String, gitPath: String)] = [
            ("visits", "a.json", "visits/a.json"),
            ("", "a.json", "a.json"),
            ("visits/old", "a.json", "visits/old/a.json"),
            ("visits", "a.json", "labs/a.json"),
            ("visits", "a.json", "visits/b.json"),
            ("visits", "a.json", "visitsXa.json"),
            ("", "a.json", "x/a.json"),
            ("visits", "ä.json", "visits/ä.json"),
        ]
        let blob = try XCTUnwrap(ObjectID(bytes: [UInt8](repeating: 7, count: 20)))
        for row in rows {
            let node = Node(source: .document(blob: blob), size: 1, modified: Timestamp(seconds: 5), gitPath: row.gitPath)
            let part = DocumentPart(blob: blob, name: "a.md", node: node, children: nil, consumedSidecars: [], sidecarLookups: [:],
                                    usesCommitTime: false, commitTime: Timestamp(seconds: 9), facts: nil)
            let decoded = try ListingIndexCodec.decode(ListingIndexCodec.encode([row.folder: [row.key: part]], limit: 1 << 20))
            XCTAssertEqual(decoded[row.folder]?[row.key]?.node.gitPath, row.gitPath, "\(row)")
        }
    }

    func testASizeTheIndexGotWrongIsCorrectedByTheRead() throws {
        _ = try coldWalk()
        // As an index of an older rendering would be: a size off by some bytes.
        let index = try ListingIndex(gitDirectory: directory.path, key: key)
        var parts = try index.load()
        let part = try XCTUnwrap(parts["visits"]?["visit-2.json"])
        let wrongNode = Node(source: part.node.source, size: part.node.size - 7, modified: part.node.modified, gitPath: part.node.gitPath)
        parts["visits"]?["visit-2.json"] = DocumentPart(
            blob: part.blob, name: part.name, node: wrongNode, children: part.children, consumedSidecars: part.consumedSidecars,
            sidecarLookups: part.sidecarLookups, usesCommitTime: part.usesCommitTime, commitTime: part.commitTime, facts: part.facts)
        try index.save(parts)
        let view = try makeView()
        defer { view.close() }
        let listed = try view.attributes("visits/visit-2.md").size
        XCTAssertEqual(listed, part.node.size - 7)
        XCTAssertFalse(view.takeSizeCorrection("/visits/visit-2.md"), "nothing found yet")
        let text = try read(view, "visits/visit-2.md")
        XCTAssertEqual(text.count, part.node.size, "the read gives the whole content")
        XCTAssertFalse(view.takeSizeCorrection("/visits/visit-1.md"), "another file")
        XCTAssertTrue(view.takeSizeCorrection("/visits/visit-2.md"), "the kernel is to be told (a FUSE path)")
        XCTAssertFalse(view.takeSizeCorrection("visits/visit-2.md"))
        XCTAssertEqual(try view.attributes("visits/visit-2.md").size, text.count, "stat now agrees with the content")
    }

    /// Decoding takes whatever the file holds: prefixes and bit flips of a real index's
    /// plaintext, behind a valid tag, are refused or decoded, never a trap (fuzz regression).
    func testTheDecoderRefusesDamagedPlaintextWithoutTrapping() throws {
        _ = try coldWalk()
        let parts = try ListingIndex(gitDirectory: directory.path, key: key).load()
        let plaintext = ListingIndexCodec.encode(parts, limit: ListingIndex.sizeLimit)
        XCTAssertNil(ListingIndexFuzzing.run([1] + plaintext, key: key))
        for cut in stride(from: 0, to: plaintext.count, by: max(plaintext.count / 97, 1)) {
            XCTAssertNil(ListingIndexFuzzing.run([1] + plaintext.prefix(cut), key: key), "cut at \(cut)")
            XCTAssertThrowsError(try ListingIndexCodec.decode(Array(plaintext.prefix(cut))), "cut at \(cut)")
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<300 {
            var damaged = plaintext
            damaged[Int.random(in: 0..<damaged.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
            XCTAssertNil(ListingIndexFuzzing.run([1] + damaged, key: key))
        }
        // Counts far beyond the input, huge numbers, overlong varints.
        for hostile: [UInt8] in [[0xFF, 0xFF, 0xFF, 0xFF, 0x0F], [1, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F],
                                 [1, 0, 1, 1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80]] {
            XCTAssertNil(ListingIndexFuzzing.run([1] + hostile, key: key))
        }
    }

    /// The fuzz seeds of plaintext decode (so fuzzing starts past the checks), and parse to
    /// what they were written as.
    func testTheFuzzSeedsDecode() throws {
        let seeds = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../Fuzz/corpus/listing-index").standardized
        for name in ["plaintext-simple", "plaintext-children"] {
            let bytes = [UInt8](try Data(contentsOf: seeds.appendingPathComponent(name)))
            let parts = try ListingIndexCodec.decode(Array(bytes.dropFirst(2)))
            XCTAssertFalse(parts.isEmpty, name)
            XCTAssertNil(ListingIndexFuzzing.run([1] + bytes.dropFirst(2), key: key), name)
        }
        let bytes = [UInt8](try Data(contentsOf: seeds.appendingPathComponent("plaintext-children")))
        let parts = try ListingIndexCodec.decode(Array(bytes.dropFirst(2)))
        let part = try XCTUnwrap(parts["labs"]?["b.json"])
        XCTAssertEqual(part.children?.listings[""]?.nodes["scan.pdf"]?.size, 1000)
        XCTAssertEqual(part.sidecarLookups["gone.enc"], .some(nil))
    }

    // MARK: Read-ahead

    func testReadAheadGivesTheSameBytesAndKeepsTheCacheBound() throws {
        _ = try coldWalk()  // the index: listing then puts nothing in the cache
        let plain = try makeView(index: false, readAhead: 0)
        defer { plain.close() }
        let names = try plain.list("visits").map(\.name)
        let expected = try names.map { try read(plain, "visits/" + $0) }
        let capacity = 6_000
        let view = try makeView(readAhead: 4, cache: capacity)
        defer { view.close() }
        for (name, bytes) in zip(names, expected) {
            XCTAssertEqual(try read(view, "visits/" + name), bytes, name)
            XCTAssertLessThanOrEqual(view.statistics.cachedBytes, capacity)
        }
        let ahead = try makeView(readAhead: 8)
        defer { ahead.close() }
        _ = try read(ahead, "visits/" + names[0])
        waitForReadAhead(ahead)
        for name in names[1...8] {
            let node = try ahead.reader.listings.node("visits/" + name)
            XCTAssertNotNil(ahead.reader.plaintext.get(node.source), "\(name) was decrypted ahead")
        }
        XCTAssertNil(ahead.reader.plaintext.get(try ahead.reader.listings.node("visits/" + names[10]).source), "beyond the window")
        for (name, bytes) in zip(names, expected) { XCTAssertEqual(try read(ahead, "visits/" + name), bytes, name) }
    }

    /// An open tells whether its file was read ahead and not opened since, once (the reader
    /// follows the read-ahead, which goes on); files not read ahead, or a view that read
    /// nothing ahead (a warm reader's), never say so.
    func testAFileReadAheadCountsAsPrefetchedOnceAndOthersNever() throws {
        _ = try coldWalk()
        let view = try makeView(readAhead: 8)
        defer { view.close() }
        let names = try view.list("visits").map(\.name)
        func source(_ name: String) throws -> Node.Source { try view.reader.listings.node("visits/" + name).source }
        XCTAssertFalse(view.reader.readAhead.takePrefetched(try source(names[1])), "nothing read ahead yet")
        _ = try read(view, "visits/" + names[0])
        waitForReadAhead(view)
        XCTAssertTrue(view.reader.readAhead.takePrefetched(try source(names[1])))
        XCTAssertFalse(view.reader.readAhead.takePrefetched(try source(names[1])), "taken once")
        XCTAssertFalse(view.reader.readAhead.takePrefetched(try source(names[10])), "beyond the window")
        XCTAssertTrue(view.reader.readAhead.takePrefetched(try source(names[8])), "the last of the window")
        let still = try makeView(readAhead: 0)
        defer { still.close() }
        for name in names { _ = try read(still, "visits/" + name) }
        XCTAssertFalse(still.reader.readAhead.takePrefetched(try still.reader.listings.node("visits/" + names[1]).source))
    }

    func waitForReadAhead(_ view: BinderView) {
        let deadline = Date().addingTimeInterval(120)
        while view.reader.readAhead.load != (0, 0) && Date() < deadline { usleep(2_000) }
        XCTAssertTrue(view.reader.readAhead.load == (0, 0), "read-ahead never finished")
    }

    func testConcurrentReadersAndACommitNeitherDeadlockNorMixBytes() throws {
        let plain = try makeView(index: false, readAhead: 0)
        let names = try plain.list("visits").map(\.name)
        let expected = Dictionary(uniqueKeysWithValues: try names.map { ($0, try read(plain, "visits/" + $0)) })
        plain.close()
        let view = try makeView(readAhead: 8, cache: 20_000)
        defer { view.close() }
        let failures = Mutex<[String]>([])
        let group = DispatchGroup()
        for reader in 0..<4 {
            DispatchQueue.global().async(group: group) {
                for round in 0..<5 {
                    for name in (reader % 2 == 0 ? names : names.reversed()) {
                        do {
                            let bytes = try Self.read(view, "visits/" + name)
                            if bytes != expected[name] { failures.withLock { $0.append("\(name) round \(round): other bytes") } }
                        } catch { failures.withLock { $0.append("\(name): \(error)") } }
                    }
                }
            }
        }
        DispatchQueue.global().async(group: group) {
            for i in 0..<5 {
                do { try view.store("visits/new-\(i).md", content: Array("# New \(i)\n".utf8)) } catch {
                    failures.withLock { $0.append("store \(i): \(error)") }
                }
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 300), .success, "readers or the commit never finished")
        XCTAssertEqual(failures.withLock { $0 }, [])
        waitForReadAhead(view)
        XCTAssertLessThanOrEqual(view.statistics.cachedBytes, 20_000)
    }

    func run(_ command: String) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", command]
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }
}
