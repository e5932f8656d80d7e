import BinderCrypto
import BinderFormat
import Foundation

/// One self-contained HTML file: styles inline, images as data URIs, a stylesheet for print,
/// and a Content-Security-Policy that allows no script and no outside load at all. Markdown is
/// rendered by Ink and sanitised (`Markdown.html`); everything else is escaped.
enum HTMLExport {
    static func render(_ content: ExportContent) -> [UInt8] {
        let e = Markdown.escape
        let name = content.patient.displayName
        var html = """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="generator" content="binder export">
        <title>Medical records — \(e(name))</title>
        <style>\(stylesheet)</style>
        </head>
        <body>
        <header class="cover">
        <p class="kind">Medical records</p>
        <h1 class="patient">\(e(name))</h1>
        <dl>

        """
        for (label, value) in coverLines(content) {
            html += "<dt>\(e(label))</dt><dd>\(e(value))</dd>\n"
        }
        html += "</dl>\n</header>\n<nav class=\"toc\">\n<h2>Contents</h2>\n<ol>\n"
        var number = 0
        for category in content.categories {
            html += "<li><a href=\"#\(anchor(category))\">\(e(category.title))</a> <span class=\"count\">(\(category.records.count))</span>\n<ol>\n"
            for record in category.records {
                number += 1
                let day = record.day.map { " <span class=\"date\">\(e($0))</span>" } ?? ""
                html += "<li><a href=\"#record-\(number)\">\(e(record.title))</a>\(day)</li>\n"
            }
            html += "</ol></li>\n"
        }
        html += "</ol>\n</nav>\n<main>\n"
        number = 0
        for category in content.categories {
            html += "<section class=\"category\" id=\"\(anchor(category))\">\n<h2>\(e(category.title))</h2>\n"
            for record in category.records {
                number += 1
                html += article(record, id: "record-\(number)", category: category.title, depth: 0)
            }
            html += "</section>\n"
        }
        html += """
        </main>
        <footer>Exported \(e(exportDay(content))) by binder · \(e(name))</footer>
        </body>
        </html>

        """
        return Array(html.utf8)
    }

    static func coverLines(_ content: ExportContent) -> [(String, String)] {
        var lines: [(String, String)] = [
            ("Date of birth", content.patient.dateOfBirth ?? "not recorded"),
            ("Emergency contact", content.patient.emergencyContact ?? "not recorded"),
        ]
        lines += content.patient.details
        lines += [
            ("Exported", exportDay(content)),
            ("Included", "\(content.selection): \(content.records.count) record\(content.records.count == 1 ? "" : "s") in "
                + "\(content.categories.count) categor\(content.categories.count == 1 ? "y" : "ies"), \(content.imageCount) image"
                + "\(content.imageCount == 1 ? "" : "s"), \(content.otherAttachmentCount) other attachment"
                + "\(content.otherAttachmentCount == 1 ? "" : "s")"),
        ]
        return lines
    }

    static func exportDay(_ content: ExportContent) -> String {
        let seconds = Int64(content.exportedAt.timeIntervalSince1970)
        return String(Timestamps.string(seconds: seconds).prefix(10))
    }

