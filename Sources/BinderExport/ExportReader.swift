import BinderCore
import BinderFormat
import Foundation

/// What to export: the whole binder, or records and folders named as in the mount, narrowed by
/// date and category.
public struct ExportSelection: Sendable {
    /// View paths (`visits`, `labs/2025-02-25-lipid-panel.md`); empty for everything.
    public let paths: [String]
    /// `YYYY-MM-DD`, inclusive, compared with a record's `created` (else `updated`) day in UTC.
    public let since: String?
    public let until: String?
    /// Top-level folders (`labs`), or their record type (`lab`), any case; empty for all.
    public let categories: [String]
    /// `paths` as a set, and every folder above one of them: what lets the walk skip, without
    /// reading them, the records and folders no path names (1,000 records picked from a folder
    /// of 100,000 must not decrypt the other 99,000).
    private let selectedPaths: Set<String>
    private let foldersAboveSelected: Set<String>

    public init(paths: [String] = [], since: String? = nil, until: String? = nil, categories: [String] = []) {
        self.paths = paths.map(ExportSelection.normalize)
        self.since = since
        self.until = until
        self.categories = categories
        // `.` (the whole binder) normalizes to "": no narrowing by path.
        selectedPaths = self.paths.contains("") ? [] : Set(self.paths)
        foldersAboveSelected = Set(self.paths.flatMap { ExportSelection.foldersAbove($0) })
    }

    /// `a/b/c.md` → `a`, `a/b`.
    static func foldersAbove(_ path: String) -> [String] {
        let parts = path.split(separator: "/")
        return parts.indices.dropLast().map { parts[...$0].joined(separator: "/") }
    }

    /// `YYYY-MM-DD`, a real day.
    public static func isDay(_ text: String) -> Bool {
        text.count == 10 && Timestamps.parse(text) != nil && text.utf8.allSatisfy { (0x30...0x39).contains($0) || $0 == 0x2D }
    }

    static func normalize(_ path: String) -> String {
        path.split(separator: "/", omittingEmptySubsequences: true).filter { $0 != "." }.joined(separator: "/")
    }

    /// Whether the file at `path` passes the selection's paths and categories (what can be
    /// decided before reading it): it is named, or its name without `.md` is, or a folder above it.
    func mayInclude(file path: String) -> Bool {
        if !selectedPaths.isEmpty {
            let named = selectedPaths.contains(path) || BinderNaming.recordStem(path).map(selectedPaths.contains) == true
            guard named || isBelowSelected(path) else { return false }
        }
        return categoryIncludes(topFolderOf: path)
    }

    /// Whether any file below the folder `path` can pass `mayInclude(file:)`.
    func mayInclude(folder path: String) -> Bool {
        if !selectedPaths.isEmpty {
            let onTheWay = selectedPaths.contains(path) || foldersAboveSelected.contains(path)
            guard onTheWay || isBelowSelected(path) else { return false }
        }
        return categoryIncludes(topFolderOf: path + "/")
    }

    /// Whether a folder above `path` is selected. Asked for every file the walk meets, so it
    /// looks each prefix up in place rather than making the list of folders above.
    private func isBelowSelected(_ path: String) -> Bool {
        var slash = path.utf8.firstIndex(of: UInt8(ascii: "/"))
        while let end = slash {
            if selectedPaths.contains(String(path[..<end])) { return true }
            slash = path.utf8[path.utf8.index(after: end)...].firstIndex(of: UInt8(ascii: "/"))
        }
        return false
    }

    /// A record's category is its top-level folder (none for a file at the top).
    private func categoryIncludes(topFolderOf path: String) -> Bool {
        guard !categories.isEmpty else { return true }
        let folder = path.firstIndex(of: "/").map { path[..<$0].lowercased() } ?? ""
        let type = Categories.documentType(forFolder: folder)
        return categories.contains { $0.lowercased() == folder || ($0.lowercased() == type && type != Categories.defaultType) }
    }

    /// For the cover: what was asked for, in words.
    var summary: String {
        var parts: [String] = []
        if !paths.isEmpty { parts.append("paths: " + paths.joined(separator: ", ")) }
        if !categories.isEmpty { parts.append("categories: " + categories.joined(separator: ", ")) }
        if let since { parts.append("since \(since)") }
        if let until { parts.append("until \(until)") }
        return parts.isEmpty ? "all records" : parts.joined(separator: "; ")
    }

