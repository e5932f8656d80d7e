import Foundation
import BinderCore
import BinderFormat

/// A record already in the binder, as the planner compares it.
public struct ExistingRecord: Sendable {
    public var gitPath: String
    public var document: MedicalDocument

    public init(gitPath: String, document: MedicalDocument) {
        self.gitPath = gitPath
        self.document = document
    }

    var folder: String { String(gitPath.split(separator: "/").dropLast().joined(separator: "/")) }
    var identity: ClinicalIdentity { ClinicalIdentity(folder: folder, document: document) }
    /// A record that may be a clinical item: a document, not an attachment's reference, a
    /// folder's display data or a file that could not be read.
    var isClinical: Bool {
        BinderNaming.isDocumentPath(gitPath) && !document.isAttachmentRef && document.type != "unreadable"
    }
}

/// What one import does: the records it makes (with their attachments), the records already
/// there that gain a source, and what it leaves out and why. Made without touching the binder;
/// `BinderImporter.store` commits it as one commit.
public struct ImportPlan: Sendable {
    public struct NewRecord: Sendable {
        public var gitPath: String
        public var document: MedicalDocument
        public var attachments: [ImportedAttachment]
    }

    public var created: [NewRecord] = []
    /// Records in the binder that another source also names (their `provenance.sources` grows).
    public var updated: [ExistingRecord] = []
    /// Items already in the binder from the same organisation: nothing to do.
    public var unchanged = 0
    public var skipped: [SkippedItem] = []
    /// Folders to make (no file under them yet).
    public var newFolders: [String] = []

    public var isEmpty: Bool { created.isEmpty && updated.isEmpty }
    public var attachmentCount: Int { created.reduce(0) { $0 + $1.attachments.count } }

    /// New records per folder.
    public var createdPerFolder: [(folder: String, count: Int)] {
        var counts: [String: Int] = [:]
        for record in created { counts[String(record.gitPath.split(separator: "/").dropLast().joined(separator: "/")), default: 0] += 1 }
        return counts.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }
}

/// Plans an import: each imported item is matched by clinical identity against the binder's
/// records and the import's own (never by document or entry id), so a second download adds
/// only what is new and an item from two sources is one record naming both.
public struct ImportPlanner {
    public var documentsFolder: String
    public var importDate: String

    /// Seconds since 1970: the time in a conflict copy's name.
    public var now: Int64

    public init(documentsFolder: String = "documents", importDate: String, now: Int64 = Int64(Date().timeIntervalSince1970)) {
        self.documentsFolder = documentsFolder
        self.importDate = importDate
        self.now = now
    }

