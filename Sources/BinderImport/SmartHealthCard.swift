import BinderFormat
import CompressNIO
import Foundation
import NIOCore

/// SMART Health Cards (https://spec.smarthealth.cards): a `.smart-health-card` file
/// (`{"verifiableCredential": ["<JWS>", …]}`) or `shc:/` text (numeric; chunks `shc:/1/2/…`
/// joined, each given once; what is wrong named by `HealthCardFault`). Each JWS's payload is
/// raw DEFLATE (CompressNIO), inflated within `maximumPayload` (a card is a few KB: a bomb is
/// cut there), and its FHIR bundle read as any other. The
/// signature is checked against the issuer's keys when they are given (`IssuerKeys`): a bad
/// one refuses the card; else the card's record says it was not checked.
enum SmartHealthCard {
    /// The spec limits a QR code's JWS to a few KB; a payload past this is refused.
    static let maximumPayload = 1 << 20

    /// The JWSs of a `.smart-health-card` file's JSON, nil when it is not one.
    static func credentials(_ object: JSONObject) -> [String]? {
        guard let list = object["verifiableCredential"]?.arrayValue else { return nil }
        return list.compactMap(\.stringValue)
    }

    /// The JWSs of `shc:/` text (white space between codes, a line each as pasted or scanned):
    /// each whole code (`shc:/digits`) is a card; chunks (`shc:/I/N/digits`) are joined in
    /// order into one, every one of 1…N given once. The digits are pairs, each a character's
    /// code minus 45. Nil when a code does not start with `shc:/` (not a card at all).
    static func jwss(fromNumeric text: String, file: String) throws(ImportError) -> [String]? {
        var wholes: [String] = []
        var chunks: [Int: String] = [:]
        var total: Int?
        for part in text.drop(while: { $0 == "\u{FEFF}" }).split(whereSeparator: \.isWhitespace) {
            guard part.utf8.count >= 5, part.prefix(5).lowercased() == "shc:/" else { return nil }
            let fields = part.dropFirst(5).split(separator: "/", omittingEmptySubsequences: false)
            if fields.count == 1 {
                wholes.append(try characters(fields[0], file: file))
                continue
            }
            guard fields.count == 3, let index = chunkNumber(fields[0]), let count = chunkNumber(fields[1]), count >= 2, (1...count).contains(index) else {
                throw .malformedHealthCard(file: file, fault: .badChunkMarker)
            }
            if let total, total != count { throw .malformedHealthCard(file: file, fault: .chunkTotalsDisagree) }
            total = count
            guard chunks[index] == nil else { throw .malformedHealthCard(file: file, fault: .duplicateChunk(index: index, total: count)) }
            chunks[index] = try characters(fields[2], file: file)
        }
        guard let total else { return wholes }
        guard wholes.isEmpty else { throw .malformedHealthCard(file: file, fault: .wholeCodeAmongChunks) }
        // Every index given is within 1…total and none twice: fewer than total means some are missing.
        guard chunks.count == total else {
            throw .malformedHealthCard(file: file, fault: .missingChunks((1...total).filter { chunks[$0] == nil }.prefix(100).map { $0 }, total: total))
        }
        return [(1...total).map { chunks[$0] ?? "" }.joined()]
    }

    /// A chunk's index or total: one to four digits, not zero.
    private static func chunkNumber(_ field: Substring) -> Int? {
        guard (1...4).contains(field.utf8.count), field.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let number = Int(field), number > 0 else { return nil }
        return number
    }

    /// The characters pairs of digits spell (each pair a character's code minus 45, `-` to `z`).
    private static func characters(_ digits: Substring, file: String) throws(ImportError) -> String {
        let bytes = Array(digits.utf8)
        guard !bytes.isEmpty else { throw .malformedHealthCard(file: file, fault: .noDigits) }
        guard bytes.allSatisfy({ (0x30...0x39).contains($0) }) else { throw .malformedHealthCard(file: file, fault: .notDigits) }
        guard bytes.count % 2 == 0 else { throw .malformedHealthCard(file: file, fault: .oddDigitCount) }
        var scalars = String.UnicodeScalarView()
        for index in stride(from: 0, to: bytes.count, by: 2) {
            let pair = Int(bytes[index] - 0x30) * 10 + Int(bytes[index + 1] - 0x30)
            guard pair <= 77 else { throw .malformedHealthCard(file: file, fault: .pairOutOfRange(value: pair)) }
            scalars.append(Unicode.Scalar(UInt8(pair + 45)))
        }
        return String(scalars)
    }

