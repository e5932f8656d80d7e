import BinderFormat
import Foundation

/// One FHIR resource made a record (or skipped, with the reason).
struct FHIRResourceMapper {
    let resource: JSONObject
    let reader: FHIRReader
    let source: ImportSource
    var records: [ImportedRecord] = []
    var skipped: [SkippedItem] = []

    init(resource: JSONObject, reader: FHIRReader, source: ImportSource) {
        self.resource = resource
        self.reader = reader
        self.source = source
    }

    var type: String { FHIRValues.string(resource["resourceType"]) ?? "resource" }

    func line(_ label: String, _ value: String?) -> [String] {
        guard let value, !value.isEmpty else { return [] }
        return ["- " + label + ": " + value]
    }

    mutating func skip(_ what: String?, _ reason: String) {
        skipped.append(SkippedItem(file: reader.file, what: what ?? type, reason: reason + " (" + (source.entryID ?? type) + ")"))
    }

    /// Refuted or entered in error: not a fact about the patient.
    func isRefuted() -> Bool {
        let verification = FHIRValues.code(resource["verificationStatus"])
        return verification == "refuted" || verification == "entered-in-error" || FHIRValues.string(resource["status"]) == "entered-in-error"
    }

    /// The International Patient Summary's code system for saying there is nothing to list
    /// ("no-allergy-info", "no-known-problems", "no-medication-info"…): such a resource is a statement, not an item.
    static let absentOrUnknownSystem = "http://hl7.org/fhir/uv/ips/CodeSystem/absent-unknown-uv-ips"

    /// Skips a resource whose concept says there is nothing (IPS absent/unknown), with its folder and what it said.
    mutating func skipsAStatementOfNothing(_ concept: JSONValue?, folder: String) -> Bool {
        guard let said = FHIRValues.codes(concept).first(where: { $0.system == Self.absentOrUnknownSystem }) else { return false }
        skip(folder, "it says there is nothing to list (\(said.display ?? said.code))")
        return true
    }

    mutating func condition() {
        if skipsAStatementOfNothing(resource["code"], folder: "conditions") { return }
        guard let name = FHIRValues.name(resource["code"]) else { return skip(nil, "it has no name") }
        if isRefuted() { return skip(name, "refuted or entered in error") }
        let status = FHIRValues.code(resource["clinicalStatus"])
        let onset = resource["onsetDateTime"] ?? FHIRValues.object(resource["onsetPeriod"])?["start"] ?? resource["recordedDate"]
        var lines = line("Status", status)
        lines += line("Onset", FHIRValues.shown(onset))
        lines += line("Resolved", FHIRValues.shown(resource["abatementDateTime"]))
        add("conditions", name, onset, lines, FHIRValues.codes(resource["code"]), status)
    }

    mutating func medication() {
        let medication = resource["medicationCodeableConcept"] ?? reader.resolve(resource["medicationReference"])?["code"]
        if skipsAStatementOfNothing(medication, folder: "medications") { return }
        guard let name = FHIRValues.name(medication) ?? FHIRValues.string(FHIRValues.object(resource["medicationReference"])?["display"])
        else { return skip(nil, "it names no medication") }
        let status = FHIRValues.string(resource["status"])
        if isRefuted() { return skip(name, "entered in error") }
        if let intent = FHIRValues.string(resource["intent"]), ["proposal", "plan"].contains(intent) {
            return skip(name, "planned (intent \(intent)), not a current medication")
        }
        if status == "not-taken" || status == "intended" { return skip(name, "not taken (status \(status ?? ""))") }
        let dosage = FHIRValues.array(resource["dosage"] ?? resource["dosageInstruction"]).first?.objectValue
        let doseAndRate = FHIRValues.array(dosage?["doseAndRate"]).first?.objectValue
        let dose = FHIRValues.object(doseAndRate?["doseQuantity"]).flatMap(FHIRValues.quantityText)
        let started = resource["effectiveDateTime"] ?? FHIRValues.object(resource["effectivePeriod"])?["start"] ?? resource["authoredOn"]
            ?? resource["dateAsserted"] ?? resource["dateWritten"]
        var lines = line("Status", status)
        lines += line("Dose", dose)
        lines += line("Instructions", FHIRValues.string(dosage?["text"]))
        lines += line("Started", FHIRValues.shown(started))
        lines += line("Stopped", FHIRValues.shown(FHIRValues.object(resource["effectivePeriod"])?["end"]))
        add("medications", name, started, lines, FHIRValues.codes(medication), status, distinguishing: dose)
    }

