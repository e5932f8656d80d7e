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
        let surface = try ImageSurface(width: side, height: side)
        guard let context = cairo_create(surface.pointer) else { throw ExportError.render("cairo made no context") }
        defer { cairo_destroy(context) }
        cairo_set_antialias(context, CAIRO_ANTIALIAS_NONE)
        cairo_set_source_rgb(context, 1, 1, 1)
        cairo_paint(context)
        cairo_set_source_rgb(context, 0, 0, 0)
        for (y, row) in modules.enumerated() {
            for (x, dark) in row.enumerated() where dark {
                cairo_rectangle(context, Double((x + quietZone) * scale), Double((y + quietZone) * scale), Double(scale), Double(scale))
            }
        }
        cairo_fill(context)
        guard cairo_status(context) == CAIRO_STATUS_SUCCESS else { throw ExportError.render("cairo could not draw the QR code") }
        cairo_surface_flush(surface.pointer)
        let sink = ByteSink()
        let status = withExtendedLifetime(sink) {
            cairo_surface_write_to_png_stream(surface.pointer, { closure, data, length in
                guard let closure, let data else { return CAIRO_STATUS_WRITE_ERROR }
                Unmanaged<ByteSink>.fromOpaque(closure).takeUnretainedValue().bytes
                    .append(contentsOf: UnsafeBufferPointer(start: data, count: Int(length)))
                return CAIRO_STATUS_SUCCESS
            }, Unmanaged.passUnretained(sink).toOpaque())
        }
        guard status == CAIRO_STATUS_SUCCESS else { throw ExportError.render(String(cString: cairo_status_to_string(status))) }
        return sink.bytes
    }

    /// An RGB image surface, destroyed with its owner.
    private final class ImageSurface {
        let pointer: OpaquePointer

        init(width: Int, height: Int) throws {
            guard let surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, Int32(width), Int32(height)) else {
                throw ExportError.render("cairo made no image")
            }
            pointer = surface
            guard cairo_surface_status(surface) == CAIRO_STATUS_SUCCESS else { throw ExportError.render("cairo made no image") }
        }

        deinit { cairo_surface_destroy(pointer) }
    }
}
