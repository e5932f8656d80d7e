/// The entries of one structured C-CDA section made records (HL7 C-CDA R2.1 entry templates).
struct CCDASections {
    enum Kind: CaseIterable {
        case problems, medications, allergies, immunizations, results, vitalSigns, procedures, encounters, payers

        /// Section templateId roots (entries required and optional) and LOINC section codes.
        var templates: (roots: [String], loinc: [String]) {
            let base = "2.16.840.1.113883.10.20.22.2."
            switch self {
            // Problems, and the diagnoses of a discharge summary (discharge and admission).
            case .problems: return ([base + "5.1", base + "5", base + "24", base + "43"], ["11450-4", "11535-2", "46241-6"])
            case .medications: return ([base + "1.1", base + "1", base + "11.1", base + "11"], ["10160-0", "10183-2"])
            case .allergies: return ([base + "6.1", base + "6"], ["48765-2"])
            case .immunizations: return ([base + "2.1", base + "2"], ["11369-6"])
            case .results: return ([base + "3.1", base + "3"], ["30954-2"])
            case .vitalSigns: return ([base + "4.1", base + "4"], ["8716-3"])
            case .procedures: return ([base + "7.1", base + "7"], ["47519-4"])
            case .encounters: return ([base + "22.1", base + "22"], ["46240-8"])
            case .payers: return ([base + "18"], ["48768-6"])
            }
        }

        var folder: String {
            switch self {
            case .problems: return "conditions"
            case .medications: return "medications"
            case .allergies: return "allergies"
            case .immunizations: return "immunizations"
            case .results: return "labs"
            case .vitalSigns: return "labs"
            case .procedures: return "procedures"
            case .encounters: return "visits"
            case .payers: return "insurance"
            }
        }

        init?(section: XMLNode) {
            let roots = Set(section.all("templateId").compactMap { $0["root"] })
            let code = section.child("code")?["code"]
            guard let kind = Kind.allCases.first(where: { kind in
                !roots.isDisjoint(with: kind.templates.roots) || code.map(kind.templates.loinc.contains) == true
            }) else { return nil }
            self = kind
        }
    }

    let section: XMLNode
    let file: String
    let source: ImportSource
    var records: [ImportedRecord] = []
    var skipped: [SkippedItem] = []

    init(section: XMLNode, file: String, source: ImportSource) {
        self.section = section
        self.file = file
        self.source = source
    }

    var narrative: XMLNode? { section.child("text") }

    mutating func read(_ kind: Kind) {
        for entry in section.all("entry") {
            guard let item = entry.children.first else { continue }
            switch kind {
            case .problems: problem(item)
            case .medications:
                // A Discharge (or Admission) Medication act wraps its Medication Activities.
                let activities = item.name == "act" ? item.all("entryRelationship").compactMap { $0.child("substanceAdministration") } : [item]
                for activity in activities { medication(activity) }
            case .allergies: allergy(item)
            case .immunizations: immunization(item)
            case .results, .vitalSigns: panel(item, folder: kind.folder)
            case .procedures: procedure(item)
            case .encounters: encounter(item)
            case .payers: coverage(item)
            }
        }
    }

    // MARK: - Entries

    /// A Problem Concern Act and its Problem Observations (one record each).
    mutating func problem(_ act: XMLNode) {
        for observation in Self.observations(of: act, template: "2.16.840.1.113883.10.20.22.4.4") {
            let value = observation.child("value")
            guard let name = CCDAValues.name(value, narrative: narrative) ?? CCDAValues.text(observation.child("text"), narrative: narrative)
            else { skip("a problem", "it has no name", observation); continue }
            if observation["negationInd"] == "true" { skip(name, "the document says it is absent (negationInd)", observation); continue }
            let time = observation.child("effectiveTime") ?? act.child("effectiveTime")
            let status = act.child("statusCode")?["code"]
            var lines = line("Status", status)
            lines += line("Onset", CCDAValues.shown(CCDAValues.time(time)))
            lines += line("Resolved", CCDAValues.shown(time?.child("high")?["value"]))
            add(folder: "conditions", title: name, time: CCDAValues.time(time), lines: lines,
                codes: CCDAValues.codes(value), status: status, entry: observation)
        }
    }