    func includes(_ record: ExportRecord) -> Bool {
        guard mayInclude(file: record.path) else { return false }
        if since != nil || until != nil {
            guard let day = record.day else { return false }
            if let since, day < since { return false }
            if let until, day > until { return false }
        }
        return true
    }
}

/// Why an export cannot be made; descriptions carry paths and reasons, never content.
public enum ExportError: Error, Sendable, CustomStringConvertible {
    case noSuchPath(String)
    case unreadable(path: String, reason: String)
    case badDate(String)
    case render(String)
    case write(path: String, reason: String)

    public var description: String {
        switch self {
        case .noSuchPath(let path): return "\(path): no such record or folder in the binder"
        case .unreadable(let path, let reason): return "\(path): cannot be read (\(reason))"
        case .badDate(let text): return "\(text): not a date (YYYY-MM-DD)"
        case .render(let why): return "cannot render the export: \(why)"
        case .write(let path, let reason): return "cannot write \(path): \(reason)"
        }
    }
}

/// Reads the records to export through `BinderView`, the model the mount serves: the same
/// names, children folders and attachments a person sees in the mounted folder.
public struct ExportReader {
    let view: BinderView

    public init(view: BinderView) { self.view = view }

    public func read(_ selection: ExportSelection, now: Date = Date()) throws -> ExportContent {
        for date in [selection.since, selection.until].compactMap({ $0 }) where !Self.isDay(date) {
            throw ExportError.badDate(date)
        }
        for path in selection.paths where (try? view.attributes(path)) == nil && (try? view.attributes(BinderNaming.recordName(stem: path))) == nil {
            throw ExportError.noSuchPath(path)
        }
        var patient = PatientSummary()
        if (try? view.attributes(BinderNaming.patientInfoViewPath)) != nil {
            let (metadata, markdown) = try document(BinderNaming.patientInfoViewPath)
            patient = PatientSummary(metadata: metadata, markdown: markdown)
        }
        var skipped = 0
        var byFolder: [String: [ExportRecord]] = [:]
        try walk("", selection: selection, skipped: &skipped) { record in
            guard selection.includes(record) else { return }
            byFolder[record.category, default: []].append(record)
        }
        let known = Categories.folderTypes.map(\.folder)
        let order = byFolder.keys.sorted { a, b in
            let ia = known.firstIndex(of: a.lowercased()) ?? Int.max, ib = known.firstIndex(of: b.lowercased()) ?? Int.max
            return ia != ib ? ia < ib : a.utf8.lexicographicallyPrecedes(b.utf8)
        }
        return ExportContent(patient: patient, categories: order.map { ExportCategory(folder: $0, records: byFolder[$0] ?? []) },
                             exportedAt: now, selection: selection.summary, skippedRawFiles: skipped)
    }

    static func isDay(_ text: String) -> Bool { ExportSelection.isDay(text) }

    /// Every record below `folder`, bytewise by path (dates first in the apps' names).
    /// Files and folders the selection's paths and categories leave out are not read.
    private func walk(_ folder: String, selection: ExportSelection, skipped: inout Int, _ visit: (ExportRecord) throws -> Void) throws {
        let entries = try list(folder)
        let names = Set(entries.map(\.name))
        for (name, attributes) in entries {
            let path = folder.isEmpty ? name : folder + "/" + name
            if attributes.kind == .directory {
                // A document's children are read with it.
                if let owner = BinderNaming.childrenOwnerStem(name), names.contains(BinderNaming.recordName(stem: owner)) { continue }
                if selection.mayInclude(folder: path) { try walk(path, selection: selection, skipped: &skipped, visit) }
                continue
            }
            guard attributes.kind == .file, selection.mayInclude(file: path) else { continue }
            if attributes.readOnly {
                skipped += 1
                continue
            }
            if path == BinderNaming.patientInfoViewPath { continue }
            if BinderNaming.isRecordName(name) {
                try visit(try record(path, childrenFolder: names.contains(BinderNaming.childrenFolderName(of: name))))
            } else {
                // An attachment on its own (a quick photo, a recording): a record holding it.
                let time = Timestamps.string(seconds: attributes.modified.seconds, nanoseconds: attributes.modified.nanoseconds)
                let attachment = ExportAttachment(name: name, bytes: try readAll(path))
                try visit(ExportRecord(path: path, title: name, type: "attachment", created: nil, updated: time,
                                       metadata: JSONObject(), body: "", children: [.attachment(attachment)]))
            }
        }
    }

