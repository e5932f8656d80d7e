import BinderFormat
import Foundation

/// What an export holds, read from the decrypted view: the patient, and the chosen records
/// grouped by category. Every format (PDF, HTML, FHIR) is made from this one model, in memory.
public struct ExportContent: Sendable {
    public var patient: PatientSummary
    public var categories: [ExportCategory]
    /// When the export was made (shown on the cover; the FHIR bundle's timestamp).
    public var exportedAt: Date
    /// What was asked for, in words for the cover ("all records", "categories: labs; since 2025-01-01").
    public var selection: String
    /// Files shown as stored (undecryptable or not binder's), left out of the export.
    public var skippedRawFiles: Int

    public var records: [ExportRecord] { categories.flatMap(\.records) }

    /// Every attachment, at any depth, of every record.
    var attachments: [ExportAttachment] { records.flatMap(\.allAttachments) }
    public var imageCount: Int { attachments.filter { $0.imageKind != nil }.count }
    public var otherAttachmentCount: Int { attachments.filter { $0.imageKind == nil }.count }
}

/// The patient, from `patient-info.md`: its front matter (legacy flat binders keep everything
/// there) and the `Label: value` lines of its markdown, as the apps write them.
public struct PatientSummary: Sendable {
    public var name: String?
    /// As written (`1985-02-14` in the apps' binders).
    public var dateOfBirth: String?
    public var emergencyContact: String?
    /// Other `Label: value` lines of patient-info (`MRN: …`), in their order.
    public var details: [(label: String, value: String)] = []

    public init(name: String? = nil, dateOfBirth: String? = nil, emergencyContact: String? = nil) {
        self.name = name
        self.dateOfBirth = dateOfBirth
        self.emergencyContact = emergencyContact
    }

    /// `Mei-Ling Chen` or a neutral stand-in.
    var displayName: String { name ?? "Patient" }

    /// Reads patient-info's metadata and markdown.
    init(metadata: JSONObject?, markdown: String) {
        let metadata = metadata ?? JSONObject()
        func text(_ keys: [String]) -> String? {
            for key in keys {
                if let value = metadata[key]?.stringValue?.trimmingCharacters(in: .whitespaces), !value.isEmpty { return value }
            }
            return nil
        }
        name = text(["name", "patientName", "fullName"])
        dateOfBirth = text(["dob", "dateOfBirth", "birthDate", "birthdate"])
        if let contact = metadata["emergencyContact"] ?? metadata["emergency_contact"] {
            emergencyContact = Self.describe(contact)
        }
        let lines = markdown.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
        for line in lines {
            if line.hasPrefix("# "), name == nil {
                name = String(line.dropFirst(2)).trimmingCharacters(in: .whitespaces)
                continue
            }
            guard let colon = line.firstIndex(of: ":"), !line.hasPrefix("#") else { continue }
            let label = line[..<colon].trimmingCharacters(in: CharacterSet(charactersIn: " *_-"))
            let value = line[line.index(after: colon)...].trimmingCharacters(in: CharacterSet(charactersIn: " *_"))
            guard !label.isEmpty, label.count <= 40, !value.isEmpty else { continue }
            switch label.lowercased() {
            case "dob", "date of birth", "born", "birth date", "birthdate":
                if dateOfBirth == nil { dateOfBirth = value }
            case "emergency contact", "emergency":
                if emergencyContact == nil { emergencyContact = value }
            case "created", "updated":
                continue
            default:
                details.append((label, value))
            }
        }
    }

    /// A contact written as an object (`{name, phone, relationship}`) or as text.
    private static func describe(_ value: JSONValue) -> String? {
        if let text = value.stringValue { return text.isEmpty ? nil : text }
        guard let object = value.objectValue else { return nil }
        let parts = ["name", "relationship", "phone", "email"].compactMap { object[$0]?.stringValue }.filter { !$0.isEmpty }
        return parts.isEmpty ? nil : parts.joined(separator: ", ")
    }
}

/// One top-level folder of the binder (`visits`, `labs`, a folder the user made).
public struct ExportCategory: Sendable {
    /// The folder's name in the view.
    public var folder: String
    public var records: [ExportRecord]

    /// `Visits`, `My info`.
    public var title: String { ExportCategory.title(folder) }

    static func title(_ folder: String) -> String {
        if folder.isEmpty { return "General" }
        let spaced = folder.replacingOccurrences(of: "-", with: " ").replacingOccurrences(of: "_", with: " ")
        return spaced.prefix(1).uppercased() + spaced.dropFirst()
    }
}

/// A record (a document, or an attachment standing on its own) or one of its text children.
public struct ExportRecord: Sendable {
    /// The path in the view (as in the mount): `visits/2025-02-25-annual-physical.md`.
    public var path: String
    public var title: String
    /// `metadata.type` (`visit`, `addendum`…).
    public var type: String
    public var created: String?
    public var updated: String?
    public var metadata: JSONObject
    /// The markdown without the heading that became `title`.
    public var body: String
    public var children: [ExportChild]

    /// The folder the record is in (`conditions/back-acne`).
    public var folder: String { path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "" }

