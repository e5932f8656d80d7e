import BinderCore
import BinderCrypto
import BinderFormat
import BinderGit
import Foundation
import Logging
import SystemPackage
import XCTest

/// The write mode of a share a doctor opened (`WriteMode.onlyNewRecords`, `binder open-share`)
/// as a table, in the style of WriteRuleTests: the patient's binder is made with `patient`
/// steps; a view in that mode is opened on it; the doctor takes `doctor` steps, then one more,
/// and the row says what follows. What the share held is read-only (EROFS); new `.md` notes
/// (in a folder, or in `X.children/` as children of X) are the doctor's to write, rewrite and
/// remove; every commit is named by the mode.
final class WritePolicyTests: XCTestCase {
    typealias Step = WriteRuleTests.Step

    enum Outcome {
        case refused(Errno)
        /// Done: the view shows exactly `files`; `contains` as in WriteRuleTests; git holds
        /// `children` children in all.
        case shows(files: [String], contains: [String: String] = [:], children: Int? = nil)
    }

    struct Row {
        let rule: String
        let patient: [Step]
        let doctor: [Step]
        let when: Step
        let then: Outcome
        init(_ rule: String, patient: [Step] = Row.shared, doctor: [Step] = [], when: Step, then: Outcome) {
            self.rule = rule
            self.patient = patient
            self.doctor = doctor
            self.when = when
            self.then = then
        }

        /// A visit with one child, and an empty folder.
        static let shared: [Step] = [.mkdir("visits"), .write("visits/a.md", WriteRuleTests.note), .mkdir("visits/a.children"),
                                     .write("visits/a.children/01-addendum.md", WriteRuleTests.addendum), .mkdir("labs")]
    }

    static let note = "---\ntype: visit\ncreated: \"2026-01-04T00:00:00.000Z\"\n---\nSeen today.\n"
    static let held = ["visits/a.children/01-addendum.md", "visits/a.md"]
    static let message = "Doctor note added 2026-01-04"

    static let rows: [Row] = [
        Row("a held record cannot be rewritten", when: .write("visits/a.md", note), then: .refused(.readOnlyFileSystem)),
        Row("nor patient-info", when: .write("patient-info.md", note), then: .refused(.readOnlyFileSystem)),
        Row("nor a held child", when: .write("visits/a.children/01-addendum.md", note), then: .refused(.readOnlyFileSystem)),
        Row("a held record cannot be removed", when: .remove("visits/a.md"), then: .refused(.readOnlyFileSystem)),
        Row("a held child cannot be removed", when: .remove("visits/a.children/01-addendum.md"), then: .refused(.readOnlyFileSystem)),
        Row("a held record cannot be renamed", when: .rename("visits/a.md", "visits/b.md"), then: .refused(.readOnlyFileSystem)),
        Row("nor moved aside as an editor's backup", when: .rename("visits/a.md", "visits/a.md~"), then: .refused(.readOnlyFileSystem)),
        Row("nothing is renamed onto a held record", doctor: [.write("visits/n.md", note)], when: .rename("visits/n.md", "visits/a.md"),
            then: .refused(.readOnlyFileSystem)),
        Row("a held record keeps its times", when: .touch("visits/a.md", seconds: 1_700_000_000), then: .refused(.readOnlyFileSystem)),
        Row("a held folder cannot be removed", when: .rmdir("labs"), then: .refused(.readOnlyFileSystem)),
        Row("a held folder cannot be renamed", when: .rename("labs", "labs2"), then: .refused(.readOnlyFileSystem)),
        Row("no new folders", when: .mkdir("notes"), then: .refused(.notPermitted)),
        Row("no attachments", when: .writeBytes("visits/scan.pdf", [1, 2, 3]), then: .refused(.notPermitted)),
        Row("a new .md note in a held folder is a new record", when: .write("visits/n.md", note),
            then: .shows(files: held + ["visits/n.md"], contains: ["visits/n.md": "Seen today."], children: 1)),
        Row("a new .md note at the root too", when: .write("n.md", note),
            then: .shows(files: held + ["n.md"], contains: ["n.md": "Seen today."], children: 1)),
        Row("the doctor's own note can be rewritten", doctor: [.write("visits/n.md", note)],
            when: .write("visits/n.md", note.replacingOccurrences(of: "Seen today.", with: "Seen again.")),
            then: .shows(files: held + ["visits/n.md"], contains: ["visits/n.md": "Seen again."])),
        Row("renamed", doctor: [.write("visits/n.md", note)], when: .rename("visits/n.md", "visits/m.md"),
            then: .shows(files: held + ["visits/m.md"], contains: ["visits/m.md": "Seen today."])),
        Row("and removed", doctor: [.write("visits/n.md", note)], when: .remove("visits/n.md"), then: .shows(files: held)),
        Row("an editor's save (swap file renamed over the note) is a write of the note",
            doctor: [.write("visits/n.md", note), .write("visits/.n.md.swp", note.replacingOccurrences(of: "Seen today.", with: "Edited."))],
            when: .rename("visits/.n.md.swp", "visits/n.md"),
            then: .shows(files: held + ["visits/n.md"], contains: ["visits/n.md": "Edited."])),
        Row("a note in X.children is a new child of the held record X", when: .write("visits/a.children/dr-lee.md", note),
            then: .shows(files: held + ["visits/a.children/dr-lee.md"], contains: ["visits/a.children/dr-lee.md": "Seen today."], children: 2)),
        Row("also where X had no children: mkdir X.children first",
            patient: [.mkdir("visits"), .write("visits/a.md", WriteRuleTests.note)], doctor: [.mkdir("visits/a.children")],
            when: .write("visits/a.children/dr-lee.md", note),
            then: .shows(files: ["visits/a.children/dr-lee.md", "visits/a.md"], children: 1)),
        Row("the doctor's child can be rewritten", doctor: [.write("visits/a.children/dr-lee.md", note)],
            when: .write("visits/a.children/dr-lee.md", note.replacingOccurrences(of: "Seen today.", with: "Seen again.")),
            then: .shows(files: held + ["visits/a.children/dr-lee.md"], contains: ["visits/a.children/dr-lee.md": "Seen again."], children: 2)),
    ]

