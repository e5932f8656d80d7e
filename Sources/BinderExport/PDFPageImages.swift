import BinderSystem
internal import CPangoCairo
import Synchronization

/// The pages of a PDF held in memory, drawn by poppler-glib onto a Cairo image and given as
/// gray pictures (`GrayImage`), for a QR decoder: a recovery sheet's code is drawn as vectors,
/// a vaccination record's as a Flate-compressed picture, a scanner's page as a JPEG, and all
/// of them come out as pixels. The bytes are never written to a file (poppler reads its own
/// copy in memory). The work is bounded: the first `Limits.maximumPages` pages only, each
/// drawn within `Limits.maximumPixels`; a page that would need fewer dots per inch than
/// `Limits.minimumDotsPerInch` to fit is refused, not allocated.
public final class PDFPageImages {
    public struct Limits: Sendable {
        /// Pages drawn at most (a health card's chunks fit on a few; a sheet is one page).
        public var maximumPages: Int
        /// The resolution a page is drawn at: a QR code printed as a picture 1.5 inches wide
        /// (85 modules: a vaccination card's) is read at 300 and not at 200, where Cairo's
        /// smoothing of the enlarged picture blurs its modules together (measured with zbar).
        public var dotsPerInch: Double
        /// Below this a larger page is refused rather than drawn smaller: a QR code would not be read.
        public var minimumDotsPerInch: Double
        /// Pixels of one page's image (4 bytes each while drawn): an A3 page at 300 dpi is 17.4 million.
        public var maximumPixels: Int

        public init(maximumPages: Int = 10, dotsPerInch: Double = 300, minimumDotsPerInch: Double = 100,
                    maximumPixels: Int = 20_000_000) {
            self.maximumPages = maximumPages
            self.dotsPerInch = dotsPerInch
            self.minimumDotsPerInch = minimumDotsPerInch
            self.maximumPixels = maximumPixels
        }
    }

    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// The PDF needs a password to be opened (its user password is not empty).
        case passwordProtected
        /// poppler cannot read it as a PDF (damaged, truncated, not a PDF): poppler's words.
        case unreadable(String)
        /// It has no page.
        case noPages
        /// The page (counted from 1) is too large to draw within the limits.
        case pageTooLarge(page: Int, widthInches: Double, heightInches: Double, maximumPixels: Int)
        /// poppler-glib (or Cairo) cannot be opened: why.
        case noRenderer(String)
        /// Drawing the page (counted from 1) failed: Cairo's words.
        case render(page: Int, String)

        public var description: String {
            switch self {
            case .passwordProtected: return "the PDF is protected by a password"
            case .unreadable(let why): return "the PDF cannot be read (\(why))"
            case .noPages: return "the PDF has no pages"
            case .pageTooLarge(let page, let width, let height, let maximum):
                return "page \(page) is \(Self.inches(width)) × \(Self.inches(height)) inches: too large to draw "
                    + "(at most \(maximum / 1_000_000) million pixels, 20,000 a side)"
            case .noRenderer(let why): return why
            case .render(let page, let why): return "page \(page) cannot be drawn (\(why))"
            }
        }

        /// poppler-glib could not be opened (a caller may read a scanner's PDF without it).
        public var isNoRenderer: Bool {
            if case .noRenderer = self { return true }
            return false
        }

        private static func inches(_ value: Double) -> String {
            value < 100 ? String(Double((value * 10).rounded()) / 10) : String(Int(min(value, 1e15)))
        }
    }

    /// Pages in the document, and how many of them `page(_:)` draws (the limit).
    public let pageCount: Int
    public var pagesDrawn: Int { min(pageCount, limits.maximumPages) }
    private let limits: Limits
    private let document: PDFDocumentHandle

    /// Opens `pdf` (a copy is poppler's, freed with this object); nothing is drawn yet.
    public init(_ pdf: [UInt8], limits: Limits = Limits()) throws(Failure) {
        self.limits = limits
        let cairo: binder_pangocairo, poppler: binder_poppler
        do { cairo = try PangoCairo.load() } catch { throw .noRenderer("\(error)") }
        poppler = try Poppler.load()
        let opened = try Poppler.serialised { () throws(Failure) in try PDFDocumentHandle(pdf, poppler: poppler, cairo: cairo) }
        let count = try Poppler.serialised { Int(poppler.poppler_document_get_n_pages(opened.pointer)) }
        guard count > 0 else { throw .noPages }
        document = opened
        pageCount = count
    }

    /// Page `index` (from 0, below `pagesDrawn`), drawn over white at `Limits.dotsPerInch`, or
    /// less where that keeps it within `Limits.maximumPixels` and 20,000 pixels a side.
    public func page(_ index: Int) throws(Failure) -> GrayImage {
        guard index >= 0, index < pagesDrawn else { throw .render(page: index + 1, "past the pages drawn") }
        let surface = try Poppler.serialised { () throws(Failure) in try document.draw(page: index, limits: limits) }
        return GrayImage.gray(surface)
    }

    /// The resolution page `number` of `widthPoints` × `heightPoints` (1/72 inch) is drawn at,
    /// and its size in pixels: `Limits.dotsPerInch` or less to fit, never below the minimum.
    static func pixels(page number: Int, widthPoints: Double, heightPoints: Double,
                       limits: Limits) throws(Failure) -> (dotsPerInch: Double, width: Int, height: Int) {
        let widthInches = widthPoints / 72, heightInches = heightPoints / 72
        guard widthInches.isFinite, heightInches.isFinite, widthInches > 0, heightInches > 0 else {
            throw .unreadable("page \(number) has no size")
        }
        let largestSide = 20_000.0
        let fitting = min(limits.dotsPerInch, (Double(limits.maximumPixels) / (widthInches * heightInches)).squareRoot(),
                          largestSide / widthInches, largestSide / heightInches)
        guard fitting >= limits.minimumDotsPerInch else {
            throw .pageTooLarge(page: number, widthInches: widthInches, heightInches: heightInches, maximumPixels: limits.maximumPixels)
        }
        // Rounded down: the pixels stay within the limits the resolution was chosen for.
        return (fitting, max(1, Int(widthInches * fitting)), max(1, Int(heightInches * fitting)))
    }
}

