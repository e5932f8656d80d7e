/// Why a JSON value is not a MedicalDocument. Descriptions name the field
/// ("children[1].metadata.type is missing") and never quote content, so they are safe
/// to log.
public enum FormatError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The plaintext is not JSON at all.
    case invalidJSON(JSONParseError)
    /// A required field is absent. `field` is a path such as `children[1].metadata.type`.
    case missing(field: String)
    /// A field has the wrong JSON type. `field` is empty for the document itself.
    case wrongType(field: String, expected: String)

    public var description: String {
        switch self {
        case let .invalidJSON(error):
            return error.description
        case let .missing(field):
            return "\(field) is missing"
        case let .wrongType(field, expected):
            return "\(field.isEmpty ? "document" : field) must be \(expected)"
        }
    }
}

/// One medical record: markdown `value`, `metadata`, dependent `children`, and any other
/// top-level keys (`renderer`, `editor`, unknown ones) kept as they were.
///
/// Reading is tolerant wherever the apps might be (documents they wrote must be shown):
/// only `value` (string), `metadata` (object) and `metadata.type` (string) are required;
/// a missing `children` reads as `[]`; a missing or odd `created` is accepted and reported
/// by `validate()`. Writing reproduces the original top-level key order exactly, and omits
/// `children` again if it was absent and is still empty, so an untouched document
/// serialises to the same bytes.
public struct MedicalDocument: Sendable {
    public var value: String
    public var metadata: JSONObject
    public var children: [MedicalDocument]
    /// Top-level keys other than `value`, `metadata` and `children`, in their order.
    public var extraFields: JSONObject

    /// The top-level key order as read, including `value`/`metadata`/`children`; new
    /// extra fields are written after these.
    private(set) var keyOrder: [String]

    static let valueKey = "value"
    static let metadataKey = "metadata"
    static let childrenKey = "children"

    /// A new document, written with keys in the apps' order: value, metadata, children.
    public init(value: String, metadata: JSONObject, children: [MedicalDocument] = []) {
        self.value = value
        self.metadata = metadata
        self.children = children
        self.extraFields = JSONObject()
        self.keyOrder = [Self.valueKey, Self.metadataKey, Self.childrenKey]
    }

    /// A new document with fresh metadata `{type, created, updated}`, as the apps create it.
    public init(type: String, value: String, now: String = Timestamps.now()) {
        self.init(value: value, metadata: ["type": .string(type), "created": .string(now), "updated": .string(now)])
    }

    public init(json: JSONValue) throws(FormatError) {
        try self.init(json: json, path: "")
    }

    /// Parses decrypted plaintext.
    public init(plaintext: [UInt8]) throws(FormatError) {
        let json: JSONValue
        do {
            json = try JSONValue.parse(plaintext)
        } catch {
            throw .invalidJSON(error)
        }
        try self.init(json: json)
    }

    private init(json: JSONValue, path: String) throws(FormatError) {
        guard case let .object(object) = json else {
            throw .wrongType(field: path.isEmpty ? "" : String(path.dropLast()), expected: "an object")
        }
        guard let rawValue = object[Self.valueKey] else { throw .missing(field: path + Self.valueKey) }
        guard case let .string(value) = rawValue else {
            throw .wrongType(field: path + Self.valueKey, expected: "a string")
        }
        guard let rawMetadata = object[Self.metadataKey] else { throw .missing(field: path + Self.metadataKey) }
        guard case let .object(metadata) = rawMetadata else {
            throw .wrongType(field: path + Self.metadataKey, expected: "an object")
        }
        guard let type = metadata["type"] else { throw .missing(field: path + "metadata.type") }
        guard case .string = type else { throw .wrongType(field: path + "metadata.type", expected: "a string") }

        var children: [MedicalDocument] = []
        if let rawChildren = object[Self.childrenKey] {
            guard case let .array(elements) = rawChildren else {
                throw .wrongType(field: path + Self.childrenKey, expected: "an array")
            }
            children.reserveCapacity(elements.count)
            for (index, element) in elements.enumerated() {
                children.append(try MedicalDocument(json: element, path: "\(path)children[\(index)]."))
            }
        }

        var extraFields = JSONObject()
        for (key, fieldValue) in object where !Self.isStructuralKey(key) {
            extraFields[key] = fieldValue
        }

        self.value = value
        self.metadata = metadata
        self.children = children
        self.extraFields = extraFields
        self.keyOrder = object.keys
    }

    private static func isStructuralKey(_ key: String) -> Bool {
        key.hasSameUTF8(as: valueKey) || key.hasSameUTF8(as: metadataKey) || key.hasSameUTF8(as: childrenKey)
    }

    /// The document as JSON, with the original top-level key order.
    public var json: JSONValue {
        var object = JSONObject()
        var wroteChildren = false
        for key in keyOrder {
            if key.hasSameUTF8(as: Self.valueKey) {
                object[key] = .string(value)
            } else if key.hasSameUTF8(as: Self.metadataKey) {
                object[key] = .object(metadata)
            } else if key.hasSameUTF8(as: Self.childrenKey) {
                object[key] = .array(children.map(\.json))
                wroteChildren = true
            } else if let field = extraFields[key] {
                object[key] = field
            }
        }
        // Only documents that were read without these keys get here.
        if !object.contains(key: Self.valueKey) { object[Self.valueKey] = .string(value) }
        if !object.contains(key: Self.metadataKey) { object[Self.metadataKey] = .object(metadata) }
        if !wroteChildren && !children.isEmpty { object[Self.childrenKey] = .array(children.map(\.json)) }
        for (key, field) in extraFields where !object.contains(key: key) {
            object[key] = field
        }
        return .object(object)
    }

    /// Compact JSON as the apps write it (see `JSONValue.serialized()`).
    public func serialized() -> String { json.serialized() }

    /// `serialized()` as UTF-8 bytes, ready to encrypt.
    public func serializedBytes() -> [UInt8] { json.serializedBytes() }
}

extension MedicalDocument: Equatable {
    /// Equal when they serialise identically (strings compared by bytes, key order counts).
    public static func == (lhs: MedicalDocument, rhs: MedicalDocument) -> Bool {
        lhs.json == rhs.json
    }
}

// MARK: - Convenience accessors

extension MedicalDocument {
    /// `metadata.type`; empty if it has been removed since reading.
    public var type: String {
        get { metadata["type"]?.stringValue ?? "" }
        set { metadata["type"] = .string(newValue) }
    }

    /// `metadata.created` if it is a string; setting `nil` removes it.
    public var created: String? {
        get { metadata["created"]?.stringValue }
        set { metadata["created"] = newValue.map(JSONValue.string) }
    }

    /// `metadata.updated` if it is a string; setting `nil` removes it.
    public var updated: String? {
        get { metadata["updated"]?.stringValue }
        set { metadata["updated"] = newValue.map(JSONValue.string) }
    }

    /// `metadata.format` of an attachment (`jpeg`, `pdf`, `m4a`…).
    public var format: String? {
        metadata["format"]?.stringValue
    }

    /// A reference to a sidecar file named by `value`.
    public var isAttachmentRef: Bool { type.hasSameUTF8(as: "attachment_ref") }

    /// An inline attachment: `value` holds the base64 of the bytes.
    public var isInlineAttachment: Bool { type.hasSameUTF8(as: "attachment") }

    /// The time to show as the file's modification time: `updated`, else `created`,
    /// whichever parses first.
    public var modificationTime: (seconds: Int64, nanoseconds: Int32)? {
        updated.flatMap(Timestamps.parse) ?? created.flatMap(Timestamps.parse)
    }
}
