import Foundation
import XCTest

/// `.binder/` over a real mount of the fixture binder (docs/PRODUCT.md, "Views"): hidden from
/// backups, read-only, links that lead to the records, every version and every deleted record.
final class ViewsMountTests: MountedFixtureTestCase {
    func testTheViewsAreHiddenFromReaddirAndReachableByPath() throws {
        XCTAssertFalse(try shell("ls -a '\(mnt)'").stdout.contains(".binder"))
        XCTAssertEqual(try shell("find '\(mnt)' -name '.binder*' | wc -l").stdout.trimmingCharacters(in: .whitespacesAndNewlines), "0")
        XCTAssertEqual(try shell("ls -U '\(mnt)/.binder'").stdout, "status\ntimeline\ntags\nhistory\ndeleted\n")
        // A backup of the mount holds no view.
        let tar = try shell("tar cf - -C '\(mnt)' . | tar tf - | grep -c '\\.binder' || true")
        XCTAssertEqual(tar.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "0")
    }

    func testTheTimelineListsEveryRecordNewestFirstAsLinksIntoTheTree() throws {
        let listed = try shell("ls -U '\(mnt)/.binder/timeline'")
        XCTAssertEqual(listed.status, 0, listed.stderr)
        let names = listed.stdout.split(separator: "\n").map(String.init)
        let documents = try XCTUnwrap(try Fixtures.manifest()["documents"] as? [String: Any])
        XCTAssertEqual(names.count, documents.count, "one link per record (documents and attachments)")
        let days = names.map { String($0.prefix(10)) }
        XCTAssertEqual(days, days.sorted(by: >), "newest first by created")
        XCTAssertTrue(names.contains("2025-02-25 labs Lipid Panel.md"), "\(names)")
        // Every link resolves to a record of the tree, with the record's bytes.
        let broken = try shell("cd '\(mnt)/.binder/timeline' && for f in *; do [ -L \"$f\" ] && [ -e \"$f\" ] || echo \"$f\"; done")
        XCTAssertEqual(broken.stdout, "")
        XCTAssertEqual(try shell("readlink '\(mnt)/.binder/timeline/2025-02-25 labs Lipid Panel.md'").stdout,
                       "../../labs/2025-02-25-lipid-panel.md\n")
        XCTAssertEqual(try shell("cmp '\(mnt)/.binder/timeline/2025-02-25 labs Lipid Panel.md' '\(mnt)/labs/2025-02-25-lipid-panel.md'").status, 0)
        // Editing through the link edits the record.
        let edit = try shell("printf '\\nSeen again.\\n' >> '\(mnt)/.binder/timeline/2025-02-25 labs Lipid Panel.md'")
        XCTAssertEqual(edit.status, 0, edit.stderr)
        XCTAssertTrue(try stored("labs/2025-02-25-lipid-panel.json").value.hasSuffix("Seen again.\n"))
        // Tags: the same links, one folder per tag.
        let tagged = try shell("ls '\(mnt)/.binder/tags/drug'")
        XCTAssertEqual(tagged.status, 0, tagged.stderr)
        XCTAssertTrue(tagged.stdout.contains("2025-02-25 allergies Penicillin allergy.md"), tagged.stdout)
        XCTAssertEqual(try shell("readlink '\(mnt)/.binder/tags/drug/2025-02-25 allergies Penicillin allergy.md'").stdout,
                       "../../../allergies/2025-02-25-penicillin.md\n")
    }