    /// A Medication Activity: what was taken, not what is planned (moodCode INT).
    mutating func medication(_ activity: XMLNode) {
        let material = activity.at("consumable", "manufacturedProduct", "manufacturedMaterial")
        guard let name = CCDAValues.name(material?.child("code"), narrative: narrative)
            ?? material?.child("name").flatMap({ CCDAValues.clean($0.allText) })
        else { skip("a medication", "it has no name", activity); return }
        guard happened(activity, name, negated: "the document says it is not taken", planned: "not a current medication") else { return }
        let times = activity.all("effectiveTime")
        let span = times.first { $0.child("low") != nil || $0.child("high") != nil || $0["value"] != nil }
        let dose = CCDAValues.quantity(activity.child("doseQuantity"), narrative: narrative)
        let status = activity.child("statusCode")?["code"]
        var lines = line("Status", status)
        lines += line("Dose", dose)
        lines += line("Frequency", times.first { $0.child("period") != nil }.flatMap { frequency($0) })
        lines += line("Route", CCDAValues.name(activity.child("routeCode"), narrative: nil))
        lines += line("Started", CCDAValues.shown(CCDAValues.time(span)))
        lines += line("Stopped", CCDAValues.shown(span?.child("high")?["value"]))
        lines += line("Instructions", CCDAValues.text(activity.child("text"), narrative: narrative))
        add(folder: "medications", title: name, time: CCDAValues.time(span), lines: lines,
            codes: CCDAValues.codes(material?.child("code")), status: status, distinguishing: dose, entry: activity)
    }

    /// The observations a concern act holds: those of `template` (a Problem or Allergy -
    /// Intolerance Observation) when any says so, else every one (older documents name none);
    /// an observation entry directly is itself. A severity or status observation beside them
    /// is not an item.
    static func observations(of act: XMLNode, template: String) -> [XMLNode] {
        if act.name == "observation" { return [act] }
        let all = act.all("entryRelationship").compactMap { $0.child("observation") }
        let templated = all.filter { $0.all("templateId").contains { $0["root"] == template } }
        return templated.isEmpty ? all : templated
    }

    /// "Every 12 h", from a PIVL_TS period.
    func frequency(_ time: XMLNode) -> String? {
        guard let period = time.child("period"), let value = period["value"] else { return nil }
        let unit = ["h": "hours", "d": "days", "wk": "weeks", "min": "minutes", "mo": "months"][period["unit"] ?? ""] ?? (period["unit"] ?? "")
        return "every \(value) \(unit)".trimmingCharacters(in: .whitespaces)
    }

    /// An Allergy Concern Act and its Allergy - Intolerance Observations. "No known allergies"
    /// (negationInd, or a substance with a nullFlavor and no name) makes no record.
    mutating func allergy(_ act: XMLNode) {
        for observation in Self.observations(of: act, template: "2.16.840.1.113883.10.20.22.4.7") {
            let substance = observation.at("participant", "participantRole", "playingEntity", "code")
            if observation["negationInd"] == "true" { skip("allergies", "no known allergies (negationInd)", observation); continue }
            guard let name = CCDAValues.name(substance, narrative: narrative)
            else { skip("allergies", substance?["nullFlavor"] != nil ? "no known allergy (nullFlavor)" : "no substance named", observation); continue }
            var reactions: [String] = [], severity: String?
            for relation in observation.all("entryRelationship") {
                guard let inner = relation.child("observation") else { continue }
                let roots = inner.all("templateId").compactMap { $0["root"] }
                let text = CCDAValues.name(inner.child("value"), narrative: narrative)
                if roots.contains("2.16.840.1.113883.10.20.22.4.9") {
                    if let text { reactions.append(text) }
                    for nested in inner.all("entryRelationship") {
                        if let s = nested.child("observation")?.child("value") { severity = severity ?? CCDAValues.name(s, narrative: narrative) }
                    }
                } else if roots.contains("2.16.840.1.113883.10.20.22.4.8") {
                    severity = text
                }
            }
            let status = act.child("statusCode")?["code"]
            var lines = line("Status", status)
            lines += line("Type", CCDAValues.name(observation.child("value"), narrative: narrative))
            lines += line("Reaction", reactions.isEmpty ? nil : reactions.joined(separator: ", "))
            lines += line("Severity", severity)
            lines += line("Since", CCDAValues.shown(CCDAValues.time(observation.child("effectiveTime"))))
            add(folder: "allergies", title: name, time: CCDAValues.time(observation.child("effectiveTime")), lines: lines,
                codes: CCDAValues.codes(substance), status: status, entry: observation)
        }
    }

