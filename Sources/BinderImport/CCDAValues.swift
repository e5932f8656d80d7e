import BinderFormat

/// How C-CDA writes codes, names, dates and quantities, read from `XMLNode`s.
enum CCDAValues {
    /// Code systems by OID (HL7's), as the FHIR URIs records carry.
    static let codeSystems: [String: String] = [
        "2.16.840.1.113883.6.96": "http://snomed.info/sct",
        "2.16.840.1.113883.6.88": "http://www.nlm.nih.gov/research/umls/rxnorm",
        "2.16.840.1.113883.6.1": "http://loinc.org",
        "2.16.840.1.113883.12.292": "http://hl7.org/fhir/sid/cvx",
        "2.16.840.1.113883.6.90": "http://hl7.org/fhir/sid/icd-10-cm",
        "2.16.840.1.113883.6.3": "http://hl7.org/fhir/sid/icd-10",
        "2.16.840.1.113883.6.103": "http://hl7.org/fhir/sid/icd-9-cm",
        "2.16.840.1.113883.6.12": "http://www.ama-assn.org/go/cpt",
        "2.16.840.1.113883.6.285": "https://www.cms.gov/Medicare/Coding/HCPCSReleaseCodeSets",
        "2.16.840.1.113883.6.69": "http://hl7.org/fhir/sid/ndc",
        "2.16.840.1.113883.4.9": "http://fdasis.nlm.nih.gov",
        "2.16.840.1.113883.3.26.1.1": "http://ncithesaurus-stage.nci.nih.gov",
        "2.16.840.1.113883.3.221.5": "https://nahdo.org/sopt",
    ]

    /// People's names of the systems, for the body.
    static let systemNames: [String: String] = [
        "http://snomed.info/sct": "SNOMED CT", "http://www.nlm.nih.gov/research/umls/rxnorm": "RxNorm",
        "http://loinc.org": "LOINC", "http://hl7.org/fhir/sid/cvx": "CVX", "http://hl7.org/fhir/sid/icd-10-cm": "ICD-10-CM",
        "http://hl7.org/fhir/sid/icd-10": "ICD-10", "http://hl7.org/fhir/sid/icd-9-cm": "ICD-9-CM",
        "http://www.ama-assn.org/go/cpt": "CPT", "http://hl7.org/fhir/sid/ndc": "NDC", "http://fdasis.nlm.nih.gov": "UNII",
    ]

    /// The codes of a coded element (`code`, `value`): its own and its `translation`s.
    static func codes(_ element: XMLNode?) -> [ClinicalCode] {
        guard let element else { return [] }
        var found: [ClinicalCode] = []
        for node in [element] + element.all("translation") {
            guard node["nullFlavor"] == nil, let code = node["code"], !code.isEmpty, let oid = node["codeSystem"] else { continue }
            let system = codeSystems[oid] ?? "urn:oid:" + oid
            found.append(ClinicalCode(system: system, code: code, display: node["displayName"]))
        }
        return found
    }

    /// A coded element's name: `displayName`, else its `originalText` (or the narrative it
    /// references), else a translation's display name.
    static func name(_ element: XMLNode?, narrative: XMLNode?) -> String? {
        guard let element else { return nil }
        if let display = element["displayName"].flatMap(clean) { return display }
        if let original = element.child("originalText") {
            if let reference = original.child("reference")?["value"], reference.hasPrefix("#"),
               let text = narrative?.descendant(withID: String(reference.dropFirst()))?.allText, let cleaned = clean(text) { return cleaned }
            if let text = clean(original.allText) { return text }
        }
        return element.all("translation").lazy.compactMap { $0["displayName"].flatMap(clean) }.first
    }

    /// The text of an entry's narrative reference (`text/reference`), or its own text.
    static func text(_ element: XMLNode?, narrative: XMLNode?) -> String? {
        guard let element else { return nil }
        if let reference = element.child("reference")?["value"], reference.hasPrefix("#"),
           let text = narrative?.descendant(withID: String(reference.dropFirst()))?.allText { return clean(text) }
        return clean(element.allText)
    }

    /// A name or value: whitespace collapsed, at most 500 characters (a title, a table cell).
    static func clean(_ text: String) -> String? {
        collapsed(text).map { String($0.prefix(500)) }
    }

    /// Text with its whitespace collapsed, whole (a section's narrative).
    static func collapsed(_ text: String) -> String? {
        let collapsed = text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        return collapsed.isEmpty ? nil : collapsed
    }