    public func plan(_ sources: [SourceDocument], existing: [ExistingRecord]) -> ImportPlan {
        var plan = ImportPlan()
        var existing = existing
        var taken = Set(existing.map(\.gitPath))
        // This import's new records (by index into plan.created), and the binder's clinical ones.
        var pending = IdentityIndex()
        var existingFolders = Set(existing.flatMap { Self.ancestors(of: $0.folder) })
        // Computed once: an identity reads the record's title and codes (adding a source changes neither).
        // An attachment's reference is no clinical item (its name is taken all the same).
        var existingIdentities = IdentityIndex()
        for (index, record) in existing.enumerated() where record.isClinical { existingIdentities.insert(record.identity, at: index) }
        for source in sources {
            var made: [String] = []
            let before = (plan.created.count, plan.updated.count)
            for var record in source.records {
                // No date of its own (an allergy, a policy): the day the document was written, not the import's.
                if record.created == nil { record.created = source.created.map { String($0.prefix(10)) } }
                let identity = record.identity
                if let match = pending.first(sameAs: identity) {
                    if Self.addSource(record.source, to: &plan.created[match].document) {
                        made.append(Self.shown(plan.created[match].gitPath) + " (also named here)")
                    }
                    continue
                }
                if let index = existingIdentities.first(sameAs: identity) {
                    // A file with the same content: nothing to add (it has no newer version, only other copies).
                    if !source.keepsSource {
                        plan.unchanged += 1
                        continue
                    }
                    var document = existing[index].document
                    if Self.addSource(record.source, to: &document) {
                        existing[index].document = document
                        if let listed = plan.updated.firstIndex(where: { $0.gitPath == existing[index].gitPath }) {
                            plan.updated[listed] = existing[index]
                        } else {
                            plan.updated.append(existing[index])
                        }
                        made.append(Self.shown(existing[index].gitPath) + " (already there, now also from \(record.source.organisation))")
                        continue
                    }
                    switch version(of: record, over: existing[index], taken: &taken) {
                    case .unchanged:
                        plan.unchanged += 1
                    case .updated(let updated):
                        existing[index] = updated
                        if let listed = plan.updated.firstIndex(where: { $0.gitPath == updated.gitPath }) {
                            plan.updated[listed] = updated
                        } else {
                            plan.updated.append(updated)
                        }
                        made.append(Self.shown(updated.gitPath) + " (brought up to date: a newer version)")
                    case .conflictCopy(let copy):
                        plan.created.append(copy)
                        made.append(Self.shown(copy.gitPath) + " (a newer version beside \(Self.shown(existing[index].gitPath)), which you edited)")
                    }
                    continue
                }
                var path = freePath(folder: record.folder, day: String((record.created ?? importDate).prefix(10)), title: record.title, taken: &taken)
                if let preferred = record.preferredPath.map(BinderNaming.documentName(shownAs:)), !taken.contains(preferred) {
                    taken.remove(path)
                    taken.insert(preferred)
                    path = preferred
                }
                plan.created.append(fitted(record, at: path))
                pending.insert(identity, at: plan.created.count - 1)
                made.append(Self.shown(path))
            }
            plan.skipped += source.skipped
            // The source itself, once: kept as an attachment of a record listing what it made,
            // unless it brought nothing new (a second download of the same records).
            let broughtSomething = plan.created.count > before.0 || plan.updated.count > before.1
            if !source.keepsSource {
                // A file is its record's attachment or text: nothing more to keep.
                if !broughtSomething { plan.skipped.append(SkippedItem(file: source.file, what: "the file", reason: "the same content as a record already in the binder or another file of this import")) }
            } else if broughtSomething || !source.narrative.isEmpty {
                let record = sourceRecord(source, made: made)
                let identity = ClinicalIdentity(folder: documentsFolder, codes: [], day: record.created.map { String($0.prefix(10)) },
                                                title: record.title, distinguishing: nil)
                if existingIdentities.first(sameAs: identity) != nil && !broughtSomething {
                    plan.unchanged += 1
                } else {
                    let path = freePath(folder: documentsFolder, day: String((record.created ?? importDate).prefix(10)), title: record.title, taken: &taken)
                    let extensionName = source.keptExtension
                    var attachments = [ImportedAttachment(fileName: NameWords.words(record.title) + "." + extensionName, format: extensionName,
                                                          bytes: source.bytes)]
                    var document = self.document(for: record)
                    if document.serializedBytes().count > WriteLimits.documentMaximum {
                        // The sections' text does not fit a record: it goes beside the document.
                        let narrative = source.narrative.map { "## " + $0.title + "\n\n" + $0.text }.joined(separator: "\n\n")
                        attachments.append(ImportedAttachment(fileName: "narrative.md", format: "md", bytes: Array(narrative.utf8)))
                        var short = source
                        short.narrative = [("Sections", "The sections' text is in the attachment narrative.md.")]
                        document = self.document(for: sourceRecord(short, made: Array(made.prefix(200))))
                    }
                    plan.created.append(ImportPlan.NewRecord(gitPath: path, document: document, attachments: attachments))
                }
            } else {
                plan.skipped.append(SkippedItem(file: source.file, what: "the document", reason: "nothing in it is new to this binder"))
            }
        }
        if let filled = fillPatientInfo(existing, from: sources) { plan.updated.append(filled) }
        for record in plan.created {
            for folder in Self.ancestors(of: String(record.gitPath.split(separator: "/").dropLast().joined(separator: "/")))
            where !existingFolders.contains(folder) {
                existingFolders.insert(folder)
                plan.newFolders.append(folder)
            }
        }
        return plan
    }

    /// `patient-info` with what it lacks (the name as its heading, the date of birth as a `DOB:`
    /// line) taken from the first source that gives it; nil when nothing is missing. What the
    /// patient wrote is never changed.
    func fillPatientInfo(_ existing: [ExistingRecord], from sources: [SourceDocument]) -> ExistingRecord? {
        guard var info = existing.first(where: { $0.gitPath == BinderNaming.patientInfoPath }), info.document.type != "unreadable" else { return nil }
        let known = BinderImporter.patient(in: [info])
        var value = info.document.value
        if known.name == nil, let name = sources.lazy.compactMap(\.patient.name).first {
            value = "# " + name + "\n\n" + value
        }
        if known.birthDate == nil, let born = sources.lazy.compactMap(\.patient.birthDate).first {
            value += (value.isEmpty || value.hasSuffix("\n\n") ? "" : value.hasSuffix("\n") ? "\n" : "\n\n") + "DOB: " + born + "\n"
        }
        guard value != info.document.value else { return nil }
        info.document.value = value
        return info
    }