    private static func anchor(_ category: ExportCategory) -> String {
        "category-" + category.folder.unicodeScalars.map { scalar in
            scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar)) ? String(scalar) : "-"
        }.joined()
    }

    private static func article(_ record: ExportRecord, id: String?, category: String?, depth: Int) -> String {
        let e = Markdown.escape
        var html = "<article class=\"\(depth == 0 ? "record" : "child")\"\(id.map { " id=\"\($0)\"" } ?? "")"
            + " data-path=\"\(e(record.path))\">\n"
        html += "<h\(min(depth + 3, 6)) class=\"title\">\(e(record.title))</h\(min(depth + 3, 6))>\n<p class=\"meta\">"
        let meta = record.metaParts(category: category).map { part in
            switch part {
            case .category(let name): return "<span class=\"category\">\(e(name))</span>"
            case .type(let type): return "<span class=\"type\">\(e(type))</span>"
            case .time(let label, let time): return "\(label) <time>\(e(time))</time>"
            case .detail(let label, let value): return "\(e(label)): \(e(value))"
            }
        }
        html += meta.joined(separator: " · ") + "</p>\n"
        if !record.body.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty {
            html += "<div class=\"body\">\(Markdown.html(record.body))</div>\n"
        }
        var listed: [ExportAttachment] = []
        for child in record.children {
            switch child {
            case .note(let note):
                html += article(note, id: nil, category: nil, depth: depth + 1)
            case .attachment(let attachment):
                if attachment.imageKind != nil {
                    let data = String(decoding: Base64.encode(attachment.bytes), as: UTF8.self)
                    html += "<figure class=\"attachment\"><img src=\"data:\(attachment.mediaType);base64,\(data)\" alt=\"\(e(attachment.name))\">"
                        + "<figcaption>\(e(attachment.name)) · \(e(formatSize(attachment.size)))</figcaption></figure>\n"
                } else {
                    listed.append(attachment)
                }
            }
        }
        if !listed.isEmpty {
            html += "<ul class=\"attachments\">\n"
            for attachment in listed {
                html += "<li class=\"attachment\"><span class=\"name\">\(e(attachment.name))</span> · \(e(attachment.mediaType))"
                    + " · \(e(formatSize(attachment.size)))</li>\n"
            }
            html += "</ul>\n"
        }
        return html + "</article>\n"
    }

    static let stylesheet = """
    :root { color-scheme: light; }
    body { font-family: "Noto Sans", "DejaVu Sans", system-ui, sans-serif; color: #1b1f23; max-width: 52rem;
           margin: 2rem auto; padding: 0 1.25rem; line-height: 1.5; }
    .cover { border-bottom: 2px solid #2c5282; padding-bottom: 1rem; margin-bottom: 2rem; }
    .cover .kind { text-transform: uppercase; letter-spacing: .08em; color: #2c5282; margin: 0; }
    .cover h1 { font-size: 2.2rem; margin: .2rem 0 1rem; }
    .cover dl { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1rem; margin: 0; }
    .cover dt { font-weight: 600; color: #4a5568; }
    .cover dd { margin: 0; }
    nav.toc ol { padding-left: 1.4rem; } nav.toc .date, nav.toc .count { color: #718096; font-size: .9em; }
    section.category > h2 { border-bottom: 1px solid #cbd5e0; padding-bottom: .2rem; margin-top: 2.5rem; color: #2c5282; }
    article.record { margin: 1.5rem 0; padding: 0 0 1rem; border-bottom: 1px dashed #e2e8f0; }
    article.child { margin: .8rem 0 .8rem 1rem; padding-left: .9rem; border-left: 3px solid #bee3f8; }
    .title { margin: .2rem 0; } .meta { color: #4a5568; font-size: .88em; margin: .2rem 0 .6rem; }
    h3.title { font-size: 1.3rem; color: #2c5282; } h4.title, h5.title, h6.title { font-size: 1.02rem; }
    .body h1, .body h2, .body h3, .body h4, .body h5, .body h6 { font-size: 1rem; margin: .9rem 0 .3rem; }
    .body h1 { font-size: 1.15rem; } .body h2 { font-size: 1.08rem; }
    .meta .category { font-weight: 600; } .meta .type { font-style: italic; }
    table { border-collapse: collapse; margin: .6rem 0; } th, td { border: 1px solid #cbd5e0; padding: .25rem .6rem; text-align: left; }
    th { background: #edf2f7; } pre { background: #f7fafc; padding: .6rem; overflow-x: auto; white-space: pre-wrap; }
    blockquote { border-left: 3px solid #cbd5e0; margin-left: 0; padding-left: 1rem; color: #4a5568; }
    figure.attachment { margin: .8rem 0; } figure.attachment img { max-width: 100%; max-height: 32rem; height: auto; }
    figcaption, ul.attachments { color: #4a5568; font-size: .88em; }
    footer { margin-top: 3rem; color: #718096; font-size: .85em; border-top: 1px solid #e2e8f0; padding-top: .5rem; }
    @media print {
      body { max-width: none; margin: 0; font-size: 10.5pt; }
      nav.toc { page-break-after: always; }
      section.category { page-break-before: always; }
      article.child, figure.attachment, table { break-inside: avoid; }
      .title, .meta { break-after: avoid; }
      a { color: inherit; text-decoration: none; }
      .body a[href^="http"]::after { content: " (" attr(href) ")"; font-size: .85em; }
      @page { margin: 18mm 16mm; @bottom-right { content: counter(page); } }
    }
    """
}
