import BinderCore
import BinderFormat
import Foundation

/// What `binder export --format fhir` adds for an import to give its records back: each
/// resource's record path in the view, and on an attachment's DocumentReference the record it
/// belongs to (identifiers of binder's own systems); the record's markdown is its first note
/// (a DocumentReference's `text/markdown` content for other types).
enum BinderExportMarks {
    static let recordPathSystem = "urn:binder:record-path"
    static let attachmentOfSystem = "urn:binder:attachment-of"

    /// The value of the resource's identifier of `system`.
    static func identifier(_ resource: JSONObject, system: String) -> String? {
        FHIRValues.array(resource["identifier"]).lazy.compactMap(\.objectValue)
            .first { FHIRValues.string($0["system"]) == system }.flatMap { $0["value"]?.stringValue }
    }

    /// `path` when binder could have written it as a record's view path (folders, then `X.md`;
    /// no empty or dot-led part, none over 200 bytes, no control characters): a path from a
    /// file is never trusted further.
    static func safeRecordPath(_ path: String) -> String? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count >= 2, BinderNaming.isRecordName(path), path.utf8.count <= 1000,
              parts.allSatisfy({ !$0.isEmpty && !$0.hasPrefix(".") && $0.utf8.count <= 200 && !$0.contains(where: \.isNewline) }),
              !path.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else { return nil }
        return path
    }

    /// The record a resource of binder's export stands for: its path, folder and markdown body.
    static func record(of resource: JSONObject, title: String) -> (path: String, folder: String, body: String)? {
        guard let path = identifier(resource, system: recordPathSystem).flatMap(safeRecordPath) else { return nil }
        let folder = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        var body = FHIRValues.array(resource["note"]).first?.objectValue?["text"]?.stringValue ?? ""
        if FHIRValues.string(resource["resourceType"]) == "DocumentReference", let markdown = markdown(of: resource) {
            let heading = "# " + title + "\n\n"
            body = markdown.hasPrefix(heading) ? String(markdown.dropFirst(heading.count)) : markdown
        }
        return (path, folder, body)
    }

    static func isMarkdown(_ attachment: JSONValue) -> Bool {
        FHIRValues.string(attachment.objectValue?["contentType"])?.lowercased().hasPrefix("text/markdown") == true
    }

    /// The text of a DocumentReference's markdown content.
    static func markdown(of resource: JSONObject) -> String? {
        let forms = FHIRValues.array(resource["content"]).compactMap { $0.objectValue?["attachment"] }
        guard let form = forms.first(where: isMarkdown), let data = form.objectValue?["data"]?.stringValue,
              let bytes = Data(base64Encoded: data, options: .ignoreUnknownCharacters) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The day a record of binder's export was created: its markdown's `creation` (a
    /// DocumentReference's `date` is when it was last changed).
    static func created(of resource: JSONObject) -> JSONValue? {
        let forms = FHIRValues.array(resource["content"]).compactMap { $0.objectValue?["attachment"] }
        return forms.first(where: isMarkdown)?.objectValue?["creation"]
    }
}
