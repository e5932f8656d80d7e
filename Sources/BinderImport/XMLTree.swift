import Foundation

/// One XML element as the mapping reads it: its local name and namespace, attributes (by
/// qualified name, as written), children in order, its own text, and the line it starts on.
final class XMLNode: @unchecked Sendable {
    // Built once by `XMLTree.parse` on one thread, then only read.
    let name: String
    let namespace: String?
    let attributes: [String: String]
    let line: Int
    fileprivate(set) var children: [XMLNode] = []
    fileprivate(set) var text = ""

    init(name: String, namespace: String?, attributes: [String: String], line: Int) {
        self.name = name
        self.namespace = namespace
        self.attributes = attributes
        self.line = line
    }

    /// The first child named `name`.
    func child(_ name: String) -> XMLNode? { children.first { $0.name == name } }
    /// Every child named `name`.
    func all(_ name: String) -> [XMLNode] { children.filter { $0.name == name } }
    /// The element at the end of `path` (child names), first match at each step.
    func at(_ path: String...) -> XMLNode? {
        var node: XMLNode? = self
        for step in path { node = node?.child(step) }
        return node
    }
    subscript(attribute: String) -> String? { attributes[attribute] }

    /// Its text and every descendant's, whitespace collapsed.
    var allText: String {
        var parts: [String] = []
        collectText(into: &parts, depth: 0)
        return parts.joined(separator: " ").split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }

    private func collectText(into parts: inout [String], depth: Int) {
        let own = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if !own.isEmpty { parts.append(own) }
        guard depth < ImportLimits.maximumDepth else { return }
        for child in children { child.collectText(into: &parts, depth: depth + 1) }
    }

    /// The descendant whose `ID` attribute is `id` (narrative references: `#id`).
    func descendant(withID id: String) -> XMLNode? {
        var stack: [XMLNode] = [self]
        while let node = stack.popLast() {
            if node.attributes["ID"] == id { return node }
            stack.append(contentsOf: node.children)
        }
        return nil
    }
}

/// Parses XML with libxml2's pull reader (`XMLReader`) into `XMLNode`s, safely: a DOCTYPE or
/// ENTITY declaration anywhere is refused before libxml2 sees the bytes (no entity of any kind
/// is expanded, no external one fetched or read: an entity-expansion bomb is refused at once),
/// the network stays off, and nesting is bounded.
enum XMLTree {
    static func parse(_ bytes: [UInt8], file: String) throws(ImportError) -> XMLNode {
        if let line = declarationLine(bytes) { throw .declarationRefused(file: file, line: line) }
        // libxml2 would read a document in another encoding when it says so; binder reads
        // UTF-8 (what C-CDA documents are written in) and says so at the byte that is not.
        if let line = firstNonUTF8Line(bytes) { throw .notUTF8(file: file, line: line) }
        guard let reader = XMLReader(bytes: bytes) else {
            throw .malformedXML(file: file, line: 1, column: 1, reason: "libxml2 could not start reading it")
        }
        var root: XMLNode?
        var open: [XMLNode] = []
        reading: while true {
            switch reader.advance() {
            case .start(let isEmpty):
                guard open.count < ImportLimits.maximumDepth else { throw .tooDeep(file: file, line: reader.line) }
                let node = XMLNode(name: reader.localName, namespace: reader.namespace, attributes: reader.attributes, line: reader.line)
                if let parent = open.last { parent.children.append(node) } else if root == nil { root = node }
                if !isEmpty { open.append(node) }
            case .end:
                _ = open.popLast()
            case .text:
                open.last?.text += reader.value
            case .other:
                continue
            case .finished:
                break reading
            case .failed:
                let failure = reader.failure
                throw .malformedXML(file: file, line: failure.line, column: failure.column, reason: XMLFailureReason.describe(failure.code))
            }
        }
        guard let root else { throw .malformedXML(file: file, line: 1, column: 1, reason: XMLFailureReason.describe(4)) }
        return root
    }

    /// The line of the first `<!DOCTYPE` or `<!ENTITY` (XML's names are case-sensitive; any
    /// case is refused all the same), or nil.
    static func declarationLine(_ bytes: [UInt8]) -> Int? {
        let doctype = Array("<!doctype".utf8), entity = Array("<!entity".utf8)
        var line = 1
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\n") { line += 1 }
            if byte == UInt8(ascii: "<"), matches(doctype, in: bytes, at: index) || matches(entity, in: bytes, at: index) { return line }
            index += 1
        }
        return nil
    }

    /// The line of the first byte that is not part of valid UTF-8, or nil.
    static func firstNonUTF8Line(_ bytes: [UInt8]) -> Int? {
        // The standard library's validation is fast; the line is only looked for when it fails.
        if String(validating: bytes, as: UTF8.self) != nil { return nil }
        var iterator = bytes.makeIterator()
        var parser = Unicode.UTF8.ForwardParser()
        var line = 1
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid(let scalar):
                if scalar.count == 1 && scalar.first == UInt8(ascii: "\n") { line += 1 }
            case .error: return line
            case .emptyInput: return nil
            }
        }
    }

    private static func matches(_ word: [UInt8], in bytes: [UInt8], at index: Int) -> Bool {
        guard index + word.count <= bytes.count else { return false }
        for offset in 0..<word.count {
            var byte = bytes[index + offset]
            if (0x41...0x5A).contains(byte) { byte += 0x20 }
            if byte != word[offset] { return false }
        }
        return true
    }
}
