import BinderCrypto
import BinderFormat
import Foundation
import XCTest

/// `binder import`'s leftovers of issue 41 with the real binary: the progress line on a failure,
/// health cards in folders and in QR pictures, a folder's total size, file times.
final class ImportCardsAndLimitsTests: MountedFixtureTestCase {
    /// The fixture binder, not mounted (import writes straight into git).
    override func setUpWithError() throws {
        binder = try MountedBinder()
        key = try NIP44.ConversationKey(selfOf: try SecretKey(nsec: Fixtures.nsec))
    }

    func fixture(_ name: String) -> String { ImportCommandTests.fixtures + "/" + name }

    func importing(_ arguments: [String], stdin: String? = nil) throws -> BinderRun {
        try binder.sandbox.run(["import"] + arguments + ["--binder", binder.repository, "--passphrase-file", binder.passphraseFile], stdin: stdin)
    }

    /// On a terminal (a pty from util-linux's script) every failure, before or after the binder
    /// is opened, erases the progress line before its message: it never ends a half-drawn line.
    func testAFailureOnATerminalStartsOnAClearedLine() throws {
        let badJSON = try binder.sandbox.file("bundle.json", "{\"resourceType\": \"Bundle\",\n\"entry\": [}\n")
        let wrongPassphrase = try binder.sandbox.file("wrong-passphrase", "not the passphrase\n")
        let rows: [(source: String, passphraseFile: String, message: String)] = [
            (badJSON, binder.passphraseFile, "bundle.json, line 2: malformed JSON"),
            (fixture("ccd.xml"), wrongPassphrase, "binder: "),
        ]
        let count = try commits()
        for row in rows {
            let command = "'\(BinderSandbox.binary)' import '\(row.source)' --binder '\(binder.repository)' --passphrase-file '\(row.passphraseFile)'"
            let run = try shell("script -qec \"\(command)\" /dev/null", environment: ["BINDER_HOME": binder.sandbox.home.path])
            XCTAssertTrue(run.stdout.contains("Reading 1 of 1: "), run.stdout.debugDescription)
            XCTAssertTrue(run.stdout.contains(row.message), run.stdout.debugDescription)
            XCTAssertTrue(run.stdout.contains("\r\u{1B}[Kbinder: "), "the error ends the progress line: \(run.stdout.debugDescription)")
        }
        XCTAssertEqual(try commits(), count)
    }
}
