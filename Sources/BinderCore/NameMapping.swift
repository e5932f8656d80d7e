import BinderFormat

/// How git names become view names, and back. See docs/DESIGN.md, "Names".
enum NameMapping {
    static let documentExtension = ".json"
    static let sidecarExtension = ".enc"
    static let folderMetadataName = ".meta.json"
    static let childrenSuffix = ".children"
    static let markdownExtension = ".md"

    /// `name-2.ext` for `name.ext`; `name-2` for `name`; dotfiles keep their leading dot.
    static func suffixed(_ name: String, _ n: Int) -> String {
        let (stem, ext) = splitExtension(name)
        return "\(stem)-\(n)\(ext)"
    }

    /// `name` if it is free, else the first of `name-2`, `name-3`… (`suffixed`) that is: the
    /// one rule for names two sources want, in listings and in the timeline.
    static func firstFree(_ name: String, isTaken: (String) -> Bool) -> String {
        var candidate = name
        var n = 2
        while isTaken(candidate) {
            candidate = suffixed(name, n)
            n += 1
        }
        return candidate
    }

    /// ("photo", ".jpg") for "photo.jpg"; ("x", "") for "x"; (".env", "") for ".env".
    static func splitExtension(_ name: String) -> (stem: String, ext: String) {
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return (name, "") }
        return (String(name[..<dot]), String(name[dot...]))
    }

    /// A sidecar's view name: its name without `.enc`, given the format's extension if it has none.
    static func attachmentName(sidecar: String, format: String?) -> String {
        var base = sidecar.hasSuffix(sidecarExtension) ? String(sidecar.dropLast(sidecarExtension.count)) : sidecar
        if splitExtension(base).ext.isEmpty, let format, !format.isEmpty {
            base += "." + AttachmentFormats.fileExtension(format: format)
        }
        return base
    }

    /// The name of child `index` (0-based) of a document: a name binder stored when it made
    /// the child (`metadata.fileName`), else `NN-<what it is>` with the right extension.
    static func childName(_ child: MedicalDocument, index: Int, count: Int, sidecar: String?) -> String {
        if let stored = child.metadata["fileName"]?.stringValue, isSafeName(stored) { return stored }
        let width = max(2, String(count).count)
        let number = String(repeating: "0", count: max(0, width - String(index + 1).count)) + String(index + 1)
        let format = child.metadata["format"]?.stringValue
        if let sidecar {
            let name = attachmentName(sidecar: sidecar, format: format)
            return "\(number)-\(name)"
        }
        if isInlineAttachment(child) {
            let ext = AttachmentFormats.fileExtension(format: format ?? "bin")
            return "\(number)-\(slug(child.type.isEmpty ? "attachment" : child.type)).\(ext)"
        }
        return "\(number)-\(slug(child.type.isEmpty ? "note" : child.type))\(markdownExtension)"
    }

    static func isInlineAttachment(_ doc: MedicalDocument) -> Bool {
        doc.type == "attachment" || doc.metadata["encoding"]?.stringValue == "base64" && doc.type != "attachment_ref"
    }

    /// "doctor_note" -> "doctor-note": lowercase ASCII letters and digits joined by hyphens.
    static func slug(_ text: String) -> String {
        var out = ""
        var pendingHyphen = false
        for scalar in text.lowercased().unicodeScalars {
            if scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar)) {
                if pendingHyphen && !out.isEmpty { out += "-" }
                out.unicodeScalars.append(scalar)
                pendingHyphen = false
            } else {
                pendingHyphen = true
            }
        }
        return out.isEmpty ? "entry" : out
    }

    /// `name` cut to at most `maxBytes` of UTF-8 (whole characters), its extension kept.
    static func fitting(_ name: String, maxBytes: Int) -> String {
        guard name.utf8.count > maxBytes else { return name }
        let (stem, ext) = splitExtension(name)
        let keep = max(0, maxBytes - (ext.utf8.count <= maxBytes / 2 ? ext.utf8.count : 0))
        var cut = ""
        for character in stem where cut.utf8.count + String(character).utf8.count <= keep { cut.append(character) }
        let out = ext.utf8.count <= maxBytes / 2 ? cut + ext : cut
        return out
    }

    /// A single path component that is safe to show: not empty, no '/', no NUL, not . or ..
    static func isSafeName(_ name: String) -> Bool {
        !name.isEmpty && name != "." && name != ".." && !name.utf8.contains(UInt8(ascii: "/")) && !name.utf8.contains(0)
    }
}
