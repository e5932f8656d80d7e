/// Reads a C-CDA R2.1 document (CCD, discharge summary, referral, progress note…): its header
/// (organisation, ids, author, patient) and the entries of the structured sections it knows,
/// found by section templateId or LOINC section code, each made a record (`CCDASections`).
enum CCDAReader {
    static let namespace = "urn:hl7-org:v3"

    /// Whether `root` is a C-CDA document.
    static func isClinicalDocument(_ root: XMLNode) -> Bool { root.name == "ClinicalDocument" && root.namespace == namespace }

    static func read(_ root: XMLNode, file: String, bytes: [UInt8], importDate: String) -> SourceDocument {
        let custodian = root.at("custodian", "assignedCustodian", "representedCustodianOrganization", "name")
        let authorOrganisation = root.at("author", "assignedAuthor", "representedOrganization", "name")
        let organisation = (custodian ?? authorOrganisation).flatMap { CCDAValues.clean($0.allText) } ?? "Unknown organisation"
        let author = CCDAValues.personName(root.at("author", "assignedAuthor", "assignedPerson", "name"))
            ?? authorOrganisation.flatMap { CCDAValues.clean($0.allText) }
        let setID = CCDAValues.identifier(root.child("setId"))
        let version = root.child("versionNumber")?["value"]
        let source = ImportSource(organisation: organisation, format: SourceFormat.ccda.rawValue,
                                  documentID: CCDAValues.identifier(root.child("id")),
                                  version: setID.map { $0 + (version.map { " v" + $0 } ?? "") } ?? version.map { "v" + $0 },
                                  author: author, entryID: nil, importDate: importDate,
                                  documentDate: CCDAValues.created(root.child("effectiveTime")?["value"]))
        let patientNode = root.at("recordTarget", "patientRole", "patient")
        let patient = PatientFacts(name: CCDAValues.personName(patientNode?.child("name")),
                                   birthDate: CCDAValues.created(patientNode?.child("birthTime")?["value"]).map { String($0.prefix(10)) })
        let title = root.child("title").flatMap { CCDAValues.clean($0.allText) }
            ?? CCDAValues.name(root.child("code"), narrative: nil) ?? "Clinical document"
        var document = SourceDocument(file: file, format: .ccda, bytes: bytes, title: title, organisation: organisation,
                                      created: CCDAValues.created(root.child("effectiveTime")?["value"]), patient: patient, source: source)
        for section in sections(of: root) {
            var reader = CCDASections(section: section, file: file, source: source)
            guard let kind = CCDASections.Kind(section: section) else {
                let heading = section.child("title").flatMap { CCDAValues.clean($0.allText) } ?? "Section"
                if let text = section.child("text").map(narrativeMarkdown), !text.isEmpty { document.narrative.append((heading, text)) }
                if !section.all("entry").isEmpty {
                    document.skipped.append(SkippedItem(file: file, what: heading, reason: "a section binder does not map (kept in the document)"))
                }
                continue
            }
            reader.read(kind)
            document.records += reader.records
            document.skipped += reader.skipped
        }
        return document
    }

    /// Every `section` of the structured body, nested ones included.
    static func sections(of root: XMLNode) -> [XMLNode] {
        guard let body = root.at("component", "structuredBody") else { return [] }
        var found: [XMLNode] = []
        var stack = body.all("component").compactMap { $0.child("section") }.reversed().map { $0 }
        while let section = stack.popLast() {
            found.append(section)
            stack.append(contentsOf: section.all("component").compactMap { $0.child("section") }.reversed())
        }
        return found
    }

    /// A section's narrative block as markdown text: paragraphs and list items on their own lines,
    /// table rows as ` | `-joined cells.
    static func narrativeMarkdown(_ text: XMLNode) -> String {
        var lines: [String] = []
        func walk(_ node: XMLNode, depth: Int) {
            guard depth < ImportLimits.maximumDepth else { return }
            switch node.name {
            // A paragraph or caption is one line whatever it holds; `content` only when it holds no elements.
            case "paragraph", "caption":
                if let line = CCDAValues.collapsed(node.allText) { lines.append(line) }
            case "content" where node.children.isEmpty:
                if let line = CCDAValues.collapsed(node.allText) { lines.append(line) }
            case "item":
                if let line = CCDAValues.collapsed(node.allText) { lines.append("- " + line) }
            case "tr":
                let cells = node.children.map { CCDAValues.collapsed($0.allText) ?? "" }
                if cells.contains(where: { !$0.isEmpty }) { lines.append(cells.joined(separator: " | ")) }
            default:
                let own = CCDAValues.collapsed(node.text)
                if let own, node.children.isEmpty || depth == 0 { lines.append(own) }
                for child in node.children { walk(child, depth: depth + 1) }
            }
        }
        walk(text, depth: 0)
        return lines.joined(separator: "\n")
    }
}
