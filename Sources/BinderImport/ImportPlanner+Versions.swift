import BinderCore
import BinderFormat

/// A newer version of what one organisation said before (a portal's later CCD, a bundle's newer
/// `timestamp`): the record it made is brought up to date, unless the patient edited it since
/// (its `updated` is set: binder's import sets it only on a file's record, which has no newer
/// version: a changed file is new content), then the new version goes beside it
/// as a conflict copy, named and marked as sync names them (`X (conflict YYYY-MM-DD HHMM).json`,
/// `conflict_of`).
extension ImportPlanner {
    enum VersionOutcome {
        case unchanged
        case updated(ExistingRecord)
        case conflictCopy(ImportPlan.NewRecord)
    }

    func version(of record: ImportedRecord, over existing: ExistingRecord, taken: inout Set<String>) -> VersionOutcome {
        let written = document(for: record)
        guard written.value != existing.document.value || written.metadata["status"] != existing.document.metadata["status"],
              let previous = Self.source(of: existing.document, like: record.source),
              Self.isNewer(record.source.documentDate, than: previous["documentDate"]?.stringValue) else { return .unchanged }
        if existing.document.metadata["updated"] != nil {
            var copy = written
            copy.metadata["conflict_of"] = .string(existing.gitPath)
            var path = ConflictNames.copy(of: existing.gitPath, at: now), n = 2
            while taken.contains(path) {
                path = ConflictNames.copy(of: BinderNaming.documentName(stem: (BinderNaming.documentStem(existing.gitPath) ?? existing.gitPath) + " \(n)"), at: now)
                n += 1
            }
            taken.insert(path)
            return .conflictCopy(ImportPlan.NewRecord(gitPath: path, document: copy, attachments: record.attachments))
        }
        var updated = existing
        updated.document.value = written.value
        for key in ["status", "codes", "dose", "memberId", "created", "importDate"] { updated.document.metadata[key] = written.metadata[key] }
        Self.replaceSource(like: record.source, with: record.source, in: &updated.document)
        return .updated(updated)
    }

    /// The entry of `provenance.sources` from the same organisation and format as `source`.
    static func source(of document: MedicalDocument, like source: ImportSource) -> JSONObject? {
        (document.metadata[provenanceKey]?.objectValue?["sources"]?.arrayValue ?? []).lazy.compactMap(\.objectValue).first {
            $0["organisation"]?.stringValue == source.organisation && $0["format"]?.stringValue == source.format
        }
    }

    static func replaceSource(like old: ImportSource, with new: ImportSource, in document: inout MedicalDocument) {
        var provenance = document.metadata[provenanceKey]?.objectValue ?? [:]
        let sources = (provenance["sources"]?.arrayValue ?? []).map { entry -> JSONValue in
            let object = entry.objectValue
            return object?["organisation"]?.stringValue == old.organisation && object?["format"]?.stringValue == old.format ? new.json : entry
        }
        provenance["sources"] = .array(sources)
        document.metadata[provenanceKey] = .object(provenance)
    }

    /// Whether the document dated `new` was written after the one dated `old` (both known).
    static func isNewer(_ new: String?, than old: String?) -> Bool {
        guard let new = new.flatMap(Timestamps.parse), let old = old.flatMap(Timestamps.parse) else { return false }
        return (new.seconds, new.nanoseconds) > (old.seconds, old.nanoseconds)
    }
}
