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

    /// A picture of a health card's QR code (PNG), of its two chunks (JPEG), and a scanner's PDF
    /// of that JPEG: the card's records, the picture kept as the card's attachment. A picture of
    /// one chunk of two is refused by name; one whose code is no card is a picture attachment.
    func testAPictureOfACardsQRCodesIsTheCardAndKeepsThePicture() throws {
        let scan = binder.sandbox.root.appendingPathComponent("scan.pdf").path
        let viewer = try shell("find /usr/share/ghostscript -name viewjpeg.ps | head -1").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let wrapped = try shell("gs -q -dNOSAFER -sDEVICE=pdfwrite -o '\(scan)' '\(viewer)' -c '(\(fixture("covid-card-chunks.jpg"))) "
                                + "<< /PageSize 2 index viewJPEGgetsize 2 array astore >> setpagedevice viewJPEG'")
        XCTAssertEqual(wrapped.status, 0, wrapped.stderr)
        let count = try commits()
        for (picture, kept) in [(fixture("covid-card-chunks.jpg"), ".jpg"), (scan, ".pdf")] {
            let dry = try importing([picture, "--dry-run"])
            XCTAssertEqual(dry.status, 0, "\(picture): \(dry.stderr)")
            XCTAssertTrue(dry.stdout.contains("Would import 3 records (documents 1, immunizations 2), 1 attachment"), dry.stdout)
            XCTAssertTrue(dry.stdout.contains("    + smart-health-card-from-https-spec-smarthealth-cards-examples-issuer" + kept + "\n"), dry.stdout)
            XCTAssertTrue(dry.stdout.contains(": signature not checked (no issuer keys given)"), dry.stdout)
        }
        let half = try importing([fixture("covid-card-chunk-1-of-2.png")])
        XCTAssertEqual(half.status, 1, half.stdout)
        XCTAssertTrue(half.stderr.contains("covid-card-chunk-1-of-2.png: not a readable SMART Health Card: chunk 2 of 2 missing"), half.stderr)
        let web = try importing([fixture("qr-web-address.png"), "--dry-run"])
        XCTAssertEqual(web.status, 0, web.stderr)
        XCTAssertTrue(web.stdout.contains("documents/\n  "), web.stdout)
        XCTAssertTrue(web.stdout.contains("Would import 1 record (documents 1), 1 attachment"), web.stdout)
        XCTAssertEqual(try commits(), count)

        let run = try importing([fixture("covid-card-qr.png")])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(try commits(), count + 1)
        let immunizations = try git("ls-tree --name-only main immunizations/").split(separator: "\n").filter { $0.contains("cvx-207") }
        XCTAssertEqual(immunizations.count, 2, "\(immunizations)")
        let kept = try XCTUnwrap(try git("ls-tree --name-only main documents/").split(separator: "\n").first { $0.contains("smart-health-card") && $0.hasSuffix(".json") })
        let record = try stored(String(kept))
        let child = try XCTUnwrap(record.children.first)
        XCTAssertEqual(child.metadata["format"], "png")
        let base64 = try shell("git -C '\(binder.repository)' cat-file blob 'main:documents/\(child.value)' | base64 -w0").stdout
        let picture = try Sidecar.decrypt(try XCTUnwrap(Base64.decode(Array(base64.trimmingCharacters(in: .whitespacesAndNewlines).utf8))), key: key).copyBytes()
        XCTAssertEqual(picture, Array(try Data(contentsOf: URL(fileURLWithPath: fixture("covid-card-qr.png")))))
        // The chunks' picture is the same card: nothing new.
        let again = try importing([fixture("covid-card-chunks.jpg")])
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertTrue(again.stdout.contains("Nothing new"), again.stdout)
    }

    /// A card's QR code drawn in a PDF rather than held as a JPEG (what vaccination records are):
    /// as vectors (Ghostscript's page of qrencode's EPS, and that page redrawn by Cairo) or as a
    /// Flate-compressed picture 2 inches wide (Ghostscript's page of qrencode's modules as a
    /// PGM): each is the card, the PDF kept as its attachment. A PDF whose pages cannot be drawn
    /// (a password, a page of 100,000 inches, garbage) is kept as a document and says why its
    /// codes were not looked for.
    func testACardsQRCodeDrawnInAPDFIsTheCard() throws {
        let root = binder.sandbox.root.path
        let viewer = try shell("find /usr/share/ghostscript -name viewpbm.ps | head -1").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let made = try shell("""
            set -e
            tr -d '\\n' < '\(fixture("covid-card.shc.txt"))' > card.txt
            qrencode -l L -t EPS -s 2 -o card.eps -r card.txt
            gs -q -dNOSAFER -dEPSCrop -sDEVICE=pdfwrite -o vector.pdf card.eps
            pdftocairo -pdf vector.pdf cairo.pdf
            qrencode -l L -t ASCII -m 0 -r card.txt | python3 -c 'import sys
            rows = [line.rstrip("\\n")[::2] for line in sys.stdin if line.strip()]
            n = len(rows) + 8
            dark = lambda x, y: 4 <= x < n - 4 and 4 <= y < n - 4 and rows[y - 4][x - 4] == "#"
            sys.stdout.buffer.write(b"P5\\n%d %d\\n255\\n" % (n, n) + bytes(0 if dark(x, y) else 255 for y in range(n) for x in range(n)))' > card.pgm
            gs -q -dNOSAFER -dSCALE=16 -sDEVICE=pdfwrite -o picture.pdf '\(viewer)' -c '(card.pgm) viewpbm'
            gs -q -sDEVICE=pdfwrite -sOwnerPassword=owner -sUserPassword=secret -dEncryptionR=3 -dKeyLength=128 -o locked.pdf cairo.pdf
            """, in: root)
        XCTAssertEqual(made.status, 0, made.stderr)
        XCTAssertEqual(try shell("pdfimages -list picture.pdf | tail -1 | awk '{print $4, $5, $9}'", in: root).stdout, "93 93 image\n")
        XCTAssertEqual(try shell("pdfimages -list vector.pdf | wc -l; pdfinfo cairo.pdf | grep -c cairo", in: root).stdout, "2\n1\n",
                       "the vector pages hold no picture; the second is Cairo's")
        let count = try commits()
        for name in ["vector.pdf", "cairo.pdf", "picture.pdf"] {
            let dry = try importing([root + "/" + name, "--dry-run"])
            XCTAssertEqual(dry.status, 0, "\(name): \(dry.stderr)")
            XCTAssertTrue(dry.stdout.contains("Would import 3 records (documents 1, immunizations 2), 1 attachment"), "\(name): \(dry.stdout)")
            XCTAssertTrue(dry.stdout.contains("    + smart-health-card-from-https-spec-smarthealth-cards-examples-issuer.pdf\n"), dry.stdout)
        }
        try Data(Array("%PDF-1.7\n".utf8) + (0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 7919 >> 3) }).write(to: URL(fileURLWithPath: root + "/garbage.pdf"))
        try HandMadePDF.pages(1, mediaBox: "0 0 7200000 7200000").write(to: URL(fileURLWithPath: root + "/huge.pdf"))
        let rows = [("locked.pdf", "the PDF is protected by a password"),
                    ("huge.pdf", "page 1 is 100000 × 100000 inches: too large to draw"),
                    ("garbage.pdf", "the PDF cannot be read")]
        for (name, why) in rows {
            let dry = try importing([root + "/" + name, "--dry-run"])
            XCTAssertEqual(dry.status, 0, "\(name): \(dry.stderr)")
            XCTAssertTrue(dry.stdout.contains("Would import 1 record (documents 1), 1 attachment"), "\(name): \(dry.stdout)")
            XCTAssertTrue(dry.stdout.contains("its QR codes") && dry.stdout.contains("not looked for: \(why)"), "\(name): \(dry.stdout)")
        }
        XCTAssertEqual(try commits(), count)
        let run = try importing([root + "/picture.pdf"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(try git("ls-tree --name-only main immunizations/").split(separator: "\n").filter { $0.contains("cvx-207") }.count, 2)
    }

    /// Chunks of a card on standard input, a line each in any order, are joined; one missing is
    /// named, and nothing is stored.
    func testChunksOnStandardInputAreJoinedAndAMissingOneIsNamed() throws {
        let numeric = try String(contentsOfFile: fixture("covid-card.shc.txt"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let digits = numeric.dropFirst("shc:/".count)
        let half = digits.index(digits.startIndex, offsetBy: (digits.count / 4) * 2)
        let count = try commits()
        let missing = try importing(["-"], stdin: "shc:/2/2/\(digits[half...])\n")
        XCTAssertEqual(missing.status, 1, missing.stdout)
        XCTAssertEqual(missing.stderr, "binder: standard input: not a readable SMART Health Card: chunk 1 of 2 missing (give every shc:/I/2/ line together) (nothing was imported)\n")
        XCTAssertEqual(try commits(), count)
        let run = try importing(["-"], stdin: "shc:/2/2/\(digits[half...])\nshc:/1/2/\(digits[..<half])\n")
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("Imported 3 records (documents 1, immunizations 2)"), run.stdout)
        XCTAssertEqual(try commits(), count + 1)
    }

    /// `--max-size` caps a folder's files together too (its --help says so): past it the folder
    /// is refused by name and nothing is stored; a single file over it inside is left out.
    func testMaxSizeCapsAFoldersTotal() throws {
        let folder = binder.sandbox.root.path + "/records"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        for name in ["a", "b", "c"] { try Data(repeating: name.utf8.first ?? 0, count: 400).write(to: URL(fileURLWithPath: folder + "/note-\(name).txt")) }
        let count = try commits()
        let refused = try importing([folder, "--max-size", "1000"])
        XCTAssertEqual(refused.status, 1, refused.stdout)
        XCTAssertEqual(refused.stderr, "binder: \(folder): its files come to at least 1200 bytes together, over the import limit of 1000 bytes "
                       + "for a folder (--max-size raises it) (nothing was imported)\n")
        XCTAssertEqual(try commits(), count)
        try Data(repeating: UInt8(ascii: "y"), count: 1500).write(to: URL(fileURLWithPath: folder + "/big.txt"))
        try FileManager.default.removeItem(atPath: folder + "/note-c.txt")
        let run = try importing([folder, "--max-size", "1000"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("Imported 2 records (documents 2)"), run.stdout)
        XCTAssertTrue(run.stdout.contains("big.txt: 1500 bytes, over the size limit (not read)"), run.stdout)
        XCTAssertEqual(try commits(), count + 1)
        let help = try binder.sandbox.run(["import", "--help"])
        XCTAssertTrue(help.stdout.replacingOccurrences(of: "\n", with: " ").split(separator: " ").joined(separator: " ")
                        .contains("a folder's files together"), help.stdout)
    }
}
