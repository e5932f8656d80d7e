import BinderFormat
import Foundation
import Synchronization

/// An import handed to the binder's one writer (a running mount, through its control
/// channel): the sources as `binder import` read them, and how to plan them. The writer plans
/// against its own tip (`WriterImport`), so what is already in the binder is never added twice.
/// Encoded as JSON (Foundation's coders) with the bytes beside it, raw (`WireCoding`): it
/// crosses a local socket from memory to memory, never a file.
public struct ImportRequest: Sendable {
    public var sources: [SourceDocument]
    public var documentsFolder: String
    public var importDate: String
    /// Seconds since 1970: the time in a conflict copy's name.
    public var now: Int64
    /// Import documents about another person than the binder's patient-info.
    public var force: Bool
    /// Plan only: store nothing.
    public var dryRun: Bool

    public init(sources: [SourceDocument], documentsFolder: String, importDate: String, now: Int64 = Int64(Date().timeIntervalSince1970),
                force: Bool = false, dryRun: Bool = false) {
        self.sources = sources
        self.documentsFolder = documentsFolder
        self.importDate = importDate
        self.now = now
        self.force = force
        self.dryRun = dryRun
    }

    public var planner: ImportPlanner { ImportPlanner(documentsFolder: documentsFolder, importDate: importDate, now: now) }

    public func encoded() throws -> [UInt8] {
        let wire = WireRequest(sources: sources.map(WireSource.init), documentsFolder: documentsFolder, importDate: importDate, now: now,
                               force: force, dryRun: dryRun)
        return try WireCoding.encode(wire)
    }

    /// Decodes what `encoded` made; anything else is refused (never trusted to be whole).
    public init(decoding bytes: [UInt8]) throws(WriterImport.Failure) {
        let wire: WireRequest = try WireCoding.decode(bytes)
        try WireCoding.check(folder: wire.documentsFolder)
        try WireCoding.check(date: wire.importDate, dayOnly: true)
        var sources: [SourceDocument] = []
        for source in wire.sources { sources.append(try source.document()) }
        self.init(sources: sources, documentsFolder: wire.documentsFolder, importDate: wire.importDate, now: wire.now, force: wire.force,
                  dryRun: wire.dryRun)
    }
}

/// What the writer did with an `ImportRequest`: its commit (nil for a dry run or nothing new)
/// and the plan it stored, without the records' content (the summary needs names and counts).
public struct ImportOutcome: Sendable {
    public var commit: String?
    public var plan: ImportPlan

    public init(commit: String?, plan: ImportPlan) {
        self.commit = commit
        self.plan = plan
    }

    public func encoded() throws -> [UInt8] {
        try WireCoding.encode(WireOutcome(
            commit: commit,
            created: plan.created.map { WireOutcome.Created(gitPath: $0.gitPath, attachments: $0.attachments.map(\.fileName)) },
            updated: plan.updated.map(\.gitPath), unchanged: plan.unchanged, skipped: plan.skipped.map(WireSkipped.init),
            newFolders: plan.newFolders))
    }

    public init(decoding bytes: [UInt8]) throws(WriterImport.Failure) {
        let wire: WireOutcome = try WireCoding.decode(bytes)
        var plan = ImportPlan()
        plan.created = wire.created.map { created in
            ImportPlan.NewRecord(gitPath: created.gitPath, document: MedicalDocument(value: "", metadata: [:]),
                                 attachments: created.attachments.map { ImportedAttachment(fileName: $0, format: "", bytes: []) })
        }
        plan.updated = wire.updated.map { ExistingRecord(gitPath: $0, document: MedicalDocument(value: "", metadata: [:])) }
        plan.unchanged = wire.unchanged
        plan.skipped = wire.skipped.map(\.item)
        plan.newFolders = wire.newFolders
        self.init(commit: wire.commit, plan: plan)
    }
}

// MARK: - On the wire

/// `[JSON's length, 8 bytes big-endian][JSON][the bytes fields, raw, one after another]`: each
/// `Data` field is `[offset, count]` in the JSON, into the bytes after it, so that attachments
/// are neither copied into base64 nor parsed. (Foundation's binary property list decoder traps
/// on some malformed input, which the `import-request` fuzz target found; its JSON decoder
/// refuses, and nests at most 512 deep.)
private enum WireCoding {
    /// The bytes an encoding collects, in the order its fields are met.
    private final class Sink: Sendable {
        let bytes = Mutex<[UInt8]>([])
    }

