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
        let path = tmp.sub("r.git")
        let repo = try GitRepository.create(path: path, bare: true)
        var random = SystemRandomNumberGenerator()
        // Files at the root, in folders, nested; `x.json` is a file at times and a folder at
        // others; `v` changes in most commits, `y` in few.
        let paths = ["a.json", "v/c.json", "v/d.json", "v/w/e.json", "x.json", "x.json/inner.json", "y/f.json"]
        var present: [String: Int] = [:]
        var tip = try repo.commitChanges(onto: nil, changes: [.write(path: "root.json", blob: try repo.writeBlob([0]))],
                                         message: "Add", author: testAuthor)
        var side: ObjectID? = nil
        // The answer extended after each commit from the one before (for a few paths).
        let followed = ["v/c.json", "x.json", "y/f.json"]
        var extended = Dictionary(uniqueKeysWithValues: try followed.map { ($0, (tip: tip, versions: try repo.versions(of: $0, from: tip))) })
        for step in 0..<150 {
            var changes: [TreeChange] = []
            for _ in 0..<Int.random(in: 1...2, using: &random) {
                let chosen = paths.randomElement(using: &random)!
                let twin = chosen == "x.json" ? "x.json/inner.json" : chosen == "x.json/inner.json" ? "x.json" : nil
                guard !changes.contains(where: { $0.path == chosen || $0.path == twin }) else { continue }
                if present[chosen] != nil, Int.random(in: 0..<4, using: &random) == 0 {
                    changes.append(.delete(path: chosen))
                    present[chosen] = nil
                } else {
                    if let twin, present[twin] != nil { changes.append(.delete(path: twin)); present[twin] = nil }
                    // Now and then the same content again (a version equal to an older one).
                    let version = Int.random(in: 0..<6, using: &random)
                    changes.append(.write(path: chosen, blob: try repo.writeBlob(Array("\(chosen) \(version)".utf8))))
                    present[chosen] = version
                }
            }
            guard !changes.isEmpty else { continue }
            if step % 25 == 5 { side = tip }
            if step % 25 == 20, let other = side {
                tip = try repo.commitChanges(onto: tip, changes: changes, message: "Merge", author: testAuthor, mergedParents: [other])
            } else {
                tip = try repo.commitChanges(onto: tip, changes: changes, message: "Edit", author: testAuthor)
            }
            for file in followed {
                let versions = try repo.versions(of: file, from: tip, extending: extended[file])
                XCTAssertEqual(versions, try repo.versions(of: file, from: tip), "\(file), step \(step)")
                extended[file] = (tip, versions)
            }
        }

        let history = try repo.history(from: tip)
        func blob(_ file: String, _ commit: ObjectID) throws -> ObjectID? {
            guard let entry = try repo.entry(at: file, commit: commit), entry.kind == .blob || entry.kind == .link else { return nil }
            return entry.id
        }
        var checked = 0
        for file in paths + ["root.json", "v/missing.json", "nowhere/a.json"] {
            var expected: [ObjectID] = []
            for commit in history {
                guard let current = try blob(file, commit.id) else { continue }
                if try commit.parents.allSatisfy({ try blob(file, $0) != current }) { expected.append(commit.id) }
            }
            let found = try repo.versions(of: file, from: tip)
            XCTAssertEqual(found.map(\.commit), expected, file)
            for version in found { XCTAssertEqual(version.blob, try blob(file, version.commit), file) }
            checked += expected.count
        }
        XCTAssertGreaterThan(checked, 100, "too few versions: the test tested little")
    }
}
