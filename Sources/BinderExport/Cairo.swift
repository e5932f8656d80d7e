internal import CPangoCairo

// Owners of the Cairo and Pango objects the PDF export uses: each frees its object in deinit,
// and none of them is visible outside this module. Each holds the entry points it calls Cairo
// and Pango through (`api`): a surface gets them from `PangoCairo.load()`, which opens the
// libraries at the first use (PangoCairoLibrary.swift), and what is made from it from it.

/// The bytes Cairo writes for a PDF, kept in memory (the export is written once, at the end).
final class ByteSink {
    var bytes: [UInt8] = []
}

/// A Cairo surface: the PDF being written, or an image to draw.
final class CairoSurface {
    let pointer: OpaquePointer
    let api: binder_pangocairo

    private init(_ pointer: OpaquePointer, api: binder_pangocairo) {
        self.pointer = pointer
        self.api = api
    }

    deinit { api.cairo_surface_destroy(pointer) }

    /// A PDF surface whose output goes to `sink` (nil: nowhere, for measuring).
    static func pdf(width: Double, height: Double, sink: ByteSink?) throws -> CairoSurface {
        let api = try PangoCairo.load()
        let surface: OpaquePointer?
        if let sink {
            surface = api.cairo_pdf_surface_create_for_stream({ closure, data, length in
                guard let closure, let data else { return CAIRO_STATUS_WRITE_ERROR }
                Unmanaged<ByteSink>.fromOpaque(closure).takeUnretainedValue().bytes
                    .append(contentsOf: UnsafeBufferPointer(start: data, count: Int(length)))
                return CAIRO_STATUS_SUCCESS
            }, Unmanaged.passUnretained(sink).toOpaque(), width, height)
        } else {
            surface = api.cairo_pdf_surface_create_for_stream(nil, nil, width, height)
        }
        guard let surface else { throw ExportError.render("cairo made no PDF surface") }
        let owned = CairoSurface(surface, api: api)
        try owned.check()
        return owned
    }

    /// An opaque image (RGB24) of `width` × `height` pixels, to draw on: the caller bounds the size.
    static func image(width: Int, height: Int) throws(ExportError) -> CairoSurface {
        let api = try PangoCairo.load()
        guard let surface = api.cairo_image_surface_create(CAIRO_FORMAT_RGB24, Int32(width), Int32(height)) else {
            throw .render("cairo made no \(width)×\(height) image")
        }
        let owned = CairoSurface(surface, api: api)
        let status = api.cairo_surface_status(surface)
        guard status == CAIRO_STATUS_SUCCESS else { throw .render(PangoCairo.describe(status, api)) }
        return owned
    }

    /// A JPEG decoded by libjpeg; the original bytes are attached, so the PDF embeds them as
    /// they are (DCT) rather than re-encoding the pixels.
    static func jpeg(_ bytes: [UInt8]) -> CairoSurface? {
        guard var api = try? PangoCairo.load(),
              let surface = bytes.withUnsafeBufferPointer({ binder_jpeg_surface(&api, $0.baseAddress, UInt($0.count)) }) else { return nil }
        let owned = CairoSurface(surface, api: api)
        guard !bytes.isEmpty, let copy = malloc(bytes.count) else { return owned }
        bytes.withUnsafeBytes { if let base = $0.baseAddress { copy.copyMemory(from: base, byteCount: bytes.count) } }
        // Cairo owns the copy from here and frees it with the surface.
        if api.cairo_surface_set_mime_data(surface, "image/jpeg", copy.assumingMemoryBound(to: UInt8.self), UInt(bytes.count),
                                       { free($0) }, copy) != CAIRO_STATUS_SUCCESS {
            free(copy)
        }
        return owned
    }