    func testEveryRule() throws {
        for row in Self.rows { try check(row) }
    }

    func testEverythingModeIsTheDefault() throws {
        let binder = try TestBinder()
        defer { binder.remove() }
        try binder.apply(.mkdir("visits"))
        try binder.apply(.write("visits/a.md", WriteRuleTests.note))
        let again = try BinderView(repository: binder.repository, key: binder.key, logger: binder.logger)
        try Self.apply(.remove("visits/a.md"), on: again)
        XCTAssertEqual(try TestBinder.files(again), [])
    }

    private func check(_ row: Row) throws {
        let binder = try TestBinder()
        defer { binder.remove() }
        for step in row.patient {
            do { try binder.apply(step) } catch { return XCTFail("\(row.rule): patient's \(step) failed: \(error)") }
        }
        var options = BinderView.Options()
        options.mode = .onlyNewRecords(commitMessage: { Self.message })
        let doctor = try BinderView(repository: binder.repository, key: binder.key, logger: binder.logger, options: options)
        let shared = try binder.repository.refs.branchTip()
        for step in row.doctor {
            do { try Self.apply(step, on: doctor) } catch { return XCTFail("\(row.rule): doctor's \(step) failed: \(error)") }
        }
        let before = try binder.repository.refs.branchTip()
        let outcome = Result { try Self.apply(row.when, on: doctor) }
        switch (row.then, outcome) {
        case (.refused(let errno), .failure(let error)):
            XCTAssertEqual((error as? WriteError)?.errno, errno, "\(row.rule): \(error)")
            XCTAssertEqual(try binder.repository.refs.branchTip(), before, "\(row.rule): a refusal changed main")
        case (.refused(let errno), .success):
            XCTFail("\(row.rule): \(row.when) succeeded; expected \(errno)")
        case (_, .failure(let error)):
            XCTFail("\(row.rule): \(row.when) failed: \(error)")
        case (.shows(let files, let contains, let children), .success):
            let view = try BinderView(repository: binder.repository, key: binder.key, logger: binder.logger)
            XCTAssertEqual(try TestBinder.files(view), files.sorted(), row.rule)
            for (path, text) in contains {
                let content = String(decoding: try TestBinder.read(view, path), as: UTF8.self)
                XCTAssertTrue(content.contains(text), "\(row.rule): \(path) holds \(content)")
            }
            if let children { XCTAssertEqual(try binder.documentCounts().children, children, "\(row.rule): children") }
            // Every commit the doctor made carries the mode's message, and nothing else.
            var commit = try XCTUnwrap(try binder.repository.refs.branchTip())
            while commit != shared {
                let info = try binder.repository.commits.commit(commit)
                XCTAssertEqual(info.summary, Self.message, row.rule)
                commit = try XCTUnwrap(info.parents.first)
            }
            XCTAssertTrue(try BinderVerifier(repository: binder.repository, key: binder.key).verify().problems.isEmpty, "\(row.rule): verify")
        }
    }

    /// As TestBinder.apply, on another view of the same binder.
    static func apply(_ step: Step, on view: BinderView) throws {
        switch step {
        case .mkdir(let path): try view.makeDirectory(path)
        case .write(let path, let text): try write(Array(text.utf8), to: path, on: view)
        case .writeBytes(let path, let bytes): try write(bytes, to: path, on: view)
        case .rename(let from, let to): try view.rename(from, to: to)
        case .remove(let path): try view.remove(path)
        case .rmdir(let path): try view.removeDirectory(path)
        case .touch(let path, let seconds): try view.setModified(path, to: Timestamp(seconds: seconds))
        }
    }

    static func write(_ bytes: [UInt8], to path: String, on view: BinderView) throws {
        let handle = (try? view.attributes(path)) == nil ? try view.create(path) : try view.openForWriting(path, truncate: true)
        defer { view.release(handle: handle) }
        _ = try bytes.withUnsafeBytes { try view.write(handle: handle, offset: 0, $0) }
        try view.flush(handle: handle, closing: true)
    }
}
