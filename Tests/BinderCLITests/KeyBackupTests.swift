import BinderCrypto
import Foundation
import XCTest

/// `binder key backup --sheet`: a printed page that gives the key back, by its QR code
/// (`binder key import --qr`) or typed; written 0600 and never over a file unless --force.
final class KeyBackupTests: XCTestCase {
    var sandbox: BinderSandbox!
    var passphrase: String!
    var ncryptsec = ""
    var npub = ""

    override func setUpWithError() throws {
        sandbox = try BinderSandbox()
        passphrase = try sandbox.file("pass", "paper passphrase\n")
        let made = try sandbox.run(["key", "generate", "--passphrase-file", passphrase, "--log-n", "8"])
        XCTAssertEqual(made.status, 0, made.stderr)
        ncryptsec = try sandbox.run(["key", "export"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        npub = String(try sandbox.run(["key", "show"]).stdout.split(separator: "\n")[0].dropFirst("npub: ".count))
    }

    override func tearDown() { sandbox = nil }

    func makeSheet() throws -> String {
        let sheet = sandbox.root.appendingPathComponent("sheet.pdf").path
        let run = try sandbox.run(["key", "backup", "--sheet", sheet])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains(sheet), run.stdout)
        return sheet
    }

    func testSheetHoldsTheNcryptsecAsTextAndAsAQRCode() throws {
        let sheet = try makeSheet()
        let attributes = try FileManager.default.attributesOfItem(atPath: sheet)
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        XCTAssertEqual(try shell("pdfinfo '\(sheet)' | grep -E '^Pages:'").stdout.filter(\.isNumber), "1")

        let text = try shell("pdftotext -layout '\(sheet)' -")
        XCTAssertEqual(text.status, 0, text.stderr)
        XCTAssertTrue(text.stdout.filter { !$0.isWhitespace }.contains(ncryptsec), text.stdout)
        XCTAssertTrue(text.stdout.contains("ncryptsec1 "), "the ncryptsec is printed in groups:\n\(text.stdout)")
        XCTAssertTrue(text.stdout.contains(npub), text.stdout)
        let day = DateFormatter()
        day.dateFormat = "yyyy-MM-dd"
        XCTAssertTrue(text.stdout.contains("Made on \(day.string(from: Date()))"), text.stdout)
        let prose = text.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        for words in ["passphrase is needed", "separate from the passphrase", "binder key import --qr"] {
            XCTAssertTrue(prose.contains(words), "\(words):\n\(text.stdout)")
        }

        // The page rendered as a scanner would: its QR code is the exact ncryptsec.
        let page = sandbox.root.appendingPathComponent("page").path
        XCTAssertEqual(try shell("pdftoppm -png -r 150 '\(sheet)' '\(page)'").status, 0)
        XCTAssertEqual(try shell("zbarimg --raw -q '\(page)-1.png'").stdout, ncryptsec + "\n")
    }

    /// The code is made for paper (error correction level H): with a band of a tenth of it wiped
    /// across the middle (a fold, a stain) it still decodes to the exact ncryptsec, which a
    /// level-L code of the same text (the screen's level) does not.
    func testTheQRCodeSurvivesABandWipedAcrossIt() throws {
        let sheet = try makeSheet()
        let gray = sandbox.root.appendingPathComponent("gray").path
        XCTAssertEqual(try shell("pdftoppm -gray -r 150 '\(sheet)' '\(gray)'").status, 0)
        var pixels = [UInt8](try Data(contentsOf: URL(fileURLWithPath: gray + "-1.pgm")))
        var start = 0, newlines = 0
        while newlines < 3, start < pixels.count { if pixels[start] == 0x0A { newlines += 1 }; start += 1 }
        let header = String(decoding: pixels[..<start], as: UTF8.self).split(whereSeparator: \.isWhitespace)
        XCTAssertEqual(header.first, "P5")
        let width = try XCTUnwrap(Int(header[1])), height = try XCTUnwrap(Int(header[2]))
        XCTAssertEqual(pixels.count, start + width * height)
        // Only the code's modules are pure black (the text is ink grey, the rule blue).
        var box = (left: width, right: 0, top: height, bottom: 0)
        for y in 0..<height {
            for x in 0..<width where pixels[start + y * width + x] < 16 {
                box = (min(box.left, x), max(box.right, x), min(box.top, y), max(box.bottom, y))
            }
        }
        let side = box.bottom - box.top
        XCTAssertGreaterThan(side, 300, "the code is about 8 cm wide on the page")
        for y in (box.top + side * 45 / 100)..<(box.top + side * 55 / 100) {
            for x in box.left...box.right { pixels[start + y * width + x] = 255 }
        }
        let damaged = sandbox.root.appendingPathComponent("damaged.pgm")
        try Data(pixels).write(to: damaged)
        XCTAssertEqual(try shell("zbarimg --raw -q '\(damaged.path)'").stdout, ncryptsec + "\n")
    }

    func testNeverOverwritesWithoutForce() throws {
        let sheet = try makeSheet()
        try Data("my thesis".utf8).write(to: URL(fileURLWithPath: sheet))
        assertFails(try sandbox.run(["key", "backup", "--sheet", sheet]), mentioning: "--force")
        XCTAssertEqual(try String(contentsOfFile: sheet, encoding: .utf8), "my thesis")
        XCTAssertEqual(chmod(sheet, 0o644), 0)
        let forced = try sandbox.run(["key", "backup", "--sheet", sheet, "--force"])
        XCTAssertEqual(forced.status, 0, forced.stderr)
        XCTAssertTrue(try Data(contentsOf: URL(fileURLWithPath: sheet)).starts(with: Data("%PDF".utf8)))
        let attributes = try FileManager.default.attributesOfItem(atPath: sheet)
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        assertFails(try sandbox.run(["key", "backup", "--sheet", "/nonexistent/sheet.pdf"]), mentioning: "cannot write")

        let help = try sandbox.run(["key", "backup", "--help"])
        XCTAssertTrue(help.stdout.contains("binder key export"), help.stdout)
        XCTAssertTrue(help.stdout.contains("OLD passphrase"), help.stdout)
    }

    /// A photo or scan (PNG, JPEG, a scanner's PDF) of the sheet gives the key back; so does its
    /// text typed as printed; the sheet's own PDF (drawn, no picture) is refused with what to do.
    func testImportFromAPictureOrTheTypedTextOfTheSheet() throws {
        let sheet = try makeSheet()
        let page = sandbox.root.appendingPathComponent("page").path
        XCTAssertEqual(try shell("pdftoppm -png -r 150 '\(sheet)' '\(page)'").status, 0)
        XCTAssertEqual(try shell("pdftoppm -jpeg -r 200 '\(sheet)' '\(page)-photo'").status, 0)
        // A scanner's PDF: the page as a JPEG inside a PDF (made here by Ghostscript's pdfwrite).
        let scan = sandbox.root.appendingPathComponent("scan.pdf").path
        let viewer = try shell("find /usr/share/ghostscript -name viewjpeg.ps | head -1").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let wrapped = try shell("gs -q -dNOSAFER -sDEVICE=pdfwrite -o '\(scan)' '\(viewer)' -c '(\(page)-photo-1.jpg) "
                                + "<< /PageSize 2 index viewJPEGgetsize 2 array astore >> setpagedevice viewJPEG'")
        XCTAssertEqual(wrapped.status, 0, wrapped.stderr)
        XCTAssertEqual(try shell("grep -c DCTDecode '\(scan)'").stdout, "1\n")
        for picture in [page + "-1.png", page + "-photo-1.jpg", scan] {
            let box = try BinderSandbox()
            let run = try box.run(["key", "import", "--qr", picture, "--passphrase-file", try box.file("p", "paper passphrase\n")])
            XCTAssertEqual(run.status, 0, "\(picture): \(run.stderr)")
            XCTAssertTrue(run.stdout.contains(npub), run.stdout)
            XCTAssertEqual(try box.run(["key", "export"]).stdout, ncryptsec + "\n")
        }
        let typed = try shell("pdftotext -layout '\(sheet)' - | sed -n '/Encrypted key/,/Public key/p' | sed '1d;$d'")
        XCTAssertTrue(typed.stdout.contains("\n"), typed.stdout)
        let box = try BinderSandbox()
        let run = try box.run(["key", "import", "--passphrase-file", try box.file("p", "paper passphrase\n")], stdin: typed.stdout)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(try box.run(["key", "export"]).stdout, ncryptsec + "\n")

        let refused = try BinderSandbox()
        assertFails(try refused.run(["key", "import", "--qr", sheet, "--passphrase-file", passphrase]), mentioning: "not the sheet's own file")
        assertFails(try refused.run(["key", "import", "--qr", passphrase, "--passphrase-file", passphrase]), mentioning: "not a PNG or JPEG")
        let markers = sandbox.root.appendingPathComponent("markers.pdf")
        try Data(Array("%PDF-1.4\n".utf8) + Array(repeating: [UInt8]([0xFF, 0xD8, 0xFF, 0xC0, 0x00]), count: 200_000).joined()).write(to: markers)
        assertFails(try refused.run(["key", "import", "--qr", markers.path, "--passphrase-file", passphrase]), mentioning: "no readable QR code")
        assertFails(try refused.run(["key", "import", "--qr", sandbox.root.appendingPathComponent("none.png").path]), mentioning: "cannot read")
        XCTAssertFalse(FileManager.default.fileExists(atPath: refused.home.appendingPathComponent("key.ncryptsec").path))
    }
}
