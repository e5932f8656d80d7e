internal import CLibXML2

/// One document read through libxml2's pull reader (`xmlTextReader`): the owner of the reader,
/// of the copy of the bytes it reads (libxml2 does not copy them) and of the place its errors go.
/// Made, used and freed on one thread, through `XMLTree.parse`: the error handlers it sets for
/// its life are that thread's (libxml2 keeps them per thread).
final class XMLReader {
    /// What the reader stands on after `advance()`.
    enum Step: Equatable {
        /// A start tag; `isEmpty` for `<a/>`, which has no end tag to follow.
        case start(isEmpty: Bool)
        case end
        /// Character data (text, CDATA, whitespace).
        case text
        /// Anything the mapping does not read (comments, processing instructions).
        case other
        case finished
        /// libxml2 found the document broken: `failure` says where.
        case failed
    }

    /// Where and what libxml2 first found wrong.
    struct Failure: Equatable {
        let code: Int
        let line: Int
        let column: Int
    }

    private let reader: xmlTextReaderPtr
    private let bytes: UnsafeMutableBufferPointer<CChar>
    private let firstErrorSlot: UnsafeMutablePointer<binder_xml_first_error>

    /// Not network, never an entity substituted (a DOCTYPE is refused before this is reached),
    /// CDATA as text, the document's own encoding declaration ignored (the bytes were checked as
    /// UTF-8 and are read as such); HUGE lifts libxml2's own nesting limit (256) above `ImportLimits.maximumDepth`
    /// so that the mapping's limit is the one met (the reader reads ahead), and its 10 MB cap on one
    /// text: a file is already bounded by `ImportLimits`' size.
    private static let options = Int32(XML_PARSE_NONET.rawValue | XML_PARSE_NOCDATA.rawValue | XML_PARSE_IGNORE_ENC.rawValue
                                       | XML_PARSE_HUGE.rawValue)

    /// libxml2's global set-up, done once before any reader (its documentation asks for it in a
    /// program with threads).
    private static let initialised: Void = xmlInitParser()

    /// Nil when libxml2 cannot make a reader (memory).
    init?(bytes source: [UInt8]) {
        _ = XMLReader.initialised
        guard source.count < Int(Int32.max) else { return nil }
        let copy = UnsafeMutableBufferPointer<CChar>.allocate(capacity: max(source.count, 1))
        source.withUnsafeBytes { raw in
            _ = copy.initialize(from: raw.bindMemory(to: CChar.self))
        }
        let slot = UnsafeMutablePointer<binder_xml_first_error>.allocate(capacity: 1)
        slot.initialize(to: binder_xml_first_error())
        // Before the reader is made: making it reads the first bytes (their encoding).
        binder_xml_route_thread_errors(slot)
        guard let reader = xmlReaderForMemory(copy.baseAddress, Int32(source.count), nil, "UTF-8", XMLReader.options) else {
            binder_xml_release_thread_errors()
            copy.deallocate()
            slot.deallocate()
            return nil
        }
        self.reader = reader
        self.bytes = copy
        self.firstErrorSlot = slot
        binder_xml_route_errors(reader, slot)
    }

    deinit {
        xmlFreeTextReader(reader)
        binder_xml_release_thread_errors()
        bytes.deallocate()
        firstErrorSlot.deallocate()
    }

    /// Moves to the next node.
    func advance() -> Step {
        switch xmlTextReaderRead(reader) {
        case 1: break
        case 0: return firstErrorSlot.pointee.seen != 0 ? .failed : .finished
        default: return .failed
        }
        if firstErrorSlot.pointee.seen != 0 { return .failed }
        switch Int32(xmlTextReaderNodeType(reader)) {
        case Int32(XML_READER_TYPE_ELEMENT.rawValue): return .start(isEmpty: xmlTextReaderIsEmptyElement(reader) == 1)
        case Int32(XML_READER_TYPE_END_ELEMENT.rawValue): return .end
        case Int32(XML_READER_TYPE_TEXT.rawValue), Int32(XML_READER_TYPE_CDATA.rawValue),
             Int32(XML_READER_TYPE_WHITESPACE.rawValue), Int32(XML_READER_TYPE_SIGNIFICANT_WHITESPACE.rawValue):
            return .text
        default: return .other
        }
    }

    /// The current element's local name ("" should libxml2 give none).
    var localName: String { Self.string(xmlTextReaderConstLocalName(reader)) ?? "" }
    /// The current element's namespace, nil for none.
    var namespace: String? { Self.string(xmlTextReaderConstNamespaceUri(reader)) }
    /// The current text node's characters.
    var value: String { Self.string(xmlTextReaderConstValue(reader)) ?? "" }

    /// The line the current node starts on (libxml2 keeps an element's line in 16 bits; past
    /// that, the line the parser has reached, a little ahead).
    var line: Int {
        if let node = xmlTextReaderCurrentNode(reader) {
            let line = Int(xmlGetLineNo(node))
            if line > 0 && line < 65535 { return line }
        }
        return Int(xmlTextReaderGetParserLineNumber(reader))
    }

