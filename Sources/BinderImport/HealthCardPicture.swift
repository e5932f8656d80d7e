import BinderFormat

/// Reads the QR codes in a picture. BinderImport links no image or QR library: the CLI gives
/// the reader its own decoders (those `binder key import --qr` uses), so the dependency stays
/// one way (BinderCommands -> BinderImport).
public protocol QRCodeScanning: Sendable {
    /// The texts of the QR codes found in `picture` (`format`: `png`, `jpeg` or `pdf`, as
    /// `SourceFiles` recognised it), in any order; empty when it holds none or cannot be
    /// decoded as a picture. Throws only when it cannot look at all (its library missing).
    func codes(in picture: [UInt8], format: String) throws -> [[UInt8]]
}

/// A photo or scan of a SMART Health Card's QR code(s), named as a source: its `shc:/` codes
/// (chunks in one picture joined) are read as the card, and the picture is kept as the card's
/// attachment. A picture without such a code is no card: it is imported as any picture.
enum HealthCardPicture {
    /// The formats whose pictures are searched for codes (those binder's decoders read).
    static let formats: Set<String> = ["png", "jpeg", "pdf"]

    /// The card the picture's codes make, or nil (no shc:/ code in it) with a note when the
    /// codes could not be looked for; a card's code that cannot be read is refused by name.
    static func read(_ bytes: [UInt8], format: String, file: String, scanner: any QRCodeScanning, importDate: String,
                     issuerKeys: IssuerKeys?) throws(ImportError) -> (card: SourceDocument?, note: SkippedItem?) {
        let codes: [[UInt8]]
        do { codes = try scanner.codes(in: bytes, format: format) } catch {
            return (nil, SkippedItem(file: file, what: "its QR codes", reason: "not looked for: \(error)"))
        }
        // A picture may hold other codes too (a web address): only the card's are read.
        let texts = codes.map { String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) }
            .filter { $0.utf8.count >= 5 && $0.prefix(5).lowercased() == "shc:/" }
        guard !texts.isEmpty, let jwss = try SmartHealthCard.jwss(fromNumeric: texts.joined(separator: "\n"), file: file) else { return (nil, nil) }
        var card = try SmartHealthCard.read(jwss: jwss, file: file, bytes: bytes, importDate: importDate, issuerKeys: issuerKeys)
        card.keptExtension = AttachmentFormats.fileExtension(format: format)
        return (card, nil)
    }
}
