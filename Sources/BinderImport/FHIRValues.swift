import BinderFormat
import Foundation

/// How FHIR R4 JSON writes codes, dates, quantities and references.
enum FHIRValues {
    static func string(_ value: JSONValue?) -> String? {
        guard let text = value?.stringValue else { return nil }
        return CCDAValues.clean(text)
    }

    static func object(_ value: JSONValue?) -> JSONObject? { value?.objectValue }
    static func array(_ value: JSONValue?) -> [JSONValue] { value?.arrayValue ?? [] }

    /// The codings of a CodeableConcept.
    static func codes(_ concept: JSONValue?) -> [ClinicalCode] {
        array(object(concept)?["coding"]).compactMap { coding in
            guard let object = coding.objectValue, let system = string(object["system"]), let code = string(object["code"]) else { return nil }
            return ClinicalCode(system: system, code: code, display: string(object["display"]))
        }
    }

    /// A CodeableConcept's name: `text`, else a coding's `display`.
    /// (A SMART Health Card gives codes alone, to keep its QR code small: then "CVX 207".)
    static func name(_ concept: JSONValue?) -> String? {
        guard let concept = object(concept) else { return nil }
        return string(concept["text"]) ?? array(concept["coding"]).lazy.compactMap { string($0.objectValue?["display"]) }.first
            ?? codes(.object(concept)).first.map { (CCDAValues.systemNames[$0.system] ?? $0.system) + " " + $0.code }
    }

    /// The first coding's code (statuses: `clinicalStatus`, `verificationStatus`).
    /// (DSTU2 writes some of these as a plain code string: that string.)
    static func code(_ concept: JSONValue?) -> String? {
        if let plain = concept?.stringValue { return string(.string(plain)) }
        return array(object(concept)?["coding"]).lazy.compactMap { string($0.objectValue?["code"]) }.first
    }

    /// A FHIR date or dateTime as a record's `created`: a day stays a day (`2012-08` → its first
    /// day), a time with a zone becomes UTC.
    static func created(_ value: JSONValue?) -> String? {
        guard let text = string(value), text.utf8.count >= 4 else { return nil }
        let digits = text.utf8.prefix(10)
        guard digits.prefix(4).allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        if text.utf8.count <= 10 {
            // FHIR's date is YYYY, YYYY-MM or YYYY-MM-DD: exactly four digits of year, two of each other.
            let parts = text.split(separator: "-", omittingEmptySubsequences: false)
            guard (1...3).contains(parts.count), parts[0].utf8.count == 4, parts.dropFirst().allSatisfy({ $0.utf8.count == 2 }),
                  let year = Int(parts[0]), let month = parts.count > 1 ? Int(parts[1]) : 1,
                  let day = parts.count > 2 ? Int(parts[2]) : 1 else { return nil }
            return Timestamps.day(year: year, month: month, day: day)
        }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return Timestamps.string(from: date) }
        formatter.formatOptions = [.withInternetDateTime]
        if let date = formatter.date(from: text) { return Timestamps.string(from: date) }
        return created(.string(String(text.prefix(10))))
    }

    /// A date for people: the day, with the time when there is one.
    static func shown(_ value: JSONValue?) -> String? {
        guard let text = string(value) else { return nil }
        return text.utf8.count > 10 ? String(text.prefix(16)).replacingOccurrences(of: "T", with: " ") : text
    }

    /// A Quantity ("7.2 %"), a CodeableConcept, a string, a boolean, a Range.
    static func value(of resource: JSONObject) -> String? {
        if let quantity = object(resource["valueQuantity"]) { return quantityText(quantity) }
        if let concept = resource["valueCodeableConcept"] { return name(concept) }
        if let text = string(resource["valueString"]) { return text }
        if let flag = resource["valueBoolean"]?.boolValue { return flag ? "yes" : "no" }
        if let number = resource["valueInteger"]?.numberText { return number }
        if let range = object(resource["valueRange"]) { return rangeText(range) }
        return nil
    }

    static func quantityText(_ quantity: JSONObject) -> String? {
        guard let number = quantity["value"]?.numberText else { return string(quantity["unit"]) }
        let unit = string(quantity["unit"]) ?? string(quantity["code"])
        return number + (unit.map { " " + $0 } ?? "")
    }

    static func rangeText(_ range: JSONObject) -> String? {
        let low = object(range["low"]).flatMap(quantityText), high = object(range["high"]).flatMap(quantityText)
        switch (low, high) {
        case let (low?, high?): return low + " – " + high
        case let (low?, nil): return "≥ " + low
        case let (nil, high?): return "≤ " + high
        default: return string(range["text"])
        }
    }

    /// The reference string of a Reference (`Medication/1`, `urn:uuid:…`).
    static func reference(_ value: JSONValue?) -> String? { string(object(value)?["reference"]) }

    /// `metadata.format` for a MIME type ("application/pdf" → pdf, "image/jpeg" → jpeg).
    static func format(contentType: String?) -> String {
        guard let contentType else { return "bin" }
        let subtype = contentType.split(separator: ";")[0].split(separator: "/").last.map(String.init) ?? ""
        switch subtype.lowercased() {
        case "plain": return "txt"
        case "xml", "hl7v3+xml", "cda+xml": return "xml"
        case "fhir+json", "json": return "json"
        default: return AttachmentFormats.format(forExtension: subtype) ?? "bin"
        }
    }
}
