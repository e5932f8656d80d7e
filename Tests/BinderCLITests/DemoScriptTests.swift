import Foundation
import XCTest

/// The README's quick start: `scripts/demo` makes and mounts a demo binder.
final class DemoScriptTests: XCTestCase {
    func testDemoMountsRealisticRecords() throws {
        let sandbox = try BinderSandbox()
        let root = Fixtures.directory.deletingLastPathComponent().deletingLastPathComponent()
        let demo = sandbox.root.appendingPathComponent("demo").path
        // The debug binaries the suite already built (the README's `scripts/demo` builds release ones).
        let bin = URL(fileURLWithPath: BinderSandbox.binary).deletingLastPathComponent()
        let run = try BinderSandbox.run(executable: root.appendingPathComponent("scripts/demo").path, ["--no-build"],
                                        environment: ["BINDER_DEMO_DIR": demo, "BINDER_DEMO_BIN": bin.path])
        XCTAssertEqual(run.status, 0, run.stderr)
        defer { _ = try? shell("fusermount3 -u -z '\(demo)/mnt' 2>/dev/null") }
        XCTAssertTrue(run.stdout.contains("Unmount with"), run.stdout)
        let mnt = demo + "/mnt"
        for file in ["patient-info.md", "visits/2026-02-09-annual-physical.md", "visits/2026-02-09-annual-physical.children/01-addendum.md",
                     "visits/2026-03-15-knee-pain-consult.children/knee-swelling.png", "labs/2026-02-10-lipid-panel-report.pdf",
                     "conditions/back-acne/2026-01-27-photo.png", "medications/2026-02-09-lisinopril.md",
                     "allergies/2025-02-25-penicillin.md"] {
            XCTAssertTrue(FileManager.default.fileExists(atPath: mnt + "/" + file), file)
        }
        XCTAssertTrue(try shell("file -b labs/2026-02-10-lipid-panel-report.pdf", in: mnt).stdout.hasPrefix("PDF document"))
        XCTAssertTrue(try shell("file -b conditions/back-acne/2026-01-27-photo.png", in: mnt).stdout.hasPrefix("PNG image data"))
        XCTAssertEqual(try shell("grep -rli lisinopril . | wc -l", in: mnt).stdout.trimmingCharacters(in: .whitespacesAndNewlines), "2")
        let verify = try BinderSandbox.run(executable: bin.appendingPathComponent("binder").path, ["verify", "demo"],
                                           environment: ["BINDER_HOME": demo + "/home"])
        XCTAssertEqual(verify.status, 0, verify.stdout + verify.stderr)
        // Nothing but ciphertext in git (file names are visible by design; content is not).
        XCTAssertEqual(try shell("git --git-dir='\(demo)/home/binders/demo' cat-file --batch-all-objects --batch | grep -c -e Okafor -e 'LDL 142' || true")
            .stdout.trimmingCharacters(in: .whitespacesAndNewlines), "0")
        let unmount = try BinderSandbox.run(executable: bin.appendingPathComponent("binder").path, ["unmount", mnt])
        XCTAssertEqual(unmount.status, 0, unmount.stderr)
    }
}
