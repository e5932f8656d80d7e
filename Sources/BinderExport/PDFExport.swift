import Foundation

/// A printable PDF laid out with Pango on Cairo's PDF surface: real, selectable text in any
/// script fontconfig has a font for. A cover page from patient-info, a table of contents by
/// category, then every record (title, category, dates, markdown, children nested beneath it,
/// pictures embedded, other attachments listed); page numbers and the patient's name in the
/// footer. Laid out twice: once to learn on which page each record falls (for the contents and
/// the "page N of M" footer), once to draw. Everything stays in memory.
enum PDFExport {
    static func render(_ content: ExportContent) throws -> [UInt8] {
        let shared = PassCache()
        let measured = try PDFPages(content: content, shared: shared, plan: nil)
        try measured.run()
        let drawn = try PDFPages(content: content, shared: shared, plan: measured.plan)
        try drawn.run()
        guard let sink = drawn.sink else { throw ExportError.render("no output") }
        return sink.bytes
    }
}

/// What both passes need and is worked out once: each picture's size (nil when it does not
/// decode), and each markdown text's blocks (asked for in the same order by both passes).
/// Decoded pixels are not kept: a picture is decoded again to be drawn and freed right after,
/// so memory holds one picture at a time, however many the records have.
final class PassCache {
    private var sizes: [Int: PictureSize?] = [:]
    private var blocks: [[PDFBlock]] = []

    struct PictureSize {
        var width: Double
        var height: Double
    }

    func blocks(_ markdown: String, sequence: Int) -> [PDFBlock] {
        if let made = blocks[safe: sequence] { return made }
        let made = PDFBlock.blocks(markdown: markdown)
        blocks.append(made)
        return made
    }

    func size(_ attachment: ExportAttachment, id: Int) -> PictureSize? {
        if let known = sizes[id] { return known }
        let size = Self.decode(attachment).map { PictureSize(width: $0.width, height: $0.height) }
        sizes[id] = size
        return size
    }

    static func decode(_ attachment: ExportAttachment) -> CairoSurface? {
        switch attachment.imageKind {
        case .jpeg: return CairoSurface.jpeg(attachment.bytes)
        case .png: return CairoSurface.png(attachment.bytes)
        case nil: return nil
        }
    }
}

/// Where things fell in the measuring pass.
struct PDFPlan {
    var recordPages: [Int] = []
    var categoryPages: [Int] = []
    var pageCount = 0
}

/// One pass over the document: measures (no output) or draws.
final class PDFPages {
    // A4 in points.
    static let pageWidth = 595.276, pageHeight = 841.89
    static let margin = 56.0, bottomMargin = 70.0, footerBaseline = 841.89 - 34

    let content: ExportContent
    let shared: PassCache
    /// The measuring pass's result; nil while measuring.
    let known: PDFPlan?
    var plan = PDFPlan()
    let sink: ByteSink?
    let surface: CairoSurface
    let cairo: CairoContext
    let text: TextContext
    var drawing: Bool { known != nil }

    var page = 1
    var y = PDFPages.margin
    var indent = 0.0
    var imageIDs = 0
    /// Markdown texts laid out so far (the shared cache's sequence numbers).
    var markdownTexts = 0

    let fonts = (body: FontDescription("Noto Sans, DejaVu Sans 10"), bold: FontDescription("Noto Sans, DejaVu Sans Bold 10"),
                 small: FontDescription("Noto Sans, DejaVu Sans 8.5"), mono: FontDescription("DejaVu Sans Mono, Noto Sans Mono 8.5"),
                 title: FontDescription("Noto Sans, DejaVu Sans Bold 26"), name: FontDescription("Noto Sans, DejaVu Sans Bold 20"),
                 category: FontDescription("Noto Sans, DejaVu Sans Bold 17"), record: FontDescription("Noto Sans, DejaVu Sans Bold 13"),
                 h1: FontDescription("Noto Sans, DejaVu Sans Bold 13"), h2: FontDescription("Noto Sans, DejaVu Sans Bold 12"),
                 h3: FontDescription("Noto Sans, DejaVu Sans Bold 11"), h4: FontDescription("Noto Sans, DejaVu Sans Bold 10.5"),
                 child: FontDescription("Noto Sans, DejaVu Sans Bold 10.5"))
    static let ink = (0.11, 0.12, 0.14), grey = (0.35, 0.38, 0.42), accent = (0.17, 0.32, 0.51), rule = (0.80, 0.83, 0.87),
               shade = (0.93, 0.95, 0.97)

