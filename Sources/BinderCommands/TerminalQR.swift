internal import CQREncode

/// A QR code of some text (libqrencode), drawn for a terminal.
struct TerminalQR {
    /// Rows of modules, true for dark, without the quiet zone.
    let modules: [[Bool]]

    /// The smallest QR code of `text` at error correction level L (as the app's QR library
    /// draws it); nil if libqrencode cannot encode it (too long).
    init?(_ text: String) {
        guard let code = QRcode_encodeString8bit(text, 0, QR_ECLEVEL_L) else { return nil }
        defer { QRcode_free(code) }
        let width = Int(code.pointee.width)
        guard width > 0, let data = code.pointee.data else { return nil }
        modules = (0..<width).map { y in (0..<width).map { x in data[y * width + x] & 1 == 1 } }
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
