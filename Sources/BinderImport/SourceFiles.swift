import BinderCore
import BinderCrypto
import BinderFormat
import Foundation

/// Files that are neither C-CDA, FHIR nor a health card, recognised by their first bytes (never
/// their names): PDFs, images, audio and video become the attachment of a record made for them;
/// UTF-8 text (markdown, plain notes) becomes a record, its front matter kept. A file's record
/// carries its bytes' SHA-256 as a code (`contentHashSystem`), so the same file imported again,
/// under any name, adds nothing. Names are made safe (control characters, `.`/`..`, past 200
/// bytes) before they become titles, attachment names or folders.
public enum SourceFiles {
    /// The code system of a file's content hash in a record's `codes` (docs/FORMAT.md).
    public static let contentHashSystem = "urn:binder:sha256"
    /// The `source` of a record made from a file.
    public static let organisation = "Imported files"
    /// Names (titles, attachments, folders) are cut to this many bytes of UTF-8.
    static let maximumNameBytes = 200

    enum Kind: Equatable {
        /// An attachment of this format (`pdf`, `png`, `jpeg`, `mp4`…).
        case attachment(format: String)
        case text
    }

    /// What `bytes` are, by their magic bytes; text when they are UTF-8 without control
    /// characters (other than tab, newline, carriage return and form feed) and do not look like
    /// XML or JSON (those are read as C-CDA or FHIR, or refused); nil otherwise.
    static func kind(of bytes: [UInt8]) -> Kind? {
        func at(_ offset: Int, _ text: String) -> Bool { bytes.dropFirst(offset).starts(with: Array(text.utf8)) }
        if at(0, "%PDF-") { return .attachment(format: "pdf") }
        if bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .attachment(format: "png") }
        if bytes.starts(with: [0xFF, 0xD8, 0xFF]) { return .attachment(format: "jpeg") }
        if at(0, "GIF87a") || at(0, "GIF89a") { return .attachment(format: "gif") }
        if bytes.starts(with: [0x49, 0x49, 0x2A, 0x00]) || bytes.starts(with: [0x4D, 0x4D, 0x00, 0x2A]) { return .attachment(format: "tiff") }
        if at(0, "RIFF") && at(8, "WEBP") { return .attachment(format: "webp") }
        if at(0, "RIFF") && at(8, "WAVE") { return .attachment(format: "wav") }
        if at(0, "RIFF") && at(8, "AVI ") { return .attachment(format: "avi") }
        if at(4, "ftyp") {
            for (brands, format) in [(["heic", "heix", "heim", "heis", "mif1", "msf1"], "heic"), (["M4A ", "M4B "], "m4a"), (["qt  "], "mov"),
                                     (["3gp4", "3gp5", "3gp6", "3g2a"], "3gp")] where brands.contains(where: { at(8, $0) }) {
                return .attachment(format: format)
            }
            return .attachment(format: "mp4")
        }
        if at(0, "ID3") || (bytes.count > 1 && bytes[0] == 0xFF && [0xFB, 0xF3, 0xF2].contains(bytes[1])) { return .attachment(format: "mp3") }
        if at(0, "OggS") { return .attachment(format: "ogg") }
        if at(0, "fLaC") { return .attachment(format: "flac") }
        if at(0, "caff") { return .attachment(format: "caf") }
        if at(0, "#!AMR") { return .attachment(format: "amr") }
        if bytes.starts(with: [0x1A, 0x45, 0xDF, 0xA3]) { return .attachment(format: "webm") }
        guard let first = SourceReader.firstByte(bytes), first != UInt8(ascii: "<"), first != UInt8(ascii: "{"), first != UInt8(ascii: "["),
              !bytes.contains(where: { $0 < 0x20 && ![0x09, 0x0A, 0x0C, 0x0D].contains($0) || $0 == 0x7F }),
              String(validating: bytes, as: UTF8.self) != nil else { return nil }
        return .text
    }

    /// The document a file makes, or nil when it is no format binder imports.
    /// - Parameters:
    ///   - name: the file's own name (made safe here).
    ///   - folder: the binder folder its record goes in (`folder(for:into:)`).
    ///   - modified: the file's modification time (seconds since 1970): the record's `created`
    ///     (unless a note's front matter dates it) and its `updated` (the apps' key for when a
    ///     document last changed; a note's own `updated` is kept over it).
    static func document(_ bytes: [UInt8], file: String, name: String, folder: String, modified: Int64?,
                         importDate: String) throws(ImportError) -> SourceDocument? {
        guard let kind = kind(of: bytes) else { return nil }
        let safe = safeName(name)
        let (wholeStem, ext) = BinderNaming.splitExtension(safe)
        let stem = wholeStem.trimmingCharacters(in: .whitespaces)
        let created = modified.map { Timestamps.string(seconds: $0) }
        let hash = sha256(bytes).map { String(format: "%02x", $0) }.joined()
        let source = ImportSource(organisation: organisation, format: SourceFormat.file.rawValue, documentID: safe, version: nil, author: nil,
                                  entryID: nil, importDate: importDate, documentDate: created)
        var title = stem
        if title.isEmpty { title = "Imported file" }
        var record = ImportedRecord(folder: folder, title: title, created: created, body: "", codes: [], status: nil, source: source)
        record.updated = created
        switch kind {
        case .attachment(let format):
            // The name's extension when it says what the bytes are, else the format's own.
            let shownExtension = AttachmentFormats.format(forExtension: String(ext.dropFirst())) == format ? ext
                : "." + AttachmentFormats.fileExtension(format: format)
            record.body = "- File: " + stem + shownExtension + "\n- Imported: " + importDate + "\n"
            record.attachments = [ImportedAttachment(fileName: (stem.isEmpty ? "file" : stem) + shownExtension, format: format, bytes: bytes)]
        case .text:
            let parsed: (metadata: JSONObject?, value: String)
            do { parsed = try FrontMatter.parse(bytes) } catch {
                throw .malformedFrontMatter(file: file, reason: "\(error)")
            }
            let heading = ClinicalIdentity.heading(parsed.value)
            // A note that starts with its own heading keeps it as its title; any other gets the file's name as one.
            if parsed.value.hasPrefix("# ") && !heading.isEmpty {
                record.title = heading
                record.text = parsed.value
            } else {
                record.text = "# " + title + "\n\n" + parsed.value
            }
            record.frontMatter = parsed.metadata
            // The note's own date names its record as it dates it.
            if let written = parsed.metadata?["created"]?.stringValue, Timestamps.parse(written) != nil { record.created = written }
        }
        // A note its front matter dates after the file was last written has no `updated` before its `created`.
        if let updated = record.updated, let written = record.created, ImportPlanner.isNewer(written, than: updated) { record.updated = nil }
        record.codes = [ClinicalCode(system: contentHashSystem, code: hash)]
        var document = SourceDocument(file: file, format: .file, bytes: [], title: title, organisation: organisation, created: created,
                                      patient: PatientFacts(), source: source)
        document.keepsSource = false
        document.records = [record]
        return document
    }

    /// The binder folder of a file `relative` folders below the imported folder: under `into`
    /// when given; else the folders' names (a known category by its name, any case), and
    /// `documents` for a file at the top.
    static func folder(for relative: [String], into: String?) -> String {
        let names = relative.map { name in
            Categories.folderTypes.first { $0.folder == name.lowercased() }?.folder ?? safeName(name)
        }
        if let into { return ([into] + names).joined(separator: "/") }
        return names.isEmpty ? "documents" : names.joined(separator: "/")
    }

    /// `name` safe as one file name: control and format characters (a bidi override) made
    /// spaces, a leading dot dropped (`..`, hidden names), cut to `maximumNameBytes`; `file`
    /// when nothing is left.
    static func safeName(_ name: String) -> String {
        var scalars = String.UnicodeScalarView()
        for scalar in name.unicodeScalars {
            let category = scalar.properties.generalCategory
            let unsafe = category == .control || category == .format || category == .lineSeparator || category == .paragraphSeparator
                || scalar == "/" || scalar == "\u{0}"
            scalars.append(unsafe ? " " : scalar)
        }
        var safe = String(scalars).trimmingCharacters(in: .whitespaces)
        while safe.hasPrefix(".") { safe.removeFirst() }
        safe = BinderNaming.fitting(safe.trimmingCharacters(in: .whitespaces), maxBytes: maximumNameBytes)
        return BinderNaming.unsafeNameReason(safe, atRoot: false) == nil && !safe.isEmpty ? safe : "file"
    }

    /// When the file at `path` was last written (seconds since 1970), or nil.
    static func modified(path: String) -> Int64? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return Int64(status.st_mtim.tv_sec)
    }
}