    init(content: ExportContent, shared: PassCache, plan known: PDFPlan?) throws {
        self.content = content
        self.shared = shared
        self.known = known
        sink = known == nil ? nil : ByteSink()
        surface = try CairoSurface.pdf(width: Self.pageWidth, height: Self.pageHeight, sink: sink)
        cairo = try CairoContext(surface)
        text = try TextContext(cairo)
        if known != nil { surface.setMetadata(title: "Medical records — \(content.patient.displayName)", creator: "binder export") }
    }

    var contentWidth: Double { Self.pageWidth - 2 * Self.margin }
    var bottom: Double { Self.pageHeight - Self.bottomMargin }
    var left: Double { Self.margin + indent }
    var width: Double { contentWidth - indent }

    func run() throws {
        cover()
        newPage()
        contents()
        for category in content.categories {
            newPage()
            plan.categoryPages.append(page)
            let outline = drawing ? surface.addOutline(parent: 0, title: category.title, page: page, open: false) : 0
            paragraph(Markdown.escape(category.title), font: fonts.category, color: Self.accent, after: 4)
            hairline(Self.accent, width: 1.2)
            y += 10
            for record in category.records { self.record(record, category: category.title, outline: outline) }
        }
        finishPage()
        plan.pageCount = page
        if drawing { try surface.finish() } else { try surface.check() }
    }

    // MARK: - Pages

    func newPage() {
        finishPage()
        page += 1
        y = Self.margin
    }

    /// The footer, then the page is output.
    func finishPage() {
        guard drawing, let known else { return }
        let name = TextLayout(text, markup: Markdown.escape(content.patient.displayName), font: fonts.small, width: contentWidth * 0.7)
        name.ellipsize()
        cairo.color(Self.grey)
        cairo.line(from: (Self.margin, Self.footerBaseline - 14), to: (Self.pageWidth - Self.margin, Self.footerBaseline - 14), width: 0.4)
        cairo.show(name, x: Self.margin, y: Self.footerBaseline - 10)
        let number = TextLayout(text, markup: "Page \(page) of \(known.pageCount)", font: fonts.small, width: nil)
        cairo.show(number, x: Self.pageWidth - Self.margin - number.size.width, y: Self.footerBaseline - 10)
        cairo.showPage()
    }

    /// Starts a new page unless `height` fits below the cursor (or the page is still empty).
    func keep(_ height: Double) {
        if y + height > bottom && y > Self.margin + 1 { newPage() }
    }

    // MARK: - Text

    /// Lays out markup at the cursor and flows it line by line onto as many pages as it needs.
    func paragraph(_ markup: String, font: FontDescription, color: (Double, Double, Double) = PDFPages.ink,
                   before: Double = 0, after: Double = 6, hang: Double = 0, marker: String? = nil, x extra: Double = 0) {
        y += before
        let layout = TextLayout(text, markup: markup, font: font, width: width - extra - hang)
        var shift = y
        var first = true
        for line in layout.lines() {
            if shift + line.top + line.height > bottom, shift + line.top > Self.margin + 1 {
                newPage()
                shift = y - line.top
            }
            if drawing {
                cairo.color(color)
                if first, let marker {
                    let markerLayout = TextLayout(text, markup: marker, font: font, width: nil)
                    cairo.show(markerLayout, x: left + extra, y: shift + line.top)
                }
                cairo.show(line.line, x: left + extra + hang + line.x, baseline: shift + line.baseline)
            }
            first = false
            y = shift + line.top + line.height
        }
        y += after
    }

    func hairline(_ color: (Double, Double, Double) = PDFPages.rule, width lineWidth: Double = 0.5) {
        if drawing {
            cairo.color(color)
            cairo.line(from: (left, y), to: (left + width, y), width: lineWidth)
        }
        y += lineWidth
    }

    // MARK: - Cover and contents

