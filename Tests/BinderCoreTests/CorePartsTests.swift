@testable import BinderCore
import BinderCrypto
import BinderFormat
import BinderGit
import Foundation
import SystemPackage
import Synchronization
import XCTest

/// The parts of the core one by one, without a kernel: the edit buffer, the listing builder
/// and the view's limits (names: `NamingTableTests`).
final class CorePartsTests: XCTestCase {
    // MARK: EditBuffer

    func bytes(_ buffer: EditBuffer, _ offset: Int = 0, _ count: Int? = nil) -> [UInt8] {
        var out = [UInt8](repeating: 0xAA, count: count ?? buffer.count)
        let n = out.withUnsafeMutableBytes { buffer.read(offset: offset, into: $0) }
        return Array(out.prefix(n))
    }

    func testEditBufferWritesAcrossPagesAndLeavesZeroHoles() throws {
        var buffer = EditBuffer(content: try SecureBytes(copying: Array("hello".utf8)))
        let page = EditBuffer.pageSize
        let tail = [UInt8](repeating: 7, count: 10)
        try tail.withUnsafeBytes { try buffer.write(offset: 2 * page - 5, $0) }  // straddles pages 1 and 2
        XCTAssertEqual(buffer.count, 2 * page + 5)
        XCTAssertEqual(bytes(buffer, 0, 5), Array("hello".utf8))
        XCTAssertEqual(bytes(buffer, 5, 100), [UInt8](repeating: 0, count: 100), "a hole reads as zeros")
        XCTAssertEqual(bytes(buffer, 2 * page - 5, 10), tail)
        XCTAssertEqual(buffer.allocatedBytes, 2 * page, "only the pages written are allocated (page 0 stays shared)")
        XCTAssertEqual(Array(bytes(buffer).prefix(5)), Array("hello".utf8))
        XCTAssertEqual(try buffer.snapshot().count, buffer.count)
    }

    func testEditBufferFarWriteCostsOnePage() throws {
        var buffer = try EditBuffer()
        try [UInt8(1)].withUnsafeBytes { try buffer.write(offset: 200 << 20, $0) }
        XCTAssertEqual(buffer.count, (200 << 20) + 1)
        XCTAssertEqual(buffer.allocatedBytes, EditBuffer.pageSize, "memory follows what was written, not the size")
        XCTAssertEqual(bytes(buffer, (200 << 20) - 2, 3), [0, 0, 1])
    }

    func testEditBufferTruncateThenGrowReadsZeros() throws {
        var buffer = EditBuffer(content: try SecureBytes(copying: Array("abcdefgh".utf8)))
        try [UInt8(ascii: "X")].withUnsafeBytes { try buffer.write(offset: 1, $0) }
        buffer.truncate(3)
        XCTAssertEqual(bytes(buffer), Array("aXc".utf8))
        buffer.truncate(6)
        XCTAssertEqual(bytes(buffer), Array("aXc".utf8) + [0, 0, 0], "what was cut does not come back")
        let shared = EditBuffer(content: try SecureBytes(copying: Array("abcdefgh".utf8)))
        var cut = shared
        cut.truncate(2)
        cut.truncate(4)
        XCTAssertEqual(bytes(cut), Array("ab".utf8) + [0, 0])
        XCTAssertEqual(bytes(shared), Array("abcdefgh".utf8), "the shared content is never changed")
    }

    // MARK: PlaintextCache

    /// `forget` drops every entry made from the blobs named (a document, a sidecar, a raw
    /// file, a document's children) and nothing else, and the size follows.
    func testPlaintextCacheForgetsReplacedVersions() throws {
        let cache = PlaintextCache(capacity: 1 << 20)
        func blob(_ n: Int) -> ObjectID { ObjectID(hex: String(format: "%040x", n))! }
        let kept: [Node.Source] = [.document(blob: blob(1)), .sidecar(blob: blob(2)), .child(blob: blob(3), indexPath: [0])]
        let gone: [Node.Source] = [.document(blob: blob(4)), .sidecar(blob: blob(5)), .raw(blob: blob(6)),
                                   .child(blob: blob(4), indexPath: [0, 1]), .inlineAttachment(blob: blob(4), indexPath: [2])]
        for (n, key) in (kept + gone).enumerated() { cache.put(key, try SecureBytes(copying: [UInt8](repeating: UInt8(n), count: 100 + n))) }
        cache.forget([blob(4), blob(5), blob(6), blob(7)])
        for key in kept { XCTAssertNotNil(cache.get(key), "\(key)") }
        for key in gone { XCTAssertNil(cache.get(key), "\(key)") }
        XCTAssertEqual(cache.usage.entries, kept.count)
        XCTAssertEqual(cache.usage.bytes, (0..<kept.count).reduce(0) { $0 + SecureBytes.footprint(ofCount: 100 + $1) })
    }