    /// A `.md` file of the view and the children in its `.children` folder.
    private func record(_ path: String, childrenFolder: Bool) throws -> ExportRecord {
        let (metadata, markdown) = try document(path)
        let metadataObject = metadata ?? JSONObject()
        let name = String(path.split(separator: "/").last ?? "")
        let (title, body) = Self.title(markdown, fallback: metadataObject["title"]?.stringValue
            ?? Self.humanized(type: metadataObject["type"]?.stringValue, name: name))
        var record = ExportRecord(path: path, title: title, type: metadataObject["type"]?.stringValue ?? "",
                                  created: metadataObject["created"]?.stringValue, updated: metadataObject["updated"]?.stringValue,
                                  metadata: metadataObject, body: body, children: [])
        if childrenFolder {
            let folder = BinderNaming.childrenFolderName(of: path)
            let entries = try list(folder)
            let names = Set(entries.map(\.name))
            for (childName, attributes) in entries where attributes.kind == .file && !attributes.readOnly {
                let childPath = folder + "/" + childName
                if BinderNaming.isRecordName(childName) {
                    var child = try self.record(childPath, childrenFolder: names.contains(BinderNaming.childrenFolderName(of: childName)))
                    // Children the apps wrote carry only `created`: they take their parent's otherwise.
                    if child.created == nil { child.created = record.created }
                    record.children.append(.note(child))
                } else {
                    record.children.append(.attachment(ExportAttachment(name: childName, bytes: try readAll(childPath))))
                }
            }
        }
        return record
    }

    /// The first line when it is a heading (`# Title`, or `## Addendum` in a child) becomes the
    /// title and leaves the body; otherwise the fallback is the title and the body is whole.
    static func title(_ markdown: String, fallback: String) -> (title: String, body: String) {
        var rest = Substring(markdown)
        while let first = rest.first, first.isNewline || first == " " { rest = rest.dropFirst() }
        let lineEnd = rest.firstIndex(where: \.isNewline) ?? rest.endIndex
        let line = rest[..<lineEnd]
        let hashes = line.prefix(while: { $0 == "#" }).count
        if (1...6).contains(hashes), line.dropFirst(hashes).first == " " {
            let title = line.dropFirst(hashes).trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "#"))
                .trimmingCharacters(in: .whitespaces)
            if !title.isEmpty { return (title, String(rest[lineEnd...]).trimmingCharacters(in: .newlines)) }
        }
        return (fallback, markdown)
    }

    /// `doctor_note` → `Doctor note`; a file name without its date and extension otherwise.
    static func humanized(type: String?, name: String) -> String {
        if let type, !type.isEmpty, !Categories.folderTypes.contains(where: { $0.type == type }), type != Categories.defaultType {
            return ExportRecord.label(type)
        }
        var stem = BinderNaming.recordStem(name) ?? name
        if stem.count > 11, ExportReader.isDay(String(stem.prefix(10))), stem.dropFirst(10).first == "-" { stem = String(stem.dropFirst(11)) }
        return ExportRecord.label(stem)
    }

    // MARK: - Reading the view

    private func list(_ path: String) throws -> [(name: String, attributes: NodeAttributes)] {
        do { return try view.list(path) } catch { throw ExportError.unreadable(path: path, reason: "\(error)") }
    }

    private func document(_ path: String) throws -> (metadata: JSONObject?, markdown: String) {
        var bytes = try readAll(path)
        defer { bytes.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) } }
        do {
            let parsed = try FrontMatter.parse(bytes)
            return (parsed.metadata, parsed.value)
        } catch {
            // The view renders what it stores; an unparsable block is kept as markdown.
            return (nil, String(decoding: bytes, as: UTF8.self))
        }
    }

    /// A file's bytes through the view (decrypted in memory, as a reader of the mount gets them).
    private func readAll(_ path: String) throws -> [UInt8] {
        do {
            let size = try view.attributes(path).size
            let handle = try view.open(path)
            defer { view.release(handle: handle) }
            var bytes = [UInt8](repeating: 0, count: size)
            var offset = 0
            while offset < size {
                let count = try bytes.withUnsafeMutableBytes { (buffer) throws(ViewError) -> Int in
                    try view.read(handle: handle, offset: offset, into: UnsafeMutableRawBufferPointer(rebasing: buffer[offset...]))
                }
                if count == 0 { break }
                offset += count
            }
            return offset == size ? bytes : Array(bytes[..<offset])
        } catch {
            throw ExportError.unreadable(path: path, reason: "\(error)")
        }
    }
}
