import BinderCrypto
import BinderFormat
import Foundation
import XCTest

/// `binder new` (category templates, mounted or not) and `binder log` (history without content).
final class NewAndLogCommandTests: XCTestCase {
    var binder: MountedBinder!
    var key: NIP44.ConversationKey!
    let today = String(ISO8601DateFormatter().string(from: Date()).prefix(10))

    override func setUpWithError() throws {
        binder = try MountedBinder()
        key = try NIP44.ConversationKey(selfOf: try SecretKey(nsec: Fixtures.nsec))
    }

    override func tearDown() {
        binder?.unmount()
        binder = nil
    }

    func run(_ arguments: [String], stdin: String? = nil, environment: [String: String] = [:]) throws -> BinderRun {
        try binder.sandbox.run(arguments + ["--binder", binder.repository], stdin: stdin, environment: environment)
    }

    func storedValue(_ gitPath: String) throws -> String? {
        let payload = try shell("git -C '\(binder.repository)' show 'main:\(gitPath)'")
        guard payload.status == 0 else { return nil }
        return try MedicalDocument(plaintext: try NIP44.decrypt(payload: payload.stdout, key: key).copyBytes()).value
    }

    /// Each category's template, written into an unmounted binder (one commit per record).
    func testNewFillsTheCategorysTemplateInAnUnmountedBinder() throws {
        let rows: [(category: String, title: String?, path: String, starts: String)] = [
            ("visits", "Follow up", "visits/\(today)-follow-up", "# Follow up\n\nDate: \(today)\nProvider: \n"),
            ("visits", "Follow up", "visits/\(today)-follow-up-2", "# Follow up\n"),
            ("labs", nil, "labs/\(today)-lab", "# Lab\n\nTest: \nFacility: \nDate: \(today)\n\n## Results\n\n| Test | Result | Range |\n"),
            ("medications", "Metformin", "medications/\(today)-metformin", "# Metformin\n\nDrug: \nDosage: \nPrescriber: \n"),
            ("conditions/back-acne", nil, "conditions/back-acne/\(today)-condition", "# Condition\n\nDiagnosis: \nDate of diagnosis: \(today)\n"),
            ("insurance", "Card", "insurance/\(today)-card", "# Card\n\n"),
        ]
        for row in rows {
            // The title from standard input (`--title -`): a title is health data, never in argv.
            let created = try binder.sandbox.run(["new", row.category, "--passphrase-file", binder.passphraseFile, "--binder", binder.repository]
                                                 + (row.title == nil ? [] : ["--title", "-"]), stdin: row.title.map { $0 + "\n" })
            XCTAssertEqual(created.status, 0, created.stderr)
            XCTAssertFalse(created.stderr.contains("warning"), created.stderr)
            XCTAssertEqual(created.stdout, row.path + ".md\n")
            let value = try XCTUnwrap(try storedValue(row.path + ".json"), row.path)
            XCTAssertTrue(value.hasPrefix(row.starts), "\(row.path): \(value)")
        }
        // A title typed on the command line still works, with a warning.
        let literal = try run(["new", "visits", "--title", "Typed title", "--passphrase-file", binder.passphraseFile])
        XCTAssertEqual(literal.status, 0, literal.stderr)
        XCTAssertEqual(literal.stdout, "visits/\(today)-typed-title.md\n")
        XCTAssertTrue(literal.stderr.contains("binder: warning: --title on the command line could be read by every user"), literal.stderr)
        let refused = try run(["new", "visits", "--edit", "--passphrase-file", binder.passphraseFile])
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.stderr.contains("--edit needs the binder mounted"), refused.stderr)
    }

    func testNewWritesThroughTheMountUsesTheUsersTemplateAndOpensTheEditor() throws {
        try binder.mount()
        let config = binder.sandbox.root.appendingPathComponent("config").path
        try FileManager.default.createDirectory(atPath: config + "/binder/templates", withIntermediateDirectories: true)
        try Data("# {{title}} (mine)\n\nSeen on {{date}}.\n".utf8).write(to: URL(fileURLWithPath: config + "/binder/templates/visits.md"))
        let editor = "sh -c 'printf \"Edited.\\n\" >> \"$1\"' editor"
        let created = try run(["new", "visits", "--title", "Checkup", "--edit"], environment: ["XDG_CONFIG_HOME": config, "EDITOR": editor])
        XCTAssertEqual(created.status, 0, created.stderr)
        let path = binder.path("visits/\(today)-checkup.md")
        XCTAssertEqual(created.stdout, path + "\n")
        XCTAssertEqual(try storedValue("visits/\(today)-checkup.json"), "# Checkup (mine)\n\nSeen on \(today).\nEdited.\n")
    }

    /// A title typed on the command line is overwritten in binder's own argument area once
    /// read: the editor (a child of binder) finds binder's /proc/PID/cmdline without it.
    func testALiteralTitleIsHiddenFromTheCommandLineOnceRead() throws {
        try binder.mount()
        let seen = binder.sandbox.root.appendingPathComponent("cmdline").path
        let editor = try binder.sandbox.file("editor.sh", """
            p=$$
            while [ "$p" -gt 1 ]; do
              if [ "$(cat /proc/$p/comm)" = binder ]; then tr '\\0' ' ' < /proc/$p/cmdline > '\(seen)'; exit 0; fi
              p=$(awk '{print $4}' /proc/$p/stat)
            done
            exit 1
            """)
        let created = try run(["new", "visits", "--title", "Secret knee", "--edit"], environment: ["EDITOR": "sh '\(editor)'"])
        XCTAssertEqual(created.status, 0, created.stderr)
        let commandLine = try String(contentsOfFile: seen, encoding: .utf8)
        XCTAssertTrue(commandLine.contains(" new visits --title *********** --edit"), commandLine)
        XCTAssertFalse(commandLine.contains("Secret"), commandLine)
    }

    /// While the editor runs, binder ignores SIGINT and SIGQUIT (a terminal sends them to the
    /// whole foreground group, binder included): the editor decides what they mean. Here the
    /// editor, ignoring them itself, sends both to its process group, then saves.
    func testBinderOutlivesTheSignalsSentToTheEditorsGroup() throws {
        try binder.mount()
        let editor = try binder.sandbox.file("editor.sh", """
            trap '' INT QUIT
            kill -INT 0
            kill -QUIT 0
            printf 'After Ctrl-C.\\n' >> "$1"
            """)
        let created = try run(["new", "visits", "--title", "-", "--edit"], stdin: "Signals\n", environment: ["EDITOR": "sh '\(editor)'"])
        XCTAssertEqual(created.status, 0, created.stderr)
        XCTAssertEqual(try storedValue("visits/\(today)-signals.json"), "# Signals\n\nDate: \(today)\nProvider: \n\n## Reason for visit\n\n## Notes\nAfter Ctrl-C.\n")
    }

    func testLogListsTheBinderAndARecordWithoutContent() throws {
        let all = try run(["log"])
        XCTAssertEqual(all.status, 0, all.stderr)
        let lines = all.stdout.split(separator: "\n")
        let commits = try shell("git -C '\(binder.repository)' rev-list --count main").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(String(lines.count), commits)
        let pattern = #"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z  [0-9a-f]{7}  \S"#
        XCTAssertTrue(lines.allSatisfy { $0.range(of: pattern, options: .regularExpression) != nil }, "\(lines.prefix(3))")

        try binder.mount()
        let record = "visits/2025-02-25-annual-physical.md"
        let before = try run(["log", record]).stdout.split(separator: "\n").count
        XCTAssertGreaterThan(before, 0)
        XCTAssertEqual(try shell("printf 'More.\\n' >> '\(binder.path(record))'").status, 0)
        // The same record by its path in the mount, as JSON; the newest first.
        let json = try run(["log", binder.path(record), "--json"])
        XCTAssertEqual(json.status, 0, json.stderr)
        let entries = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: String]])
        XCTAssertEqual(entries.count, before + 1)
        XCTAssertEqual(entries.first?["commit"], try shell("git -C '\(binder.repository)' rev-parse main").stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        XCTAssertEqual(entries.first?["message"], "Update entry")
        XCTAssertFalse(json.stdout.contains("More.") || json.stdout.contains("Annual Physical"), "no content")
        let missing = try run(["log", "visits/none.md"])
        XCTAssertEqual(missing.status, 1)
        XCTAssertTrue(missing.stderr.contains("visits/none.md: no such record"), missing.stderr)
    }
}
