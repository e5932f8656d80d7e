import Foundation
internal import Ink

/// Markdown to HTML with Ink, made safe to put in a page: raw HTML in a record is shown as the
/// text it is, pictures by URL become their description (the file loads nothing from outside),
/// and Ink's output is rebuilt from a short list of elements and attributes, with link
/// targets limited to web, mail and phone addresses. The PDF is laid out from the same HTML.
enum Markdown {
    static func html(_ markdown: String) -> String {
        sanitize(rawHTML(markdown))
    }

    /// Ink's HTML before sanitising (raw HTML already turned into text, images into words).
    static func rawHTML(_ markdown: String) -> String {
        var parser = MarkdownParser()
        parser.addModifier(Modifier(target: .html) { input in escape(String(input.markdown)) })
        parser.addModifier(Modifier(target: .images) { input in
            let alt = input.markdown.dropFirst(2).prefix(while: { $0 != "]" })
            return "<em>[picture: \(escape(String(alt)))]</em>"
        })
        // Ink passes HTML through, and an element it never sees closed swallows the rest of the
        // record: `<` is hidden from it and comes back as text.
        let hidden = keepingLineBreaks(keepingFrontMatter(markdown)).replacingOccurrences(of: "<", with: placeholder)
        return parser.html(from: hidden).replacingOccurrences(of: placeholder, with: "&lt;")
    }

    /// A private-use character standing for `<` while Ink reads the markdown.
    static let placeholder = "\u{E000}"

    /// A value that itself starts with a `---` block (the mobile app writes some): Ink would
    /// take it as its own metadata and drop it, so it is shown as a code block instead.
    static func keepingFrontMatter(_ markdown: String) -> String {
        guard markdown.hasPrefix("---\n") || markdown.hasPrefix("---\r\n") else { return markdown }
        let lines = markdown.split(separator: "\n", omittingEmptySubsequences: false)
        guard let close = lines.dropFirst().firstIndex(where: { $0.trimmingCharacters(in: .whitespaces) == "---" }) else {
            return markdown
        }
        let block = lines[1..<close].joined(separator: "\n")
        let rest = lines[(close + 1)...].joined(separator: "\n")
        return "```\n" + block + "\n```\n\n" + rest
    }

    /// A line break inside a paragraph stays a line break, as the apps show it (and GitHub in
    /// comments): a record is written line by line ("Date: …", then "Provider: …", as the
    /// templates have it), not reflowed prose, and markdown would join those lines into one.
    /// Done by ending each such line with markdown's own hard break (two spaces), in the copy
    /// given to Ink only: the record stays as written, valid markdown for every reader.
    /// Headings, list items, tables, quotes, fenced and indented code keep markdown's rules.
    static func keepingLineBreaks(_ markdown: String) -> String {
        let lines = markdown.split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.count > 1 else { return markdown }
        var out: [Substring] = []
        out.reserveCapacity(lines.count)
        var fence: Substring?
        var inParagraph = false
        for (index, line) in lines.enumerated() {
            let trimmed = line.drop { $0 == " " }
            if let open = fence {
                if trimmed.hasPrefix(open) { fence = nil }
                out.append(line)
                continue
            }
            if trimmed.hasPrefix("```") || trimmed.hasPrefix("~~~") {
                fence = trimmed.prefix(3)
                inParagraph = false
                out.append(line)
                continue
            }
            let isText = isParagraphText(line, continuing: inParagraph)
            inParagraph = isText
            let next = index + 1 < lines.count ? lines[index + 1] : nil
            if isText, let next, isParagraphText(next, continuing: true), !line.hasSuffix("  "), !line.hasSuffix("\\") {
                out.append(line + "  ")
            } else {
                out.append(line)
            }
        }
        return out.joined(separator: "\n")
    }