    /// The FHIR bundle and issuer a JWS carries.
    static func payload(of jws: String, file: String) throws(ImportError) -> (bundle: JSONObject, issuer: String, issued: String?) {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = base64URL(parts[0]), let compressed = base64URL(parts[1]),
              let headerObject = (try? JSONValue.parse(header))?.objectValue else {
            throw .malformedHealthCard(file: file, fault: .notJWS)
        }
        let json = headerObject["zip"]?.stringValue == "DEF" ? try inflate(compressed, file: file) : compressed
        guard let payload = (try? JSONValue.parse(json))?.objectValue,
              let bundle = payload["vc"]?.objectValue?["credentialSubject"]?.objectValue?["fhirBundle"]?.objectValue else {
            throw .malformedHealthCard(file: file, fault: .noFHIRBundle)
        }
        // `nbf`: when the card was issued (seconds since 1970).
        let issued = payload["nbf"]?.doubleValue.flatMap { $0 >= 0 && $0 < Double(Timestamps.maximumSeconds) ? Timestamps.string(seconds: Int64($0)) : nil }
        return (bundle, payload["iss"]?.stringValue ?? "Unknown issuer", issued)
    }

    static func base64URL<S: StringProtocol>(_ text: S) -> [UInt8]? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.utf8.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64).map(Array.init)
    }

    /// Raw DEFLATE through a 64 KiB window, counting what comes out: past `maximumPayload` it stops.
    static func inflate(_ bytes: [UInt8], file: String) throws(ImportError) -> [UInt8] {
        let refused = ImportError.malformedHealthCard(file: file, fault: .payloadNotDeflate)
        guard let decompressor = try? ZlibDecompressor(algorithm: .deflate) else { throw refused }
        var input = ByteBuffer(bytes: bytes)
        var window = ByteBufferAllocator().buffer(capacity: 64 << 10)
        var output: [UInt8] = []
        while input.readableBytes > 0 {
            window.clear()
            let before = input.readableBytes
            do { try decompressor.inflate(from: &input, to: &window) } catch let error as CompressNIOError
                where error == .bufferOverflow || error == .inputBufferOverflow {
                // The window is full, or the input used up: the next round goes on.
            } catch { throw refused }
            if window.readableBytes == 0 && input.readableBytes == before { break }
            output += window.readableBytesView
            if output.count > maximumPayload {
                throw .payloadTooLarge(file: file, limit: maximumPayload)
            }
        }
        return output
    }

    /// A card read as a source: its bundles' resources (each card's), kept as the file was.
    static func read(jwss: [String], file: String, bytes: [UInt8], importDate: String, issuerKeys: IssuerKeys? = nil) throws(ImportError) -> SourceDocument {
        var resources: [JSONObject] = []
        var issuers: [String] = []
        var issued: String?
        var unknownKey = false
        for jws in jwss {
            switch issuerKeys?.check(jws) {
            case .invalid?: throw .signatureRefused(file: file)
            case .noKey?: unknownKey = true
            case .valid?, nil: break
            }
            let card = try payload(of: jws, file: file)
            resources.append(card.bundle)
            issuers.append(card.issuer)
            issued = issued ?? card.issued
        }
        guard !resources.isEmpty else { throw .notRecognised(file: file) }
        var document = try FHIRReader.read(resources, file: file, bytes: bytes, importDate: importDate)
        let issuer = issuers.first ?? "Unknown issuer"
        document.organisation = issuer
        document.source.organisation = issuer
        document.source.format = "SMART Health Card"
        for index in document.records.indices {
            document.records[index].source.organisation = issuer
            document.records[index].source.format = "SMART Health Card"
        }
        document.title = "SMART Health Card"
        document.created = issued
        document.source.documentDate = issued
        // The card as it was: its JSON, or an shc:/ code's text.
        document.keptExtension = bytes.first == UInt8(ascii: "{") ? "json" : "txt"
        if issuerKeys == nil || unknownKey {
            let why = issuerKeys == nil ? "no issuer keys given" : "its key is not among the issuer keys given"
            document.signature = "not checked (\(why))"
            document.skipped.append(SkippedItem(file: file, what: "the card's signature", reason: "not checked (\(why)): what it says is the issuer's unverified"))
        } else {
            document.signature = "checked (ES256, the issuer's key)"
        }
        return document
    }
}