    /// The new record at `path`; a body past a record's 65,535 bytes (a panel of thousands of
    /// rows) goes into an attachment `details.md`, the record saying so.
    func fitted(_ record: ImportedRecord, at path: String) -> ImportPlan.NewRecord {
        let document = document(for: record)
        guard document.serializedBytes().count > WriteLimits.documentMaximum else {
            return ImportPlan.NewRecord(gitPath: path, document: document, attachments: record.attachments)
        }
        var short = record
        short.body = "The details are too long for a record: they are in the attachment details.md.\n"
        let details = ImportedAttachment(fileName: "details.md", format: "md", bytes: Array(record.value.utf8))
        return ImportPlan.NewRecord(gitPath: path, document: self.document(for: short), attachments: record.attachments + [details])
    }

    /// The record that keeps a source: its title, organisation and date, what was made from
    /// it, what was skipped, and the text of the sections binder does not map.
    func sourceRecord(_ source: SourceDocument, made: [String]) -> ImportedRecord {
        var lines = ["- Organisation: " + source.organisation, "- Format: " + source.format.rawValue]
        if let created = source.created { lines.append("- Date: " + String(created.prefix(10))) }
        if let signature = source.signature { lines.append("- Signature: " + signature) }
        lines.append("- Imported: " + importDate)
        if !made.isEmpty { lines += ["", "## Made from this document", ""] + made.map { "- " + $0 } }
        if !source.skipped.isEmpty {
            lines += ["", "## Left out", ""] + source.skipped.map { "- " + $0.what + ": " + $0.reason }
        }
        for section in source.narrative { lines += ["", "## " + section.title, "", section.text] }
        var record = ImportedRecord(folder: documentsFolder, title: source.title + " from " + source.organisation, created: source.created,
                                    body: lines.joined(separator: "\n") + "\n", codes: [], status: nil, source: source.source)
        record.distinguishing = nil
        return record
    }

    /// A record's document: its markdown, the apps' import keys, its codes and provenance.
    func document(for record: ImportedRecord) -> MedicalDocument {
        var metadata: JSONObject = [
            "type": .string(Categories.documentType(forFolder: record.folder)),
            "created": .string(record.created ?? importDate),
            "imported": true,
            "source": .string(record.source.organisation),
            "importDate": .string(importDate),
        ]
        if let updated = record.updated { metadata["updated"] = .string(updated) }
        if !record.codes.isEmpty { metadata["codes"] = .array(record.codes.map(\.json)) }
        if let status = record.status { metadata["status"] = .string(status) }
        if let distinguishing = record.distinguishing {
            metadata[ClinicalIdentity.topFolder(record.folder) == "insurance" ? "memberId" : "dose"] = .string(distinguishing)
        }
        metadata[Self.provenanceKey] = .object(["sources": .array([record.source.json])])
        for (key, value) in record.frontMatter ?? [:] where !["imported", "source", "importDate", Self.provenanceKey].contains(key) {
            metadata[key] = key == "codes" ? .array((value.arrayValue ?? [value]) + (metadata["codes"]?.arrayValue ?? [])) : value
        }
        return MedicalDocument(value: record.value, metadata: metadata)
    }

    /// The front-matter key of where an imported record came from (docs/FORMAT.md).
    public static let provenanceKey = "provenance"

    /// Adds `source` to the record's `provenance.sources` unless a source of the same
    /// organisation and format is there already. Whether it changed.
    static func addSource(_ source: ImportSource, to document: inout MedicalDocument) -> Bool {
        var provenance = document.metadata[provenanceKey]?.objectValue ?? [:]
        var sources = provenance["sources"]?.arrayValue ?? []
        let named = sources.contains { entry in
            entry.objectValue?["organisation"]?.stringValue == source.organisation && entry.objectValue?["format"]?.stringValue == source.format
        }
        if named { return false }
        if sources.isEmpty, let organisation = document.metadata["source"]?.stringValue, organisation == source.organisation { return false }
        sources.append(source.json)
        provenance["sources"] = .array(sources)
        document.metadata[provenanceKey] = .object(provenance)
        return true
    }

    /// `folder/YYYY-MM-DD-title-words` + the document extension, `-2`, `-3`… when taken.
    func freePath(folder: String, day: String, title: String, taken: inout Set<String>) -> String {
        let stem = folder + "/" + day + "-" + NameWords.words(title)
        var path = BinderNaming.documentName(stem: stem), n = 2
        while taken.contains(path) {
            path = BinderNaming.documentName(stem: stem + "-\(n)")
            n += 1
        }
        taken.insert(path)
        return path
    }

    /// The path as the mount shows it (`X.md`).
    static func shown(_ gitPath: String) -> String { BinderNaming.recordName(ofDocument: gitPath) }

    /// `a`, `a/b`, `a/b/c` for `a/b/c`.
    static func ancestors(of folder: String) -> [String] {
        var result: [String] = [], current = ""
        for part in folder.split(separator: "/") {
            current = current.isEmpty ? String(part) : current + "/" + part
            result.append(current)
        }
        return result
    }
}
