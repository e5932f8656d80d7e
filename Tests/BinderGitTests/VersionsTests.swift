import Foundation
import XCTest
@testable import BinderGit

/// `versions(of:from:)` finds each commit's blob through its folder's tree, remembered by the
/// tree's id, and extends an earlier answer over the commits since. Held here to the plain
/// rule, read off every commit: a version is a commit whose blob at the path differs from the
/// blob of every parent.
final class VersionsTests: XCTestCase {
    func testVersionsEqualTheBlobOfEveryCommitComparedWithItsParents() throws {
        let tmp = try TemporaryDirectory()
        let repo = try GitRepository.create(path: tmp.sub("r.git"), bare: true)
        // Files at the root, in folders and nested; `x.json` is a file at times, a folder at others.
        let paths = ["a.json", "v/c.json", "v/d.json", "v/w/e.json", "x.json", "x.json/inner.json", "y/f.json"]
        // The answer extended after each commit from the one before (for a few paths).
        let followed = ["v/c.json", "x.json", "y/f.json"]
        var extended: [String: (tip: ObjectID, versions: [PathVersion])] = [:]
        let tip = try randomHistory(in: repo, paths: paths, steps: 150, changesAtMost: 2, removeOneIn: 4, contents: 6,
                                    mergeEvery: 25) { tip, step in
            for file in followed {
                let versions = try repo.history.versions(of: file, from: tip, extending: extended[file])
                XCTAssertEqual(versions, try repo.history.versions(of: file, from: tip), "\(file), step \(step)")
                extended[file] = (tip, versions)
            }
        }

        let history = try repo.history.commits(from: tip)
        func blob(_ file: String, _ commit: ObjectID) throws -> ObjectID? {
            guard let entry = try repo.trees.entry(at: file, commit: commit), entry.kind == .blob || entry.kind == .link else { return nil }
            return entry.id
        }
        var checked = 0
        for file in paths + ["root.json", "v/missing.json", "nowhere/a.json"] {
            var expected: [ObjectID] = []
            for commit in history {
                guard let current = try blob(file, commit.id) else { continue }
                if try commit.parents.allSatisfy({ try blob(file, $0) != current }) { expected.append(commit.id) }
            }
            let found = try repo.history.versions(of: file, from: tip)
            XCTAssertEqual(found.map(\.commit), expected, file)
            for version in found { XCTAssertEqual(version.blob, try blob(file, version.commit), file) }
            checked += expected.count
        }
        XCTAssertGreaterThan(checked, 100, "too few versions: the test tested little")
    }
}