    /// An HL7 TS (`20120806`, `201208061530-0500`) as a record's `created`: the day alone when
    /// the source gives no time or no zone (it stays that day everywhere), else the UTC time.
    static func created(_ ts: String?) -> String? {
        guard let ts, let parts = timeParts(ts) else { return nil }
        let day = String(format4(parts.year)) + "-" + two(parts.month) + "-" + two(parts.day)
        guard let hour = parts.hour, let zone = parts.zoneMinutes else { return day }
        var components = DateComponents()
        components.year = parts.year; components.month = parts.month; components.day = parts.day
        components.hour = hour; components.minute = parts.minute ?? 0; components.second = parts.second ?? 0
        components.timeZone = TimeZone(secondsFromGMT: zone * 60)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(secondsFromGMT: 0)!
        guard let date = calendar.date(from: components) else { return day }
        return Timestamps.string(from: date)
    }

    /// A TS for people: `2012-08-06`, `2012-08-06 15:30`, `2012-08`, `2012`.
    static func shown(_ ts: String?) -> String? {
        guard let ts, let parts = timeParts(ts) else { return nil }
        var text = format4(parts.year)
        if parts.precision >= 6 { text += "-" + two(parts.month) }
        if parts.precision >= 8 { text += "-" + two(parts.day) }
        if let hour = parts.hour { text += " " + two(hour) + ":" + two(parts.minute ?? 0) }
        return text
    }

    /// The time of an `effectiveTime`-like element: its `value`, else its `low`'s, else `center`.
    static func time(_ element: XMLNode?) -> String? {
        guard let element else { return nil }
        return element["value"] ?? element.child("low")?["value"] ?? element.child("center")?["value"]
    }

    struct TimeParts {
        var year: Int, month: Int, day: Int, precision: Int
        var hour: Int?, minute: Int?, second: Int?, zoneMinutes: Int?
    }

    static func timeParts(_ ts: String) -> TimeParts? {
        let bytes = Array(ts.utf8)
        var digits = 0
        while digits < bytes.count, (0x30...0x39).contains(bytes[digits]) { digits += 1 }
        guard digits >= 4 else { return nil }
        func number(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= digits else { return nil }
            return bytes[from..<(from + count)].reduce(0) { $0 * 10 + Int($1 - 0x30) }
        }
        guard let year = number(0, 4) else { return nil }
        let month = number(4, 2) ?? 1, day = number(6, 2) ?? 1
        guard Timestamps.day(year: year, month: month, day: day) != nil else { return nil }
        var parts = TimeParts(year: year, month: month, day: day, precision: min(digits, 8))
        if let hour = number(8, 2), hour < 24 {
            parts.hour = hour
            parts.minute = number(10, 2).flatMap { $0 < 60 ? $0 : nil }
            parts.second = number(12, 2).flatMap { $0 < 60 ? $0 : nil }
        }
        // The zone: ±HHMM after the digits (and any fraction).
        var index = digits
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            while index < bytes.count, (0x30...0x39).contains(bytes[index]) { index += 1 }
        }
        if index + 5 <= bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-"),
           bytes[(index + 1)..<(index + 5)].allSatisfy({ (0x30...0x39).contains($0) }) {
            let value = bytes[(index + 1)..<(index + 5)].reduce(0) { $0 * 10 + Int($1 - 0x30) }
            let minutes = (value / 100) * 60 + value % 100
            if minutes <= 14 * 60 { parts.zoneMinutes = bytes[index] == UInt8(ascii: "-") ? -minutes : minutes }
        }
        return parts
    }

    private static func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
    private static func format4(_ n: Int) -> String { String(repeating: "0", count: max(0, 4 - String(n).count)) + String(n) }

    /// A PQ, IVL_PQ, CD, ST… value as people read it ("7.2 %", "Positive", "120-140 mg/dL").
    static func quantity(_ element: XMLNode?, narrative: XMLNode?) -> String? {
        guard let element else { return nil }
        if let value = element["value"] {
            let unit = element["unit"].flatMap { $0 == "1" ? nil : $0 }
            return value + (unit.map { " " + $0 } ?? "")
        }
        if element.child("low") != nil || element.child("high") != nil {
            let low = quantity(element.child("low"), narrative: narrative), high = quantity(element.child("high"), narrative: narrative)
            switch (low, high) {
            case let (low?, high?): return low + " – " + high
            case let (low?, nil): return "≥ " + low
            case let (nil, high?): return "≤ " + high
            default: return nil
            }
        }
        if element["code"] != nil || element.child("originalText") != nil { return name(element, narrative: narrative) }
        return clean(element.allText)
    }

    /// A `name` element (PN, ON): its parts in the order written, prefixes and suffixes kept.
    static func personName(_ element: XMLNode?) -> String? {
        guard let element else { return nil }
        let parts = element.children.compactMap { clean($0.allText) }
        return clean(parts.isEmpty ? element.allText : parts.joined(separator: " "))
    }

    /// An `id` as `root` or `root^extension`.
    static func identifier(_ element: XMLNode?) -> String? {
        guard let element, element["nullFlavor"] == nil, let root = element["root"] else { return nil }
        return element["extension"].map { root + "^" + $0 } ?? root
    }
}

import Foundation
