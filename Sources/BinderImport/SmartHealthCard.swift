import BinderFormat
import CompressNIO
import Foundation
import NIOCore

/// SMART Health Cards (https://spec.smarthealth.cards): a `.smart-health-card` file
/// (`{"verifiableCredential": ["<JWS>", …]}`) or an `shc:/` string (numeric, chunked `shc:/1/2/…`
/// joined). Each JWS's payload is raw DEFLATE (CompressNIO), inflated within `maximumPayload`
/// (a card is a few KB: a bomb is cut there), and its FHIR bundle read as any other. The
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

    /// The JWS of an `shc:/` string: `shc:/` then pairs of digits, each a character's code
    /// minus 45 (chunks `shc:/I/N/…` in order, joined).
    static func jws(fromNumeric text: String, file: String) throws(ImportError) -> String {
        let parts = text.split(whereSeparator: \.isWhitespace).map(String.init).filter { !$0.isEmpty }
        var chunks: [(Int, String)] = []
        for part in parts {
            guard part.lowercased().hasPrefix("shc:/") else { throw .notRecognised(file: file) }
            let fields = part.dropFirst(5).split(separator: "/").map(String.init)
            if fields.count == 3, let index = Int(fields[0]) { chunks.append((index, fields[2])) } else if fields.count == 1 {
                chunks.append((1, fields[0]))
            } else { throw .malformedJSON(file: file, line: 1, reason: "an shc:/ chunk is not I/N/digits") }
        }
        var jws = ""
        for (_, digits) in chunks.sorted(by: { $0.0 < $1.0 }) {
            let bytes = Array(digits.utf8)
            guard bytes.count % 2 == 0, bytes.allSatisfy({ (0x30...0x39).contains($0) }) else {
                throw .malformedJSON(file: file, line: 1, reason: "an shc:/ code is not pairs of digits")
            }
            for index in stride(from: 0, to: bytes.count, by: 2) {
                let value = Int(bytes[index] - 0x30) * 10 + Int(bytes[index + 1] - 0x30) + 45
                guard value < 128 else { throw .malformedJSON(file: file, line: 1, reason: "an shc:/ code is out of range") }
                jws.append(Character(Unicode.Scalar(UInt8(value))))
            }
        }
        return jws
    }

    /// The FHIR bundle and issuer a JWS carries.
    static func payload(of jws: String, file: String) throws(ImportError) -> (bundle: JSONObject, issuer: String, issued: String?) {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = base64URL(parts[0]), let compressed = base64URL(parts[1]),
              let headerObject = (try? JSONValue.parse(header))?.objectValue else {
            throw .malformedJSON(file: file, line: 1, reason: "a health card's JWS is not header.payload.signature")
        }
        let json = headerObject["zip"]?.stringValue == "DEF" ? try inflate(compressed, file: file) : compressed
        guard let payload = (try? JSONValue.parse(json))?.objectValue,
              let bundle = payload["vc"]?.objectValue?["credentialSubject"]?.objectValue?["fhirBundle"]?.objectValue else {
            throw .malformedJSON(file: file, line: 1, reason: "a health card's payload holds no FHIR bundle")
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
        let refused = ImportError.malformedJSON(file: file, line: 1, reason: "a health card's payload does not inflate")
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
