import BinderCore
import BinderCrypto
import BinderFormat
import BinderGit
import Foundation
import Synchronization
import XCTest

/// `BinderView.commitBeside`: a commit the mount's own process makes beside the view (an
/// import) is serialised with the view's saves and shown at once, without a kernel.
final class CommitBesideTests: XCTestCase {
    func document(_ title: String) -> MedicalDocument { MedicalDocument(type: "visit", value: "# \(title)\n", now: "2026-12-06T10:00:00.000Z") }

    func testACommitBesideIsShownAtOnceAndTheNextSaveGoesOnTopOfIt() throws {
        let binder = try TestBinder()
        defer { binder.remove() }
        try binder.apply(.mkdir("visits"))
        try binder.apply(.write("visits/a.md", "# A\n"))
        XCTAssertEqual(try TestBinder.files(binder.view), ["visits/a.md"])
        let announced = Mutex<[ObjectID]>([])
        binder.view.setSyncHooks(onCommit: { id in announced.withLock { $0.append(id) } }, status: nil)
        let before = try binder.repository.refs.branchTip()
        let made = try binder.view.commitBeside { tip in
            XCTAssertEqual(tip, before, "given the branch's tip")
            let writer = BinderWriter(repository: binder.repository, key: binder.key, author: Signature(name: "t", email: "t@t"))
            try writer.putDocument(document("B"), at: "visits/b.json")
            return try writer.commit(message: "Import records")
        }
        let id = try XCTUnwrap(made)
        XCTAssertEqual(try binder.repository.refs.branchTip(), id)
        // Shown at once, listing and content, with no reload asked for.
        XCTAssertEqual(try TestBinder.files(binder.view), ["visits/a.md", "visits/b.md"])
        XCTAssertTrue(String(decoding: try TestBinder.read(binder.view, "visits/b.md"), as: UTF8.self).contains("# B\n"))
        XCTAssertEqual(announced.withLock { $0 }, [id], "sync is told, as of the view's own commits")
        // The next save is planned on top of it: nothing of it is lost.
        try binder.apply(.write("visits/c.md", "# C\n"))
        let tip = try XCTUnwrap(try binder.repository.refs.branchTip())
        XCTAssertEqual(try binder.repository.commits.commit(tip).parents, [id])
        let paths = try binder.repository.trees.listTree(commit: tip).map(\.path)
        XCTAssertTrue(paths.contains("visits/b.json") && paths.contains("visits/c.json"), "\(paths)")
        // Nothing to store: nothing changes.
        XCTAssertNil(try binder.view.commitBeside { _ in nil })
        XCTAssertEqual(try binder.repository.refs.branchTip(), tip)
    }

    /// A save that comes while a commit is made beside waits for it, then lands on top: both kept.
    func testASaveMeanwhileWaitsAndIsKept() throws {
        let binder = try TestBinder()
        defer { binder.remove() }
        try binder.apply(.mkdir("visits"))
        let saved = DispatchSemaphore(value: 0)
        let failure = Mutex<String?>(nil)
        let view = binder.view
        let made = try binder.view.commitBeside { _ in
            Thread.detachNewThread {
                do {
                    let handle = try view.create("visits/saved.md")
                    defer { view.release(handle: handle) }
                    _ = try Array("# Saved\n".utf8).withUnsafeBytes { try view.write(handle: handle, offset: 0, $0) }
                    try view.flush(handle: handle, closing: true)
                } catch {
                    failure.withLock { $0 = "\(error)" }
                }
                saved.signal()
            }
            // Gives the save time to reach the write lock (the test holds either way).
            Thread.sleep(forTimeInterval: 0.2)
            let writer = BinderWriter(repository: binder.repository, key: binder.key, author: Signature(name: "t", email: "t@t"))
            try writer.putDocument(document("Imported"), at: "visits/imported.json")
            return try writer.commit(message: "Import records")
        }
        saved.wait()
        XCTAssertNil(failure.withLock { $0 })
        let tip = try XCTUnwrap(try binder.repository.refs.branchTip())
        XCTAssertEqual(try binder.repository.commits.commit(tip).parents, [try XCTUnwrap(made)])
        XCTAssertEqual(try TestBinder.files(binder.view), ["visits/imported.md", "visits/saved.md"])
    }
}
