import BinderCrypto
import BinderFormat
import Foundation

/// An R4 Bundle of type `document`, shaped like an International Patient Summary: the
/// Composition first, the Patient, then one resource per record (the closest kind for its
/// category, else a DocumentReference), the record's markdown kept as its narrative and notes,
/// and each attachment as a DocumentReference holding its bytes.
enum FHIRExport {
    static let xhtml = "http://www.w3.org/1999/xhtml"

    static func render(_ content: ExportContent) throws -> [UInt8] {
        var builder = Builder(content: content)
        let bundle = builder.bundle()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .withoutEscapingSlashes]
        do { return Array(try encoder.encode(bundle)) } catch { throw ExportError.render("FHIR: \(error)") }
    }

    /// IPS section codes (LOINC) for the usual categories.
    static let sectionCodes: [String: (code: String, display: String)] = [
        "condition": ("11450-4", "Problem list - Reported"),
        "medication": ("10160-0", "History of Medication use Narrative"),
        "allergy": ("48765-2", "Allergies and adverse reactions Document"),
        "immunization": ("11369-6", "History of Immunization Narrative"),
        "lab": ("30954-2", "Relevant diagnostic tests/laboratory data Narrative"),
        "procedure": ("47519-4", "History of Procedures Document"),
        "visit": ("46240-8", "History of Hospitalizations+Outpatient visits Narrative"),
        "imaging": ("18748-4", "Diagnostic imaging study"),
    ]

    struct Builder {
        let content: ExportContent
        let patientURL = "urn:uuid:" + UUID().uuidString.lowercased()
        var entries: [FHIR.Entry] = []

        init(content: ExportContent) { self.content = content }

        var patientReference: FHIR.Reference { FHIR.Reference(reference: patientURL, display: content.patient.name) }

        mutating func bundle() -> FHIR.Bundle {
            let now = Timestamps.string(from: content.exportedAt)
            var sections: [FHIR.Composition.Section] = []
            for category in content.categories {
                var references: [FHIR.Reference] = []
                for record in category.records { references += add(record) }
                let type = Categories.documentType(forFolder: category.folder)
                let code = sectionCodes[type].map {
                    FHIR.CodeableConcept(coding: [FHIR.Coding(system: "http://loinc.org", code: $0.code, display: $0.display)], text: category.title)
                }
                let items = category.records.map { "<li>\(Markdown.escape($0.title))</li>" }.joined()
                sections.append(FHIR.Composition.Section(title: category.title, code: code,
                                                         text: narrative("<ul>\(items)</ul>"), entry: references.isEmpty ? nil : references))
            }
            let patient = content.patient
            var identifiers: [FHIR.Identifier] = []
            for (label, value) in patient.details where ["mrn", "medical record number"].contains(label.lowercased()) {
                identifiers.append(FHIR.Identifier(type: FHIR.CodeableConcept(coding: [FHIR.Coding(
                    system: "http://terminology.hl7.org/CodeSystem/v2-0203", code: "MR", display: "Medical record number")], text: label),
                    system: nil, value: value))
            }
            let birthDate = patient.dateOfBirth.flatMap { ExportReader.isDay($0) ? $0 : nil }
            var patientLines = "<p><b>\(Markdown.escape(patient.displayName))</b></p>"
            if let dob = patient.dateOfBirth { patientLines += "<p>Date of birth: \(Markdown.escape(dob))</p>" }
            if let contact = patient.emergencyContact { patientLines += "<p>Emergency contact: \(Markdown.escape(contact))</p>" }
            let patientResource = FHIR.Patient(
                id: FHIRExport.id(patientURL), text: narrative(patientLines), identifier: identifiers.isEmpty ? nil : identifiers,
                name: patient.name.map { [FHIR.HumanName(text: $0)] }, birthDate: birthDate,
                contact: patient.emergencyContact.map { contact in
                    [FHIR.Patient.Contact(relationship: [FHIR.CodeableConcept(coding: [FHIR.Coding(
                        system: "http://terminology.hl7.org/CodeSystem/v2-0131", code: "C", display: "Emergency Contact")], text: nil)],
                        name: FHIR.HumanName(text: contact))]
                })
            let compositionURL = "urn:uuid:" + UUID().uuidString.lowercased()
            let composition = FHIR.Composition(
                id: FHIRExport.id(compositionURL), text: narrative("<p>Patient summary of \(Markdown.escape(patient.displayName)), exported "
                    + "\(Markdown.escape(HTMLExport.exportDay(content))) by binder (\(Markdown.escape(content.selection))).</p>"),
                type: FHIR.CodeableConcept(coding: [FHIR.Coding(system: "http://loinc.org", code: "60591-5",
                                                                display: "Patient summary Document")], text: "Patient summary"),
                subject: patientReference, date: now, author: [patientReference],
                title: "Patient summary — \(patient.displayName)", section: sections)
            let head = [FHIR.Entry(fullUrl: compositionURL, resource: .composition(composition)),
                        FHIR.Entry(fullUrl: patientURL, resource: .patient(patientResource))]
            return FHIR.Bundle(identifier: FHIR.Identifier(system: "urn:ietf:rfc:3986", value: "urn:uuid:" + UUID().uuidString.lowercased()),
                               timestamp: now, entry: head + entries)
        }

        /// The record's resource and one DocumentReference per attachment; their references.
        mutating func add(_ record: ExportRecord) -> [FHIR.Reference] {
            var references: [FHIR.Reference] = []
            let attachments = record.allAttachments
            let standsAlone = record.type == "attachment" && record.body.isEmpty && record.allNotes.isEmpty
            if !standsAlone {
                let url = "urn:uuid:" + UUID().uuidString.lowercased()
                entries.append(FHIR.Entry(fullUrl: url, resource: resource(record, id: FHIRExport.id(url))))
                references.append(FHIR.Reference(reference: url, display: record.title))
            }
            for attachment in attachments {
                let url = "urn:uuid:" + UUID().uuidString.lowercased()
                let data = String(decoding: Base64.encode(attachment.bytes), as: UTF8.self)
                let document = FHIR.DocumentReference(
                    id: FHIRExport.id(url),
                    text: narrative("<p>Attachment \(Markdown.escape(attachment.name)) of \(Markdown.escape(record.title)) ("
                        + "\(Markdown.escape(attachment.mediaType)), \(Markdown.escape(formatSize(attachment.size))))</p>"),
                    identifier: [FHIR.Identifier(system: FHIRExport.attachmentOfSystem, value: record.path)],
                    type: FHIR.CodeableConcept(coding: nil, text: "Attachment"), subject: patientReference,
                    date: instant(record.updated ?? record.created), description: attachment.name,
                    content: [FHIR.DocumentReference.Content(attachment: FHIR.Attachment(
                        contentType: attachment.mediaType, data: data, size: attachment.size, title: attachment.name,
                        creation: dateTime(record.created)))])
                entries.append(FHIR.Entry(fullUrl: url, resource: .documentReference(document)))
                references.append(FHIR.Reference(reference: url, display: attachment.name))
            }
            return references
        }

        func resource(_ record: ExportRecord, id: String) -> FHIR.Resource {
            let text = narrative(recordNarrative(record))
            // The record's codes (`metadata.codes`, as `binder import` writes them) and its path:
            // what an import of this bundle needs to give the same record back.
            let codings = (record.metadata["codes"]?.arrayValue ?? []).compactMap { value -> FHIR.Coding? in
                guard let code = value.objectValue, let system = code["system"]?.stringValue, let value = code["code"]?.stringValue else { return nil }
                return FHIR.Coding(system: system, code: value, display: code["display"]?.stringValue)
            }
            let code = FHIR.CodeableConcept(coding: codings.isEmpty ? nil : codings, text: record.title)
            let path = [FHIR.Identifier(system: FHIRExport.recordPathSystem, value: record.path)]
            let notes = self.notes(record)
            let recorded = dateTime(record.created ?? record.updated)
            // By the record's own type: a `note` in a conditions folder is a note, not a diagnosis.
            switch record.type {
            case "condition":
                return .condition(FHIR.Condition(id: id, text: text, identifier: path, code: code, subject: patientReference, recordedDate: recorded, note: notes))
            case "medication":
                return .medicationStatement(FHIR.MedicationStatement(id: id, text: text, identifier: path, medicationCodeableConcept: code,
                                                                     subject: patientReference, dateAsserted: recorded, note: notes))
            case "allergy":
                return .allergyIntolerance(FHIR.AllergyIntolerance(id: id, text: text, identifier: path, code: code, patient: patientReference,
                                                                   recordedDate: recorded, note: notes))
            case "immunization":
                let occurred = record.metadata["date"]?.stringValue.flatMap(dateTime) ?? recorded
                return .immunization(FHIR.Immunization(id: id, text: text, identifier: path, vaccineCode: code, patient: patientReference,
                                                       occurrenceDateTime: occurred, occurrenceString: occurred == nil ? "unknown" : nil,
                                                       recorded: recorded, note: notes))
            case "lab":
                let components = LabTable.components(record.body)
                if !components.isEmpty {
                    return .observation(FHIR.Observation(
                        id: id, text: text, identifier: path,
                        category: [FHIR.CodeableConcept(coding: [FHIR.Coding(system: "http://terminology.hl7.org/CodeSystem/observation-category",
                                                                             code: "laboratory", display: "Laboratory")], text: nil)],
                        code: code, subject: patientReference, effectiveDateTime: recorded, note: notes, component: components))
                }
                fallthrough
            default:
                var markdown = record.title.isEmpty ? "" : "# \(record.title)\n\n"
                markdown += record.body
                for note in record.allNotes { markdown += "\n\n## \(note.title)\n\n\(note.body)" }
                return .documentReference(FHIR.DocumentReference(
                    id: id, text: text, identifier: path, type: FHIR.CodeableConcept(coding: codings.isEmpty ? nil : codings,
                                                                                     text: record.type.isEmpty ? "note" : record.type),
                    subject: patientReference, date: instant(record.updated ?? record.created), description: record.title,
                    content: [FHIR.DocumentReference.Content(attachment: FHIR.Attachment(
                        contentType: "text/markdown; charset=utf-8", data: String(decoding: Base64.encode(Array(markdown.utf8)), as: UTF8.self),
                        size: markdown.utf8.count, title: record.title, creation: recorded))]))
            }
        }

        /// The record's markdown and its text children's, as annotations (FHIR's `markdown` type).
        func notes(_ record: ExportRecord) -> [FHIR.Annotation]? {
            var notes: [FHIR.Annotation] = []
            if !record.body.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty {
                notes.append(FHIR.Annotation(time: dateTime(record.created), text: record.body))
            }
            for note in record.allNotes {
                notes.append(FHIR.Annotation(time: dateTime(note.created), text: "## \(note.title)\n\n\(note.body)"))
            }
            return notes.isEmpty ? nil : notes
        }

        /// The markdown as written, in a `<pre>`, the children's after it.
        func recordNarrative(_ record: ExportRecord) -> String {
            var html = "<h3>\(Markdown.escape(record.title))</h3>"
            if !record.body.isEmpty { html += "<pre>\(Markdown.escape(record.body))</pre>" }
            for note in record.allNotes {
                html += "<h4>\(Markdown.escape(note.title))</h4>"
                if !note.body.isEmpty { html += "<pre>\(Markdown.escape(note.body))</pre>" }
            }
            return html
        }

        func narrative(_ body: String) -> FHIR.Narrative {
            FHIR.Narrative(div: "<div xmlns=\"\(FHIRExport.xhtml)\">\(body)</div>")
        }

        /// A FHIR dateTime from the apps' timestamps (normalised to UTC with milliseconds).
        func dateTime(_ time: String?) -> String? {
            guard let time, let parsed = Timestamps.parse(time) else { return nil }
            return Timestamps.string(seconds: parsed.seconds, nanoseconds: parsed.nanoseconds)
        }

        func instant(_ time: String?) -> String? { dateTime(time) }
    }

    static func id(_ url: String) -> String { String(url.dropFirst("urn:uuid:".count)) }

    /// The identifier systems of binder's own: a resource's record path in the view, and the
    /// record an attachment's DocumentReference belongs to (read back by `binder import`).
    static let recordPathSystem = "urn:binder:record-path"
    static let attachmentOfSystem = "urn:binder:attachment-of"
}

