import BinderFormat
import Foundation

/// Reads one source file as a whole, within a size limit, and recognises its format by its
/// content (never its name): a C-CDA `ClinicalDocument` in `urn:hl7-org:v3`, or FHIR R4 JSON
/// (a Bundle, one resource, or NDJSON: a resource a line). Anything else is refused by name.
public enum SourceReader {
    /// Reads `path` (named `file` in messages) and parses it.
    public static func read(path: String, file: String, maximumBytes: Int = ImportLimits.defaultMaximumBytes,
                            importDate: String) throws(ImportError) -> SourceDocument {
        let bytes = try load(path: path, file: file, maximumBytes: maximumBytes)
        return try parse(bytes, file: file, importDate: importDate)
    }

    /// The sources at `path`: a file's, or a folder's (`SourceFolder`). A file that is not
    /// C-CDA, FHIR or a health card may be a PDF, an image, audio, video or a note
    /// (`SourceFiles`): its record goes in `into` (default `documents`).
    /// A PNG, JPEG or PDF file is searched for a health card's QR codes with
    /// `scanner` when given (`HealthCardPicture`); a folder's pictures are not (decoding every
    /// photo of a folder would cost seconds each).
    public static func sources(path: String, file: String, maximumBytes: Int = ImportLimits.defaultMaximumBytes,
                               importDate: String, into: String? = nil, issuerKeys: IssuerKeys? = nil,
                               scanner: (any QRCodeScanning)? = nil) throws(ImportError) -> [SourceDocument] {
        var status = stat()
        if stat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFDIR {
            return try SourceFolder.read(path: path, file: file, maximumBytes: maximumBytes, importDate: importDate, into: into, issuerKeys: issuerKeys)
        }
        if AppleHealthExport.isZip(path: path) {
            // Read in place (an export is often larger than any one record); its entries are held to the limit.
            return [try AppleHealthExport.read(path: path, file: file, limits: AppleHealthExport.Limits(bytes: maximumBytes), importDate: importDate)]
        }
        let bytes = try load(path: path, file: file, maximumBytes: maximumBytes)
        do { return [try parse(bytes, file: file, importDate: importDate, issuerKeys: issuerKeys)] } catch .notRecognised {
            let name = String(file.split(separator: "/").last ?? "")
            var note: SkippedItem?
            if let scanner, case .attachment(let format)? = SourceFiles.kind(of: bytes), HealthCardPicture.formats.contains(format) {
                let scanned = try HealthCardPicture.read(bytes, format: format, file: file, scanner: scanner, importDate: importDate, issuerKeys: issuerKeys)
                if let card = scanned.card { return [card] }
                note = scanned.note
            }
            guard var document = try SourceFiles.document(bytes, file: file, name: name, folder: SourceFiles.folder(for: [], into: into),
                                                          modified: SourceFiles.modified(path: path), importDate: importDate) else {
                throw .notRecognised(file: file)
            }
            if let note { document.skipped.append(note) }
            return [document]
        }
    }

    /// The name standard input goes by in messages and in the card's record.
    public static let standardInputName = "standard input"

    /// A health card's `shc:/` text from standard input (`-`: a code scanned elsewhere and
    /// pasted or piped, never in argv); anything else there is refused.
    public static func standardInput(maximumBytes: Int, importDate: String, issuerKeys: IssuerKeys? = nil) throws(ImportError) -> SourceDocument {
        let bytes = try load(path: "/dev/stdin", file: standardInputName, maximumBytes: maximumBytes)
        guard let first = firstByte(bytes), first == UInt8(ascii: "s") || first == UInt8(ascii: "S") else {
            throw .notRecognised(file: standardInputName)
        }
        return try parse(bytes, file: standardInputName, importDate: importDate, issuerKeys: issuerKeys)
    }

