import BinderCore
import BinderCrypto
import BinderFormat
import BinderGit
import Foundation
import Logging
import SystemPackage
import XCTest

/// When secret memory runs out, the operation that needed it fails with ENOMEM (as the kernel
/// would answer) and the mount goes on: no trap, nothing stored changed, and everything works
/// again once memory is back. The arena's test limit stands in for a kernel refusing regions.
final class SecretMemoryExhaustionTests: XCTestCase {
    var directory: URL!
    var key: NIP44.ConversationKey!
    let logger = Logger(label: "test")
    let record = "visits/2026-02-09-follow-up.md"
    let content = Array("---\nprovider: Dr. Who\n---\n# Follow-up\n\nAll good.\n".utf8)

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("binder-enomem-\(UUID().uuidString)")
        key = try NIP44.ConversationKey(selfOf: try SecretKey.generate())
        _ = try BinderCreator.create(at: directory.path, key: key, patientName: "Test Patient", dateOfBirth: nil,
                                     author: Signature(name: "t", email: "t@t"))
    }

    override func tearDown() {
        SecureBytes.limitForTesting(nil)
        try? FileManager.default.removeItem(at: directory)
    }

    func view() throws -> BinderView {
        try BinderView(repository: try GitRepository.open(path: directory.path), key: key, logger: logger)
    }

    func read(_ view: BinderView, _ path: String) throws -> [UInt8] {
        let handle = try view.open(path)
        defer { view.release(handle: handle) }
        var out = [UInt8](repeating: 0, count: try view.attributes(path).size)
        _ = try out.withUnsafeMutableBytes { try view.read(handle: handle, offset: 0, into: $0) }
        return out
    }

    func assertNoMemory<T>(_ operation: @autoclosure () throws -> T, _ what: String, line: UInt = #line) {
        do {
            _ = try operation()
            XCTFail("\(what) should fail without secret memory", line: line)
        } catch let error as ViewError {
            XCTAssertEqual(error.errno, .noMemory, "\(what): \(error)", line: line)
        } catch let error as WriteError {
            XCTAssertEqual(error.errno, .noMemory, "\(what): \(error)", line: line)
        } catch {
            XCTFail("\(what): unexpected \(error)", line: line)
        }
    }

    func testReadsAndWritesFailWithENOMEMThenRecover() throws {
        let writer = try view()
        try writer.makeDirectory("visits")
        try writer.store(record, content: content)
        let tip = try GitRepository.open(path: directory.path).refs.branchTip()
        let shown = try read(writer, record)  // as rendered, with the metadata the save added
        let editing = try writer.openForWriting(record, truncate: false)
        let reader = try view()  // nothing cached: reading the record needs secret memory

        SecureBytes.limitForTesting(SecureBytes.bytesInUseForTesting)
        // Listing a folder decrypts its records: refused, not shown as stored files.
        assertNoMemory(try reader.list("visits"), "listing")
        assertNoMemory(try reader.open(record), "opening for reading")
        assertNoMemory(try reader.open(".binder/status"), "reading the status file")
        let more = Array("More.\n".utf8)
        assertNoMemory(try more.withUnsafeBytes { try writer.write(handle: editing, offset: shown.count, $0) }, "writing")
        assertNoMemory(try writer.create("visits/new.md"), "creating a file")
        assertNoMemory(try writer.create("visits/.new.md.swp"), "creating a scratch file")
        // (A file another handle holds open shares that handle's bytes: O_TRUNC of it needs none.)
        assertNoMemory(try writer.openForWriting("patient-info.md", truncate: true), "opening with O_TRUNC")
        XCTAssertFalse(try writer.flush(handle: editing, closing: true), "the refused write left nothing to store")
        XCTAssertEqual(try GitRepository.open(path: directory.path).refs.branchTip(), tip, "nothing was committed")

        // Memory back: the same operations work, and what is stored is what was saved.
        SecureBytes.limitForTesting(nil)
        XCTAssertEqual(try reader.list("visits").map(\.name), ["2026-02-09-follow-up.md"])
        XCTAssertEqual(try read(reader, record), shown)
        _ = try more.withUnsafeBytes { try writer.write(handle: editing, offset: shown.count, $0) }
        XCTAssertTrue(try writer.flush(handle: editing, closing: true))
        _ = writer.release(handle: editing)
        let saved = try FrontMatter.parse(try read(try view(), record))
        XCTAssertEqual(saved.value, "# Follow-up\n\nAll good.\nMore.\n")
    }
}