    static func encode(_ value: some Encodable) throws -> [UInt8] {
        let sink = Sink()
        let encoder = JSONEncoder()
        encoder.dataEncodingStrategy = .custom { data, encoder in
            let offset = sink.bytes.withLock { bytes in
                defer { bytes += data }
                return bytes.count
            }
            var container = encoder.singleValueContainer()
            try container.encode([offset, data.count])
        }
        let json = try encoder.encode(value)
        return withUnsafeBytes(of: UInt64(json.count).bigEndian, Array.init) + Array(json) + sink.bytes.withLock { $0 }
    }

    static func decode<T: Decodable>(_ bytes: [UInt8]) throws(WriterImport.Failure) -> T {
        guard bytes.count >= 8 else { throw .malformedRequest(reason: "\(bytes.count) bytes") }
        let declared = bytes[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard declared <= UInt64(bytes.count - 8) else { throw .malformedRequest(reason: "its JSON is said to be longer than it") }
        let jsonEnd = 8 + Int(declared)
        let decoder = JSONDecoder()
        decoder.dataDecodingStrategy = .custom { decoder in
            let range = try decoder.singleValueContainer().decode([Int].self)
            guard range.count == 2, range[0] >= 0, range[1] >= 0, range[0] <= bytes.count - jsonEnd - range[1] else {
                throw DecodingError.dataCorrupted(DecodingError.Context(codingPath: decoder.codingPath, debugDescription: "bytes out of range"))
            }
            return Data(bytes[(jsonEnd + range[0])..<(jsonEnd + range[0] + range[1])])
        }
        do { return try decoder.decode(T.self, from: Data(bytes[8..<jsonEnd])) } catch {
            throw .malformedRequest(reason: "\(error)")
        }
    }

    /// A folder binder could have made (what `--into` and the readers allow): the request names
    /// the paths the writer stores at, and a path from another process is never trusted further.
    static func check(folder: String) throws(WriterImport.Failure) {
        guard BinderExportMarks.safeRecordPath(folder + "/x.md") != nil else { throw .malformedRequest(reason: "a folder binder would not make") }
    }

    /// A date binder's readers would give (it names records' files): a day, or a timestamp.
    static func check(date: String?, dayOnly: Bool = false) throws(WriterImport.Failure) {
        guard let date else { return }
        let parts = date.split(separator: "-", omittingEmptySubsequences: false)
        if parts.count == 3, parts.allSatisfy({ $0.allSatisfy(\.isASCII) }), let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2]),
           Timestamps.day(year: year, month: month, day: day) == date {
            return
        }
        guard !dayOnly, Timestamps.parse(date) != nil else { throw .malformedRequest(reason: "a date binder would not write") }
    }

    /// A kept file's extension or an attachment's format: a few letters and digits.
    static func check(fileExtension: String) throws(WriterImport.Failure) {
        guard (1...16).contains(fileExtension.utf8.count), fileExtension.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x7A).contains($0) }) else {
            throw .malformedRequest(reason: "a file extension binder would not make")
        }
    }

    static func check(fileName: String) throws(WriterImport.Failure) {
        guard !fileName.contains("/"), BinderExportMarks.safeRecordPath("x/" + fileName + ".md") != nil else {
            throw .malformedRequest(reason: "an attachment name binder would not make")
        }
    }
}

private struct WireRequest: Codable {
    var sources: [WireSource]
    var documentsFolder: String
    var importDate: String
    var now: Int64
    var force: Bool
    var dryRun: Bool
}

private struct WireOutcome: Codable {
    struct Created: Codable {
        var gitPath: String
        var attachments: [String]
    }

    var commit: String?
    var created: [Created]
    var updated: [String]
    var unchanged: Int
    var skipped: [WireSkipped]
    var newFolders: [String]
}

private struct WireSkipped: Codable {
    var file: String
    var what: String
    var reason: String

    init(_ item: SkippedItem) {
        file = item.file
        what = item.what
        reason = item.reason
    }

    var item: SkippedItem { SkippedItem(file: file, what: what, reason: reason) }
}

private struct WireAttachment: Codable {
    var fileName: String
    var format: String
    var bytes: Data
}

