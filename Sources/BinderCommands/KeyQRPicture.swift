import BinderExport
import Foundation

/// The text of the QR code in a photo or scan of a recovery sheet (`binder key import --qr`),
/// read by the same decoders as `binder open-share --qr`: PNG by Cairo, JPEG by libjpeg, the
/// code by libzbar.
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
        if bytes.starts(with: Array("%PDF".utf8)) {
            throw CommandFailure("\(path) is a PDF: reading a PDF is not supported yet. Give a photo or scan of the printed sheet "
                                 + "(PNG or JPEG), or a page rendered from it, e.g. 'pdftoppm -png -r 200 \(path) sheet'")
        }
        let found: [UInt8]
        do {
            let image = try GrayImage.decode(bytes, maximumPixels: maximumPixels)
            found = try QRImageReader.read(image, maximumBytes: maximumTextBytes)
        } catch let error as GrayImage.Failure {
            throw CommandFailure("cannot read the picture \(path): \(error)")
        } catch let error as QRImageReader.Failure {
            throw CommandFailure("cannot read the picture \(path): \(error)")
        }
        guard found.count <= maximumTextBytes else { throw CommandFailure("the QR code in \(path) is too long to be a key") }
        return found.filter { ![0x20, 0x09, 0x0A, 0x0B, 0x0C, 0x0D].contains($0) }
    }
}
