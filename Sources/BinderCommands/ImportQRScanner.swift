import BinderExport
import BinderImport

/// The QR codes in a picture named to `binder import` (a photo or scan of a health card),
/// read by the decoders `binder key import --qr` uses: PNG by Cairo, JPEG by libjpeg, a PDF's
/// pages drawn by poppler-glib (its first 10; a scanner's PDF's JPEG pictures when poppler-glib
/// is not installed), the codes by libzbar. BinderImport is given this scanner rather than
/// depending on the image and QR libraries itself. A PDF it cannot look into (a password,
/// damaged, a page too large to draw) throws: the PDF is kept as a document, and the import
/// says why its codes were not looked for.
struct ImportQRScanner: QRCodeScanning {
    /// A health card's code is at most a few thousand digits (a version 40 code holds 7,089).
    static let maximumCodeBytes = 8 << 10

    func codes(in picture: [UInt8], format: String) throws -> [[UInt8]] {
        if format == "pdf" {
            return try KeyQRPicture.codesInPDF(picture, maximumBytes: Self.maximumCodeBytes, firstPageOnly: false).codes
        }
        // Not decodable (damaged, a format Cairo or libjpeg refuses): no code, the picture is kept as it is.
        guard let image = try? GrayImage.decode(picture, maximumPixels: KeyQRPicture.maximumPixels) else { return [] }
        return try QRImageReader.codes(in: image, maximumBytes: Self.maximumCodeBytes)
    }
}
