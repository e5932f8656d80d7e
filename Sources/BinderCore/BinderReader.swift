import BinderCrypto
import BinderFormat

/// Reading the stored format: the one place that knows a document is a NIP-44 payload holding
/// MedicalDocument JSON (or, in very old binders, a flat patient-info object).
public enum BinderReader {
    public enum Error: Swift.Error, CustomStringConvertible {
        case decrypt(NIP44.Error)
        case parse(String)

        public var description: String {
            switch self {
            case .decrypt(let e): return e.description
            case .parse(let why): return why
            }
        }
    }

    /// The most bytes a stored document can have: the longest payload, and room for the line
    /// breaks and spaces a writer may end the file with. A larger blob is no document, and is
    /// not read to find that out.
    public static let maximumDocumentBlobBytes = NIP44.maximumPayloadLength + 4096

    public static func decryptDocument(_ stored: [UInt8], key: NIP44.ConversationKey) throws -> SecureBytes {
        try stored.withUnsafeBytes { (b) throws in try decryptDocument(b, key: key) }
    }

    /// A stored document decrypted where it lies (a blob in libgit2's buffer).
    public static func decryptDocument(_ stored: UnsafeRawBufferPointer, key: NIP44.ConversationKey) throws -> SecureBytes {
        // Some writers may end the file with a newline; the payload itself never contains one.
        var end = stored.count
        while end > 0, stored[end - 1] == 0x0A || stored[end - 1] == 0x0D || stored[end - 1] == 0x20 { end -= 1 }
        let payload = UnsafeRawBufferPointer(start: stored.baseAddress, count: end)
        do {
            return try NIP44.decrypt(payload: payload, key: key)
        } catch {
            throw Error.decrypt(error)
        }
    }

    /// A stored `.json` document, decrypted and parsed.
    public static func readDocument(_ stored: [UInt8], key: NIP44.ConversationKey, gitPath: String) throws -> MedicalDocument {
        try parseDocument(try decryptDocument(stored, key: key), gitPath: gitPath)
    }

    /// A stored `.json` document read where it lies, decrypted and parsed.
    public static func readDocument(_ stored: UnsafeRawBufferPointer, key: NIP44.ConversationKey, gitPath: String) throws -> MedicalDocument {
        try parseDocument(try decryptDocument(stored, key: key), gitPath: gitPath)
    }

    /// Parses a decrypted document. A flat legacy `patient-info.json` becomes a document whose
    /// metadata is the whole object and whose value is empty.
    public static func parseDocument(_ plaintext: SecureBytes, gitPath: String) throws -> MedicalDocument {
        let bytes = plaintext.copyBytes()
        let json: JSONValue
        do { json = try JSONValue.parse(bytes) } catch { throw Error.parse("not JSON: \(error)") }
        do {
            return try MedicalDocument(json: json)
        } catch {
            if isPatientInfo(gitPath), case .object(let flat) = json, flat["value"] == nil {
                return MedicalDocument(value: "", metadata: flat)
            }
            throw Error.parse("not a medical document: \(error)")
        }
    }

    static func isPatientInfo(_ gitPath: String) -> Bool { gitPath == BinderNaming.patientInfoPath }
}