    /// The first byte after a byte-order mark and white space, or nil.
    static func firstByte(_ bytes: [UInt8]) -> UInt8? {
        var start = 0
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { start = 3 }
        while start < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[start]) { start += 1 }
        return start < bytes.count ? bytes[start] : nil
    }

    /// Parses bytes already read.
    public static func parse(_ bytes: [UInt8], file: String, importDate: String, issuerKeys: IssuerKeys? = nil) throws(ImportError) -> SourceDocument {
        guard let first = firstByte(bytes) else { throw .notRecognised(file: file) }
        switch first {
        case UInt8(ascii: "<"):
            let root = try XMLTree.parse(bytes, file: file)
            guard CCDAReader.isClinicalDocument(root) else { throw .notRecognised(file: file) }
            return CCDAReader.read(root, file: file, bytes: bytes, importDate: importDate)
        case UInt8(ascii: "{"):
            switch try jsonContent(bytes, file: file) {
            case .healthCard(let jwss):
                return try SmartHealthCard.read(jwss: jwss, file: file, bytes: bytes, importDate: importDate, issuerKeys: issuerKeys)
            case .resources(let resources):
                return try FHIRReader.read(resources, file: file, bytes: bytes, importDate: importDate)
            }
        case UInt8(ascii: "s"), UInt8(ascii: "S"):
            // An shc:/ string (a QR code's text, pasted or scanned).
            guard let jwss = try healthCardText(bytes, file: file) else { throw .notRecognised(file: file) }
            return try SmartHealthCard.read(jwss: jwss, file: file, bytes: bytes, importDate: importDate, issuerKeys: issuerKeys)
        default:
            throw .notRecognised(file: file)
        }
    }

    /// What a JSON source holds: a `.smart-health-card` file's JWSs, or FHIR resources.
    enum JSONContent {
        case healthCard([String])
        case resources([JSONObject])
    }

    /// A JSON document parsed once: a health card (`verifiableCredential`) or FHIR (one
    /// resource, or NDJSON when the whole does not parse); anything else is not recognised.
    static func jsonContent(_ bytes: [UInt8], file: String) throws(ImportError) -> JSONContent {
        guard let object = (try? JSONValue.parse(bytes))?.objectValue else { return .resources(try jsonResources(bytes, file: file)) }
        if let jwss = SmartHealthCard.credentials(object) { return .healthCard(jwss) }
        guard object["resourceType"]?.stringValue != nil else { throw .notRecognised(file: file) }
        return .resources([object])
    }

    /// The JWSs of text that is `shc:/` codes only (a QR code's text, pasted or scanned: a
    /// code a line or separated by spaces), nil when it is other text; a code that cannot be
    /// read is refused (`HealthCardFault`).
    static func healthCardText(_ bytes: [UInt8], file: String) throws(ImportError) -> [String]? {
        guard let first = firstByte(bytes), first == UInt8(ascii: "s") || first == UInt8(ascii: "S") else { return nil }
        return try SmartHealthCard.jwss(fromNumeric: String(decoding: bytes, as: UTF8.self), file: file)
    }

    /// The file's bytes, refused past `maximumBytes` before they are read.
    static func load(path: String, file: String, maximumBytes: Int) throws(ImportError) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .unreadable(file: file, errno: errno) }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw .unreadable(file: file, errno: errno) }
        if (status.st_mode & S_IFMT) == S_IFDIR { throw .unreadable(file: file, errno: EISDIR) }
        if Int(status.st_size) > maximumBytes { throw .tooLarge(file: file, bytes: Int(status.st_size), limit: maximumBytes) }
        // Read to the end (a pipe or a growing file has no size to trust), one byte past the limit at most.
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { Foundation.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .unreadable(file: file, errno: errno)
            }
            if count == 0 { break }
            bytes += chunk[0..<count]
            if bytes.count > maximumBytes { throw .tooLarge(file: file, bytes: bytes.count, limit: maximumBytes) }
        }
        return bytes
    }

    /// The resources of a JSON document or of NDJSON (one per non-empty line). A JSON value that
    /// is not an object with a `resourceType` makes the file not FHIR.
    static func jsonResources(_ bytes: [UInt8], file: String) throws(ImportError) -> [JSONObject] {
        do {
            let value = try JSONValue.parse(bytes)
            guard let object = value.objectValue, object["resourceType"]?.stringValue != nil else { throw ImportError.notRecognised(file: file) }
            return [object]
        } catch let error as ImportError {
            throw error
        } catch let whole as JSONParseError {
            // NDJSON: several lines, each one resource. A single document's error stands otherwise.
            let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
            let firstLine = lines.first.map { Array($0) } ?? []
            guard lines.count > 1, (try? JSONValue.parse(firstLine)) != nil else {
                throw .malformedJSON(file: file, line: line(of: whole.offset, in: bytes), reason: whole.message)
            }
            var resources: [JSONObject] = []
            for (index, line) in lines.enumerated() {
                let text = Array(line)
                if text.allSatisfy({ [0x20, 0x09, 0x0D].contains($0) }) { continue }
                let value: JSONValue
                do { value = try JSONValue.parse(text) } catch {
                    throw .malformedJSON(file: file, line: index + 1, reason: error.message)
                }
                guard let object = value.objectValue, object["resourceType"]?.stringValue != nil else { throw .notRecognised(file: file) }
                resources.append(object)
            }
            return resources
        } catch {
            throw .notRecognised(file: file)
        }
    }

    /// The 1-based line of byte `offset`.
    static func line(of offset: Int, in bytes: [UInt8]) -> Int {
        1 + bytes.prefix(max(0, min(offset, bytes.count))).reduce(0) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
    }
}
