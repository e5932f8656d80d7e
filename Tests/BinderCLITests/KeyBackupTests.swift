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

    /// A scanner's PDF: the page as a JPEG inside a PDF (made here by Ghostscript's pdfwrite).
    func makeScan(ofPhoto photo: String) throws -> String {
        let scan = sandbox.root.appendingPathComponent("scan.pdf").path
        let viewer = try shell("find /usr/share/ghostscript -name viewjpeg.ps | head -1").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let wrapped = try shell("gs -q -dNOSAFER -sDEVICE=pdfwrite -o '\(scan)' '\(viewer)' -c '(\(photo)) "
                                + "<< /PageSize 2 index viewJPEGgetsize 2 array astore >> setpagedevice viewJPEG'")
        XCTAssertEqual(wrapped.status, 0, wrapped.stderr)
        XCTAssertEqual(try shell("grep -c DCTDecode '\(scan)'").stdout, "1\n")
        return scan
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

    /// A photo or scan (PNG, JPEG, a scanner's PDF) of the sheet gives the key back, and so does
    /// the sheet's own PDF (its code drawn as vectors by Cairo: poppler-glib draws the page);
    /// so does its text typed as printed.
    func testImportFromAPictureOrTheTypedTextOfTheSheet() throws {
        let sheet = try makeSheet()
        let page = sandbox.root.appendingPathComponent("page").path
        XCTAssertEqual(try shell("pdftoppm -png -r 150 '\(sheet)' '\(page)'").status, 0)
        XCTAssertEqual(try shell("pdftoppm -jpeg -r 200 '\(sheet)' '\(page)-photo'").status, 0)
        let scan = try makeScan(ofPhoto: page + "-photo-1.jpg")
        XCTAssertEqual(try shell("pdfimages -list '\(sheet)' | wc -l").stdout, "2\n", "the sheet holds no picture: its code is drawn")
        for picture in [page + "-1.png", page + "-photo-1.jpg", scan, sheet] {
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
        assertFails(try refused.run(["key", "import", "--qr", passphrase, "--passphrase-file", passphrase]), mentioning: "not a PNG or JPEG")
        assertFails(try refused.run(["key", "import", "--qr", sandbox.root.appendingPathComponent("none.png").path]), mentioning: "cannot read")
        XCTAssertFalse(FileManager.default.fileExists(atPath: refused.home.appendingPathComponent("key.ncryptsec").path))
    }

    /// A PDF that is no sheet is refused with a clear error, and at once: one that needs a
    /// password, garbage after `%PDF` (with JPEG markers a scanner's PDF would have), a page of
    /// 100,000 inches (never allocated), thousands of pages (the first 10 looked at), none.
    func testAHostilePDFIsRefusedByNameAndNothingIsImported() throws {
        let sheet = try makeSheet()
        let root = sandbox.root.path
        let locked = try shell("gs -q -sDEVICE=pdfwrite -sOwnerPassword=owner -sUserPassword=secret -dEncryptionR=3 -dKeyLength=128 "
                               + "-o locked.pdf '\(sheet)'", in: root)
        XCTAssertEqual(locked.status, 0, locked.stderr)
        try Data(Array("%PDF-1.4\n".utf8) + Array(repeating: [UInt8]([0xFF, 0xD8, 0xFF, 0xC0, 0x00]), count: 200_000).joined())
            .write(to: URL(fileURLWithPath: root + "/markers.pdf"))
        try HandMadePDF.pages(1, mediaBox: "0 0 7200000 7200000").write(to: URL(fileURLWithPath: root + "/huge.pdf"))
        try HandMadePDF.pages(1, mediaBox: "0 0 1440000 72").write(to: URL(fileURLWithPath: root + "/long.pdf"))
        try HandMadePDF.pages(5_000, mediaBox: "0 0 72 72").write(to: URL(fileURLWithPath: root + "/many.pdf"))
        try HandMadePDF.pages(0, mediaBox: "0 0 72 72").write(to: URL(fileURLWithPath: root + "/empty.pdf"))
        let rows = [("locked.pdf", "cannot read the PDF \(root)/locked.pdf: the PDF is protected by a password"),
                    ("markers.pdf", "cannot read the PDF \(root)/markers.pdf: the PDF cannot be read"),
                    ("huge.pdf", "page 1 is 100000 × 100000 inches: too large to draw (at most 20 million pixels, 20,000 a side)"),
                    ("long.pdf", "page 1 is 20000 × 1.0 inches: too large to draw"),
                    ("many.pdf", "many.pdf is a PDF with no readable QR code in its first 10 pages (of 5000)"),
                    ("empty.pdf", "empty.pdf is a PDF with no pages")]
        let box = try BinderSandbox()
        for (name, message) in rows {
            assertFails(try box.run(["key", "import", "--qr", root + "/" + name, "--passphrase-file", passphrase]), mentioning: message)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: box.home.appendingPathComponent("key.ncryptsec").path))
    }

    /// poppler-glib is opened when a PDF is read, not at start: on a machine without it (here
    /// /dev/null over its file, in a mount namespace of the command's own) a scanner's PDF of the
    /// sheet still gives the key (its JPEG read as it is), and the sheet's own PDF is refused
    /// with one line naming what to install.
    func testWithoutPopplerAScannersPDFStillGivesTheKey() throws {
        let found = try shell("ldconfig -p | awk '$1 == \"libpoppler-glib.so.8\" { print $NF; exit }'").stdout
        let library = found.trimmingCharacters(in: .whitespacesAndNewlines)
        try XCTSkipIf(library.isEmpty || (try shell("command -v unshare").status) != 0, "no libpoppler-glib or unshare here")
        let sheet = try makeSheet()
        let page = sandbox.root.appendingPathComponent("page").path
        XCTAssertEqual(try shell("pdftoppm -jpeg -r 200 '\(sheet)' '\(page)'").status, 0)
        let scan = try makeScan(ofPhoto: page + "-1.jpg")
        let box = try BinderSandbox()
        func importWithoutPoppler(_ picture: String) throws -> BinderRun {
            try BinderSandbox.run(executable: "/usr/bin/unshare",
                                  ["-m", "sh", "-c", "mount --bind /dev/null \"$0\" && exec \"$@\"", library, BinderSandbox.binary,
                                   "key", "import", "--qr", picture, "--passphrase-file", passphrase],
                                  environment: ["BINDER_HOME": box.home.path])
        }
        assertFails(try importWithoutPoppler(sheet), mentioning: "poppler-glib is needed to read a PDF's pages (apt install libpoppler-glib8)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: box.home.appendingPathComponent("key.ncryptsec").path))
        let run = try importWithoutPoppler(scan)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(try box.run(["key", "export"]).stdout, ncryptsec + "\n")
    }
}