    /// The top-level folder.
    public var category: String { path.split(separator: "/", omittingEmptySubsequences: false).count > 1
        ? String(path.split(separator: "/")[0]) : "" }

    /// The record's own date for `--since`/`--until`: `created`, else `updated` (UTC day).
    var day: String? {
        for time in [created, updated].compactMap({ $0 }) {
            if let parsed = Timestamps.parse(time) { return String(Timestamps.string(seconds: parsed.seconds).prefix(10)) }
        }
        return nil
    }

    var allAttachments: [ExportAttachment] {
        children.flatMap { child -> [ExportAttachment] in
            switch child {
            case .attachment(let attachment): return [attachment]
            case .note(let note): return note.allAttachments
            }
        }
    }

    /// Text children, at any depth.
    var allNotes: [ExportRecord] {
        children.flatMap { child -> [ExportRecord] in
            if case .note(let note) = child { return [note] + note.allNotes }
            return []
        }
    }

    /// `provider`, `npi`, tags and other short metadata worth printing, as label and text.
    var details: [(label: String, value: String)] {
        var details: [(String, String)] = []
        for (key, value) in metadata {
            guard !["type", "created", "updated", "displayOrder", "format", "encoding", "originalSizeBytes", "fileName"]
                .contains(key) else { continue }
            let text: String?
            switch value {
            case .string(let s): text = s
            case .array(let items): text = items.compactMap(\.stringValue).joined(separator: ", ")
            case .number(let n): text = n
            case .bool(let b): text = b ? "yes" : "no"
            default: text = nil
            }
            if let text, !text.isEmpty, text.count <= 200 { details.append((Self.label(key), text)) }
        }
        return details
    }

    enum MetaPart {
        case category(String), type(String), time(label: String, String), detail(label: String, String)
    }

    /// The line under a record's title, in parts for each format to style: its category (top
    /// level only), type, dates and short metadata.
    func metaParts(category: String?) -> [MetaPart] {
        var parts: [MetaPart] = []
        if let category { parts.append(.category(category)) }
        if !type.isEmpty, type != "attachment" { parts.append(.type(type)) }
        if let created = formatTime(created) { parts.append(.time(label: "created", created)) }
        if let shown = formatTime(updated), updated != created { parts.append(.time(label: "updated", shown)) }
        for (label, value) in details { parts.append(.detail(label: label, value)) }
        return parts
    }

    /// `lab_name` → `Lab name`, `providerNpi` → `Provider npi`.
    static func label(_ key: String) -> String {
        var words = ""
        for character in key {
            if character == "_" || character == "-" { words.append(" ") } else if character.isUppercase, !words.isEmpty {
                words.append(" ")
                words.append(contentsOf: character.lowercased())
            } else {
                words.append(character)
            }
        }
        return words.prefix(1).uppercased() + words.dropFirst()
    }
}

public enum ExportChild: Sendable {
    case note(ExportRecord)
    case attachment(ExportAttachment)
}

/// An attachment's decrypted bytes, in memory only.
public struct ExportAttachment: Sendable {
    public enum ImageKind: Sendable { case jpeg, png }

    /// Its name in the view (`01-attachment.png`, `2025-02-19-photo.jpg`).
    public var name: String
    public var bytes: [UInt8]

    public var size: Int { bytes.count }

    /// JPEG and PNG are embedded, told by their first bytes (not by the name).
    public var imageKind: ImageKind? {
        if bytes.starts(with: [0xFF, 0xD8, 0xFF]) { return .jpeg }
        if bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        return nil
    }

    /// The media type, from the bytes for images, else from the extension.
    public var mediaType: String {
        switch imageKind {
        case .jpeg: return "image/jpeg"
        case .png: return "image/png"
        case nil: break
        }
        let ext = name.lastIndex(of: ".").map { name[name.index(after: $0)...].lowercased() } ?? ""
        return Self.mediaTypes[ext] ?? "application/octet-stream"
    }

    static let mediaTypes: [String: String] = [
        "jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png", "gif": "image/gif", "webp": "image/webp",
        "heic": "image/heic", "pdf": "application/pdf", "txt": "text/plain", "csv": "text/csv", "json": "application/json",
        "m4a": "audio/mp4", "aac": "audio/aac", "mp3": "audio/mpeg", "wav": "audio/wav", "ogg": "audio/ogg",
        "mp4": "video/mp4", "mov": "video/quicktime", "webm": "video/webm",
    ]
}

/// Sizes for people: `237 bytes`, `23.7 KB`, `1.4 MB`.
func formatSize(_ bytes: Int) -> String {
    if bytes < 1000 { return "\(bytes) bytes" }
    if bytes < 1_000_000 { return String(format: "%.1f KB", Double(bytes) / 1000) }
    return String(format: "%.1f MB", Double(bytes) / 1_000_000)
}

/// `2025-02-25T20:37:21.507Z` → `2025-02-25 20:37 UTC`; anything unparsable as written.
func formatTime(_ time: String?) -> String? {
    guard let time else { return nil }
    guard let parsed = Timestamps.parse(time) else { return time }
    let iso = Timestamps.string(seconds: parsed.seconds)
    return String(iso.prefix(10)) + " " + String(iso.dropFirst(11).prefix(5)) + " UTC"
}