    mutating func allergy() {
        // DSTU2 names the substance `substance`, its status `status`, its onset `onset`.
        let substance = resource["code"] ?? resource["substance"]
        if skipsAStatementOfNothing(substance, folder: "allergies") { return }
        let codes = FHIRValues.codes(substance)
        // SNOMED CT's "no known allergy" family: a statement of none, not an allergy.
        let none: Set<String> = ["716186003", "409137002", "428607008", "429625007", "428197003"]
        if codes.contains(where: { $0.system == "http://snomed.info/sct" && none.contains($0.code) }) {
            return skip("allergies", "no known allergies")
        }
        guard let name = FHIRValues.name(substance) else { return skip("allergies", "no substance named") }
        if isRefuted() { return skip(name, "refuted or entered in error") }
        let reactions = FHIRValues.array(resource["reaction"]).compactMap(\.objectValue)
        let manifestations = reactions.flatMap { FHIRValues.array($0["manifestation"]) }.compactMap { FHIRValues.name($0) }
        let severity = reactions.lazy.compactMap { FHIRValues.string($0["severity"]) }.first ?? FHIRValues.string(resource["criticality"])
        let status = FHIRValues.code(resource["clinicalStatus"]) ?? FHIRValues.string(resource["status"])
        let since = resource["onsetDateTime"] ?? resource["onset"] ?? resource["recordedDate"]
        var lines = line("Status", status)
        lines += line("Type", FHIRValues.string(resource["type"]))
        lines += line("Reaction", manifestations.isEmpty ? nil : manifestations.joined(separator: ", "))
        lines += line("Severity", severity)
        lines += line("Since", FHIRValues.shown(since))
        add("allergies", name, since, lines, codes, status)
    }

    mutating func immunization() {
        if skipsAStatementOfNothing(resource["vaccineCode"], folder: "immunizations") { return }
        guard let name = FHIRValues.name(resource["vaccineCode"]) else { return skip(nil, "it names no vaccine") }
        let status = FHIRValues.string(resource["status"])
        if status == "not-done" || status == "entered-in-error" { return skip(name, "not given (status \(status ?? ""))") }
        if resource["wasNotGiven"]?.boolValue == true { return skip(name, "not given (wasNotGiven)") }
        let date = resource["occurrenceDateTime"] ?? resource["date"]
        var lines = line("Date", FHIRValues.shown(date))
        lines += line("Status", status)
        lines += line("Lot", FHIRValues.string(resource["lotNumber"]))
        lines += line("Dose", FHIRValues.object(resource["doseQuantity"]).flatMap(FHIRValues.quantityText))
        add("immunizations", name, date, lines, FHIRValues.codes(resource["vaccineCode"]), status)
    }

    /// An Observation: a panel (its `hasMember`s, or its `component`s) as one table.
    mutating func observation() {
        guard let name = FHIRValues.name(resource["code"]) else { return skip(nil, "it has no name") }
        if isRefuted() { return skip(name, "entered in error") }
        let memberIndexes = FHIRValues.array(resource["hasMember"]).compactMap { reader.resolveIndex($0) }
        let members = memberIndexes.map { reader.resources[$0] }
        let date = resource["effectiveDateTime"] ?? FHIRValues.object(resource["effectivePeriod"])?["start"] ?? resource["issued"]
        var codes = FHIRValues.codes(resource["code"])
        var rows: [JSONObject] = members
        var shown = Set(memberIndexes)
        if members.isEmpty { rows = FHIRValues.array(resource["component"]).compactMap(\.objectValue) }
        if rows.isEmpty {
            rows = [resource]
        } else if FHIRValues.value(of: resource) != nil {
            // A panel with a value of its own is the first row; its members follow it (appendRows).
            rows = members.isEmpty ? [resource] + rows : [resource]
            shown = []
        }
        let table = tableLines(rows, shown: shown, codes: &codes)
        let status = FHIRValues.string(resource["status"])
        var lines = line("Date", FHIRValues.shown(date))
        lines += line("Status", status)
        lines += [""] + table
        add("labs", name, date, lines, codes, status)
    }

    /// `shown`: the indexes (in the source) of resources among `rows`, not to be shown again as a member.
    func tableLines(_ rows: [JSONObject], shown: Set<Int>, codes: inout [ClinicalCode]) -> [String] {
        var lines = ["| Test | Value | Reference range | Flag |", "|---|---|---|---|"]
        var shown = shown
        appendRows(rows, depth: 0, shown: &shown, lines: &lines, codes: &codes)
        return lines
    }