    /// An Immunization Activity given (not refused, not planned).
    mutating func immunization(_ activity: XMLNode) {
        let material = activity.at("consumable", "manufacturedProduct", "manufacturedMaterial")
        guard let name = CCDAValues.name(material?.child("code"), narrative: narrative)
        else { skip("an immunization", "it has no name", activity); return }
        guard happened(activity, name, negated: "not given", planned: "not given") else { return }
        let time = CCDAValues.time(activity.child("effectiveTime"))
        let status = activity.child("statusCode")?["code"]
        var lines = line("Date", CCDAValues.shown(time))
        lines += line("Status", status)
        lines += line("Dose", CCDAValues.quantity(activity.child("doseQuantity"), narrative: narrative))
        lines += line("Lot", material?.child("lotNumberText").flatMap { CCDAValues.clean($0.allText) })
        lines += line("Manufacturer", activity.at("consumable", "manufacturedProduct", "manufacturerOrganization", "name")
            .flatMap { CCDAValues.clean($0.allText) })
        add(folder: "immunizations", title: name, time: time, lines: lines, codes: CCDAValues.codes(material?.child("code")),
            status: status, entry: activity)
    }

    /// A Result Organizer or Vital Signs Organizer: one record, its values as a table.
    mutating func panel(_ organizer: XMLNode, folder: String) {
        let observations = organizer.name == "observation" ? [organizer] : organizer.all("component").compactMap { $0.child("observation") }
        guard !observations.isEmpty else { skip("a panel", "it has no results", organizer); return }
        let title = CCDAValues.name(organizer.child("code"), narrative: narrative)
            ?? (organizer.child("code")?["code"] == "46680005" ? "Vital signs" : nil)
            ?? (observations.count == 1 ? CCDAValues.name(observations[0].child("code"), narrative: narrative) : nil)
            ?? "Results"
        let time = CCDAValues.time(organizer.child("effectiveTime")) ?? observations.lazy.compactMap { CCDAValues.time($0.child("effectiveTime")) }.first
        var rows = ["| Test | Value | Reference range | Flag |", "|---|---|---|---|"]
        var codes = organizer.name == "observation" ? [] : CCDAValues.codes(organizer.child("code"))
        for observation in observations {
            let test = CCDAValues.name(observation.child("code"), narrative: narrative) ?? "Result"
            let value = CCDAValues.quantity(observation.child("value"), narrative: narrative) ?? ""
            let range = observation.at("referenceRange", "observationRange").flatMap {
                CCDAValues.quantity($0.child("value"), narrative: narrative) ?? CCDAValues.text($0.child("text"), narrative: narrative)
            } ?? ""
            let flag = CCDAValues.name(observation.child("interpretationCode"), narrative: nil) ?? ""
            rows.append("| " + [test, value, range, flag].map(Self.cell).joined(separator: " | ") + " |")
            codes += CCDAValues.codes(observation.child("code"))
        }
        let status = organizer.child("statusCode")?["code"]
        var lines = line("Date", CCDAValues.shown(time))
        lines += line("Status", status)
        lines.append("")
        lines += rows
        add(folder: folder, title: title, time: time, lines: lines, codes: codes, status: status, entry: organizer)
    }

    static func cell(_ text: String) -> String { text.replacingOccurrences(of: "|", with: "\\|") }

    /// A Procedure Activity (procedure, observation or act).
    mutating func procedure(_ item: XMLNode) {
        guard let name = CCDAValues.name(item.child("code"), narrative: narrative) ?? CCDAValues.text(item.child("text"), narrative: narrative)
        else { skip("a procedure", "it has no name", item); return }
        guard happened(item, name, negated: "not done", planned: "not done yet") else { return }
        let time = CCDAValues.time(item.child("effectiveTime"))
        let status = item.child("statusCode")?["code"]
        var lines = line("Date", CCDAValues.shown(time))
        lines += line("Status", status)
        lines += line("Site", CCDAValues.name(item.child("targetSiteCode"), narrative: nil))
        lines += line("Performer", item.at("performer", "assignedEntity", "representedOrganization", "name").flatMap { CCDAValues.clean($0.allText) })
        add(folder: "procedures", title: name, time: time, lines: lines, codes: CCDAValues.codes(item.child("code")), status: status, entry: item)
    }

