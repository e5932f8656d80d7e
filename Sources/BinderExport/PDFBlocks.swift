import Foundation

/// A record's markdown as blocks to lay out on PDF pages, each holding Pango markup: Ink's
/// sanitised HTML (the same as the HTML export shows) walked element by element.
enum PDFBlock: Equatable {
    case heading(level: Int, markup: String)
    case paragraph(markup: String, quoteDepth: Int)
    case listItem(marker: String, markup: String, depth: Int)
    case code(String)
    case table([[TableCell]])
    case rule

    struct TableCell: Equatable {
        var markup: String
        var isHeader: Bool
    }

    static let linkColor = "#1a4f8b"

    static func blocks(markdown: String) -> [PDFBlock] {
        blocks(html: Markdown.html(markdown))
    }

    static func blocks(html: String) -> [PDFBlock] {
        var builder = Builder()
        for token in HTMLTokenizer.tokens(html) { builder.take(token) }
        builder.flushText()
        return builder.blocks
    }

    private struct Builder {
        enum Open { case paragraph, heading(Int), listItem, cell(header: Bool) }

        var blocks: [PDFBlock] = []
        var markup = ""
        var open: Open?
        var lists: [(ordered: Bool, next: Int)] = []
        var quoteDepth = 0
        var code: String?
        var rows: [[TableCell]]?
        var row: [TableCell] = []
        /// Open links: where their text starts in `markup`, and their target.
        var links: [(start: String.Index, href: String?)] = []
        var listItemMarker: String?

        mutating func take(_ token: HTMLToken) {
            if code != nil { return takeInCode(token) }
            switch token {
            case .text(let text): takeText(text)
            case .start(let name, let attributes): startElement(name, attributes: attributes)
            case .end(let name): endElement(name)
            }
        }

        /// Inside `<pre>`: text is kept as it is until the block ends.
        private mutating func takeInCode(_ token: HTMLToken) {
            guard let text = code else { return }
            switch token {
            case .text(let more): code = text + more
            case .end("pre"):
                blocks.append(.code(text.hasSuffix("\n") ? String(text.dropLast()) : text))
                code = nil
            default: break
            }
        }

        /// Text outside any block starts a paragraph (unless it is only whitespace).
        private mutating func takeText(_ text: String) {
            if open == nil {
                guard !text.allSatisfy(\.isWhitespace) else { return }
                begin(.paragraph)
            }
            markup += Markdown.escape(text.replacingOccurrences(of: "\n", with: " "))
        }

        private mutating func startElement(_ name: String, attributes: [(String, String)]) {
            switch name {
            case "p": if case .listItem = open {} else if case .cell = open {} else { begin(.paragraph) }
            case "h1", "h2", "h3", "h4", "h5", "h6": begin(.heading(Int(name.dropFirst()) ?? 3))
            case "ul", "ol":
                flushText()
                let start = attributes.first(where: { $0.0 == "start" }).flatMap { Int($0.1) } ?? 1
                lists.append((name == "ol", start))
            case "li": startListItem()
            case "blockquote": flushText(); quoteDepth += 1
            case "pre": flushText(); code = ""
            case "code": markup += "<tt>"
            case "strong": markup += "<b>"
            case "em": markup += "<i>"
            case "s", "del": markup += "<s>"
            case "br": markup += "\n"
            case "hr": flushText(); blocks.append(.rule)
            case "a":
                links.append((markup.endIndex, attributes.first(where: { $0.0 == "href" })?.1))
                markup += "<span foreground=\"\(PDFBlock.linkColor)\" underline=\"single\">"
            case "table": flushText(); rows = []
            case "tr": row = []
            case "th", "td": begin(.cell(header: name == "th"))
            default: break
            }
        }

        /// A list item's marker: the next number in an ordered list, else a bullet that
        /// alternates with nesting depth.
        private mutating func startListItem() {
            begin(.listItem)
            if var list = lists.popLast() {
                listItemMarker = list.ordered ? "\(list.next)." : (lists.count % 2 == 0 ? "•" : "◦")
                list.next += 1
                lists.append(list)
            } else {
                listItemMarker = "•"
            }
        }

        private mutating func endElement(_ name: String) {
            switch name {
            case "p", "h1", "h2", "h3", "h4", "h5", "h6", "li": flushText()
            case "ul", "ol": flushText(); _ = lists.popLast()
            case "blockquote": flushText(); quoteDepth = max(0, quoteDepth - 1)
            case "code": markup += "</tt>"
            case "strong": markup += "</b>"
            case "em": markup += "</i>"
            case "s", "del": markup += "</s>"
            case "a": endLink()
            case "th", "td":
                if case .cell(let header) = open { row.append(TableCell(markup: markup, isHeader: header)) }
                markup = ""
                open = nil
            case "tr": rows?.append(row); row = []
            case "table":
                if let rows, !rows.isEmpty { blocks.append(.table(rows)) }
                rows = nil
            default: break
            }
        }

        private mutating func endLink() {
            markup += "</span>"
            if let link = links.popLast(), let href = link.href, href.hasPrefix("http") || href.hasPrefix("mailto:") {
                // The target is printed: paper has no links.
                let shown = markup[link.start...]
                if !shown.contains(Markdown.escape(href)) { markup += " (\(Markdown.escape(href)))" }
            }
        }

        mutating func begin(_ kind: Open) {
            flushText()
            open = kind
        }

        mutating func flushText() {
            defer { markup = ""; links = [] }
            guard let kind = open else { return }
            open = nil
            let text = markup.trimmingCharacters(in: .whitespacesAndNewlines)
            switch kind {
            case .paragraph:
                if !text.isEmpty { blocks.append(.paragraph(markup: text, quoteDepth: quoteDepth)) }
            case .heading(let level):
                if !text.isEmpty { blocks.append(.heading(level: level, markup: text)) }
            case .listItem:
                if !text.isEmpty || listItemMarker != nil {
                    blocks.append(.listItem(marker: listItemMarker ?? "", markup: text, depth: max(0, lists.count - 1)))
                }
                listItemMarker = nil
            case .cell(let header):
                row.append(TableCell(markup: text, isHeader: header))
            }
        }
    }
}
