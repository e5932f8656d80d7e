/// Why a source cannot be imported. Each case names the file (as given on the command line)
/// and, for bad content, where in it; the message never quotes the content (it is health data).
public enum ImportError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file could not be read (`errno`).
    case unreadable(file: String, errno: Int32)
    /// Larger than the size limit (`--max-size`).
    case tooLarge(file: String, bytes: Int, limit: Int)
    /// A folder whose files come to more than the size limit (`--max-size`) together: refused
    /// when the file that passes it is met (`bytes`: the total with it), before it is read.
    case folderTooLarge(folder: String, bytes: Int, limit: Int)
    /// Neither C-CDA nor FHIR R4 JSON.
    case notRecognised(file: String)
    /// A DOCTYPE or ENTITY declaration: refused before parsing, so no entity is ever expanded
    /// or fetched.
    case declarationRefused(file: String, line: Int)
    /// XML whose bytes are not UTF-8 at `line` (C-CDA is UTF-8; libxml2 would pass such names
    /// on, and Foundation's parser traps on them).
    case notUTF8(file: String, line: Int)
    /// XML that libxml2 refuses, at `line`.
    case malformedXML(file: String, line: Int, column: Int, reason: String)
    /// JSON that does not parse, at `line` (`record`: the NDJSON line, or 0 for one document).
    case malformedJSON(file: String, line: Int, reason: String)
    /// A structure nested deeper than `ImportLimits.maximumDepth`.
    case tooDeep(file: String, line: Int)
    /// A SMART Health Card's payload inflates past `limit` (a card is a few KB).
    case payloadTooLarge(file: String, limit: Int)
    /// A zip archive (Apple Health's `export.zip`) refused whole: a path out of it, too many
    /// entries, past the size limit, a bomb, damaged.
    case archiveRefused(file: String, reason: String)
    /// A health card whose signature is not the issuer's key's (`--issuer-keys`): altered, or forged.
    case signatureRefused(file: String)
    /// A SMART Health Card that cannot be read: its `shc:/` text, its chunks or its JWS (`fault` says which).
    case malformedHealthCard(file: String, fault: HealthCardFault)
    /// A note whose front matter is not YAML binder reads (or not closed by a `---` line).
    case malformedFrontMatter(file: String, reason: String)
    /// The document is about someone else than the binder's `patient-info` (refused without `--force`).
    case differentPatient(file: String, reason: String)

    public var file: String {
        switch self {
        case .unreadable(let file, _), .tooLarge(let file, _, _), .notRecognised(let file), .declarationRefused(let file, _), .notUTF8(let file, _),
             .malformedXML(let file, _, _, _), .malformedJSON(let file, _, _), .tooDeep(let file, _), .differentPatient(let file, _),
             .payloadTooLarge(let file, _), .malformedFrontMatter(let file, _), .signatureRefused(let file), .archiveRefused(let file, _),
             .malformedHealthCard(let file, _), .folderTooLarge(let file, _, _):
            return file
        }
    }

    public var description: String {
        switch self {
        case .unreadable(let file, let errno): return "\(file): cannot read it (errno \(errno))"
        case .tooLarge(let file, let bytes, let limit):
            return "\(file): \(bytes) bytes is over the import limit of \(limit) bytes (--max-size raises it)"
        case .folderTooLarge(let folder, let bytes, let limit):
            return "\(folder): its files come to at least \(bytes) bytes together, over the import limit of \(limit) bytes for a folder (--max-size raises it)"
        case .notRecognised(let file): return "\(file): format not recognised (binder imports C-CDA XML, FHIR R4 JSON, SMART Health Cards, PDFs, images, audio, video and UTF-8 text)"
        case .declarationRefused(let file, let line):
            return "\(file), line \(line): a DOCTYPE or ENTITY declaration is refused (entities are never expanded or fetched)"
        case .notUTF8(let file, let line): return "\(file), line \(line): not UTF-8 text (binder reads C-CDA documents in UTF-8)"
        case .malformedXML(let file, let line, let column, let reason): return "\(file), line \(line), column \(column): malformed XML: \(reason)"
        case .malformedJSON(let file, let line, let reason): return "\(file), line \(line): malformed JSON: \(reason)"
        case .tooDeep(let file, let line): return "\(file), line \(line): nested deeper than \(ImportLimits.maximumDepth) levels"
        case .payloadTooLarge(let file, let limit): return "\(file): a health card's payload inflates past \(limit) bytes (refused)"
        case .archiveRefused(let file, let reason): return "\(file): zip archive refused: \(reason)"
        case .signatureRefused(let file):
            return "\(file): the health card's signature does not verify with the issuer's key (altered or not the issuer's): refused"
        case .malformedHealthCard(let file, let fault): return "\(file): not a readable SMART Health Card: \(fault)"
        case .malformedFrontMatter(let file, let reason): return "\(file): its front matter cannot be read: \(reason)"
        case .differentPatient(let file, let reason):
            return "\(file) is about a different person than this binder's patient-info (\(reason)); --force imports it anyway"
        }
    }
}

