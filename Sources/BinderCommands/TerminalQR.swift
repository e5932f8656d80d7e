import BinderSystem
internal import CQREncode

/// A QR code of some text (libqrencode), drawn for a terminal.
struct TerminalQR {
    /// Rows of modules, true for dark, without the quiet zone.
    let modules: [[Bool]]

    enum Failure: Error, CustomStringConvertible {
        /// libqrencode cannot be opened: why.
        case noEncoder(String)
        /// libqrencode made no code of the text (too long for a QR code).
        case tooLong

        var description: String {
            switch self {
            case .noEncoder(let why): return why
            case .tooLong: return "the text is too long for a QR code"
            }
        }
    }

    /// How much of the code may be damaged and still read (ISO/IEC 18004 levels).
    enum Correction {
        /// L, about 7%: a screen (as the app's QR library draws it).
        case low
        /// H, about 30%: paper, which gets folded, stained and photographed at an angle.
        case high
    }

    /// The smallest QR code of `text` at the error correction level `correction`.
    init(_ text: String, correction: Correction = .low) throws(Failure) {
        let api = try QREncode.api()
        guard let code = api.QRcode_encodeString8bit(text, 0, correction == .high ? QR_ECLEVEL_H : QR_ECLEVEL_L) else { throw .tooLong }
        defer { api.QRcode_free(code) }
        let width = Int(code.pointee.width)
        guard width > 0, let data = code.pointee.data else { throw .tooLong }
        modules = (0..<width).map { y in (0..<width).map { x in data[y * width + x] & 1 == 1 } }
    }

    /// libqrencode, opened at the first QR code drawn (`dlopen`: CQREncode's shim.h says why it
    /// is not linked).
    enum QREncode {
        /// Opened once, at the first use; the library stays loaded.
        private static let opened = Result { () throws(SharedLibraryError) in
            try SharedLibrarySymbols<binder_qrencode>([(file: "libqrencode.so.4", names: binder_qrencode_names)])
        }

        /// The entry points, opening the library at the first call.
        static func api() throws(Failure) -> binder_qrencode {
            do { return try opened.get().entries } catch {
                throw .noEncoder("libqrencode is needed to draw a QR code (apt install libqrencode4): \(error)")
            }
        }
    }

    /// Two rows of modules per line in half blocks, light modules drawn (for a dark terminal,
    /// as `qrencode -t UTF8` does), with a quiet zone of two modules.
    var text: String {
        let quiet = 2
        let size = modules.count + 2 * quiet
        func dark(_ x: Int, _ y: Int) -> Bool {
            let (mx, my) = (x - quiet, y - quiet)
            guard my >= 0, my < modules.count, mx >= 0, mx < modules.count else { return false }
            return modules[my][mx]
        }
        var lines: [String] = []
        for y in stride(from: 0, to: size, by: 2) {
            var line = ""
            for x in 0..<size {
                switch (dark(x, y), y + 1 < size ? dark(x, y + 1) : true) {
                case (false, false): line += "█"
                case (false, true): line += "▀"
                case (true, false): line += "▄"
                case (true, true): line += " "
                }
            }
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }
}
