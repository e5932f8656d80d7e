import BinderFormat

/// How a binder's git paths and the names the mount shows map to each other, both ways: the
/// one place that spells the rule (docs/DESIGN.md, "Names"; rows of
/// `Tests/BinderCoreTests/NamingTableTests.swift`). A record `X.md` is the document `X.json`,
/// its children the folder `X.children/`; an attachment `Y.pdf` is the sidecar `Y.pdf.enc`
/// named by a reference (`Y.json`, or a child); a folder's display data is `.meta.json`; names
/// hold at most 255 bytes of UTF-8 shown and stored. No other file of the sources spells
/// `.json`, `.enc` or `.children` (`NamingTableTests.testNoOtherSourceSpellsTheSuffixes`).
///
/// A value type without instances: every rule is a pure function of names, so that readers
/// (the view, `verify`, export, `binder log`) and writers (the planner, merges, shares, import)
/// cannot disagree.
public enum BinderNaming {
    /// A document's git name ends so: `X.json`.
    public static let documentExtension = ".json"
    /// A sidecar's git name ends so: `Y.pdf.enc`.
    public static let sidecarExtension = ".enc"
    /// A folder's encrypted display data (not a document).
    public static let folderMetadataName = ".meta.json"
    /// The view's folder of a record's children: `X.children/`.
    public static let childrenSuffix = ".children"
    /// A record's view name ends so: `X.md`.
    public static let markdownExtension = ".md"
    /// The record every binder has, in git and in the view.
    public static let patientInfoPath = "patient-info" + documentExtension
    public static let patientInfoViewPath = "patient-info" + markdownExtension
    /// NAME_MAX: for the names shown, and for the names they are stored under in git (a work
    /// tree on disk, the apps' clones), so `X.md` may have 253 bytes (`X.json`) and an
    /// attachment 251 (`X.ext.enc`).
    public static let maximumBytes = 255

    // MARK: Records: `X.md` <-> `X.json`

    /// Whether a view name (or path) is a record's: `X.md`.
    public static func isRecordName(_ viewName: String) -> Bool { viewName.hasSuffix(markdownExtension) }

    /// `X` for `X.md`; nil for any other name.
    public static func recordStem(_ viewName: String) -> String? {
        isRecordName(viewName) ? String(viewName.dropLast(markdownExtension.count)) : nil
    }

    /// `stem.md`: the view name of the record whose document is `stem.json`.
    public static func recordName(stem: String) -> String { stem + markdownExtension }

    /// Whether a git name (or path) ends as a document's, `.meta.json` included.
    public static func hasDocumentExtension(_ gitName: String) -> Bool { gitName.hasSuffix(documentExtension) }

    /// Whether a git path is a document's: `X.json`, not a folder's `.meta.json`.
    public static func isDocumentPath(_ gitPath: String) -> Bool {
        hasDocumentExtension(gitPath) && !isFolderMetadata(gitPath)
    }

    /// `X` for `X.json` (also for a path); nil for any other name.
    public static func documentStem(_ gitName: String) -> String? {
        hasDocumentExtension(gitName) ? String(gitName.dropLast(documentExtension.count)) : nil
    }

    /// `stem.json` (a name or a path without its extension).
    public static func documentName(stem: String) -> String { stem + documentExtension }

    /// `X.json` for the record `X.md` (also for a path). A name not a record's keeps its
    /// extension's place: `X.json` for `X.pdf` too, the name its reference wants.
    public static func documentName(shownAs viewName: String) -> String {
        documentName(stem: recordStem(viewName) ?? splitExtension(viewName).stem)
    }

    /// `X.md` for `X.json` (also for a path).
    public static func recordName(ofDocument gitName: String) -> String {
        recordName(stem: documentStem(gitName) ?? gitName)
    }