    /// How deep panels inside panels are followed (a report's CBC panel's values are the second level).
    static let maximumPanelDepth = 3

    /// Each row, then the members of a row that is a panel itself (a report's result with `hasMember`:
    /// its values are rows, as they are of no record of their own). Each resource is shown once and
    /// panels are followed `maximumPanelDepth` deep, so a cycle of references in the source ends.
    func appendRows(_ rows: [JSONObject], depth: Int, shown: inout Set<Int>, lines: inout [String], codes: inout [ClinicalCode]) {
        for row in rows {
            let test = FHIRValues.name(row["code"]) ?? "Result"
            let range = FHIRValues.array(row["referenceRange"]).first?.objectValue.flatMap(FHIRValues.rangeText) ?? ""
            let flag = FHIRValues.array(row["interpretation"]).first.flatMap { FHIRValues.name($0) } ?? ""
            lines.append("| " + [test, FHIRValues.value(of: row) ?? "", range, flag].map(CCDASections.cell).joined(separator: " | ") + " |")
            codes += FHIRValues.codes(row["code"])
            guard depth < Self.maximumPanelDepth else { continue }
            let members = FHIRValues.array(row["hasMember"]).compactMap { reader.resolveIndex($0) }.filter { shown.insert($0).inserted }
            if !members.isEmpty {
                appendRows(members.map { reader.resources[$0] }, depth: depth + 1, shown: &shown, lines: &lines, codes: &codes)
            }
        }
    }

    mutating func procedure() {
        if skipsAStatementOfNothing(resource["code"], folder: "procedures") { return }
        guard let name = FHIRValues.name(resource["code"]) else { return skip(nil, "it has no name") }
        let status = FHIRValues.string(resource["status"])
        if status == "not-done" || status == "entered-in-error" || status == "preparation" { return skip(name, "not done (status \(status ?? ""))") }
        let date = resource["performedDateTime"] ?? FHIRValues.object(resource["performedPeriod"])?["start"]
        var lines = line("Date", FHIRValues.shown(date))
        lines += line("Status", status)
        lines += line("Site", FHIRValues.array(resource["bodySite"]).first.flatMap { FHIRValues.name($0) })
        add("procedures", name, date, lines, FHIRValues.codes(resource["code"]), status)
    }

    mutating func encounter() {
        let typeConcept = FHIRValues.array(resource["type"]).first
        let name = FHIRValues.name(typeConcept) ?? FHIRValues.string(FHIRValues.object(resource["class"])?["display"]) ?? "Visit"
        let date = FHIRValues.object(resource["period"])?["start"]
        let reasons = FHIRValues.array(resource["reasonCode"]).compactMap { FHIRValues.name($0) }
        let status = FHIRValues.string(resource["status"])
        var lines = line("Date", FHIRValues.shown(date))
        lines += line("Status", status)
        lines += line("Provider", FHIRValues.array(resource["participant"]).lazy
            .compactMap { FHIRValues.string(FHIRValues.object($0.objectValue?["individual"])?["display"]) }.first)
        lines += line("Location", FHIRValues.string(FHIRValues.object(resource["serviceProvider"])?["display"]))
        lines += line("Reason", reasons.isEmpty ? nil : reasons.joined(separator: ", "))
        add("visits", name, date, lines, FHIRValues.codes(typeConcept), status)
    }

    mutating func coverage() {
        let payor = FHIRValues.array(resource["payor"]).first
        let payer = FHIRValues.string(FHIRValues.object(payor)?["display"]) ?? reader.resolve(payor).flatMap { FHIRValues.string($0["name"]) }
        guard let title = payer ?? FHIRValues.name(resource["type"]) else { return skip(nil, "it names no payer") }
        let member = FHIRValues.string(resource["subscriberId"])
        let group = FHIRValues.array(resource["class"]).compactMap(\.objectValue)
            .first { FHIRValues.code($0["type"]) == "group" }.flatMap { FHIRValues.string($0["value"]) }
        var lines = line("Payer", payer)
        lines += line("Coverage", FHIRValues.name(resource["type"]))
        lines += line("Member id", member)
        lines += line("Group", group)
        lines += line("Status", FHIRValues.string(resource["status"]))
        add("insurance", title, FHIRValues.object(resource["period"])?["start"], lines, FHIRValues.codes(resource["type"]),
            FHIRValues.string(resource["status"]), distinguishing: member)
    }