private struct WireRecord: Codable {
    var folder: String
    var title: String
    var created: String?
    /// A file's modification time (`ImportedRecord.updated`); absent in a request of a binder before it.
    var updated: String?
    var body: String
    var codes: [[String]]
    var status: String?
    var distinguishing: String?
    var source: ImportSource
    var attachments: [WireAttachment]
    var preferredPath: String?
    var text: String?
    /// The note's front matter as JSON text (binder's own JSON keeps its key order and numbers).
    var frontMatter: String?

    init(_ record: ImportedRecord) {
        folder = record.folder
        title = record.title
        created = record.created
        updated = record.updated
        body = record.body
        codes = record.codes.map { [$0.system, $0.code] + ($0.display.map { [$0] } ?? []) }
        status = record.status
        distinguishing = record.distinguishing
        source = record.source
        attachments = record.attachments.map { WireAttachment(fileName: $0.fileName, format: $0.format, bytes: Data($0.bytes)) }
        preferredPath = record.preferredPath
        text = record.text
        frontMatter = record.frontMatter.map { JSONValue.object($0).serialized() }
    }

    func record() throws(WriterImport.Failure) -> ImportedRecord {
        try WireCoding.check(folder: folder)
        for attachment in attachments {
            try WireCoding.check(fileName: attachment.fileName)
            try WireCoding.check(fileExtension: attachment.format)
        }
        try WireCoding.check(date: created)
        try WireCoding.check(date: updated)
        if let preferredPath, BinderExportMarks.safeRecordPath(preferredPath) == nil {
            throw .malformedRequest(reason: "a record path binder would not make")
        }
        var codes: [ClinicalCode] = []
        for code in self.codes {
            guard code.count == 2 || code.count == 3 else { throw .malformedRequest(reason: "a code of \(code.count) parts") }
            codes.append(ClinicalCode(system: code[0], code: code[1], display: code.count == 3 ? code[2] : nil))
        }
        var record = ImportedRecord(folder: folder, title: title, created: created, body: body, codes: codes, status: status,
                                    distinguishing: distinguishing, source: source)
        record.attachments = attachments.map { ImportedAttachment(fileName: $0.fileName, format: $0.format, bytes: Array($0.bytes)) }
        record.preferredPath = preferredPath
        record.updated = updated
        record.text = text
        if let frontMatter {
            guard let object = (try? JSONValue.parse(frontMatter))?.objectValue else {
                throw .malformedRequest(reason: "a front matter that is not a JSON object")
            }
            record.frontMatter = object
        }
        return record
    }
}

private struct WireSource: Codable {
    struct Section: Codable {
        var title: String
        var text: String
    }

    var file: String
    var format: String
    var bytes: Data
    var keptExtension: String
    var title: String
    var organisation: String
    var created: String?
    var patientName: String?
    var patientBirthDate: String?
    var records: [WireRecord]
    var skipped: [WireSkipped]
    var narrative: [Section]
    var source: ImportSource
    var keepsSource: Bool
    var signature: String?

    init(_ document: SourceDocument) {
        file = document.file
        format = document.format.rawValue
        bytes = Data(document.bytes)
        keptExtension = document.keptExtension
        title = document.title
        organisation = document.organisation
        created = document.created
        patientName = document.patient.name
        patientBirthDate = document.patient.birthDate
        records = document.records.map(WireRecord.init)
        skipped = document.skipped.map(WireSkipped.init)
        narrative = document.narrative.map { Section(title: $0.title, text: $0.text) }
        source = document.source
        keepsSource = document.keepsSource
        signature = document.signature
    }

    func document() throws(WriterImport.Failure) -> SourceDocument {
        guard let format = SourceFormat(rawValue: format) else { throw .malformedRequest(reason: "an unknown source format") }
        try WireCoding.check(fileExtension: keptExtension)
        try WireCoding.check(date: created)
        var document = SourceDocument(file: file, format: format, bytes: Array(bytes), title: title, organisation: organisation, created: created,
                                      patient: PatientFacts(name: patientName, birthDate: patientBirthDate), source: source)
        document.keptExtension = keptExtension
        for record in records { document.records.append(try record.record()) }
        document.skipped = skipped.map(\.item)
        document.narrative = narrative.map { (title: $0.title, text: $0.text) }
        document.keepsSource = keepsSource
        document.signature = signature
        return document
    }
}