    func cover() {
        y = 150
        paragraph("MEDICAL RECORDS", font: fonts.bold, color: Self.accent, after: 10)
        paragraph(Markdown.escape(content.patient.displayName), font: fonts.title, after: 18)
        hairline(Self.accent, width: 1.5)
        y += 16
        for (label, value) in HTMLExport.coverLines(content) {
            paragraph("<b>\(Markdown.escape(label))</b>", font: fonts.body, color: Self.grey, after: 1)
            paragraph(Markdown.escape(value), font: fonts.body, after: 10)
        }
        y += 20
        paragraph("Made by binder from the patient's own encrypted Medical Binder. It holds health information: keep it safe.",
                  font: fonts.small, color: Self.grey)
    }

    func contents() {
        paragraph("Contents", font: fonts.category, color: Self.accent, after: 4)
        hairline(Self.accent, width: 1.2)
        y += 10
        var recordIndex = 0
        for (index, category) in content.categories.enumerated() {
            keep(40)
            tocLine(Markdown.escape(category.title), font: fonts.bold, page: known?.categoryPages[safe: index], before: 8)
            for record in category.records {
                let day = record.day.map { "  <span foreground=\"#5a6169\" size=\"small\">\(Markdown.escape($0))</span>" } ?? ""
                tocLine(Markdown.escape(record.title) + day, font: fonts.body, page: known?.recordPages[safe: recordIndex], before: 0,
                        inset: 14)
                recordIndex += 1
            }
        }
    }

    func tocLine(_ markup: String, font: FontDescription, page target: Int?, before: Double, inset: Double = 0) {
        let numberWidth = 40.0
        let layout = TextLayout(text, markup: markup, font: font, width: contentWidth - inset - numberWidth)
        layout.ellipsize()
        let height = layout.size.height
        y += before
        keep(height)
        if drawing {
            let top = y
            cairo.color(Self.ink)
            let draw = { [self] in
                cairo.show(layout, x: Self.margin + inset, y: top)
                if let target {
                    let number = TextLayout(text, markup: "\(target)", font: font, width: nil)
                    cairo.show(number, x: Self.pageWidth - Self.margin - number.size.width, y: top)
                }
            }
            if let target { cairo.link(toPage: target, draw) } else { draw() }
        }
        y += height + 2
    }

    // MARK: - Records

    func record(_ record: ExportRecord, category: String, outline: Int32) {
        // The title stays with what follows it: some text, or the picture a photo record is.
        var lead = 90.0
        if record.body.allSatisfy(\.isWhitespace), case .attachment(let first)? = record.children.first,
           let size = shared.size(first, id: imageIDs + 1) {
            lead = pictureScale(size) * size.height + 70
        }
        keep(lead)
        plan.recordPages.append(page)
        if drawing { surface.addOutline(parent: outline, title: record.title, page: page, open: false) }
        paragraph(Markdown.escape(record.title), font: fonts.record, color: Self.accent, after: 2)
        paragraph(meta(record, category: category), font: fonts.small, color: Self.grey, after: 6)
        body(record)
        y += 4
        hairline()
        y += 12
    }

    func meta(_ record: ExportRecord, category: String?) -> String {
        let e = Markdown.escape
        return record.metaParts(category: category).map { part in
            switch part {
            case .category(let name): return "<b>\(e(name))</b>"
            case .type(let type): return "<i>\(e(type))</i>"
            case .time(let label, let time): return "\(label) \(e(time))"
            case .detail(let label, let value): return "\(e(label)): \(e(value))"
            }
        }.joined(separator: "  ·  ")
    }

    /// The markdown, then the children, nested one step in.
    func body(_ record: ExportRecord) {
        for block in shared.blocks(record.body, sequence: markdownTexts) { draw(block) }
        markdownTexts += 1
        for child in record.children {
            switch child {
            case .note(let note):
                let saved = indent
                // Nested one step further, down to five steps (deeper ones line up with the fifth).
                indent = min(indent + 16, 80)
                keep(50)
                let top = y, startPage = page
                paragraph(Markdown.escape(note.title), font: fonts.child, before: 4, after: 1)
                paragraph(meta(note, category: nil), font: fonts.small, color: Self.grey, after: 4)
                body(note)
                // A bar beside the child, on the page it started on.
                if drawing, page == startPage {
                    cairo.color((0.75, 0.86, 0.95))
                    cairo.line(from: (left - 8, top + 2), to: (left - 8, y - 2), width: 2)
                }
                indent = saved
            case .attachment(let attachment):
                self.attachment(attachment)
            }
        }
    }

