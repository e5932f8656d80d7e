import BinderFormat
import BinderImport

/// The target for `binder import`'s readers: C-CDA XML and FHIR JSON from outside.
enum ImportTargets {
    /// Input: a source file (seeds: the C-CDA and FHIR fixtures). Reading it either fails with a
    /// typed error naming the file or gives records that plan into documents within the
    /// format's rules: a `created` that is a day or a timestamp, serialised JSON that parses.
    static func source(_ bytes: [UInt8]) {
        let document: SourceDocument
        do { document = try SourceReader.parse(bytes, file: "fuzz", importDate: "2026-01-01") } catch {
            check(error.file == "fuzz", "an import error names another file")
            return
        }
        let plan = ImportPlanner(importDate: "2026-01-01").plan([document], existing: [])
        for record in plan.created {
            let created = record.document.created ?? ""
            check(created.utf8.count == 10 || Timestamps.parse(created) != nil, "created \(created) is neither a day nor a timestamp")
            check((try? MedicalDocument(plaintext: record.document.serializedBytes())) != nil, "a planned document does not parse back")
        }
    }
}
