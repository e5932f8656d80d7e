internal import CPangoCairo

/// A QR code drawn as a PNG by Cairo's PNG writer (`binder share --qr-png`): black modules on
/// white, `scale` pixels a module, with the standard quiet zone of four light modules around.
/// The bytes stay in memory: the caller decides where they may go (the payload holds secrets).
public enum QRCodePNG {
    /// The light modules around the code that scanners expect (ISO/IEC 18004).
    public static let quietZone = 4

    /// `modules`: rows of the code, true for dark, square, without a quiet zone.
    public static func png(modules: [[Bool]], scale: Int) throws -> [UInt8] {
        let count = modules.count
        guard count > 0, modules.allSatisfy({ $0.count == count }) else { throw ExportError.render("a QR code is a square of modules") }
        guard scale >= 1, scale <= 64 else { throw ExportError.render("a QR module is 1 to 64 pixels") }
        let side = (count + 2 * quietZone) * scale
        let api = try PangoCairo.load()
        let surface = try ImageSurface(width: side, height: side, api: api)
        guard let context = api.cairo_create(surface.pointer) else { throw ExportError.render("cairo made no context") }
        defer { api.cairo_destroy(context) }
        api.cairo_set_antialias(context, CAIRO_ANTIALIAS_NONE)
        api.cairo_set_source_rgb(context, 1, 1, 1)
        api.cairo_paint(context)
        api.cairo_set_source_rgb(context, 0, 0, 0)
        for (y, row) in modules.enumerated() {
            for (x, dark) in row.enumerated() where dark {
                api.cairo_rectangle(context, Double((x + quietZone) * scale), Double((y + quietZone) * scale), Double(scale), Double(scale))
            }
        }
        api.cairo_fill(context)
        guard api.cairo_status(context) == CAIRO_STATUS_SUCCESS else { throw ExportError.render("cairo could not draw the QR code") }
        api.cairo_surface_flush(surface.pointer)
        let sink = ByteSink()
        let status = withExtendedLifetime(sink) {
            api.cairo_surface_write_to_png_stream(surface.pointer, { closure, data, length in
                guard let closure, let data else { return CAIRO_STATUS_WRITE_ERROR }
                Unmanaged<ByteSink>.fromOpaque(closure).takeUnretainedValue().bytes
                    .append(contentsOf: UnsafeBufferPointer(start: data, count: Int(length)))
                return CAIRO_STATUS_SUCCESS
            }, Unmanaged.passUnretained(sink).toOpaque())
        }
        guard status == CAIRO_STATUS_SUCCESS else { throw ExportError.render(PangoCairo.describe(status, api)) }
        return sink.bytes
    }

    /// An RGB image surface, destroyed with its owner.
    private final class ImageSurface {
        let pointer: OpaquePointer
        let api: binder_pangocairo

        init(width: Int, height: Int, api: binder_pangocairo) throws {
            self.api = api
            guard let surface = api.cairo_image_surface_create(CAIRO_FORMAT_RGB24, Int32(width), Int32(height)) else {
                throw ExportError.render("cairo made no image")
            }
            pointer = surface
            guard api.cairo_surface_status(surface) == CAIRO_STATUS_SUCCESS else { throw ExportError.render("cairo made no image") }
        }

        deinit { api.cairo_surface_destroy(pointer) }
    }
}
