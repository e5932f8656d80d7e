/// What one source file held once read: the records it makes, what it skipped and why, who it
/// is about, and what the record that keeps the file itself says.
public struct SourceDocument: Sendable {
    public var file: String
    public var format: SourceFormat
    /// What is kept of the source: the file's bytes (a folder's resources, as NDJSON).
    public var bytes: [UInt8]
    /// The kept copy's extension: `xml`, `json`, or `ndjson` for a folder's resources.
    public var keptExtension: String
    public var title: String
    public var organisation: String
    public var created: String?
    public var patient: PatientFacts
    public var records: [ImportedRecord] = []
    public var skipped: [SkippedItem] = []
    /// Sections with text only (no entries binder understands): kept in the document's record.
    public var narrative: [(title: String, text: String)] = []
    public var source: ImportSource
    /// Whether the file is kept as the attachment of a record listing what it made (false for
    /// a PDF, a photo or a note: the record made for it is the file's own).
    public var keepsSource = true
    /// A health card's signature, for people: `checked (…)` or `not checked (why)`; nil for other formats.
    public var signature: String?

    init(file: String, format: SourceFormat, bytes: [UInt8], title: String, organisation: String, created: String?,
         patient: PatientFacts, source: ImportSource) {
        self.file = file
        self.format = format
        self.bytes = bytes
        keptExtension = format == .ccda ? "xml" : "json"
        self.title = title
        self.organisation = organisation
        self.created = created
        self.patient = patient
        self.source = source
    }
}

/// The patient a source is about (or the binder's, from `patient-info`).
public struct PatientFacts: Sendable, Equatable {
    public var name: String?
    /// YYYY-MM-DD.
    public var birthDate: String?

    public init(name: String? = nil, birthDate: String? = nil) {
        self.name = name
        self.birthDate = birthDate
    }

    /// Why `other` is not this person, or nil: birth dates both known and different, or names
    /// both known with no word in common ("Mei-Ling Chen" and "陈美玲 (Mei-Ling Chen)" share one).
    public func difference(from other: PatientFacts) -> String? {
        if let mine = birthDate, let theirs = other.birthDate, mine.prefix(10) != theirs.prefix(10) {
            return "born \(theirs.prefix(10)), not \(mine.prefix(10))"
        }
        if let mine = name, let theirs = other.name {
            let words = { (text: String) in Set(text.lowercased().split { !($0.isLetter || $0.isNumber) }.map(String.init)) }
            let a = words(mine), b = words(theirs)
            if !a.isEmpty, !b.isEmpty, a.isDisjoint(with: b) { return "named differently" }
        }
        return nil
    }
}

public enum SourceFormat: String, Sendable {
    case ccda = "C-CDA"
    case fhir = "FHIR R4"
    /// A PDF, image, audio or video file, or a text note (`SourceFiles`).
    case file = "file"
}