/// poppler-glib, opened at the first PDF read (`dlopen`: popplershim.h says why), apart from
/// Pango and Cairo so that drawing and pictures work without it.
enum Poppler {
    /// Opened once, at the first use; the library stays loaded (a failure is kept too).
    private static let opened = Result { () throws(SharedLibraryError) in
        try SharedLibrarySymbols<binder_poppler>([(file: String(cString: binder_poppler_file()), names: binder_poppler_names)])
    }

    /// One document is opened or drawn at a time: poppler makes its global state (fonts,
    /// character maps) at the first document, without a lock of its own in this version.
    private static let lock = Mutex(())

    static func load() throws(PDFPageImages.Failure) -> binder_poppler {
        do { return try opened.get().entries } catch {
            throw .noRenderer("poppler-glib is needed to read a PDF's pages (apt install libpoppler-glib8): \(error)")
        }
    }

    static func serialised<Value>(_ body: () throws(PDFPageImages.Failure) -> Value) throws(PDFPageImages.Failure) -> Value {
        try lock.withLock { _ throws(PDFPageImages.Failure) in try body() }
    }
}

/// A poppler document and the GLib copy of the bytes it reads; both freed in deinit.
private final class PDFDocumentHandle {
    let pointer: OpaquePointer
    private let bytes: OpaquePointer
    private let poppler: binder_poppler
    private let cairo: binder_pangocairo

    init(_ pdf: [UInt8], poppler: binder_poppler, cairo: binder_pangocairo) throws(PDFPageImages.Failure) {
        self.poppler = poppler
        self.cairo = cairo
        guard let bytes = pdf.withUnsafeBytes({ poppler.g_bytes_new($0.baseAddress, UInt($0.count)) }) else {
            throw .unreadable("no memory for its copy")
        }
        var error: UnsafeMutablePointer<GError>?
        guard let document = poppler.poppler_document_new_from_bytes(bytes, nil, &error) else {
            poppler.g_bytes_unref(bytes)
            guard let error else { throw .unreadable("poppler gave no reason") }
            defer { poppler.g_error_free(error) }
            if error.pointee.domain == poppler.poppler_error_quark() && error.pointee.code == BINDER_POPPLER_ERROR_ENCRYPTED {
                throw .passwordProtected
            }
            throw .unreadable(error.pointee.message.map { String(cString: $0) } ?? "poppler error \(error.pointee.code)")
        }
        self.bytes = bytes
        pointer = document
    }

    deinit {
        poppler.g_object_unref(UnsafeMutableRawPointer(pointer))
        poppler.g_bytes_unref(bytes)
    }

    /// Page `index` drawn onto a new white image (the lock of `Poppler.serialised` held).
    func draw(page index: Int, limits: PDFPageImages.Limits) throws(PDFPageImages.Failure) -> CairoSurface {
        guard let pointer = poppler.poppler_document_get_page(pointer, Int32(index)) else {
            throw .unreadable("page \(index + 1) cannot be read")
        }
        let page = PDFPageHandle(pointer, poppler: poppler)
        var widthPoints = 0.0, heightPoints = 0.0
        poppler.poppler_page_get_size(page.pointer, &widthPoints, &heightPoints)
        let size = try PDFPageImages.pixels(page: index + 1, widthPoints: widthPoints, heightPoints: heightPoints, limits: limits)
        let surface: CairoSurface, context: CairoContext
        do {
            surface = try CairoSurface.image(width: size.width, height: size.height)
            context = try CairoContext(surface)
        } catch { throw .render(page: index + 1, "\(error)") }
        cairo.cairo_set_source_rgb(context.pointer, 1, 1, 1)
        cairo.cairo_paint(context.pointer)
        cairo.cairo_scale(context.pointer, size.dotsPerInch / 72, size.dotsPerInch / 72)
        poppler.poppler_page_render(page.pointer, context.pointer)
        let status = cairo.cairo_status(context.pointer)
        guard status == CAIRO_STATUS_SUCCESS else { throw .render(page: index + 1, PangoCairo.describe(status, cairo)) }
        return surface
    }
}

/// A page of a poppler document (a reference of its own), released in deinit.
private final class PDFPageHandle {
    let pointer: OpaquePointer
    private let poppler: binder_poppler

    init(_ pointer: OpaquePointer, poppler: binder_poppler) {
        self.pointer = pointer
        self.poppler = poppler
    }

    deinit { poppler.g_object_unref(UnsafeMutableRawPointer(pointer)) }
}