    func attachment(_ attachment: ExportAttachment) {
        imageIDs += 1
        let caption = "<i>\(Markdown.escape(attachment.name))</i>  ·  \(Markdown.escape(attachment.mediaType))  ·  "
            + Markdown.escape(formatSize(attachment.size))
        guard let size = shared.size(attachment, id: imageIDs) else {
            paragraph("Attachment: " + caption, font: fonts.small, color: Self.grey, before: 2, after: 4)
            return
        }
        let scale = pictureScale(size)
        let height = size.height * scale
        keep(height + 18)
        if drawing, let image = PassCache.decode(attachment) { cairo.draw(image, x: left, y: y + 2, scale: scale) }
        y += height + 6
        paragraph(caption, font: fonts.small, color: Self.grey, after: 8)
    }

    /// Pictures are scaled to the width, and to at most 40% of a page's height.
    func pictureScale(_ size: PassCache.PictureSize) -> Double {
        min(width / size.width, (bottom - Self.margin) * 0.4 / size.height)
    }

    func draw(_ block: PDFBlock) {
        switch block {
        case .heading(let level, let markup):
            let font = [fonts.h1, fonts.h2, fonts.h3][safe: level - 1] ?? fonts.h4
            keep(40)
            paragraph(markup, font: font, before: 4, after: 3)
        case .paragraph(let markup, let quoteDepth):
            paragraph(markup, font: fonts.body, color: quoteDepth > 0 ? Self.grey : Self.ink, x: Double(quoteDepth) * 14)
        case .listItem(let marker, let markup, let depth):
            paragraph(markup, font: fonts.body, after: 3, hang: 14 + Double(marker.count > 2 ? 6 : 0), marker: Markdown.escape(marker),
                      x: Double(depth) * 14)
        case .code(let code):
            paragraph(Markdown.escape(code), font: fonts.mono, color: (0.2, 0.25, 0.3), before: 2, after: 8, x: 10)
        case .rule:
            y += 4
            hairline()
            y += 8
        case .table(let rows):
            table(rows)
        }
    }

    func table(_ rows: [[PDFBlock.TableCell]]) {
        let columns = rows.map(\.count).max() ?? 0
        guard columns > 0 else { return }
        let pad = 4.0
        var natural = [Double](repeating: 20, count: columns)
        for row in rows {
            for (column, cell) in row.enumerated() {
                let layout = TextLayout(text, markup: cell.isHeader ? "<b>\(cell.markup)</b>" : cell.markup, font: fonts.body, width: nil)
                natural[column] = max(natural[column], layout.size.width + 2 * pad + 1)
            }
        }
        let total = natural.reduce(0, +)
        let widths = total <= width ? natural : natural.map { max(36, $0 * width / total) }
        y += 2
        for row in rows {
            let layouts = row.enumerated().map { column, cell in
                TextLayout(text, markup: cell.isHeader ? "<b>\(cell.markup)</b>" : cell.markup, font: fonts.body,
                           width: max(10, widths[column] - 2 * pad))
            }
            let height = (layouts.map(\.size.height).max() ?? 10) + 2 * pad
            keep(height)
            if drawing {
                var x = left
                for column in 0..<columns {
                    let header = row[safe: column]?.isHeader ?? false
                    if header {
                        cairo.color(Self.shade)
                        cairo.rectangle(x: x, y: y, width: widths[column], height: height, fill: true)
                    }
                    cairo.color(Self.rule)
                    cairo.rectangle(x: x, y: y, width: widths[column], height: height, fill: false)
                    if let layout = layouts[safe: column] {
                        cairo.color(Self.ink)
                        cairo.show(layout, x: x + pad, y: y + pad)
                    }
                    x += widths[column]
                }
            }
            y += height
        }
        y += 8
    }
}

extension Array {
    subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
