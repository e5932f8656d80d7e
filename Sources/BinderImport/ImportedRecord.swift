import BinderFormat

/// A coded fact: a code system (its FHIR URI), a code and the system's name for it.
public struct ClinicalCode: Sendable, Hashable {
    public var system: String
    public var code: String
    public var display: String?

    public init(system: String, code: String, display: String? = nil) {
        self.system = system
        self.code = code
        self.display = display
    }

    /// As stored in a record's `codes` front matter: `{system, code, display}`.
    var json: JSONValue {
        var object: JSONObject = ["system": .string(system), "code": .string(code)]
        if let display, !display.isEmpty { object["display"] = .string(display) }
        return .object(object)
    }

    init?(json: JSONValue) {
        guard let object = json.objectValue, let system = object["system"]?.stringValue, let code = object["code"]?.stringValue else { return nil }
        self.init(system: system, code: code, display: object["display"]?.stringValue)
    }
}

/// Where an imported item came from: one entry of `provenance.sources` (docs/FORMAT.md).
public struct ImportSource: Sendable, Equatable, Codable {
    /// The organisation (the custodian of a C-CDA, a resource's performer or the bundle's
    /// author): also the apps' `source` key.
    public var organisation: String
    /// `C-CDA` or `FHIR R4`.
    public var format: String
    /// The document's id (C-CDA `id`, a Bundle's `identifier` or `id`).
    public var documentID: String?
    /// The document's set and version (C-CDA `setId`/`versionNumber`; FHIR `meta.versionId`).
    public var version: String?
    public var author: String?
    /// The entry's id in the document (C-CDA entry `id`, FHIR `resourceType/id`).
    public var entryID: String?
    /// The day of the import (YYYY-MM-DD).
    public var importDate: String
    /// When the document was written (C-CDA `effectiveTime`, a Bundle's `timestamp`): which of
    /// two versions from one organisation is the newer.
    public var documentDate: String?

    var json: JSONValue {
        var object: JSONObject = ["organisation": .string(organisation), "format": .string(format), "importDate": .string(importDate)]
        if let documentID { object["documentId"] = .string(documentID) }
        if let version { object["version"] = .string(version) }
        if let author { object["author"] = .string(author) }
        if let entryID { object["entryId"] = .string(entryID) }
        if let documentDate { object["documentDate"] = .string(documentDate) }
        return .object(object)
    }
}

/// A record an import makes: where it goes, what it says for a person, its coded facts and
/// its clinical date, and what makes it the same item as one already in the binder.
public struct ImportedRecord: Sendable {
    /// The folder (category) it goes in: `conditions`, `medications`…
    public var folder: String
    public var title: String
    /// The clinical date: `YYYY-MM-DD` when the source gives a day only (it stays that day in
    /// every time zone), else a UTC timestamp; nil when the source has none.
    public var created: String?
    /// When the source last changed it, as the apps' `updated`: a file's modification time;
    /// nil for clinical items (their documents date them, and a record's `updated` set later
    /// says the patient edited it: `ImportPlanner.version`).
    public var updated: String?
    /// Human-readable markdown below the title (dates, status, dose, reaction, values).
    public var body: String
    public var codes: [ClinicalCode]
    /// The source's status (`statusCode`, FHIR `clinicalStatus`/`status`).
    public var status: String?
    /// Distinguishes items of one code where it matters (a medication's dose).
    public var distinguishing: String?
    public var source: ImportSource
    /// Attachments of the record (a DocumentReference's PDF), bytes intact.
    public var attachments: [ImportedAttachment] = []
    /// The view path it had in the binder a FHIR export of binder's came from (checked by
    /// `BinderExportMarks.safeRecordPath`), kept when free.
    public var preferredPath: String?
    /// A note's own markdown, kept as written: the record's whole text (its title is its heading).
    public var text: String?
    /// A note's own front matter, kept over what the import would write (not over the import's
    /// own keys: `imported`, `source`, `importDate`, `provenance`; its `codes` are kept beside the import's).
    public var frontMatter: JSONObject?

    public init(folder: String, title: String, created: String?, body: String, codes: [ClinicalCode], status: String?,
                distinguishing: String? = nil, source: ImportSource) {
        self.folder = folder
        self.title = title
        self.created = created
        self.body = body
        self.codes = codes
        self.status = status
        self.distinguishing = distinguishing
        self.source = source
    }

    /// The record's markdown: its title as the first heading, then the body.
    public var value: String { text ?? "# " + title + "\n" + (body.isEmpty ? "" : "\n" + body) }

    public var identity: ClinicalIdentity {
        ClinicalIdentity(folder: folder, codes: codes, day: created.map { String($0.prefix(10)) }, title: title,
                         distinguishing: distinguishing)
    }
}

public struct ImportedAttachment: Sendable {
    public var fileName: String
    public var format: String
    public var bytes: [UInt8]
}

/// Something a source held that made no record, and why ("no known allergies", "planned").
public struct SkippedItem: Sendable, Equatable {
    public var file: String
    public var what: String
    public var reason: String
}

extension ImportedRecord {
    /// A record from body lines and codes: codes listed once each (first seen kept), and named
    /// under the lines for people ("Codes: SNOMED CT 233604007").
    init(folder: String, title: String, created: String?, lines: [String], codes: [ClinicalCode], status: String?,
         distinguishing: String?, source: ImportSource) {
        var unique: [ClinicalCode] = []
        for code in codes where !unique.contains(where: { $0.system == code.system && $0.code == code.code }) { unique.append(code) }
        var body = lines.joined(separator: "\n")
        let coded = unique.map { (CCDAValues.systemNames[$0.system] ?? $0.system) + " " + $0.code }
        if !coded.isEmpty { body += "\n\nCodes: " + coded.joined(separator: ", ") }
        self.init(folder: folder, title: title, created: created, body: body + "\n", codes: unique, status: status,
                  distinguishing: distinguishing, source: source)
    }
}