/// What is wrong with a SMART Health Card (https://spec.smarthealth.cards): its `shc:/` text
/// (pairs of digits, each a character's code minus 45), its chunks (`shc:/I/N/digits`, all N of
/// them, each once), or the JWS they spell (`header.payload.signature`, the payload raw DEFLATE
/// of JSON holding a FHIR bundle).
public enum HealthCardFault: Sendable, Equatable, CustomStringConvertible {
    /// `shc:/` with nothing after it.
    case noDigits
    /// A character after `shc:/` (or a chunk's marker) that is not a digit.
    case notDigits
    /// An odd number of digits: they are read in pairs.
    case oddDigitCount
    /// A pair above 77: no character of a JWS (`value` is the pair).
    case pairOutOfRange(value: Int)
    /// A chunk's marker that is not `I/N/` with 1 ≤ I ≤ N and N ≥ 2.
    case badChunkMarker
    /// Chunks that give different totals (`shc:/1/2/…` with `shc:/2/3/…`).
    case chunkTotalsDisagree
    /// Chunks `missing` (1-based) of `total` were not given.
    case missingChunks([Int], total: Int)
    /// Chunk `index` of `total` was given twice.
    case duplicateChunk(index: Int, total: Int)
    /// A whole code (`shc:/digits`) given with chunks of another.
    case wholeCodeAmongChunks
    /// The digits spell no JWS: not three base64url parts, or a header that is not JSON.
    case notJWS
    /// The payload is not raw DEFLATE.
    case payloadNotDeflate
    /// The payload is not JSON, or holds no `vc.credentialSubject.fhirBundle`.
    case noFHIRBundle

    public var description: String {
        switch self {
        case .noDigits: return "shc:/ with no digits after it"
        case .notDigits: return "a character that is not a digit after shc:/"
        case .oddDigitCount: return "an odd number of digits (an shc:/ code is pairs of digits)"
        case .pairOutOfRange(let value): return "the digit pair \(value) is over 77 (no character of a card)"
        case .badChunkMarker: return "a chunk is not shc:/I/N/digits with 1 ≤ I ≤ N and N at least 2"
        case .chunkTotalsDisagree: return "its chunks give different totals (shc:/I/N/: N differs)"
        case .missingChunks(let missing, let total):
            let shown = missing.prefix(10).map(String.init).joined(separator: ", ") + (missing.count > 10 ? "…" : "")
            return "chunk\(missing.count == 1 ? "" : "s") \(shown) of \(total) missing (give every shc:/I/\(total)/ line together)"
        case .duplicateChunk(let index, let total): return "chunk \(index) of \(total) given twice"
        case .wholeCodeAmongChunks: return "a whole shc:/ code given with chunks (shc:/I/N/) of another"
        case .notJWS: return "its text is not a JWS (header.payload.signature in base64url)"
        case .payloadNotDeflate: return "its payload does not inflate (raw DEFLATE)"
        case .noFHIRBundle: return "its payload holds no FHIR bundle (vc.credentialSubject.fhirBundle)"
        }
    }
}

/// Bounds on what one source may cost.
public enum ImportLimits {
    /// The default of `--max-size`: a CCD is rarely over a few MB; a FHIR bundle with PDFs inside may be larger.
    public static let defaultMaximumBytes = 64 << 20
    /// Elements or JSON values nested deeper are refused (the mapping recurses).
    public static let maximumDepth = 256
}