    /// An Encounter Activity: its type, date, place, clinician and diagnoses.
    mutating func encounter(_ item: XMLNode) {
        let name = CCDAValues.name(item.child("code"), narrative: narrative) ?? CCDAValues.text(item.child("text"), narrative: narrative) ?? "Visit"
        let time = CCDAValues.time(item.child("effectiveTime"))
        var lines = line("Date", CCDAValues.shown(time))
        lines += line("Provider", CCDAValues.personName(item.at("performer", "assignedEntity", "assignedPerson", "name")))
        lines += line("Location", item.at("participant", "participantRole", "playingEntity", "name").flatMap { CCDAValues.clean($0.allText) })
        let diagnoses = item.all("entryRelationship").compactMap { $0.child("act") }.flatMap { $0.all("entryRelationship") }
            .compactMap { CCDAValues.name($0.child("observation")?.child("value"), narrative: narrative) }
        lines += line("Diagnoses", diagnoses.isEmpty ? nil : diagnoses.joined(separator: ", "))
        add(folder: "visits", title: name, time: time, lines: lines, codes: CCDAValues.codes(item.child("code")),
            status: item.child("statusCode")?["code"], entry: item)
    }

    /// A Coverage Activity and its Policy Activities (one record each: the payer, member and group ids).
    mutating func coverage(_ act: XMLNode) {
        let policies = act.all("entryRelationship").compactMap { $0.child("act") }
        for policy in policies.isEmpty ? [act] : policies {
            let payer = policy.at("performer", "assignedEntity", "representedOrganization", "name").flatMap { CCDAValues.clean($0.allText) }
            let kind = CCDAValues.name(policy.child("code"), narrative: narrative)
            guard let title = payer ?? kind else { skip("a payer", "it names no payer", policy); continue }
            let member = policy.all("participant").first { $0["typeCode"] == "COV" }?.at("participantRole", "id")?["extension"]
            var lines = line("Payer", payer)
            lines += line("Coverage", kind)
            lines += line("Member id", member)
            lines += line("Group", policy.child("id")?["extension"])
            add(folder: "insurance", title: title, time: CCDAValues.time(policy.child("effectiveTime")), lines: lines,
                codes: CCDAValues.codes(policy.child("code")), status: policy.child("statusCode")?["code"], distinguishing: member, entry: policy)
        }
    }

    // MARK: - Records

    func line(_ label: String, _ value: String?) -> [String] {
        guard let value, !value.isEmpty else { return [] }
        return ["- " + label + ": " + value]
    }

    mutating func add(folder: String, title: String, time: String?, lines: [String], codes: [ClinicalCode], status: String?,
                      distinguishing: String? = nil, entry: XMLNode) {
        var source = self.source
        source.entryID = CCDAValues.identifier(entry.child("id"))
        records.append(ImportedRecord(folder: folder, title: title, created: CCDAValues.created(time), lines: lines, codes: codes,
                                      status: status, distinguishing: distinguishing, source: source))
    }

    /// Whether an entry tells of something that happened: not negated (`negationInd`), not
    /// planned (a `moodCode` other than EVN: intended, requested, proposed). Else it is skipped.
    mutating func happened(_ entry: XMLNode, _ name: String, negated: String, planned: String) -> Bool {
        if entry["negationInd"] == "true" {
            skip(name, negated + " (negationInd)", entry)
            return false
        }
        if let mood = entry["moodCode"], mood != "EVN" {
            skip(name, "planned (moodCode \(mood)), " + planned, entry)
            return false
        }
        return true
    }

    mutating func skip(_ what: String, _ reason: String, _ entry: XMLNode) {
        skipped.append(SkippedItem(file: file, what: what, reason: reason + " (line \(entry.line))"))
    }
}

import Foundation
