internal import CPangoCairo

/// A picture as 8-bit grayscale (one byte a pixel, rows top to bottom, no padding): what
/// `binder open-share` hands a QR decoder. PNG is read by Cairo and JPEG by libjpeg (the
/// readers the PDF export uses), never by code of our own. Transparent pixels lie over white.
public struct GrayImage: Sendable {
    public let width: Int
    public let height: Int
    public let pixels: [UInt8]

    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// Neither a PNG nor a JPEG (by their signatures).
        case notAnImage
        /// Larger than the caller's bound (or than the readers' own: 20,000 pixels a side).
        case tooLarge(width: Int, height: Int, maximumPixels: Int)
        /// A PNG or JPEG the reader could not decode (truncated, corrupt, CMYK…).
        case unreadable(kind: String)
        /// The readers (Cairo, libjpeg) cannot be opened: why.
        case noReader(String)

        public var description: String {
            switch self {
            case .notAnImage: return "not a PNG or JPEG image"
            case .tooLarge(let width, let height, let maximum):
                return "the image is \(width)×\(height) pixels; at most \(maximum) pixels (20,000 a side) are read"
            case .unreadable(let kind): return "the \(kind) image cannot be decoded (truncated or corrupt)"
            case .noReader(let why): return why
            }
        }
    }

    /// Decodes `bytes` (a PNG or a JPEG) to grayscale. The size in the header is checked against
    /// `maximumPixels` before anything is allocated for the pixels.
    public static func decode(_ bytes: [UInt8], maximumPixels: Int) throws(Failure) -> GrayImage {
        let isPNG = bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        let isJPEG = bytes.starts(with: [0xFF, 0xD8, 0xFF])
        guard isPNG || isJPEG else { throw .notAnImage }
        let kind = isPNG ? "PNG" : "JPEG"
        guard let (width, height) = isPNG ? pngSize(bytes) : jpegSize(bytes) else { throw .unreadable(kind: kind) }
        guard width > 0, height > 0 else { throw .unreadable(kind: kind) }
        guard width <= 20_000, height <= 20_000, width * height <= maximumPixels else {
            throw .tooLarge(width: width, height: height, maximumPixels: maximumPixels)
        }
        do { _ = try PangoCairo.load() } catch { throw .noReader("\(error)") }
        guard let surface = isPNG ? CairoSurface.png(bytes) : CairoSurface.jpeg(bytes) else { throw .unreadable(kind: kind) }
        return gray(surface)
    }

    /// IHDR's width and height (a PNG's first chunk, bytes 16..<24).
    static func pngSize(_ bytes: [UInt8]) -> (Int, Int)? {
        guard bytes.count >= 24, bytes[12..<16].elementsEqual("IHDR".utf8) else { return nil }
        return (bytes[16..<20].reduce(0) { $0 << 8 | Int($1) }, bytes[20..<24].reduce(0) { $0 << 8 | Int($1) })
    }

    /// The frame header's size: the first SOFn marker's (not DHT C4, JPG C8, DAC CC), walking
    /// the marker segments by their lengths.
    static func jpegSize(_ bytes: [UInt8]) -> (Int, Int)? {
        var at = 2
        while at + 9 < bytes.count {
            guard bytes[at] == 0xFF else { return nil }
            let marker = bytes[at + 1]
            if marker == 0xFF { at += 1; continue }  // fill byte
            let length = Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
            guard length >= 2 else { return nil }
            if (0xC0...0xCF).contains(marker) && ![0xC4, 0xC8, 0xCC].contains(marker) {
                let height = Int(bytes[at + 5]) << 8 | Int(bytes[at + 6]), width = Int(bytes[at + 7]) << 8 | Int(bytes[at + 8])
                return (width, height)
            }
            at += 2 + length
        }
        return nil
    }

    /// Luma (ITU-R BT.601) of Cairo's native-endian 0xAARRGGBB pixels (premultiplied in ARGB32;
    /// RGB24 has no alpha), over white.
    static func gray(_ surface: CairoSurface) -> GrayImage {
        let api = surface.api
        api.cairo_surface_flush(surface.pointer)
        let width = Int(api.cairo_image_surface_get_width(surface.pointer)), height = Int(api.cairo_image_surface_get_height(surface.pointer))
        let stride = Int(api.cairo_image_surface_get_stride(surface.pointer))
        let hasAlpha = api.cairo_image_surface_get_format(surface.pointer) == CAIRO_FORMAT_ARGB32
        var pixels = [UInt8](repeating: 255, count: width * height)
        if let data = api.cairo_image_surface_get_data(surface.pointer) {
            let raw = UnsafeRawPointer(data)
            for y in 0..<height {
                let row = raw + y * stride
                for x in 0..<width {
                    let pixel = row.loadUnaligned(fromByteOffset: x * 4, as: UInt32.self)
                    let r = Int(pixel >> 16 & 0xFF), g = Int(pixel >> 8 & 0xFF), b = Int(pixel & 0xFF)
                    let alpha = hasAlpha ? Int(pixel >> 24) : 255
                    pixels[y * width + x] = UInt8(min(255, (r * 299 + g * 587 + b * 114) / 1000 + (255 - alpha)))
                }
            }
        }
        return GrayImage(width: width, height: height, pixels: pixels)
    }
}
