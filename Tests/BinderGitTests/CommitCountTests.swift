import Foundation
import XCTest
@testable import BinderGit

/// `aheadBehind` counts what a mount's status shows as pending commits. It keeps its last
/// answer and counts a branch that moved forward from there; each row is asked in turn (so a
/// row is answered from the rows before it) and held to stock git's `rev-list --count`.
final class CommitCountTests: XCTestCase {
    func testCountsEqualStockGitAskedInAnyOrder() throws {
        let tmp = try TemporaryDirectory()
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        var step = 0
        func commit(onto parent: ObjectID?, branch: String = "main", merging other: ObjectID? = nil) throws -> ObjectID {
            step += 1
            return try repo.commits.commitChanges(onto: parent, changes: [.write(path: "f\(step % 7).json", blob: try repo.objects.writeBlob(Array("\(step)".utf8)))],
                                          message: "Edit", author: testAuthor, branch: branch, mergedParents: other.map { [$0] } ?? [])
        }
        // A main line of 20 commits; a side line of 7 from its 5th; their merge; 3 more.
        var main: [ObjectID] = []
        for _ in 0..<20 { main.append(try commit(onto: main.last)) }
        try git("branch", "side", main[4].hex, in: path)
        var side: [ObjectID] = [main[4]]
        for _ in 0..<7 { side.append(try commit(onto: side.last, branch: "side")) }
        let merge = try commit(onto: main.last, merging: side.last)
        var after = [merge]
        for _ in 0..<3 { after.append(try commit(onto: after.last)) }
        let tip = after.last!

        let rows: [(String, local: ObjectID?, upstream: ObjectID?)] = [
            ("a tip, first asked", main[9], nil),
            ("the same tip again", main[9], nil),
            ("moved forward", main[19], nil),
            ("forward over a merge (the side line counts)", merge, nil),
            ("forward again", tip, nil),
            ("moved back", main[14], nil),
            ("moved to another line", side.last!, nil),
            ("a merge seen from its side line", tip, nil),
            ("ahead of the server", tip, main[9]),
            ("behind the server", main[9], tip),
            ("diverged from the server", main[19], side.last!),
            ("nothing local", nil, main[19]),
            ("nothing at all", nil, nil),
            ("back to the tip", tip, nil),
        ]
        for (name, local, upstream) in rows {
            func revListCount(_ from: ObjectID?, _ hiding: ObjectID?) throws -> Int {
                guard let from else { return 0 }
                let output = try gitData(["rev-list", "--count", from.hex] + (hiding.map { ["^" + $0.hex] } ?? []), in: path)
                return Int(String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))!
            }
            let counted = try repo.history.aheadBehind(local: local, upstream: upstream)
            XCTAssertEqual(counted.ahead, try revListCount(local, upstream), name)
            XCTAssertEqual(counted.behind, try revListCount(upstream, local), name)
        }
    }
}
