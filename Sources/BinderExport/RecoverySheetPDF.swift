/// A key's recovery sheet (`binder key backup --sheet`): one A4 page to print, with the
/// ncryptsec as a QR code (drawn as vector squares, sharp at any printer's resolution) and as
/// text in short groups a person can type back, the npub it belongs to, the date and the
/// caller's instructions. Everything stays in memory: the caller decides where the bytes go.
public enum RecoverySheetPDF {
    /// Characters in a group, and groups on a line, of the printed ncryptsec.
    public static let groupLength = 6, groupsPerLine = 6

    /// The ncryptsec as printed: its prefix (`ncryptsec1`) whole, then groups of `groupLength`
    /// characters, `groupsPerLine` to a line.
    public static func groupedLines(_ text: String) -> [String] {
        let separator = text.lastIndex(of: "1").map { text.index(after: $0) } ?? text.startIndex
        let characters = Array(text[separator...])
        let groups = (separator == text.startIndex ? [] : [String(text[..<separator])])
            + stride(from: 0, to: characters.count, by: groupLength).map {
                String(characters[$0..<min($0 + groupLength, characters.count)])
            }
        return stride(from: 0, to: groups.count, by: groupsPerLine).map {
            groups[$0..<min($0 + groupsPerLine, groups.count)].joined(separator: " ")
        }
    }

    /// The page. `qrModules`: the code's rows, true for dark, without the quiet zone (the
    /// caller's QR encoder makes them); `instructions`: plain paragraphs, shown as they are.
    public static func render(title: String, ncryptsec: String, npub: String, date: String,
                              instructions: [String], qrModules: [[Bool]]) throws -> [UInt8] {
        let count = qrModules.count
        guard count > 0, qrModules.allSatisfy({ $0.count == count }) else { throw ExportError.render("a QR code is a square of modules") }
        let sink = ByteSink()
        let surface = try CairoSurface.pdf(width: PDFPages.pageWidth, height: PDFPages.pageHeight, sink: sink)
        surface.setMetadata(title: title, creator: "binder key backup")
        let cairo = try CairoContext(surface)
        let text = try TextContext(cairo)
        let margin = PDFPages.margin, width = PDFPages.pageWidth - 2 * PDFPages.margin
        var y = margin

        func paragraph(_ markup: String, _ font: FontDescription, color: (Double, Double, Double) = PDFPages.ink, after: Double) {
            let layout = TextLayout(text, markup: markup, font: font, width: width)
            cairo.color(color)
            cairo.show(layout, x: margin, y: y)
            y += layout.size.height + after
        }

        paragraph(Markdown.escape(title), FontDescription("Noto Sans, DejaVu Sans Bold 20"), after: 4)
        paragraph(Markdown.escape(date), FontDescription("Noto Sans, DejaVu Sans 10"), color: PDFPages.grey, after: 8)
        cairo.color(PDFPages.accent)
        cairo.line(from: (margin, y), to: (margin + width, y), width: 1.2)
        y += 14

        // The QR code, centred, with the four light modules of quiet zone scanners expect.
        let module = min(3.0, 230.0 / Double(count + 2 * QRCodePNG.quietZone))
        let side = Double(count + 2 * QRCodePNG.quietZone) * module
        let left = (PDFPages.pageWidth - side) / 2
        cairo.color((1, 1, 1))
        cairo.rectangle(x: left, y: y, width: side, height: side, fill: true)
        cairo.color((0, 0, 0))
        let origin = (x: left + Double(QRCodePNG.quietZone) * module, y: y + Double(QRCodePNG.quietZone) * module)
        for (row, modules) in qrModules.enumerated() {
            for (column, dark) in modules.enumerated() where dark {
                // A hair wider than a module, so that no seam shows between neighbours.
                cairo.rectangle(x: origin.x + Double(column) * module, y: origin.y + Double(row) * module,
                                width: module + 0.05, height: module + 0.05, fill: true)
            }
        }
        y += side + 10

        let label = FontDescription("Noto Sans, DejaVu Sans Bold 10")
        paragraph("Encrypted key (ncryptsec)", label, color: PDFPages.accent, after: 4)
        paragraph(groupedLines(ncryptsec).map(Markdown.escape).joined(separator: "\n"), FontDescription("DejaVu Sans Mono, Noto Sans Mono 12"), after: 10)
        paragraph("Public key (npub): the key this sheet restores", label, color: PDFPages.accent, after: 4)
        paragraph(Markdown.escape(npub), FontDescription("DejaVu Sans Mono, Noto Sans Mono 9"), after: 12)
        let body = FontDescription("Noto Sans, DejaVu Sans 10")
        for instruction in instructions { paragraph(Markdown.escape(instruction), body, after: 6) }
        guard y <= PDFPages.pageHeight - 20 else { throw ExportError.render("the recovery sheet does not fit on one page") }
        cairo.showPage()
        try surface.finish()
        return sink.bytes
    }
}