    /// A DiagnosticReport: its results as a table, its conclusion, its PDFs and images kept.
    mutating func report() {
        guard let name = FHIRValues.name(resource["code"]) else { return skip(nil, "it has no name") }
        let date = resource["effectiveDateTime"] ?? FHIRValues.object(resource["effectivePeriod"])?["start"] ?? resource["issued"]
        var codes = FHIRValues.codes(resource["code"])
        let resultIndexes = FHIRValues.array(resource["result"]).compactMap { reader.resolveIndex($0) }
        let results = resultIndexes.map { reader.resources[$0] }
        let status = FHIRValues.string(resource["status"])
        var lines = line("Date", FHIRValues.shown(date))
        lines += line("Status", status)
        lines += line("Conclusion", FHIRValues.string(resource["conclusion"]))
        if !results.isEmpty { lines += [""] + tableLines(results, shown: Set(resultIndexes), codes: &codes) }
        let categories = FHIRValues.array(resource["category"]).flatMap { FHIRValues.codes($0) }.map(\.code)
        let folder = categories.contains("RAD") || categories.contains("LP29684-5") ? "imaging" : "labs"
        add(folder, name, date, lines, codes, status, attachments: attachments(FHIRValues.array(resource["presentedForm"])))
    }

    mutating func documentReference() {
        let name = FHIRValues.string(resource["description"]) ?? FHIRValues.name(resource["type"]) ?? "Document"
        if FHIRValues.string(resource["status"]) == "entered-in-error" { return skip(name, "entered in error") }
        let forms = FHIRValues.array(resource["content"]).compactMap { $0.objectValue?["attachment"] }
        let date = resource["date"] ?? FHIRValues.object(FHIRValues.object(resource["context"])?["period"])?["start"]
        var lines = line("Date", FHIRValues.shown(date))
        lines += line("Type", FHIRValues.name(resource["type"]))
        // binder's own export keeps a record's markdown as `text/markdown` content: that is its body, not an attachment.
        let own = BinderExportMarks.identifier(resource, system: BinderExportMarks.recordPathSystem) != nil
        let kept = attachments(own ? forms.filter { !BinderExportMarks.isMarkdown($0) } : forms)
        add("documents", name, date, lines, FHIRValues.codes(resource["type"]), FHIRValues.string(resource["docStatus"]), attachments: kept)
    }

    /// Attachments with their bytes inline (`data`); one only linked (`url`) is listed as skipped.
    mutating func attachments(_ forms: [JSONValue]) -> [ImportedAttachment] {
        var kept: [ImportedAttachment] = []
        for (index, form) in forms.enumerated() {
            guard let form = form.objectValue else { continue }
            let format = FHIRValues.format(contentType: FHIRValues.string(form["contentType"]))
            guard let data = form["data"]?.stringValue, let bytes = Data(base64Encoded: data, options: .ignoreUnknownCharacters) else {
                if form["url"] != nil { skip(FHIRValues.string(form["title"]) ?? "an attachment", "linked, not included (its url is not fetched)") }
                continue
            }
            let stem = NameWords.words(FHIRValues.string(form["title"]) ?? "attachment-\(index + 1)")
            let ext = AttachmentFormats.fileExtension(format: format)
            kept.append(ImportedAttachment(fileName: stem.hasSuffix("-" + ext) ? stem : stem + "." + ext, format: format, bytes: Array(bytes)))
        }
        return kept
    }

    mutating func add(_ folder: String, _ title: String, _ date: JSONValue?, _ lines: [String], _ codes: [ClinicalCode], _ status: String?,
                      distinguishing: String? = nil, attachments: [ImportedAttachment] = []) {
        var record = ImportedRecord(folder: folder, title: title, created: FHIRValues.created(date), lines: lines, codes: codes,
                                    status: status, distinguishing: distinguishing, source: source)
        record.attachments = attachments
        if let own = BinderExportMarks.record(of: resource, title: title) {
            // binder's own export: the record goes back where it was, with its own markdown and attachments.
            record.folder = own.folder
            record.preferredPath = own.path
            record.body = own.body
            record.created = FHIRValues.created(BinderExportMarks.created(of: resource) ?? date)
            record.attachments += self.attachments(reader.attachmentForms(of: own.path))
        }
        records.append(record)
    }
}

/// Lowercase ASCII letters and digits joined by hyphens, as the apps name files.
enum NameWords {
    static func words(_ text: String) -> String {
        let words = text.lowercased().split { !($0.isLetter || $0.isNumber) || !$0.isASCII }
        let joined = words.joined(separator: "-")
        return joined.isEmpty ? "entry" : String(joined.prefix(80))
    }
}
