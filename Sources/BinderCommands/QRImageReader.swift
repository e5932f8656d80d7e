import BinderExport
import BinderSystem
internal import CZBar

/// Reads the text of the QR codes in a picture with libzbar: the only user of CZBar. Each zbar
/// object has one owner that frees it in deinit; nothing of zbar's leaves this file.
enum QRImageReader {
    enum Failure: Error, CustomStringConvertible {
        case noCode
        case scanner(String)

        var description: String {
            switch self {
            case .noCode: return "no QR code found in the image"
            case .scanner(let why): return "the QR decoder failed (\(why))"
            }
        }
    }

    /// The bytes of the first QR code zbar finds in `image`, at most `maximumBytes` of them
    /// (a longer one is not a scan payload: nil).
    static func read(_ image: GrayImage, maximumBytes: Int) throws(Failure) -> [UInt8] {
        guard let first = try codes(in: image, maximumBytes: maximumBytes, limit: 1).first else { throw .noCode }
        return first
    }

    /// The bytes of each QR code zbar finds in `image` (a picture of a health card's chunks
    /// holds several), at most `limit` of them, in zbar's order; a code longer than
    /// `maximumBytes` is given as `maximumBytes + 1` zeros (no scan payload). Empty when none.
    static func codes(in image: GrayImage, maximumBytes: Int, limit: Int = 64) throws(Failure) -> [[UInt8]] {
        let api = try ZBar.load()
        guard let scanner = Scanner(api) else { throw .scanner("no scanner") }
        guard let picture = Picture(image, api) else { throw .scanner("no image") }
        let found = api.zbar_scan_image(scanner.pointer, picture.pointer)
        guard found >= 0 else { throw .scanner("zbar_scan_image \(found)") }
        var codes: [[UInt8]] = []
        var symbol = api.zbar_image_first_symbol(picture.pointer)
        while let current = symbol, codes.count < limit {
            if api.zbar_symbol_get_type(current) == ZBAR_QRCODE, let data = api.zbar_symbol_get_data(current) {
                let count = Int(api.zbar_symbol_get_data_length(current))
                codes.append(count > maximumBytes ? Array(repeating: 0, count: maximumBytes + 1)
                             : data.withMemoryRebound(to: UInt8.self, capacity: count) { Array(UnsafeBufferPointer(start: $0, count: count)) })
            }
            symbol = api.zbar_symbol_next(current)
        }
        return codes
    }

    /// libzbar, opened at the first picture read (`dlopen`: CZBar's shim.h says why it is not
    /// linked). The scanner and picture below hold the entry points `load()` gave.
    enum ZBar {
        /// Opened once, at the first use; the library stays loaded.
        private static let opened = Result { () throws(SharedLibraryError) in
            try SharedLibrarySymbols<binder_zbar>([(file: "libzbar.so.0", names: binder_zbar_names)])
        }

        /// The entry points, the library opened at the first call.
        static func load() throws(Failure) -> binder_zbar {
            do { return try opened.get().entries } catch {
                throw .scanner("libzbar is needed to read a QR code in a picture (apt install libzbar0): \(error)")
            }
        }
    }

    /// A zbar image scanner that looks for QR codes only.
    private final class Scanner {
        let pointer: OpaquePointer
        let api: binder_zbar

        init?(_ api: binder_zbar) {
            self.api = api
            guard let pointer = api.zbar_image_scanner_create() else { return nil }
            self.pointer = pointer
            _ = api.zbar_image_scanner_request_dbus(pointer, 0)  // results stay here (zbar can announce them on D-Bus)
            _ = api.zbar_image_scanner_set_config(pointer, ZBAR_NONE, ZBAR_CFG_ENABLE, 0)
            _ = api.zbar_image_scanner_set_config(pointer, ZBAR_QRCODE, ZBAR_CFG_ENABLE, 1)
        }

        deinit { api.zbar_image_scanner_destroy(pointer) }
    }

    /// A zbar image over a copy of the gray pixels this object owns (zbar only borrows them:
    /// the image is destroyed before they are freed).
    private final class Picture {
        let pointer: OpaquePointer
        private let pixels: UnsafeMutableBufferPointer<UInt8>
        let api: binder_zbar

        init?(_ image: GrayImage, _ api: binder_zbar) {
            self.api = api
            guard let pointer = api.zbar_image_create() else { return nil }
            self.pointer = pointer
            pixels = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(1, image.pixels.count))
            _ = pixels.initialize(from: image.pixels)
            api.zbar_image_set_format(pointer, binder_zbar_format_y800())
            api.zbar_image_set_size(pointer, UInt32(image.width), UInt32(image.height))
            api.zbar_image_set_data(pointer, pixels.baseAddress, UInt(image.pixels.count), nil)
        }

        deinit {
            api.zbar_image_destroy(pointer)
            pixels.deallocate()
        }
    }
}
