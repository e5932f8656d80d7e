import BinderCore
import BinderGit
import Foundation
import SystemPackage
import XCTest

/// The refusals that used to live in the FUSE bridge, now the writer's (`ViewWriter`): on a
/// read-only view (`Options.readOnly`, a `--read-only` mount) every change is EROFS, and so is
/// every change in `.binder/` on any view; each is refused before anything is looked up (a
/// name that does not exist is EROFS too, not ENOENT), and nothing reaches git. Rows: a change
/// and the view it is tried on.
final class ReadOnlyViewTests: XCTestCase {
    struct Row: Sendable {
        let change: String
        let readOnlyView: Bool
        let apply: @Sendable (BinderView) throws -> Void
    }

    static let rows: [Row] = [true, false].flatMap { readOnly -> [Row] in
        // On a writable view, the same changes aimed into `.binder/`.
        let record = readOnly ? "visits/a.md" : ".binder/status"
        let missing = readOnly ? "visits/none.md" : ".binder/none"
        let folder = readOnly ? "visits" : ".binder/timeline"
        return [
            Row(change: "store \(record)", readOnlyView: readOnly) { try $0.store(record, content: Array("x".utf8)) },
            Row(change: "store \(missing)", readOnlyView: readOnly) { try $0.store(missing, content: Array("x".utf8)) },
            Row(change: "create \(missing)", readOnlyView: readOnly) { _ = try $0.create(missing) },
            Row(change: "open \(record) for writing", readOnlyView: readOnly) { _ = try $0.openForWriting(record, truncate: false) },
            Row(change: "truncate \(record)", readOnlyView: readOnly) { try $0.truncate(record, size: 0) },
            Row(change: "remove \(record)", readOnlyView: readOnly) { try $0.remove(record) },
            Row(change: "remove \(missing)", readOnlyView: readOnly) { try $0.remove(missing) },
            Row(change: "rename \(record) away", readOnlyView: readOnly) { try $0.rename(record, to: "visits/b.md") },
            Row(change: "rename onto \(record)", readOnlyView: readOnly) { try $0.rename("visits/a.md", to: record) },
            Row(change: "back up \(record)", readOnlyView: readOnly) { try $0.rename(record, to: record + "~") },
            Row(change: "mkdir in \(folder)", readOnlyView: readOnly) { try $0.makeDirectory(folder + "/new") },
            Row(change: "rmdir \(folder)", readOnlyView: readOnly) { try $0.removeDirectory(folder) },
            Row(change: "symlink in \(folder)", readOnlyView: readOnly) { try $0.symlink("x", at: folder + "/.#lock") },
            Row(change: "times of \(record)", readOnlyView: readOnly) { try $0.setModified(record, to: Timestamp(seconds: 1_700_000_000)) },
            Row(change: "chmod \(record)", readOnlyView: readOnly) { try $0.refuseChanges(at: record) },
        ]
    }

    func testEveryChangeOnAReadOnlyViewOrInBinderIsEROFS() throws {
        let binder = try TestBinder()
        defer { binder.remove() }
        try binder.apply(.mkdir("visits"))
        try binder.apply(.write("visits/a.md", WriteRuleTests.note))
        let before = try binder.repository.refs.branchTip()
        let readOnly = try BinderView(repository: binder.repository, key: binder.key, logger: binder.logger,
                                      options: BinderView.Options(readOnly: true))
        let writable = try BinderView(repository: binder.repository, key: binder.key, logger: binder.logger)
        for row in Self.rows {
            let view = row.readOnlyView ? readOnly : writable
            XCTAssertThrowsError(try row.apply(view), row.change) { error in
                XCTAssertEqual((error as? WriteError)?.errno, .readOnlyFileSystem, "\(row.change): \(error)")
            }
        }
        XCTAssertEqual(try binder.repository.refs.branchTip(), before, "a refusal changed main")
        // What a read-only view shows is the binder as stored.
        XCTAssertEqual(try TestBinder.files(readOnly), ["visits/a.md"])
        XCTAssertTrue(String(decoding: try TestBinder.read(readOnly, "visits/a.md"), as: UTF8.self).contains("# Visit"))
    }
}
