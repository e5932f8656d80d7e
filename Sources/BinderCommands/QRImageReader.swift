import BinderExport
internal import CZBar

/// Reads the text of a QR code in a picture with libzbar: the only user of CZBar. Each zbar
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
        try ZBar.load()
        guard let scanner = Scanner() else { throw .scanner("no scanner") }
        guard let picture = Picture(image) else { throw .scanner("no image") }
        let found = ZBar.api.zbar_scan_image(scanner.pointer, picture.pointer)
        guard found >= 0 else { throw .scanner("zbar_scan_image \(found)") }
        var symbol = ZBar.api.zbar_image_first_symbol(picture.pointer)
        while let current = symbol {
            if ZBar.api.zbar_symbol_get_type(current) == ZBAR_QRCODE, let data = ZBar.api.zbar_symbol_get_data(current) {
                let count = Int(ZBar.api.zbar_symbol_get_data_length(current))
                guard count <= maximumBytes else { return Array(repeating: 0, count: maximumBytes + 1) }
                return data.withMemoryRebound(to: UInt8.self, capacity: count) { Array(UnsafeBufferPointer(start: $0, count: count)) }
            }
            symbol = ZBar.api.zbar_symbol_next(current)
        }
        throw .noCode
    }

    /// libzbar, opened at the first picture read (`dlopen`: CZBar's shim.h says why it is not
    /// linked). The scanner and picture below are made after `load()` succeeded.
    enum ZBar {
        /// The entry points found; immutable once made.
        final class Entries: @unchecked Sendable {
            let api: binder_zbar

            init(_ api: binder_zbar) { self.api = api }
        }

        /// Opened once, at the first use; the library stays loaded.
        private static let opened: Result<Entries, Failure> = {
            guard let table = binder_zbar_allocate() else { return .failure(.scanner("out of memory")) }
            defer { free(table) }
            if let why = binder_zbar_open(table) {
                return .failure(.scanner("libzbar is needed to read a QR code in a picture (apt install libzbar0): "
                                         + String(cString: why)))
            }
            return .success(Entries(table.pointee))
        }()

        static func load() throws(Failure) { _ = try opened.get() }

        /// The entry points. Only for code that runs after `load()` succeeded: a call before it is
        /// our bug, and traps.
        static var api: binder_zbar {
            guard case .success(let entries) = opened else { preconditionFailure("libzbar used before ZBar.load()") }
            return entries.api
        }
    }

    /// A zbar image scanner that looks for QR codes only.
    private final class Scanner {
        let pointer: OpaquePointer

        init?() {
            guard let pointer = ZBar.api.zbar_image_scanner_create() else { return nil }
            self.pointer = pointer
            _ = ZBar.api.zbar_image_scanner_request_dbus(pointer, 0)  // results stay here (zbar can announce them on D-Bus)
            _ = ZBar.api.zbar_image_scanner_set_config(pointer, ZBAR_NONE, ZBAR_CFG_ENABLE, 0)
            _ = ZBar.api.zbar_image_scanner_set_config(pointer, ZBAR_QRCODE, ZBAR_CFG_ENABLE, 1)
        }

        deinit { ZBar.api.zbar_image_scanner_destroy(pointer) }
    }

    /// A zbar image over a copy of the gray pixels this object owns (zbar only borrows them:
    /// the image is destroyed before they are freed).
    private final class Picture {
        let pointer: OpaquePointer
        private let pixels: UnsafeMutableBufferPointer<UInt8>

        init?(_ image: GrayImage) {
            guard let pointer = ZBar.api.zbar_image_create() else { return nil }
            self.pointer = pointer
            pixels = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(1, image.pixels.count))
            _ = pixels.initialize(from: image.pixels)
            ZBar.api.zbar_image_set_format(pointer, binder_zbar_format_y800())
            ZBar.api.zbar_image_set_size(pointer, UInt32(image.width), UInt32(image.height))
            ZBar.api.zbar_image_set_data(pointer, pixels.baseAddress, UInt(image.pixels.count), nil)
        }

        deinit {
            ZBar.api.zbar_image_destroy(pointer)
            pixels.deallocate()
        }
    }
}