    /// Whether `line` is text of a paragraph (`continuing` one: an indented line then
    /// continues it rather than starting code), not blank and not another block's start.
    private static func isParagraphText(_ line: Substring, continuing: Bool) -> Bool {
        let line = line.hasSuffix("\r") ? line.dropLast() : line
        let indent = line.prefix { $0 == " " || $0 == "\t" }
        let rest = line.dropFirst(indent.count)
        if rest.isEmpty { return false }
        if !continuing && (indent.count >= 4 || indent.contains("\t")) { return false }
        guard let first = rest.first else { return false }
        if "#|>`~<".contains(first) { return false }
        if "-*+".contains(first) && (rest.dropFirst().first == " " || rest.allSatisfy { $0 == first || $0 == " " }) { return false }
        if first == "=" && rest.allSatisfy({ $0 == "=" || $0 == " " }) { return false }
        let digits = rest.prefix { $0.isASCII && $0.isNumber }
        if !digits.isEmpty && digits.count <= 9 {
            let after = rest.dropFirst(digits.count)
            if after.hasPrefix(". ") || after.hasPrefix(") ") || after == "." || after == ")" { return false }
        }
        return true
    }

    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default:
                // Control characters other than tab and newline have no place in a page.
                if scalar.value < 0x20 && scalar != "\n" && scalar != "\t" || (0x7F...0x9F).contains(scalar.value) { continue }
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    // MARK: - Sanitising

    /// Elements kept, and the attributes each may carry.
    static let allowed: [String: Set<String>] = [
        "p": [], "br": [], "hr": [], "h1": [], "h2": [], "h3": [], "h4": [], "h5": [], "h6": [],
        "ul": [], "ol": ["start"], "li": [], "strong": [], "em": [], "s": [], "del": [], "code": [], "pre": [],
        "blockquote": [], "table": [], "thead": [], "tbody": [], "tr": [], "th": ["align"], "td": ["align"], "a": ["href"],
    ]
    static let voidElements: Set<String> = ["br", "hr"]
    /// Whose content is dropped with them (Ink never makes them; defence in depth).
    static let droppedWithContent: Set<String> = ["script", "style", "iframe", "object", "embed", "template", "svg", "math"]

    /// Rebuilds HTML from its tokens: allowed elements with allowed attributes, every text
    /// escaped again, every open element closed.
    static func sanitize(_ html: String) -> String {
        var out = ""
        var open: [String] = []
        var dropping: String?
        for token in HTMLTokenizer.tokens(html) {
            if let name = dropping {
                if case .end(name) = token { dropping = nil }
                continue
            }
            switch token {
            case .text(let text):
                out += escape(text)
            case .start(let name, let attributes):
                if droppedWithContent.contains(name) { dropping = name; continue }
                guard let names = allowed[name] else { continue }
                out += "<" + name
                for (key, value) in attributes where names.contains(key) {
                    guard let safe = safeAttribute(key, value) else { continue }
                    out += " \(key)=\"\(escape(safe))\""
                }
                out += ">"
                if !voidElements.contains(name) { open.append(name) }
            case .end(let name):
                guard allowed[name] != nil, !voidElements.contains(name), let index = open.lastIndex(of: name) else { continue }
                for element in open[index...].reversed() { out += "</\(element)>" }
                open.removeSubrange(index...)
            }
        }
        for element in open.reversed() { out += "</\(element)>" }
        return out
    }

    static func safeAttribute(_ key: String, _ value: String) -> String? {
        switch key {
        case "href": return safeLink(value)
        case "align": return ["left", "center", "right"].contains(value) ? value : nil
        case "start": return Int(value).map(String.init)
        default: return nil
        }
    }

    /// Web, mail and phone links, and links within the page; anything else (javascript:,
    /// data:, file:) is dropped.
    static func safeLink(_ url: String) -> String? {
        let trimmed = url.trimmingCharacters(in: .whitespacesAndNewlines)
        let lowered = trimmed.lowercased()
        for scheme in ["https://", "http://", "mailto:", "tel:"] where lowered.hasPrefix(scheme) { return trimmed }
        if trimmed.hasPrefix("#"), trimmed.count > 1 { return trimmed }
        return nil
    }
}

/// A tokenizer for the HTML Ink writes (and anything else: what does not parse is text).
enum HTMLToken: Equatable {
    case start(name: String, attributes: [(String, String)])
    case end(String)
    case text(String)