    /// A PNG decoded by Cairo; nil when it is not one, or larger than the limits below.
    static func png(_ bytes: [UInt8]) -> CairoSurface? {
        // IHDR's width and height (bytes 16..<24): refuse pictures too large to allocate.
        guard bytes.count > 24 else { return nil }
        let width = bytes[16..<20].reduce(0) { $0 << 8 | Int($1) }, height = bytes[20..<24].reduce(0) { $0 << 8 | Int($1) }
        guard width > 0, height > 0, width <= 20_000, height <= 20_000, width * height <= 80_000_000,
              let api = try? PangoCairo.load() else { return nil }
        final class Source {
            let bytes: [UInt8]
            var offset = 0
            init(_ bytes: [UInt8]) { self.bytes = bytes }
        }
        let source = Source(bytes)
        let surface = withExtendedLifetime(source) {
            api.cairo_image_surface_create_from_png_stream({ closure, data, length in
                guard let closure, let data else { return CAIRO_STATUS_READ_ERROR }
                let source = Unmanaged<Source>.fromOpaque(closure).takeUnretainedValue()
                let count = Int(length)
                guard source.bytes.count - source.offset >= count else { return CAIRO_STATUS_READ_ERROR }
                source.bytes.withUnsafeBufferPointer { buffer in
                    if let base = buffer.baseAddress { data.update(from: base + source.offset, count: count) }
                }
                source.offset += count
                return CAIRO_STATUS_SUCCESS
            }, Unmanaged.passUnretained(source).toOpaque())
        }
        guard let surface else { return nil }
        let owned = CairoSurface(surface, api: api)
        return api.cairo_surface_status(surface) == CAIRO_STATUS_SUCCESS ? owned : nil
    }

    var width: Double { Double(api.cairo_image_surface_get_width(pointer)) }
    var height: Double { Double(api.cairo_image_surface_get_height(pointer)) }

    func check() throws {
        let status = api.cairo_surface_status(pointer)
        guard status == CAIRO_STATUS_SUCCESS else { throw ExportError.render(PangoCairo.describe(status, api)) }
    }

    func setMetadata(title: String, creator: String) {
        api.cairo_pdf_surface_set_metadata(pointer, CAIRO_PDF_METADATA_TITLE, title)
        api.cairo_pdf_surface_set_metadata(pointer, CAIRO_PDF_METADATA_CREATOR, creator)
    }

    /// An entry of the PDF's outline (bookmarks); returns its id for children.
    @discardableResult
    func addOutline(parent: Int32, title: String, page: Int, open: Bool) -> Int32 {
        api.cairo_pdf_surface_add_outline(pointer, parent, title, "page=\(page)",
                                      open ? CAIRO_PDF_OUTLINE_FLAG_OPEN : cairo_pdf_outline_flags_t(rawValue: 0))
    }

    func finish() throws {
        api.cairo_surface_finish(pointer)
        try check()
    }
}

/// A Cairo drawing context on a surface.
final class CairoContext {
    let pointer: OpaquePointer
    let api: binder_pangocairo

    init(_ surface: CairoSurface) throws {
        api = surface.api
        guard let context = api.cairo_create(surface.pointer) else { throw ExportError.render("cairo made no context") }
        pointer = context
        guard api.cairo_status(context) == CAIRO_STATUS_SUCCESS else { throw ExportError.render("cairo made no context") }
    }

    deinit { api.cairo_destroy(pointer) }
}

/// A Pango font description (`Noto Sans Bold 12`), made by Pango at its first use: a renderer
/// names its fonts before it opens Pango (`PangoCairo.load()`, when its surface is made).
final class FontDescription {
    private let description: String
    /// Pango's description, and the entry points that made it (and free it).
    private var made: (pointer: OpaquePointer, api: binder_pangocairo)?

    init(_ description: String) { self.description = description }

    /// Nil only if Pango made none (it makes one of any string): the layout then keeps its
    /// default font.
    func pointer(_ api: binder_pangocairo) -> OpaquePointer? {
        if let made { return made.pointer }
        guard let new = api.pango_font_description_from_string(description) else { return nil }
        made = (new, api)
        return new
    }

    deinit { if let made { made.api.pango_font_description_free(made.pointer) } }
}

/// Pango's context for one Cairo context (fonts at 72 dpi: a point is a PDF unit).
final class TextContext {
    let pointer: OpaquePointer
    let api: binder_pangocairo

    init(_ cairo: CairoContext) throws {
        api = cairo.api
        guard let context = api.pango_cairo_create_context(cairo.pointer) else { throw ExportError.render("pango made no context") }
        pointer = context
        api.pango_cairo_context_set_resolution(context, 72)
    }

    deinit { api.g_object_unref(UnsafeMutableRawPointer(pointer)) }
}

/// A paragraph of text laid out by Pango.
final class TextLayout {
    let pointer: OpaquePointer
    let api: binder_pangocairo
    static let scale = Double(BINDER_PANGO_SCALE)

