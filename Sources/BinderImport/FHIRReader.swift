import BinderFormat
import Foundation

/// Reads FHIR R4 resources (a Bundle's entries, one resource, or NDJSON lines) and makes a
/// record of each clinical one; references inside the source (a MedicationRequest's
/// `medicationReference`, an Observation panel's `hasMember`) are resolved there.
struct FHIRReader {
    let file: String
    let resources: [JSONObject]
    /// Indexes into `resources`, by `fullUrl` and by `Type/id`.
    let byReference: [String: Int]
    var source: ImportSource
    var records: [ImportedRecord] = []
    var skipped: [SkippedItem] = []
    /// Observations shown inside a panel or report (indexes into `resources`), not records of their own.
    var members: Set<Int> = []
    /// binder's export: the DocumentReferences of a record's attachments, by the record's path
    /// (given to that record, not made records of their own when it is in the source).
    var attachmentsOf: [String: [Int]] = [:]

    static func read(_ top: [JSONObject], file: String, bytes: [UInt8], importDate: String) throws(ImportError) -> SourceDocument {
        var resources: [JSONObject] = []
        var byReference: [String: Int] = [:]
        var bundle: JSONObject?
        for resource in top {
            if FHIRValues.string(resource["resourceType"]) == "Bundle" {
                bundle = bundle ?? resource
                for entry in FHIRValues.array(resource["entry"]) {
                    guard let entry = entry.objectValue, let inner = entry["resource"]?.objectValue else { continue }
                    if let url = FHIRValues.string(entry["fullUrl"]) { byReference[url] = resources.count }
                    resources.append(inner)
                }
            } else {
                resources.append(resource)
            }
        }
        for (index, resource) in resources.enumerated() {
            if let type = FHIRValues.string(resource["resourceType"]), let id = FHIRValues.string(resource["id"]) {
                byReference[type + "/" + id] = index
            }
        }
        let organisation = resources.first { FHIRValues.string($0["resourceType"]) == "Organization" }.flatMap { FHIRValues.string($0["name"]) }
            ?? resources.first { FHIRValues.string($0["resourceType"]) == "Composition" }
                .flatMap { FHIRValues.array($0["author"]).lazy.compactMap { FHIRValues.string($0.objectValue?["display"]) }.first }
            ?? "Unknown organisation"
        let identifier = FHIRValues.object(bundle?["identifier"]).flatMap { FHIRValues.string($0["value"]) }
        let source = ImportSource(organisation: organisation, format: SourceFormat.fhir.rawValue,
                                  documentID: identifier ?? bundle.flatMap { FHIRValues.string($0["id"]) },
                                  version: FHIRValues.object(bundle?["meta"]).flatMap { FHIRValues.string($0["versionId"]) },
                                  author: nil, entryID: nil, importDate: importDate,
                                  documentDate: (bundle?["timestamp"] ?? FHIRValues.object(bundle?["meta"])?["lastUpdated"]).flatMap(FHIRValues.created))
        let patientResource = resources.first { FHIRValues.string($0["resourceType"]) == "Patient" }
        let patient = PatientFacts(name: patientResource.flatMap(patientName),
                                   birthDate: patientResource.flatMap { FHIRValues.created($0["birthDate"]) })
        var reader = FHIRReader(file: file, resources: resources, byReference: byReference, source: source)
        reader.readAll()
        let composition = resources.first { FHIRValues.string($0["resourceType"]) == "Composition" }
        var document = SourceDocument(file: file, format: .fhir, bytes: bytes,
                                      title: composition.flatMap { FHIRValues.string($0["title"]) } ?? (bundle == nil ? "FHIR resources" : "FHIR bundle"),
                                      organisation: organisation, created: (composition?["date"] ?? bundle?["timestamp"]).flatMap(FHIRValues.created),
                                      patient: patient, source: source)
        document.records = reader.records
        document.skipped = reader.skipped
        return document
    }

    static func patientName(_ patient: JSONObject) -> String? {
        guard let name = FHIRValues.array(patient["name"]).first?.objectValue else { return nil }
        if let text = FHIRValues.string(name["text"]) { return text }
        let given = FHIRValues.array(name["given"]).compactMap { FHIRValues.string($0) }
        return CCDAValues.clean((given + [FHIRValues.string(name["family"]) ?? ""]).joined(separator: " "))
    }

    mutating func readAll() {
        for resource in resources {
            for reference in FHIRValues.array(resource["hasMember"]) + FHIRValues.array(resource["result"]) {
                if let index = resolveIndex(reference) { members.insert(index) }
            }
        }
        var recordPaths = Set<String>()
        for (index, resource) in resources.enumerated() {
            if let owner = BinderExportMarks.identifier(resource, system: BinderExportMarks.attachmentOfSystem) {
                attachmentsOf[owner, default: []].append(index)
            }
            if let path = BinderExportMarks.identifier(resource, system: BinderExportMarks.recordPathSystem) { recordPaths.insert(path) }
        }
        let given = Set(attachmentsOf.filter { recordPaths.contains($0.key) }.values.joined())
        for (index, resource) in resources.enumerated() {
            if given.contains(index) { continue }
            let type = FHIRValues.string(resource["resourceType"]) ?? ""
            var entrySource = source
            entrySource.entryID = FHIRValues.string(resource["id"]).map { type + "/" + $0 }
            var mapper = FHIRResourceMapper(resource: resource, reader: self, source: entrySource)
            switch type {
            case "Condition": mapper.condition()
            // MedicationOrder: DSTU2's MedicationRequest (Apple Health's older clinical records).
            case "MedicationStatement", "MedicationRequest", "MedicationOrder": mapper.medication()
            case "AllergyIntolerance": mapper.allergy()
            case "Immunization": mapper.immunization()
            case "Observation":
                if members.contains(index) { continue }
                mapper.observation()
            case "Procedure": mapper.procedure()
            case "Encounter": mapper.encounter()
            case "Coverage": mapper.coverage()
            case "DiagnosticReport": mapper.report()
            case "DocumentReference": mapper.documentReference()
            case "Patient", "Organization", "Practitioner", "PractitionerRole", "Medication", "Composition", "Provenance", "Location", "Device":
                continue
            default:
                skipped.append(SkippedItem(file: file, what: type.isEmpty ? "a resource" : type, reason: "a resource type binder does not map"))
                continue
            }
            records += mapper.records
            skipped += mapper.skipped
        }
    }

    /// The attachments (`content[].attachment`) of the record at `path` in binder's export.
    func attachmentForms(of path: String) -> [JSONValue] {
        (attachmentsOf[path] ?? []).flatMap { FHIRValues.array(resources[$0]["content"]).compactMap { $0.objectValue?["attachment"] } }
    }

    /// The resource a reference names in this source.
    func resolve(_ reference: JSONValue?) -> JSONObject? { resolveIndex(reference).map { resources[$0] } }

    func resolveIndex(_ reference: JSONValue?) -> Int? {
        guard let target = FHIRValues.reference(reference) else { return nil }
        if let found = byReference[target] { return found }
        // An absolute URL ending in Type/id.
        let parts = target.split(separator: "/")
        guard parts.count >= 2 else { return nil }
        return byReference[parts[parts.count - 2] + "/" + parts[parts.count - 1]]
    }
}
