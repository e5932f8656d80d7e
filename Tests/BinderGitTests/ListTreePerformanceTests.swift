import Foundation
import XCTest
@testable import BinderGit

final class ListTreePerformanceTests: XCTestCase {
    func testTenThousandEntries() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("big.git")
        let repo = try GitRepository.create(path: path, bare: true)
        // 100 folders of 100 files, written in one commit. Each blob write is
        // fsynced, so 100 distinct blobs are shared (file i of every folder).
        let blobs = try (0..<100).map { file in try repo.objects.writeBlob(Array("entry \(file)".utf8)) }
        var changes: [TreeChange] = []
        for folder in 0..<100 {
            for file in 0..<100 {
                let id = blobs[file]
                changes.append(.write(path: String(format: "folder-%03d/2026-01-01-entry-%03d.json", folder, file), blob: id))
            }
        }
        let commit = try repo.commits.commitChanges(onto: nil, changes: changes, message: "Add entries", author: testAuthor)

        _ = try repo.trees.listTree(commit: commit)  // warm the object cache as a mounted binder would have it
        var best = Double.infinity
        var entries: [TreeEntry] = []
        for _ in 0..<5 {
            let start = DispatchTime.now().uptimeNanoseconds
            entries = try repo.trees.listTree(commit: commit)
            best = min(best, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
        }
        let cold = try GitRepository.open(path: path)
        let coldStart = DispatchTime.now().uptimeNanoseconds
        let coldEntries = try cold.trees.listTree(commit: commit)
        let coldMs = Double(DispatchTime.now().uptimeNanoseconds - coldStart) / 1e6
        print("listTree of \(entries.count) entries: best \(String(format: "%.2f", best)) ms warm, "
              + "\(String(format: "%.2f", coldMs)) ms on a freshly opened repository")

        XCTAssertEqual(entries.count, 100 + 10_000)
        XCTAssertEqual(coldEntries, entries)
        XCTAssertEqual(entries.filter { $0.kind == .tree }.count, 100)
        XCTAssertEqual(entries.map(\.path), lines(try git("ls-tree", "-r", "-t", "--name-only", "main", in: path)))
    }
}
