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

    /// Input: an import request as it crosses a mount's control socket (seeds: requests in its
    /// shape, made by make-seeds.py), and the outcome the mount answers. Decoding
    /// either refuses it (a typed failure) or gives sources whose paths binder would make, and
    /// that plan into documents that parse back.
    static func request(_ bytes: [UInt8]) {
        _ = try? ImportOutcome(decoding: bytes)
        let request: ImportRequest
        do { request = try ImportRequest(decoding: bytes) } catch {
            guard case .malformedRequest = error else { return check(false, "a request refused other than as malformed: \(error)") }
            return
        }
        let plan = request.planner.plan(request.sources, existing: [])
        for record in plan.created {
            check(!record.gitPath.hasPrefix("/") && !record.gitPath.split(separator: "/").contains { $0.hasPrefix(".") },
                  "a planned path out of the binder: \(record.gitPath)")
            check((try? MedicalDocument(plaintext: record.document.serializedBytes())) != nil, "a planned document does not parse back")
        }
    }
}
