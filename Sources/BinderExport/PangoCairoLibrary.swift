internal import CPangoCairo

/// Pango, Cairo and libjpeg, opened at the first PDF or picture (`dlopen`, CPangoCairo's
/// shim.h says why they are not linked). Every owner in Cairo.swift and QRCodePNG.swift holds
/// the entry points `load()` gave the surface it was made from.
enum PangoCairo {
    /// The entry points found; immutable once made.
    final class Entries: @unchecked Sendable {
        let api: binder_pangocairo

        init(_ api: binder_pangocairo) { self.api = api }
    }

    /// Opened once, at the first use; the libraries stay loaded (a failure is kept too: the
    /// files do not appear while the process runs).
    private static let opened: Result<Entries, ExportError> = {
        guard let table = binder_pangocairo_allocate() else { return .failure(.render("out of memory")) }
        defer { free(table) }
        if let why = binder_pangocairo_open(table) {
            return .failure(.render("Pango, Cairo and libjpeg are needed to draw (apt install libpangocairo-1.0-0 "
                                    + "libjpeg62-turbo): \(String(cString: why))"))
        }
        return .success(Entries(table.pointee))
    }()

    /// The entry points, the libraries opened at the first call; throws when they cannot be.
    static func load() throws(ExportError) -> binder_pangocairo { try opened.get().api }

    /// Cairo's words for a status.
    static func describe(_ status: cairo_status_t, _ api: binder_pangocairo) -> String {
        api.cairo_status_to_string(status).map { String(cString: $0) } ?? "cairo status \(status.rawValue)"
    }
}