    /// What the cache keeps, by what a node shows and its size: a large attachment or raw
    /// file is never kept (its open decrypts it when read, and the kernel keeps its pages), and
    /// no room is made for one; documents and their children are kept whatever their size.
    func testPlaintextCacheKeepsNoLargeAttachment() throws {
        let capacity = 1 << 20, largest = PlaintextCache.largestFileKept
        func blob(_ n: Int) -> ObjectID { ObjectID(hex: String(format: "%040x", n))! }
        let table: [(source: Node.Source, count: Int, kept: Bool)] = [
            (.sidecar(blob: blob(1)), largest, true),
            (.sidecar(blob: blob(2)), largest + 1, false),
            (.sidecar(blob: blob(3)), 3 << 18, false),
            (.raw(blob: blob(4)), 1_000, true),
            (.raw(blob: blob(5)), largest + 1, false),
            (.document(blob: blob(6)), largest + 1, true),
            (.child(blob: blob(7), indexPath: [0]), largest + 1, true),
            (.inlineAttachment(blob: blob(8), indexPath: [1]), largest + 1, true),
        ]
        for row in table {
            let cache = PlaintextCache(capacity: capacity)
            let resident: Node.Source = .document(blob: blob(99))
            // Full but for a few bytes: whatever is kept needs room made.
            cache.put(resident, try SecureBytes(copying: [UInt8](repeating: 7, count: capacity - 64)))
            XCTAssertNotNil(cache.get(resident))
            XCTAssertEqual(PlaintextCache.keeps(row.source, count: row.count), row.kept, "\(row.source)")
            cache.makeRoom(for: row.count, of: row.source)
            XCTAssertEqual(cache.get(resident) != nil, !row.kept, "room made for \(row.source): \(row.count)")
            cache.put(row.source, try SecureBytes(copying: [UInt8](repeating: 1, count: row.count)))
            XCTAssertEqual(cache.get(row.source)?.count, row.kept ? row.count : nil, "\(row.source): \(row.count)")
        }
    }

    /// The cache against a plain model of least-recently-used eviction, over a seeded stream of
    /// gets, puts of varied sizes and room made ahead of a decryption: the same entries held,
    /// the same secret memory (sizes rounded as the arena rounds them), the bound kept.
    func testPlaintextCacheEvictsTheLeastRecentlyUsedLikeAModel() throws {
        let capacity = 1_000
        let cache = PlaintextCache(capacity: capacity)
        var model: [(key: Int, size: Int)] = []  // least recently used first
        var seed: UInt64 = 42
        // A repeatable stream (Knuth's MMIX linear congruential generator, high bits).
        func next() -> UInt64 {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return seed >> 33
        }
        func source(_ key: Int) -> Node.Source {
            .document(blob: ObjectID(hex: String(format: "%040x", key))!)
        }
        func held() -> Int { model.reduce(0) { $0 + SecureBytes.footprint(ofCount: $1.size) } }
        func evict(toFit size: Int) {
            while held() + SecureBytes.footprint(ofCount: size) > capacity, !model.isEmpty { model.removeFirst() }
        }
        for step in 0..<20_000 {
            let key = Int(next() % 64)
            switch next() % 7 {
            case 0, 1:
                let size = Int(next() % 300) + 1
                let bytes = try SecureBytes(copying: [UInt8](repeating: UInt8(truncatingIfNeeded: key), count: size))
                cache.put(source(key), bytes)
                model.removeAll { $0.key == key }
                evict(toFit: size)
                model.append((key, size))
            case 2:
                let size = Int(next() % 300) + 1
                cache.makeRoom(for: size, of: source(key))
                evict(toFit: size)
            default:
                let got = cache.get(source(key))
                if let index = model.firstIndex(where: { $0.key == key }) {
                    let entry = model.remove(at: index)
                    model.append(entry)
                    XCTAssertEqual(got?.count, entry.size, "step \(step)")
                    XCTAssertEqual(got?.copyBytes().first, UInt8(truncatingIfNeeded: key), "step \(step)")
                } else {
                    XCTAssertNil(got, "step \(step): key \(key) should have been evicted")
                }
            }
            let usage = cache.usage
            XCTAssertEqual(usage.entries, model.count, "step \(step)")
            XCTAssertEqual(usage.bytes, held(), "step \(step)")
            XCTAssertLessThanOrEqual(usage.bytes, capacity)
        }
        // Larger than the whole cache: not kept, nothing evicted for it.
        let before = cache.usage
        cache.put(source(999), try SecureBytes(copying: [UInt8](repeating: 1, count: capacity + 1)))
        XCTAssertNil(cache.get(source(999)))
        XCTAssertEqual(cache.usage.entries, before.entries)
        cache.removeAll()
        XCTAssertEqual(cache.usage.entries, 0)
        XCTAssertEqual(cache.usage.bytes, 0)
        cache.put(source(1), try SecureBytes(copying: [1, 2, 3]))
        XCTAssertEqual(cache.get(source(1))?.copyBytes(), [1, 2, 3])
    }

