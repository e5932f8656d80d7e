import BinderSystem
import Foundation
import XCTest

/// `CodePages.releaseStartupCode` (run by the mount daemon once it is up) drops this process's
/// resident code and nothing else: the code comes back as it runs, and data, written or not,
/// is untouched. Every mount test also runs it, in the daemon that serves the test.
final class CodePagesTests: XCTestCase {
    func testReleasingCodeDropsItsPagesAndKeepsEverythingElse() throws {
        let table = (0..<4_096).map { UInt32($0) &* 2_654_435_761 }
        let text = String(repeating: "binder ", count: 1_000)
        let before = try Self.residentKiB()
        XCTAssertGreaterThan(before.code, 1_024, "less than 1 MiB of code resident: smaps not read?")

        let released = try XCTUnwrap(CodePages.releaseStartupCode())
        let after = try Self.residentKiB()

        XCTAssertGreaterThanOrEqual(released / 1_024, before.code, "released less than the code that was resident")
        XCTAssertLessThan(after.code, before.code / 2, "code still resident: \(after.code) KiB of \(before.code)")
        // Data stays: what this process wrote, and what its libraries hold.
        XCTAssertGreaterThanOrEqual(after.written, before.written, "private copies of file pages were dropped")
        XCTAssertEqual(table, (0..<4_096).map { UInt32($0) &* 2_654_435_761 })
        XCTAssertEqual(text, String(repeating: "binder ", count: 1_000))
        // And the code runs again (Foundation, the Swift runtime, libc).
        XCTAssertEqual(try JSONSerialization.jsonObject(with: Data("[1,2]".utf8)) as? [Int], [1, 2])
    }

    /// Resident code (executable file mappings) and written file pages (private copies in the
    /// other file mappings: relocated and written data), in KiB, from /proc/self/smaps.
    static func residentKiB() throws -> (code: Int, written: Int) {
        let smaps = try String(contentsOfFile: "/proc/self/smaps", encoding: .utf8)
        var code = 0, written = 0, isCode = false, isFile = false
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if let range = fields.first, range.contains("-"), fields.count >= 5, !range.hasSuffix(":") {
                isFile = fields.count >= 6 && fields[5].hasPrefix("/")
                isCode = isFile && fields[1] == "r-xp"
            } else if fields.first == "Rss:", isCode {
                code += Int(fields[1]) ?? 0
            } else if fields.first == "Anonymous:", let kib = Int(fields[1]), isFile, !isCode {
                written += kib
            }
        }
        return (code, written)
    }
}