/// The rows of a lab record's markdown table (`| Test | Value |`) as Observation components:
/// a number and its unit as a quantity, anything else as text.
enum LabTable {
    static func components(_ markdown: String) -> [FHIR.Observation.Component] {
        let rows = markdown.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { $0.hasPrefix("|") }
        guard rows.count >= 3, isSeparator(rows[1]) else { return [] }
        let header = cells(rows[0]).map { $0.lowercased() }
        let unitColumn = header.firstIndex(where: { $0 == "unit" || $0 == "units" })
        var components: [FHIR.Observation.Component] = []
        for row in rows.dropFirst(2) where !isSeparator(row) {
            let values = cells(row)
            guard values.count >= 2, !values[0].isEmpty, !values[1].isEmpty else { continue }
            var quantity: FHIR.Quantity?
            let text = values[1]
            let numberPart = text.prefix(while: { $0.isNumber || $0 == "." || $0 == "-" })
            if !numberPart.isEmpty, let value = Double(numberPart), value.isFinite {
                var unit = text.dropFirst(numberPart.count).trimmingCharacters(in: .whitespaces)
                if unit.isEmpty, let unitColumn, unitColumn < values.count { unit = values[unitColumn] }
                quantity = FHIR.Quantity(value: value, unit: unit.isEmpty ? nil : unit)
            }
            components.append(FHIR.Observation.Component(code: FHIR.CodeableConcept(coding: nil, text: values[0]),
                                                         valueQuantity: quantity, valueString: quantity == nil ? text : nil))
        }
        return components
    }

    static func cells(_ row: String) -> [String] {
        var inner = Substring(row)
        if inner.hasPrefix("|") { inner = inner.dropFirst() }
        if inner.hasSuffix("|") { inner = inner.dropLast() }
        return inner.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
    }

    static func isSeparator(_ row: String) -> Bool {
        let body = cells(row)
        return !body.isEmpty && body.allSatisfy { cell in !cell.isEmpty && cell.allSatisfy { "-:".contains($0) } }
    }
}