    /// `markup` is Pango markup; text that does not parse as markup is shown as plain text.
    init(_ context: TextContext, markup: String, font: FontDescription, width: Double?) {
        api = context.api
        // Never NULL: no input reaches this; GLib aborts the process when out of memory before
        // g_object_new could return nothing.
        guard let layout = api.pango_layout_new(context.pointer) else { preconditionFailure("pango_layout_new returned NULL") }
        pointer = layout
        api.pango_layout_set_font_description(pointer, font.pointer(api))
        if let width {
            api.pango_layout_set_width(pointer, Int32(width * Self.scale))
            api.pango_layout_set_wrap(pointer, PangoWrapMode(BINDER_PANGO_WRAP_WORD_CHAR))
        }
        // Parsed first so that a bad string never makes Pango print a warning (with its text).
        var attributes: OpaquePointer?
        var text: UnsafeMutablePointer<CChar>?
        if api.pango_parse_markup(markup, -1, 0, &attributes, &text, nil, nil) != 0, let text {
            api.pango_layout_set_text(pointer, text, -1)
            api.pango_layout_set_attributes(pointer, attributes)
        } else {
            api.pango_layout_set_text(pointer, markup, -1)
        }
        if let attributes { api.pango_attr_list_unref(attributes) }
        api.g_free(text)
    }

    deinit { api.g_object_unref(UnsafeMutableRawPointer(pointer)) }

    func ellipsize() { api.pango_layout_set_ellipsize(pointer, PangoEllipsizeMode(BINDER_PANGO_ELLIPSIZE_END)) }

    var size: (width: Double, height: Double) {
        var width: Int32 = 0, height: Int32 = 0
        api.pango_layout_get_size(pointer, &width, &height)
        return (Double(width) / Self.scale, Double(height) / Self.scale)
    }

    /// Each line: its top and height (from the layout's top), its baseline, its left edge.
    func lines() -> [(top: Double, height: Double, baseline: Double, x: Double, line: OpaquePointer?)] {
        guard let iterator = api.pango_layout_get_iter(pointer) else { return [] }
        defer { api.pango_layout_iter_free(iterator) }
        var result: [(Double, Double, Double, Double, OpaquePointer?)] = []
        repeat {
            var logical = PangoRectangle()
            api.pango_layout_iter_get_line_extents(iterator, nil, &logical)
            let baseline = Double(api.pango_layout_iter_get_baseline(iterator)) / Self.scale
            result.append((Double(logical.y) / Self.scale, Double(logical.height) / Self.scale, baseline,
                           Double(logical.x) / Self.scale, api.pango_layout_iter_get_line_readonly(iterator)))
        } while api.pango_layout_iter_next_line(iterator) != 0
        return result
    }
}

/// Drawing calls, kept here so that only this file speaks Cairo.
extension CairoContext {
    func color(_ rgb: (Double, Double, Double)) { api.cairo_set_source_rgb(pointer, rgb.0, rgb.1, rgb.2) }

    func show(_ line: OpaquePointer?, x: Double, baseline: Double) {
        guard let line else { return }
        api.cairo_move_to(pointer, x, baseline)
        api.pango_cairo_show_layout_line(pointer, line)
    }

    func show(_ layout: TextLayout, x: Double, y: Double) {
        api.cairo_move_to(pointer, x, y)
        api.pango_cairo_show_layout(pointer, layout.pointer)
    }

    func line(from: (Double, Double), to: (Double, Double), width: Double) {
        api.cairo_set_line_width(pointer, width)
        api.cairo_move_to(pointer, from.0, from.1)
        api.cairo_line_to(pointer, to.0, to.1)
        api.cairo_stroke(pointer)
    }

    func rectangle(x: Double, y: Double, width: Double, height: Double, fill: Bool, lineWidth: Double = 0.5) {
        api.cairo_rectangle(pointer, x, y, width, height)
        if fill { api.cairo_fill(pointer) } else {
            api.cairo_set_line_width(pointer, lineWidth)
            api.cairo_stroke(pointer)
        }
    }

    func draw(_ image: CairoSurface, x: Double, y: Double, scale: Double) {
        api.cairo_save(pointer)
        api.cairo_translate(pointer, x, y)
        api.cairo_scale(pointer, scale, scale)
        api.cairo_set_source_surface(pointer, image.pointer, 0, 0)
        // Tiny pictures (a 4×4 test strip) stay sharp when scaled up.
        if scale > 4 { api.cairo_pattern_set_filter(api.cairo_get_source(pointer), CAIRO_FILTER_NEAREST) }
        api.cairo_paint(pointer)
        api.cairo_restore(pointer)
    }

    func showPage() { api.cairo_show_page(pointer) }

    /// Makes what is drawn inside `body` a link to `page` of the document.
    func link(toPage page: Int, _ body: () -> Void) {
        api.cairo_tag_begin(pointer, "Link", "page=\(page)")
        body()
        api.cairo_tag_end(pointer, "Link")
    }
}