    static func == (a: HTMLToken, b: HTMLToken) -> Bool {
        switch (a, b) {
        case (.end(let x), .end(let y)), (.text(let x), .text(let y)): return x == y
        case (.start(let x, let ax), .start(let y, let ay)): return x == y && ax.elementsEqual(ay, by: { $0 == $1 })
        default: return false
        }
    }
}

enum HTMLTokenizer {
    static func tokens(_ html: String) -> [HTMLToken] {
        let scalars = Array(html.unicodeScalars)
        var tokens: [HTMLToken] = []
        var text = String.UnicodeScalarView()
        var i = 0
        func flush() {
            if !text.isEmpty { tokens.append(.text(decodeEntities(String(text)))) }
            text = String.UnicodeScalarView()
        }
        while i < scalars.count {
            if scalars[i] == "<", let (token, next) = tag(scalars, i) {
                flush()
                tokens.append(token)
                i = next
            } else {
                text.append(scalars[i])
                i += 1
            }
        }
        flush()
        return tokens
    }

    /// The tag starting at `start` (a `<`), and where it ends; nil when it is not one.
    private static func tag(_ s: [Unicode.Scalar], _ start: Int) -> (HTMLToken, Int)? {
        var i = start + 1
        var closing = false
        if i < s.count, s[i] == "/" { closing = true; i += 1 }
        let nameStart = i
        while i < s.count, s[i].properties.isAlphabetic || ("0"..."9").contains(s[i]) { i += 1 }
        guard i > nameStart else { return nil }
        let name = String(String.UnicodeScalarView(s[nameStart..<i])).lowercased()
        var attributes: [(String, String)] = []
        while i < s.count {
            while i < s.count, s[i].properties.isWhitespace || s[i] == "/" { i += 1 }
            guard i < s.count else { return nil }
            if s[i] == ">" { return (closing ? .end(name) : .start(name: name, attributes: attributes), i + 1) }
            let keyStart = i
            while i < s.count, !s[i].properties.isWhitespace, !["=", ">", "/"].contains(s[i]) { i += 1 }
            let key = String(String.UnicodeScalarView(s[keyStart..<i])).lowercased()
            var value = ""
            if i < s.count, s[i] == "=" {
                i += 1
                if i < s.count, s[i] == "\"" || s[i] == "'" {
                    let quote = s[i]
                    i += 1
                    let valueStart = i
                    while i < s.count, s[i] != quote { i += 1 }
                    guard i < s.count else { return nil }
                    value = String(String.UnicodeScalarView(s[valueStart..<i]))
                    i += 1
                } else {
                    let valueStart = i
                    while i < s.count, !s[i].properties.isWhitespace, s[i] != ">" { i += 1 }
                    value = String(String.UnicodeScalarView(s[valueStart..<i]))
                }
            }
            if !key.isEmpty { attributes.append((key, decodeEntities(value))) }
        }
        return nil
    }

    static func decodeEntities(_ text: String) -> String {
        guard text.contains("&") else { return text }
        var out = ""
        var rest = Substring(text)
        while let amp = rest.firstIndex(of: "&") {
            out += rest[..<amp]
            let after = rest[rest.index(after: amp)...]
            if let semi = after.prefix(10).firstIndex(of: ";") {
                let name = after[..<semi]
                var decoded: String?
                switch name {
                case "amp": decoded = "&"
                case "lt": decoded = "<"
                case "gt": decoded = ">"
                case "quot": decoded = "\""
                case "apos": decoded = "'"
                case "nbsp": decoded = "\u{A0}"
                default:
                    if name.hasPrefix("#x") || name.hasPrefix("#X"), let v = UInt32(name.dropFirst(2), radix: 16) {
                        decoded = Unicode.Scalar(v).map { String($0) }
                    } else if name.hasPrefix("#"), let v = UInt32(name.dropFirst()) {
                        decoded = Unicode.Scalar(v).map { String($0) }
                    }
                }
                if let decoded {
                    out += decoded
                    rest = after[after.index(after: semi)...]
                    continue
                }
            }
            out += "&"
            rest = after
        }
        return out + rest
    }
}
