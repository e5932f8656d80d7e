import BinderExport
import Foundation

/// The text of the QR code in a photo or scan of a recovery sheet, or in the sheet's own PDF
/// (`binder key import --qr`), read by the same decoders as `binder open-share --qr`: PNG by
/// Cairo, JPEG by libjpeg, a PDF's pages drawn by poppler-glib, the code by libzbar.
enum KeyQRPicture {
    /// A phone's photo is a few MiB; a scan at 600 dpi a few tens.
    static let maximumInputBytes = 64 << 20
    static let maximumPixels = 50_000_000
    /// An ncryptsec is 162 characters; anything much longer is not a key.
    static let maximumTextBytes = 1024

    /// The code's text, ASCII whitespace removed (as typed input).
    static func read(_ path: String) throws -> [UInt8] {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw CommandFailure("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        defer { try? handle.close() }
        let bytes = [UInt8](handle.readData(ofLength: maximumInputBytes + 1))
        guard bytes.count <= maximumInputBytes else { throw CommandFailure("\(path) is over \(maximumInputBytes >> 20) MiB: not a photo of a sheet") }
        let found: [UInt8]
        do {
            if bytes.starts(with: Array("%PDF".utf8)) {
                let read = try codesInPDF(bytes, maximumBytes: maximumTextBytes, firstPageOnly: true)
                guard let text = read.codes.first else {
                    let pages = read.pagesLookedAt ?? (0, 0)
                    guard pages.count > 0 else { throw CommandFailure("\(path) is a PDF with no pages") }
                    throw CommandFailure("\(path) is a PDF with no readable QR code "
                                         + (pages.drawn < pages.count ? "in its first \(pages.drawn) pages (of \(pages.count))"
                                            : "on its \(pages.count) page(s)"))
                }
                found = text
            } else {
                let image = try GrayImage.decode(bytes, maximumPixels: maximumPixels)
                found = try QRImageReader.read(image, maximumBytes: maximumTextBytes)
            }
        } catch let error as GrayImage.Failure {
            throw CommandFailure("cannot read the picture \(path): \(error)")
        } catch let error as QRImageReader.Failure {
            throw CommandFailure("cannot read the picture \(path): \(error)")
        } catch let error as PDFPageImages.Failure {
            throw CommandFailure("cannot read the PDF \(path): \(error)")
        }
        guard found.count <= maximumTextBytes else { throw CommandFailure("the QR code in \(path) is too long to be a key") }
        return found.filter { ![0x20, 0x09, 0x0A, 0x0B, 0x0C, 0x0D].contains($0) }
    }

    /// The QR codes on a PDF's pages, each page drawn by poppler-glib (`PDFPageImages`: its
    /// first 10 pages, within its limits) and read by libzbar: those of the first page that has
    /// any (`firstPageOnly`: a recovery sheet), or of every page (a health card's chunks may be
    /// on several). Without poppler-glib, a scanner's PDF's JPEG pictures are read instead
    /// (`codesInScannedPDF`: `pagesLookedAt` nil), and where they hold none its absence is
    /// thrown. A PDF with no pages holds no code; one poppler cannot open (damaged, a password)
    /// or a page too large to draw throws `PDFPageImages.Failure`.
    static func codesInPDF(_ pdf: [UInt8], maximumBytes: Int,
                           firstPageOnly: Bool) throws -> (codes: [[UInt8]], pagesLookedAt: (drawn: Int, count: Int)?) {
        let pages: PDFPageImages
        switch Result(catching: { () throws(PDFPageImages.Failure) in try PDFPageImages(pdf) }) {
        case .success(let opened): pages = opened
        case .failure(let failure) where failure.isNoRenderer:
            let codes = try codesInScannedPDF(pdf, maximumBytes: maximumBytes, firstPictureOnly: firstPageOnly)
            guard !codes.isEmpty else { throw failure }  // not looked for on the pages, which poppler-glib would draw
            return (codes, nil)
        case .failure(.noPages): return ([], (0, 0))
        case .failure(let failure): throw failure
        }
        var codes: [[UInt8]] = []
        for index in 0..<pages.pagesDrawn {
            codes += try QRImageReader.codes(in: try pages.page(index), maximumBytes: maximumBytes)
            if firstPageOnly && !codes.isEmpty { break }
        }
        return (codes, (pages.pagesDrawn, pages.pageCount))
    }

    /// At most this many JPEG start markers of a PDF are tried.
    static let maximumPDFPictures = 16

    /// The QR codes of a scanner's PDF's JPEG pictures, read without a PDF renderer (poppler-glib
    /// not installed): a scanner's PDF holds each page as a JPEG stream (DCTDecode), stored as it
    /// is, so its bytes run from the JPEG start marker to the stream's `endstream`. Those of the
    /// first picture that has any, or of every picture (`firstPictureOnly` false).
    static func codesInScannedPDF(_ pdf: [UInt8], maximumBytes: Int, firstPictureOnly: Bool) throws(QRImageReader.Failure) -> [[UInt8]] {
        let end = Array("endstream".utf8)
        var at = 0, tried = 0
        var codes: [[UInt8]] = []
        while tried < maximumPDFPictures, let start = firstIndex(of: [0xFF, 0xD8, 0xFF], in: pdf, from: at) {
            let stop = firstIndex(of: end, in: pdf, from: start) ?? pdf.count
            at = stop
            tried += 1  // every candidate counts, decodable or not: a crafted file full of markers costs 16 tries
            guard let image = try? GrayImage.decode(Array(pdf[start..<stop]), maximumPixels: maximumPixels) else { continue }
            codes += try QRImageReader.codes(in: image, maximumBytes: maximumBytes)
            if firstPictureOnly && !codes.isEmpty { break }
        }
        return codes
    }

    static func firstIndex(of needle: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        guard needle.count <= bytes.count, start <= bytes.count - needle.count else { return nil }
        var index = start
        while index <= bytes.count - needle.count {
            if bytes[index] == needle[0], bytes[index..<(index + needle.count)].elementsEqual(needle) { return index }
            index += 1
        }
        return nil
    }
}