    func testHistoryKeepsEveryVersionAndCpRestoresOne() throws {
        let record = "\(mnt)/visits/2025-02-25-annual-physical.md"
        let history = "\(mnt)/.binder/history/visits/2025-02-25-annual-physical.md"
        let original = try binder.read("visits/2025-02-25-annual-physical.md")
        let before = try shell("ls '\(history)' | wc -l").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(try shell("printf 'one more line\\n' >> '\(record)'").status, 0)
        XCTAssertEqual(try shell("sed -i 's/one more line/changed line/' '\(record)'").status, 0)
        let versions = try shell("ls -U '\(history)'").stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(versions.count, (Int(before) ?? 0) + 2, "\(versions)")
        let times = versions.map { $0.prefix(18) }  // within one second, the order is the commits'
        XCTAssertEqual(times, times.sorted(by: >), "newest first")
        XCTAssertTrue(versions.allSatisfy { $0.range(of: #"^\d{4}-\d{2}-\d{2}T\d{6}Z-[0-9a-f]{7}\.md$"#, options: .regularExpression) != nil })
        // The newest is the record as it is; the one before the edits is the original, exactly.
        XCTAssertEqual(try shell("cmp '\(history)/\(versions[0])' '\(record)'").status, 0)
        XCTAssertEqual(try binder.read(".binder/history/visits/2025-02-25-annual-physical.md/" + versions[2]), original)
        // Restoring is cp.
        let restore = try shell("cp '\(history)/\(versions[2])' '\(record)'")
        XCTAssertEqual(restore.status, 0, restore.stderr)
        XCTAssertEqual(try binder.read("visits/2025-02-25-annual-physical.md"), original)
    }

    func testDeletedRecordsKeepTheirLastVersionAndHistory() throws {
        let record = "medications/2025-02-25-metformin.md"
        let last = try binder.read(record)
        XCTAssertEqual(try shell("rm '\(binder.path(record))'").status, 0)
        XCTAssertEqual(try binder.read(".binder/deleted/" + record), last)
        let versions = try shell("ls '\(mnt)/.binder/history/\(record)'")
        XCTAssertEqual(versions.status, 0, versions.stderr)
        XCTAssertFalse(versions.stdout.isEmpty)
        // Restored by copying it back.
        XCTAssertEqual(try shell("cp '\(mnt)/.binder/deleted/\(record)' '\(binder.path(record))'").status, 0)
        XCTAssertEqual(try binder.read(record), last)
        XCTAssertEqual(try shell("ls '\(mnt)/.binder/deleted/medications' 2>/dev/null").stdout, "", "no longer deleted")
    }

    /// The kernel keeps a name it looked up for 60 s and a missing one for 5 s; under `.binder`
    /// each commit drops them. Without that, a record deleted after its name was looked up in
    /// `deleted/` stayed missing there for 5 s, and once restored stayed there for a minute
    /// (`stat` yes, `cat` no such file), as did its timeline link.
    func testNamesInBinderFollowEachCommit() throws {
        let record = "labs/2025-02-25-lipid-panel.md"
        let deleted = "\(mnt)/.binder/deleted/\(record)"
        let link = "\(mnt)/.binder/timeline/2025-02-25 labs Lipid Panel.md"
        let content = try binder.read(record)
        // The kernel is given both names: the link exists, the deleted copy does not.
        XCTAssertEqual(try shell("[ -L '\(link)' ] && ls -l '\(mnt)/.binder/timeline' > /dev/null").status, 0)
        XCTAssertNotEqual(try shell("stat '\(deleted)'").status, 0)

        XCTAssertEqual(try shell("rm '\(binder.path(record))'").status, 0)
        // Within moments (the kernel is told right after the commit), not after the kernel's 5 s.
        try eventually(2, "the deleted record shows in deleted/") { try shell("[ -f '\(deleted)' ]").status == 0 }
        try eventually(2, "the timeline link of the deleted record goes") { try shell("[ -L '\(link)' ]").status != 0 }
        XCTAssertEqual(try binder.read(".binder/deleted/" + record), content)

        XCTAssertEqual(try shell("cp '\(deleted)' '\(binder.path(record))'").status, 0)
        // Restored: gone from deleted/ for stat as for ls, not after the kernel's minute.
        try eventually(2, "the restored record leaves deleted/") { try shell("[ -e '\(deleted)' ]").status != 0 }
        try eventually(2, "the timeline link comes back") { try shell("[ -L '\(link)' ]").status == 0 }
        XCTAssertEqual(try shell("cat '\(link)'").stdout, String(decoding: content, as: UTF8.self))
    }

    /// The kernel keeps each link's target once read (FUSE_CAP_CACHE_SYMLINKS). A link that
    /// keeps its name while its record moves (same day, category and title) must lead to the
    /// record's new place once the move is committed, not to where the kernel last read.
    func testALinkWhoseRecordMovesLeadsToItsNewPlace() throws {
        let link = "\(mnt)/.binder/timeline/2025-02-25 labs Lipid Panel.md"
        let tagLink = "\(mnt)/.binder/tags/drug/2025-02-25 allergies Penicillin allergy.md"
        // Both targets read, by `ls -l` (readdirplus) and by readlink after a lookup.
        XCTAssertEqual(try shell("ls -l '\(mnt)/.binder/timeline' '\(mnt)/.binder/tags/drug' > /dev/null").status, 0)
        XCTAssertEqual(try shell("readlink '\(link)'").stdout, "../../labs/2025-02-25-lipid-panel.md\n")
        XCTAssertEqual(try shell("readlink '\(tagLink)'").stdout, "../../../allergies/2025-02-25-penicillin.md\n")

        let moves = try shell("""
            mv '\(mnt)/labs/2025-02-25-lipid-panel.md' '\(mnt)/labs/lipids.md' && \
            mv '\(mnt)/allergies/2025-02-25-penicillin.md' '\(mnt)/allergies/penicillin.md'
            """)
        XCTAssertEqual(moves.status, 0, moves.stderr)
        try eventually(2, "the timeline link leads to the moved record") {
            try shell("readlink '\(link)'").stdout == "../../labs/lipids.md\n"
        }
        try eventually(2, "the tag link leads to the moved record") {
            try shell("readlink '\(tagLink)'").stdout == "../../../allergies/penicillin.md\n"
        }
        XCTAssertEqual(try shell("cmp '\(link)' '\(mnt)/labs/lipids.md' && cmp '\(tagLink)' '\(mnt)/allergies/penicillin.md'").status, 0)
        // `ls -l` shows the new targets too.
        let listed = try shell("ls -l '\(mnt)/.binder/timeline' | grep 'Lipid Panel'").stdout
        XCTAssertTrue(listed.hasSuffix("-> ../../labs/lipids.md\n"), listed)
    }

    func testEveryChangeInBinderIsEROFS() throws {
        let attempts = [
            "touch '\(mnt)/.binder/new'",
            "echo x > '\(mnt)/.binder/status'",
            "mkdir '\(mnt)/.binder/timeline/x'",
            "rm '\(mnt)/.binder/timeline/2025-02-25 labs Lipid Panel.md'",
            "mv '\(mnt)/.binder/history' '\(mnt)/.binder/h'",
            "mv '\(mnt)/visits/2025-02-25-annual-physical.md' '\(mnt)/.binder/deleted/x.md'",
            "ln -s x '\(mnt)/.binder/link'",
            "rmdir '\(mnt)/.binder/tags'",
            "chmod 777 '\(mnt)/.binder/status'",
            "chown \(getuid()):\(getgid()) '\(mnt)/.binder/status'",
        ]
        for attempt in attempts {
            let run = try shell("(" + attempt + ") 2>&1")
            XCTAssertNotEqual(run.status, 0, attempt)
            XCTAssertTrue(run.stdout.contains("Read-only file system"), "\(attempt): \(run.stdout)")
        }
        XCTAssertEqual(try shell("[ -e '\(mnt)/visits/2025-02-25-annual-physical.md' ]").status, 0)
    }

    func testViewsVisibleListsTheFolder() throws {
        binder.unmount()
        try binder.mount(["--views", "visible"])
        XCTAssertTrue(try shell("ls -a '\(mnt)'").stdout.split(separator: "\n").contains(".binder"))
        XCTAssertEqual(try shell("ls '\(mnt)/.binder/timeline' | wc -l").status, 0)
    }
}
