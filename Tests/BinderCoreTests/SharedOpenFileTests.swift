@testable import BinderCore
import BinderCrypto
import BinderFormat
import XCTest

/// Several handles open on one file share its content, as POSIX has it (one file, one content):
/// a write through one is read through the others at once, and each store holds every
/// handle's writes. Found losing the first writer's bytes by a user's audit.
final class SharedOpenFileTests: XCTestCase {
    var binder: TestBinder!
    var view: BinderView { binder.view }

    override func setUpWithError() throws {
        binder = try TestBinder()
        try view.makeDirectory("labs")
        try view.makeDirectory("visits")
    }

    override func tearDown() { binder.remove() }

    private func write(_ handle: UInt64, at offset: Int, _ text: String) throws {
        _ = try Array(text.utf8).withUnsafeBytes { try view.write(handle: handle, offset: offset, $0) }
    }

    private func write(_ handle: UInt64, at offset: Int, _ bytes: [UInt8]) throws {
        _ = try bytes.withUnsafeBytes { try view.write(handle: handle, offset: offset, $0) }
    }

    private func close(_ handle: UInt64) throws {
        defer { view.release(handle: handle) }
        try view.flush(handle: handle, closing: true)
    }

    /// A writes at 0, B at 1 MiB, A closes, B closes: both are stored, on a new file and on a
    /// stored one, whichever closes first.
    func testTwoWritersAtDifferentOffsetsKeepBothWrites() throws {
        let first = [UInt8](repeating: 0xA1, count: 4096), second = [UInt8](repeating: 0xB2, count: 4096)
        for (path, firstCloses) in [("labs/new.bin", true), ("labs/new-2.bin", false)] {
            let a = try view.create(path)
            let b = try view.openForWriting(path, truncate: false)
            try write(a, at: 0, first)
            try write(b, at: 1 << 20, second)
            try close(firstCloses ? a : b)
            try close(firstCloses ? b : a)
            let stored = try TestBinder.read(view, path)
            XCTAssertEqual(stored.count, (1 << 20) + 4096, path)
            XCTAssertEqual(Array(stored[0..<4096]), first, path)
            XCTAssertEqual(Array(stored[(1 << 20)...]), second, path)
        }
        // A stored attachment, opened twice without O_TRUNC.
        let a = try view.openForWriting("labs/new.bin", truncate: false)
        let b = try view.openForWriting("labs/new.bin", truncate: false)
        try write(a, at: 10, [1, 2, 3])
        try write(b, at: 20, [4, 5, 6])
        try close(a)
        try close(b)
        let stored = try TestBinder.read(view, "labs/new.bin")
        XCTAssertEqual(Array(stored[10..<13]), [1, 2, 3])
        XCTAssertEqual(Array(stored[20..<23]), [4, 5, 6])
    }

    /// A reader opened while a writer holds unsaved bytes reads them (a write through one
    /// descriptor is seen through another at once); O_TRUNC empties the file for every handle.
    func testAWriteIsReadThroughAnotherHandleAtOnce() throws {
        try binder.write("visits/a.md", Array("# A\n".utf8))
        let size = try view.attributes("visits/a.md").size  // front matter, then "# A\n"
        let writer = try view.openForWriting("visits/a.md", truncate: false)
        try write(writer, at: size - 4, "# B")
        let reader = try view.open("visits/a.md")
        var bytes = [UInt8](repeating: 0, count: size)
        let count = try bytes.withUnsafeMutableBytes { try view.read(handle: reader, offset: 0, into: $0) }
        XCTAssertTrue(String(decoding: bytes[..<count], as: UTF8.self).hasSuffix("\n# B\n"), String(decoding: bytes, as: UTF8.self))
        view.release(handle: reader)
        let truncating = try view.openForWriting("visits/a.md", truncate: true)
        XCTAssertEqual(try view.attributes("visits/a.md").size, 0, "O_TRUNC empties the file for every handle")
        try write(writer, at: 0, "# C\n")
        try close(truncating)
        try close(writer)
        XCTAssertTrue(String(decoding: try TestBinder.read(view, "visits/a.md"), as: UTF8.self).hasSuffix("# C\n"))
    }

    /// Two handles fill one record, each half: the first close finds front matter that does not
    /// parse yet, and stores nothing without refusing; the second close stores the whole.
    func testARecordNotParsingWhileAnotherWriterHoldsItIsStoredAtThatClose() throws {
        let text = "---\nprovider: [Dr. Who, Dr. Watson]\n---\n# Two halves\n"
        let split = text.utf8.count / 2
        let a = try view.create("visits/halves.md")
        let b = try view.openForWriting("visits/halves.md", truncate: false)
        try write(a, at: 0, String(text.utf8.prefix(split))!)
        let before = try binder.repository.refs.branchTip()
        try close(a)
        XCTAssertEqual(try binder.repository.refs.branchTip(), before, "half a record is not stored")
        XCTAssertFalse(view.reader.controls.statusText().contains("last_refused_save:"), "nor refused")
        try write(b, at: split, String(text.utf8.dropFirst(split))!)
        try close(b)
        let shown = String(decoding: try TestBinder.read(view, "visits/halves.md"), as: UTF8.self)
        XCTAssertTrue(shown.contains("Dr. Watson") && shown.hasSuffix("# Two halves\n"), shown)
        // Alone, such a record is refused at its close, as before.
        let alone = try view.create("visits/alone.md")
        try write(alone, at: 0, String(text.utf8.prefix(split))!)
        XCTAssertThrowsError(try close(alone)) { XCTAssertEqual(($0 as? WriteError)?.errno, .invalidArgument) }
    }

    /// `rm patient-info.md` (tar -x does it before extracting the file) stores nothing and
    /// hides the record until a new one is stored in its place; a new view shows it again.
    func testPatientInfoIsHeldNotDeleted() throws {
        try view.makeDirectory("patient-info.children")
        try binder.write("patient-info.children/note.md", Array("# Note\n".utf8))
        let before = try binder.repository.refs.branchTip()
        try view.remove("patient-info.md")
        XCTAssertEqual(try binder.repository.refs.branchTip(), before, "the unlink stores nothing")
        XCTAssertThrowsError(try view.attributes("patient-info.md"))
        XCTAssertFalse(try view.list("").map(\.name).contains("patient-info.md"))
        let again = try BinderView(repository: binder.repository, key: binder.key, logger: binder.logger)
        XCTAssertNoThrow(try again.attributes("patient-info.md"), "the next mount shows it")
        // Written again (as tar extracts it): replaced, children kept.
        let handle = try view.create("patient-info.md")
        try write(handle, at: 0, "# Restored\n")
        try close(handle)
        XCTAssertTrue(String(decoding: try TestBinder.read(view, "patient-info.md"), as: UTF8.self).hasSuffix("# Restored\n"))
        XCTAssertEqual(try TestBinder.read(view, "patient-info.children/note.md").count > 0, true)
        XCTAssertEqual(try binder.documentCounts().children, 1)
    }
}