    /// The current element's attributes by qualified name, as written (`xsi:type`); namespace
    /// declarations are not attributes here.
    var attributes: [String: String] {
        guard xmlTextReaderHasAttributes(reader) == 1 else { return [:] }
        var found: [String: String] = [:]
        while xmlTextReaderMoveToNextAttribute(reader) == 1 {
            guard xmlTextReaderIsNamespaceDecl(reader) != 1, let name = Self.string(xmlTextReaderConstName(reader)) else { continue }
            found[name] = Self.string(xmlTextReaderConstValue(reader)) ?? ""
        }
        _ = xmlTextReaderMoveToElement(reader)
        return found
    }

    /// The first error libxml2 reported, or where the parser stood should it have reported none.
    var failure: Failure {
        let first = firstErrorSlot.pointee
        let code = first.seen != 0 ? Int(first.code) : Int(XML_ERR_INTERNAL_ERROR.rawValue)
        if first.seen != 0 && first.line > 0 { return Failure(code: code, line: Int(first.line), column: max(1, Int(first.column))) }
        // None reported, or one raised outside the parser (an encoding's conversion), which has no
        // place: where the parser stood, at least line 1, column 1.
        return Failure(code: code, line: max(1, Int(xmlTextReaderGetParserLineNumber(reader))),
                       column: max(1, Int(xmlTextReaderGetParserColumnNumber(reader))))
    }

    /// libxml2's strings are UTF-8 it has checked; decoded with repair all the same, and nil
    /// for a NULL (which libxml2 returns for what is absent).
    private static func string(_ pointer: UnsafePointer<xmlChar>?) -> String? {
        guard let pointer else { return nil }
        return String(cString: pointer)
    }
}

/// What a libxml2 error code says, in words a person reading `binder import`'s message can act
/// on (the code follows in parentheses). libxml2's own message is not passed on: it quotes the
/// document (names, values) and the message may travel to a log.
enum XMLFailureReason {
    /// A row a newcomer extends: libxml2's code (xmlerror.h) and its words.
    static let words: [Int: String] = [
        Int(XML_ERR_DOCUMENT_START.rawValue): "no document where one should start",
        Int(XML_ERR_DOCUMENT_EMPTY.rawValue): "the document is empty",
        Int(XML_ERR_DOCUMENT_END.rawValue): "the document does not end where it should (an element left open, no element at all, or something after the last)",
        Int(XML_ERR_INVALID_CHARREF.rawValue): "a character reference names no character XML allows",
        Int(XML_ERR_INVALID_CHAR.rawValue): "a character XML does not allow",
        Int(XML_ERR_UNDECLARED_ENTITY.rawValue): "an entity reference (&name;) that is not one of XML's five",
        Int(XML_ERR_LT_IN_ATTRIBUTE.rawValue): "a '<' inside an attribute's value",
        Int(XML_ERR_ATTRIBUTE_NOT_STARTED.rawValue): "an attribute's value is not in quotes",
        Int(XML_ERR_ATTRIBUTE_WITHOUT_VALUE.rawValue): "an attribute without a value",
        Int(XML_ERR_ATTRIBUTE_REDEFINED.rawValue): "an attribute written twice on one element",
        Int(XML_ERR_COMMENT_NOT_FINISHED.rawValue): "a comment that is not closed",
        Int(XML_ERR_PI_NOT_FINISHED.rawValue): "a processing instruction that is not closed",
        Int(XML_ERR_CDATA_NOT_FINISHED.rawValue): "a CDATA section that is not closed",
        Int(XML_ERR_RESERVED_XML_NAME.rawValue): "an XML declaration that is not at the very start",
        Int(XML_ERR_NAME_REQUIRED.rawValue): "a name is missing",
        Int(XML_ERR_GT_REQUIRED.rawValue): "a tag that is not closed with '>'",
        Int(XML_ERR_LTSLASH_REQUIRED.rawValue): "an end tag is missing",
        Int(XML_ERR_TAG_NAME_MISMATCH.rawValue): "an end tag does not match its start tag",
        Int(XML_ERR_TAG_NOT_FINISHED.rawValue): "the document ends inside an element",
        Int(XML_NS_ERR_UNDEFINED_NAMESPACE.rawValue): "a namespace prefix that is not declared",
        // libxml2 took the first bytes for UTF-16 or UCS-4 (NUL is valid UTF-8) and could not convert them.
        Int(XML_ERR_INVALID_ENCODING.rawValue): "bytes that do not read as text in one encoding",
        Int(XML_IO_ENCODER.rawValue): "bytes that do not read as text in one encoding",
        Int(XML_I18N_CONV_FAILED.rawValue): "bytes that do not read as text in one encoding",
    ]

    static func describe(_ code: Int) -> String {
        guard let words = words[code] else { return "libxml2 error \(code)" }
        return "\(words) (libxml2 error \(code))"
    }
}