    /// The document a path of the view or of git names, for `binder log`: `X.json` as given;
    /// `X.md` → `X.json`; an attachment `Y.pdf` → `Y.json` (its reference); the extension is
    /// taken from the last component only.
    public static func documentPath(ofViewPath path: String) -> String {
        if hasDocumentExtension(path) { return path }
        let name = path.split(separator: "/").last.map(String.init) ?? path
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return documentName(stem: path) }
        return documentName(stem: String(path.dropLast(name.distance(from: dot, to: name.endIndex))))
    }

    // MARK: Folders: `.meta.json`, `X.children/`

    /// Whether a git path names a folder's display data (`.meta.json`, in any folder).
    /// Compared as bytes: the listing asks this of every document of a folder.
    public static func isFolderMetadata(_ gitPath: String) -> Bool {
        let bytes = gitPath.utf8, name = folderMetadataName.utf8
        guard bytes.count >= name.count, bytes.suffix(name.count).elementsEqual(name) else { return false }
        return bytes.count == name.count || bytes[bytes.index(bytes.endIndex, offsetBy: -name.count - 1)] == UInt8(ascii: "/")
    }

    /// `folder/.meta.json` (`.meta.json` at the root).
    public static func folderMetadataPath(in folder: String) -> String {
        folder.isEmpty ? folderMetadataName : folder + "/" + folderMetadataName
    }

    /// `X.children` for a record shown as `X.md` (or a child shown as `X.<ext>`).
    public static func childrenFolderName(of shownName: String) -> String {
        childrenFolderName(stem: splitExtension(shownName).stem)
    }

    /// `stem.children`.
    public static func childrenFolderName(stem: String) -> String { stem + childrenSuffix }

    /// Whether a name is a children folder's: `X.children`.
    public static func isChildrenFolder(_ name: String) -> Bool { name.hasSuffix(childrenSuffix) }

    /// `X` for `X.children`; nil for any other name.
    public static func childrenOwnerStem(_ folderName: String) -> String? {
        isChildrenFolder(folderName) ? String(folderName.dropLast(childrenSuffix.count)) : nil
    }

    // MARK: Sidecars: `Y.pdf` <-> `Y.pdf.enc`

    /// Whether a git name (or path) is a sidecar's: `*.enc`.
    public static func isSidecarName(_ gitName: String) -> Bool { gitName.hasSuffix(sidecarExtension) }

    /// `name.enc`: where the file shown as `name` keeps its bytes.
    public static func sidecarName(of fileName: String) -> String { fileName + sidecarExtension }

    /// `name.enc` with `name` cut (`fitting`) so that the whole holds `maximumBytes`: for a
    /// sidecar whose name is binder's own (a child's, shown under another name).
    public static func fittedSidecarName(of name: String) -> String {
        sidecarName(of: fitting(name, maxBytes: maximumBytes - sidecarExtension.utf8.count))
    }

    /// `Y-2.pdf.enc` for `Y.pdf.enc`: a sidecar's name numbered before its first dot, so that
    /// the attachment keeps its extension (doctor notes brought home beside a name taken).
    public static func sidecarSuffixed(_ name: String, _ n: Int) -> String {
        let dot = name.firstIndex(of: ".") ?? name.endIndex
        return "\(name[..<dot])-\(n)\(name[dot...])"
    }

    /// `Y.pdf` for `Y.pdf.enc`; nil for any other name.
    public static func sidecarStem(_ gitName: String) -> String? {
        isSidecarName(gitName) ? String(gitName.dropLast(sidecarExtension.count)) : nil
    }

    /// The sidecar a document or child refers to: an `attachment_ref` whose value is a `*.enc`
    /// name (whether it is a plain name in the same folder is the reader's check).
    public static func sidecarReference(of document: MedicalDocument) -> String? {
        document.type == "attachment_ref" && isSidecarName(document.value) ? document.value : nil
    }

    /// Whether an `attachment_ref`'s value names a sidecar the view shows as its attachment: a
    /// plain `*.enc` file name in the document's folder. A reference to anything else
    /// (`../x.enc`, `sub/x.enc`, `notes.txt`) is not followed, so deleting or moving the
    /// document never touches another file.
    public static func isSidecarReference(_ value: String) -> Bool {
        isSidecarName(value) && unsafeNameReason(value, atRoot: false) == nil
    }

    /// The sidecar names an `attachment_ref` document or any of its descendants refers to
    /// (`isSidecarReference`), as written.
    public static func sidecarReferences(_ document: MedicalDocument) -> [String] {
        attachmentValues(document).filter(isSidecarReference)
    }

    /// Every `attachment_ref` value in a document and its descendants, as written.
    static func attachmentValues(_ document: MedicalDocument) -> [String] {
        var values: [String] = []
        if document.type == "attachment_ref", !document.value.isEmpty { values.append(document.value) }
        for child in document.children { values += attachmentValues(child) }
        return values
    }

    /// The longest name a new file shown as `name` in a folder is stored under: `X.json` for a
    /// record `X.md`, its sidecar `name.enc` for anything else.
    public static func storedName(shownAs name: String) -> String {
        isRecordName(name) ? documentName(shownAs: name) : sidecarName(of: name)
    }

    /// Whether a git name fits `maximumBytes`.
    public static func fitsStored(_ gitName: String) -> Bool { gitName.utf8.count <= maximumBytes }

    /// Refuses a name whose git name (`X.json`, `X.ext.enc`) would be over 255 bytes.
    static func checkStored(_ gitName: String, path: String) throws(WriteError) {
        guard fitsStored(gitName) else { throw .nameTooLong(path) }
    }

    /// Refuses a name the mount cannot store: not a file name, over 255 bytes, `.git`, or in
    /// (or being) binder's own `.binder` folder.
    static func check(_ name: String, in parentPath: String, path: String) throws(WriteError) {
        guard isSafeName(name) else { throw .invalid(path: path, reason: "not a usable file name") }
        guard name.utf8.count <= maximumBytes else { throw .nameTooLong(path) }
        if name.lowercased() == ".git" {
            throw .notPermitted(path: path, reason: "'.git' is git's own name and cannot be stored in a binder")
        }
        if parentPath.isEmpty && name == BinderView.controlDirectory || BinderView.isControlPath(parentPath) {
            throw .notPermitted(path: path, reason: "\(BinderView.controlDirectory) is binder's own folder")
        }
    }

    // MARK: Names two sources want, and names cut to fit

    /// `name-2.ext` for `name.ext`; `name-2` for `name`; dotfiles keep their leading dot.
    public static func suffixed(_ name: String, _ n: Int) -> String {
        let (stem, ext) = splitExtension(name)
        return "\(stem)-\(n)\(ext)"
    }

    /// `name` if it is free, else the first of `name-2`, `name-3`… (`suffixed`) that is: the
    /// one rule for names two sources want, in listings and in the timeline.
    public static func firstFree(_ name: String, isTaken: (String) -> Bool) -> String {
        var candidate = name
        var n = 2
        while isTaken(candidate) {
            candidate = suffixed(name, n)
            n += 1
        }
        return candidate
    }

    /// ("photo", ".jpg") for "photo.jpg"; ("x", "") for "x"; (".env", "") for ".env".
    public static func splitExtension(_ name: String) -> (stem: String, ext: String) {
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return (name, "") }
        return (String(name[..<dot]), String(name[dot...]))
    }

    /// `name` cut to at most `maxBytes` of UTF-8 (whole characters), its extension kept.
    public static func fitting(_ name: String, maxBytes: Int) -> String {
        guard name.utf8.count > maxBytes else { return name }
        let (stem, ext) = splitExtension(name)
        let keep = max(0, maxBytes - (ext.utf8.count <= maxBytes / 2 ? ext.utf8.count : 0))
        var cut = ""
        for character in stem where cut.utf8.count + String(character).utf8.count <= keep { cut.append(character) }
        let out = ext.utf8.count <= maxBytes / 2 ? cut + ext : cut
        return out
    }

    /// Why `name` cannot be a file name in the view (nil: it can): the same rule for names
    /// from git and names the view makes, which are then hidden. At the root, `.binder` too:
    /// an attachment shown by its sidecar's name (`.binder.enc`) would stand where the views are.
    public static func unsafeNameReason(_ name: String, atRoot: Bool) -> String? {
        if name.isEmpty { return "empty" }
        if name == "." || name == ".." { return "'\(name)', which leads out of its folder" }
        if name.utf8.contains(UInt8(ascii: "/")) || name.utf8.contains(0) { return "not a single file name (it holds '/' or NUL)" }
        if name.utf8.count > maximumBytes { return "\(name.utf8.count) bytes long; file names are limited to \(maximumBytes)" }
        if name.utf8.count == 4, name.lowercased() == ".git" { return "'\(name)', git's own folder" }
        if atRoot && name == ".binder" { return "'.binder', binder's status folder" }
        return nil
    }

    /// A single path component that is safe to show: not empty, no '/', no NUL, not . or ..
    public static func isSafeName(_ name: String) -> Bool {
        !name.isEmpty && name != "." && name != ".." && !name.utf8.contains(UInt8(ascii: "/")) && !name.utf8.contains(0)
    }

    // MARK: Children and attachments shown

    /// A sidecar's view name: its name without `.enc`, given the format's extension if it has none.
    public static func attachmentName(sidecar: String, format: String?) -> String {
        var base = sidecarStem(sidecar) ?? sidecar
        if splitExtension(base).ext.isEmpty, let format, !format.isEmpty {
            base += "." + AttachmentFormats.fileExtension(format: format)
        }
        return base
    }

    /// The name of child `index` (0-based) of a document: a name binder stored when it made
    /// the child (`metadata.fileName`), else `NN-<what it is>` with the right extension.
    public static func childName(_ child: MedicalDocument, index: Int, count: Int, sidecar: String?) -> String {
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

    public static func isInlineAttachment(_ doc: MedicalDocument) -> Bool {
        doc.type == "attachment" || doc.metadata["encoding"]?.stringValue == "base64" && doc.type != "attachment_ref"
    }

    /// "doctor_note" -> "doctor-note": lowercase ASCII letters and digits joined by hyphens.
    public static func slug(_ text: String) -> String {
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

    // MARK: Scratch names

    /// Whether a name is an editor's or tool's scratch file, kept in memory and never
    /// committed (docs/PRODUCT.md, "Writing through the mount").
    public static func isScratch(_ name: String) -> Bool {
        if name.hasPrefix(".") || name.hasPrefix("#") || name.hasSuffix("~") { return true }   // .x.swp .#x #x# x~ .goutputstream-* rsync .x.XXXXXX
        if name == "4913" || name.hasSuffix(".swp") || name.hasSuffix(".swx") || name.hasSuffix(".tmp") { return true }
        // sed -i writes sedXXXXXX beside the file (six of [A-Za-z0-9]), then renames it over the
        // file. Six lowercase letters are taken for a word ("sedatives", "sedentary"): a file
        // kept in memory is lost at unmount, while a sed temporary file taken for a record (one
        // run in 190) only costs a commit more.
        let suffix = name.utf8.dropFirst(3)
        let lower = UInt8(ascii: "a")...UInt8(ascii: "z"), upper = UInt8(ascii: "A")...UInt8(ascii: "Z"), digit = UInt8(ascii: "0")...UInt8(ascii: "9")
        if name.utf8.count == 9, name.hasPrefix("sed"), suffix.allSatisfy({ lower ~= $0 || upper ~= $0 || digit ~= $0 }),
           suffix.contains(where: { !(lower ~= $0) }) {
            return true
        }
        return false
    }
}
