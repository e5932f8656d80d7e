import BinderSystem
internal import CPangoCairo

/// Pango, Cairo and libjpeg, opened at the first PDF or picture (`dlopen`, CPangoCairo's
/// shim.h says why they are not linked). Every owner in Cairo.swift and QRCodePNG.swift holds
/// the entry points `load()` gave the surface it was made from.
enum PangoCairo {
    /// Opened once, at the first use; the libraries stay loaded (a failure is kept too: the
    /// files do not appear while the process runs).
    private static let opened = Result { () throws(SharedLibraryError) in
        try SharedLibrarySymbols<binder_pangocairo>([(file: String(cString: binder_pangocairo_file()), names: binder_pangocairo_names),
                                                     (file: String(cString: binder_jpeg_file()), names: binder_jpeg_names)])
    }

    /// The entry points, the libraries opened at the first call; throws when they cannot be.
    static func load() throws(ExportError) -> binder_pangocairo {
        do { return try opened.get().entries } catch {
            throw .render("Pango, Cairo and libjpeg are needed to draw (apt install libpangocairo-1.0-0 libjpeg62-turbo): \(error)")
        }
    }

    /// Cairo's words for a status.
    static func describe(_ status: cairo_status_t, _ api: binder_pangocairo) -> String {
        api.cairo_status_to_string(status).map { String(cString: $0) } ?? "cairo status \(status.rawValue)"
    }
}