    // MARK: Listing

    /// A listing's sorted entries are kept between asks, and follow every change of the copy
    /// that changed, never of the copies made before it: a table of steps, each checked
    /// against sorting the names afresh and against the listing's own nodes.
    func testSortedEntriesFollowEveryChangeAndNoOtherCopy() {
        func node(_ size: Int) -> Node {
            Node(source: .document(blob: ObjectID(bytes: [UInt8](repeating: 7, count: 20))!), size: size,
                 modified: Timestamp(seconds: 5), gitPath: "visits/x.json")
        }
        func expected(_ listing: Listing) -> [String] { listing.nodes.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) } }
        var listing = Listing()
        for name in ["b.md", "a.md", "É.md", "a-2.md", "Z.md"] { _ = listing.insertUnique(name, node(1)) }
        XCTAssertEqual(listing.sortedEntries.map(\.name), expected(listing))
        XCTAssertEqual(listing.sortedEntries.map(\.name), ["Z.md", "a-2.md", "a.md", "b.md", "É.md"])
        // (step, change) on a fresh copy of the last listing; every copy made so far must still
        // list what it held.
        let steps: [(String, (inout Listing) -> Void)] = [
            ("insert", { _ = $0.insertUnique("c.md", node(2)) }),
            ("insert a taken name", { _ = $0.insertUnique("a.md", node(3)) }),
            ("remove", { $0.nodes.removeValue(forKey: "b.md") }),
            ("replace a node", { $0.nodes["Z.md"] = node(9) }),
            ("set a new name", { $0.nodes["0.md"] = node(4) }),
            ("empty", { $0.nodes.removeAll() }),
            ("refill", { $0.nodes["only.md"] = node(5) }),
        ]
        var copies: [(Listing, [String])] = [(listing, expected(listing))]
        for (step, change) in steps {
            var next = copies.last!.0
            _ = next.sortedEntries.map(\.name)  // filled before the change, shared with the copy it came from
            change(&next)
            XCTAssertEqual(next.sortedEntries.map(\.name), expected(next), step)
            XCTAssertEqual(next.sortedEntries.map(\.name), expected(next), step + ", asked again")
            copies.append((next, expected(next)))
            for (copy, names) in copies {
                XCTAssertEqual(copy.sortedEntries.map(\.name), names, "a copy made before \(step)")
                XCTAssertTrue(copy.sortedEntries.allSatisfy { copy.nodes[$0.name] === $0.node }, "a copy's nodes after \(step)")
            }
        }
        // Asked from many threads at once, one listing gives one answer.
        var wide = Listing()
        for i in 0..<5_000 { wide.nodes["r\(i * 7919 % 5_000).md"] = node(i) }
        let shared = wide
        let answers = Mutex<Set<[String]>>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            let names = shared.sortedEntries.map(\.name)
            answers.withLock { _ = $0.insert(names) }
        }
        XCTAssertEqual(answers.withLock { $0 }, [expected(wide)])
    }

    // MARK: ViewPath

    /// A view path is normalized by its bytes: a row per case. (Its cutting is
    /// `PathBytes.split`'s, whose rows are in `PathBytesTests`.)
    func testViewPathNormalize() {
        let normalized: [(path: String, expected: String)] = [
            ("/a/b/", "a/b"), ("a/b", "a/b"), ("///", ""), ("/", ""), ("", ""), ("//x//", "x"),
            ("/\u{301}x/", "\u{301}x"), ("/é/", "é"),
        ]
        for row in normalized {
            XCTAssertTrue(ViewPath.normalize(row.path).utf8.elementsEqual(row.expected.utf8), "normalize \(row.path.debugDescription)")
        }
    }

    // MARK: BinderView.isControlPath

    /// Which paths are `.binder`'s: a row per case. The byte comparison must agree with the
    /// rule it stands for: the path without its outer slashes is `.binder` or lies inside it.
    func testControlPathTable() {
        let rows: [(path: String, control: Bool)] = [
            (".binder", true), ("/.binder", true), ("/.binder/", true), ("//.binder//", true),
            ("/.binder/status", true), ("/.binder/timeline/2025 labs X.md", true), (".binder//x", true),
            ("/", false), ("", false), ("/.binde", false), ("/.binderx", false), ("/.binder.md", false),
            ("/visits/.binder", false), ("/.Binder", false), ("/ .binder", false),
        ]
        for row in rows {
            XCTAssertEqual(BinderView.isControlPath(row.path), row.control, row.path)
            let normalized = ViewPath.normalize(row.path)
            let rule = normalized == BinderView.controlDirectory || PathBytes.isInside(normalized, folder: BinderView.controlDirectory)
            XCTAssertEqual(BinderView.isControlPath(row.path), rule, "the rule, for \(row.path)")
        }
    }

    // MARK: RecordFacts.firstHeading

    /// Titles the timeline takes from a body: a row per rule. The byte scan must give what the
    /// line-by-line rules give, on each row and on bodies built at random from the same pieces.
    func testFirstHeadingTable() {
        let rows: [(body: String, title: String?)] = [
            ("# Title\nbody\n", "Title"),
            ("intro\n\n## Second level ##\n", "Second level"),
            ("   ### Indented\n", "Indented"),
            ("#\tTabbed\n", "Tabbed"),
            ("####### seven is not a heading\n# six or fewer is\n", "six or fewer is"),
            ("#tag is not a heading\n", nil),
            ("# \n#  #  \n# Empty ones are skipped\n", "Empty ones are skipped"),
            ("no heading at all", nil),
            ("", nil),
            ("# \u{301}combining after the space\n# next\n", "next"),
            ("#\u{301} combining after the hash\n", nil),
            (" \u{301}# combining after the indent\n", nil),
            ("# Title with trailing unicode space\u{3000}\n", "Title with trailing unicode space"),
            ("# Crlf\r\nbody\r\n", RecordFacts.firstHeadingByLines("# Crlf\r\nbody\r\n")),
            ("body\r\n# Not split at crlf\r\n", nil),
            ("# Émile's visit ✓\n", "Émile's visit ✓"),
        ]
        for row in rows {
            XCTAssertEqual(RecordFacts.firstHeading(row.body), row.title, "\(row.body.debugDescription)")
            XCTAssertEqual(RecordFacts.firstHeadingByLines(row.body), row.title, "rules: \(row.body.debugDescription)")
        }
        let pieces = ["#", "# ", " ", "\t", "\n", "\r", "\r\n", "x", "é", "\u{301}", "\u{3000}", "###### ", "####### ", "Title"]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            let body = (0..<Int.random(in: 0...12, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
            XCTAssertEqual(RecordFacts.firstHeading(body), RecordFacts.firstHeadingByLines(body), "\(body.debugDescription)")
        }
    }

    // MARK: TimelineNames.clean

    /// Titles made fit for a link's name: a row per rule. `clean` (which returns a text it
    /// would not change as it is) must answer as the rule scalar by scalar does, on each row
    /// and on texts built at random from the same pieces.
    func testTimelineCleanTable() {
        let rows: [(text: String, clean: String)] = [
            ("Annual physical", "Annual physical"),
            ("Allergy — increase prescribed", "Allergy — increase prescribed"),
            ("", ""),
            ("A/B test", "A-B test"),
            ("two  spaces", "two spaces"),
            ("tab\there", "tab here"),
            ("  leading and trailing  ", "leading and trailing"),
            ("trailing ", "trailing"),
            ("no\u{A0}break\u{3000}ideographic", "no break ideographic"),
            ("next\u{85}line", "next line"),
            ("bell\u{7}and\u{7F}delete", "bell and delete"),
            (".hidden", "hidden"),
            ("...dots", "dots"),
            ("\t.after a tab", "after a tab"),
            ("middle. dot.", "middle. dot."),
            ("zero\u{200B}width", "zero\u{200B}width"),
            ("e \u{301}accent", "e \u{301}accent"),
            ("陈美玲 🥜", "陈美玲 🥜"),
        ]
        for row in rows {
            XCTAssertEqual(TimelineNames.clean(row.text), row.clean, "\(row.text.debugDescription)")
            XCTAssertEqual(TimelineNames.cleanByScalars(row.text), row.clean, "rule: \(row.text.debugDescription)")
        }
        let pieces = [" ", "  ", "\t", "\n", ".", "/", "x", "é", "\u{301}", "\u{A0}", "\u{3000}", "\u{85}", "\u{7F}", "\u{200B}", "—", "Title"]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            let text = (0..<Int.random(in: 0...8, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
            XCTAssertEqual(TimelineNames.clean(text), TimelineNames.cleanByScalars(text), "\(text.debugDescription)")
        }
    }

    // MARK: Bytewise order

    /// readdir's order: bytes of the UTF-8, a prefix first. A row per case; the pairs are also
    /// checked both ways and as Substrings (tree entry names are slices of their paths).
    func testBytewiseOrderOfNames() {
        let rows: [(a: String, b: String, line: UInt)] = [
            ("", "a", #line),
            ("a", "b", #line),
            ("B", "a", #line),                                   // uppercase first, as bytes
            ("visit", "visit-2", #line),                          // a prefix first
            ("visit-2.md", "visit.md", #line),                    // '-' (0x2D) before '.' (0x2E)
            ("z", "é", #line),                                    // 0x7A before 0xC3
            ("e\u{301}", "é", #line),                              // decomposed 'e' before the composed one
            ("short", String(repeating: "s", count: 40), #line),  // a small string against a heap one
            (String(repeating: "x", count: 40) + "a", String(repeating: "x", count: 40) + "b", #line),
            ("陈美玲", "🥜", #line),
        ]
        for row in rows {
            XCTAssertTrue(ViewPath.precedesBytewise(row.a, row.b), "\(row.a) < \(row.b)", line: row.line)
            XCTAssertFalse(ViewPath.precedesBytewise(row.b, row.a), "\(row.b) < \(row.a)", line: row.line)
            XCTAssertFalse(ViewPath.precedesBytewise(row.a, row.a), line: row.line)
            let pathA = "folder/" + row.a, pathB = "other/" + row.b
            XCTAssertTrue(ViewPath.precedesBytewise(pathA.dropFirst(7), pathB.dropFirst(6)), line: row.line)
            XCTAssertEqual(ViewPath.precedesBytewise(row.a, row.b), row.a.utf8.lexicographicallyPrecedes(row.b.utf8), line: row.line)
        }
    }

    func testSettledChildNamesKeepFileNameOnlyWhenNeeded() {
        var children = [MedicalDocument(value: "x", metadata: ["type": "addendum", "created": "2025-01-01T00:00:00.000Z"])]
        WritePlanner.settleName(of: &children, at: 0, shownAs: "01-addendum.md")
        XCTAssertNil(children[0].metadata["fileName"])
        WritePlanner.settleName(of: &children, at: 0, shownAs: "notes.md")
        XCTAssertEqual(children[0].metadata["fileName"]?.stringValue, "notes.md")
        WritePlanner.settleName(of: &children, at: 0, shownAs: "01-addendum.md")
        XCTAssertNil(children[0].metadata["fileName"])
    }

    // MARK: ListingBuilder and the view

    func testListingShowsDocumentsChildrenAttachmentsAndRawFiles() throws {
        let binder = try TestBinder()
        defer { binder.remove() }
        let writer = BinderWriter(repository: binder.repository, key: binder.key, author: Signature(name: "t", email: "t@t"))
        var visit = MedicalDocument(type: "visit", value: "# V\n")
        visit.children = [MedicalDocument(value: "A", metadata: ["type": "addendum", "created": "2025-01-01T00:00:00.000Z"])]
        try writer.putDocument(visit, at: "visits/v.json")
        try writer.putDocument(visit, at: "visits/w.json")  // a second record whose name is free
        try writer.putAttachment([1, 2, 3, 4, 5], fileName: "scan.pdf", folder: "visits")
        try writer.commit(message: "Add")
        _ = try binder.repository.commits.commitChanges(onto: try binder.repository.refs.branchTip(),
                                                changes: [.write(path: "visits/notes.txt", blob: try binder.repository.objects.writeBlob(Array("plain".utf8)))],
                                                message: "Add raw", author: Signature(name: "t", email: "t@t"))
        let view = try BinderView(repository: binder.repository, key: binder.key, logger: binder.logger)
        let entries = try view.list("visits")
        XCTAssertEqual(entries.map(\.name), ["notes.txt", "scan.pdf", "v.children", "v.md", "w.children", "w.md"])
        let byName = Dictionary(uniqueKeysWithValues: entries.map { ($0.name, $0.attributes) })
        XCTAssertEqual(byName["scan.pdf"]?.size, 5, "a sidecar's size is exact without decrypting it")
        XCTAssertEqual(byName["notes.txt"]?.readOnly, true, "what is not binder's is shown as stored, read-only")
        XCTAssertEqual(byName["v.md"]?.size, try TestBinder.read(view, "visits/v.md").count)
        XCTAssertEqual(try view.list("visits/v.children").map(\.name), ["01-addendum.md"])
        XCTAssertEqual(try TestBinder.read(view, "visits/scan.pdf"), [1, 2, 3, 4, 5])
        XCTAssertThrowsError(try view.list("visits/v.md")) { XCTAssertEqual($0 as? ViewError, .notDirectory("visits/v.md")) }
        XCTAssertThrowsError(try view.attributes("visits/none.md")) { XCTAssertEqual($0 as? ViewError, .notFound("visits/none.md")) }
        XCTAssertEqual(try view.list(".binder").map(\.name), ["status", "timeline", "tags", "history", "deleted"])
        XCTAssertFalse(try view.list("").map(\.name).contains(".binder"), "the control folder is not listed")
    }

    func testWritesPastTheLimitAreRefusedAtWriteAndStoreNothing() throws {
        let binder = try TestBinder(options: BinderView.Options(limits: WriteLimits(attachmentBytes: 1 << 20)))
        defer { binder.remove() }
        let view = binder.view
        try view.makeDirectory("labs")
        let before = try binder.repository.refs.branchTip()
        // A record: EFBIG at the write that crosses 65,535 bytes, whatever the offset.
        let record = try view.create("labs/big.md")
        let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 40_000)
        XCTAssertEqual(try chunk.withUnsafeBytes { try view.write(handle: record, offset: 0, $0) }, 40_000)
        XCTAssertThrowsError(try chunk.withUnsafeBytes { try view.write(handle: record, offset: 40_000, $0) }) {
            XCTAssertEqual(($0 as? WriteError)?.errno, .fileTooLarge)
        }
        XCTAssertThrowsError(try view.flush(handle: record, closing: true)) { XCTAssertEqual(($0 as? WriteError)?.errno, .fileTooLarge) }
        view.release(handle: record)
        // An attachment: at 2^40 and 2^62, and a truncate past its limit.
        let attachment = try view.create("labs/scan.bin")
        for offset in [1 << 40, 1 << 62, Int.max - 1] {
            XCTAssertThrowsError(try [UInt8(1), 2].withUnsafeBytes { try view.write(handle: attachment, offset: offset, $0) }) {
                XCTAssertEqual(($0 as? WriteError)?.errno, .fileTooLarge)
            }
        }
        XCTAssertThrowsError(try view.truncate(handle: attachment, size: 1 << 30)) { XCTAssertEqual(($0 as? WriteError)?.errno, .fileTooLarge) }
        view.release(handle: attachment)
        XCTAssertEqual(try binder.repository.refs.branchTip(), before, "a refused save stores nothing")
        XCTAssertEqual(try TestBinder.files(view), [], "and nothing is listed")
        XCTAssertTrue(view.reader.controls.statusText().contains("last_refused_save:"), view.reader.controls.statusText())
        XCTAssertTrue(view.reader.controls.statusText().contains("the limit is 1,048,576"), view.reader.controls.statusText())
        // truncate(2) by path on a record past 65,535 bytes.
        try binder.write("labs/small.md", Array("# S\n".utf8))
        XCTAssertThrowsError(try view.truncate("labs/small.md", size: 1 << 30)) { XCTAssertEqual(($0 as? WriteError)?.errno, .fileTooLarge) }
        XCTAssertEqual(String(decoding: try TestBinder.read(view, "labs/small.md"), as: UTF8.self).hasSuffix("# S\n"), true)
    }

    func testEachCommitTakesTheTimeOfItsSave() throws {
        let binder = try TestBinder()
        defer { binder.remove() }
        try binder.view.makeDirectory("visits")
        Thread.sleep(forTimeInterval: 1.1)
        try binder.write("visits/a.md", Array("# A\n".utf8))
        let log = try binder.repository.history.log(limit: 2)
        XCTAssertEqual(log.count, 2)
        XCTAssertGreaterThan(log[0].author.seconds, log[1].author.seconds, "a view's commits are not all stamped with one time")
    }
}
