import BinderCrypto
import BinderFormat
import BinderGit

/// What a save becomes (docs/DESIGN.md, "Writes"): `*.md` in a folder is a document, any other
/// file an attachment (`attachment_ref` + DEK sidecar); in `X.children/` both become children
/// of `X`. Front matter is the metadata as written; `updated` is the time the writer set, an
/// `updated:` the writer changed, or now.
extension WritePlanner {
    struct Edit {
        let planner: WritePlanner
        let path: String
        let name: String
        let content: [UInt8]
        /// The time the writer set on the file, if any.
        let modifiedTime: Timestamp?
        /// The same, as the apps write times (ISO 8601).
        var modified: String? { modifiedTime.map(WritePlanner.iso) }

        var isMarkdown: Bool { BinderNaming.isRecordName(name) }
        var binder: any StoredBinder { planner.binder }
        var now: String { planner.now }

        // MARK: Saving over what is shown

        func replace(_ current: Node) throws(WriteError) -> WritePlan {
            switch current.source {
            case .sidecar, .inlineAttachment: if try isStoredAlready(current) { return .none() }
            default: break
            }
            switch (current.source, current.owner) {
            case (.document, _):
                var document = try binder.document(current.gitPath)
                guard try apply(to: &document, isNew: false, isChild: false) else { return .none() }
                return WritePlan(changes: [try planner.documentChange(document, at: current.gitPath, path: path)], message: "Update entry")
            case (.sidecar, .document(let reference)?):
                var document = try binder.document(reference)
                document.metadata["originalSizeBytes"] = JSONValue(content.count)
                document.metadata["updated"] = .string(modified ?? now)
                var sidecarPath = current.gitPath
                if planner.isShared(sidecar: current.gitPath, by: reference) {
                    // Another record names the same sidecar: this one gets a sidecar of its own,
                    // named as it is shown, and the other keeps its bytes.
                    let (folder, _) = ViewPath.split(current.gitPath)
                    let sidecarName = BinderNaming.sidecarName(of: name)
                    sidecarPath = join(folder, sidecarName)
                    try BinderNaming.checkStored(sidecarName, path: path)
                    guard binder.entry(sidecarPath) == nil else { throw .exists(path) }
                    document.value = sidecarName
                }
                return WritePlan(changes: [.sidecar(gitPath: sidecarPath, content: content),
                                           try planner.documentChange(document, at: reference, path: path)],
                                 message: "Update attachment")
            case (.sidecar, nil):
                return WritePlan(changes: [.sidecar(gitPath: current.gitPath, content: content)], message: "Update attachment")
            case (.child(_, let indexPath), _), (.inlineAttachment(_, let indexPath), _), (.sidecar, .child(_, let indexPath)?):
                var documentPath = current.gitPath
                if case .child(let owner, _)? = current.owner { documentPath = owner }
                return try replaceChild(current, documentPath: documentPath, indexPath: indexPath)
            default:
                throw .readOnly(path)
            }
        }

        /// Whether an attachment is saved again as it is stored, with no other time set: a
        /// new sidecar (a new key, new ciphertext; an inline attachment made a sidecar) and a
        /// commit would change nothing a reader sees (`tar --overwrite`, `cp -p` out and back).
        private func isStoredAlready(_ attachment: Node) throws(WriteError) -> Bool {
            guard content.count == attachment.size, modifiedTime.map(attachment.modified.matches(set:)) ?? true else { return false }
            var stored = try binder.content(attachment, viewPath: path)
            defer { secureZero(&stored) }
            return stored == content
        }

        private func replaceChild(_ current: Node, documentPath: String, indexPath: [Int]) throws(WriteError) -> WritePlan {
            guard let index = indexPath.last else { throw .corrupt(path: path, reason: "not a child") }
            var document = try binder.document(documentPath)
            var extra: [PlannedChange] = []
            var changed = true
            try WritePlanner.modifyChild(&document, at: Array(indexPath.dropLast()), path: path) { (parent) throws(WriteError) in
                guard index < parent.children.count else { throw .corrupt(path: documentPath, reason: "child \(index) is gone") }
                if case .sidecar = current.source {
                    extra.append(.sidecar(gitPath: current.gitPath, content: content))
                    parent.children[index].metadata["originalSizeBytes"] = JSONValue(content.count)
                    parent.children[index].metadata["updated"] = .string(modified ?? now)
                } else if isMarkdown {
                    changed = try apply(to: &parent.children[index], isNew: false, isChild: true)
                } else {
                    // An inline attachment replaced: it becomes a sidecar, as new writes are.
                    let record = AttachmentRecord.child(fileName: name, documentPath: documentPath, size: content.count,
                                                        created: modified ?? now, taken: { binder.entry($0) != nil })
                    parent.children[index] = record.child
                    extra.append(.sidecar(gitPath: record.sidecarPath, content: content))
                }
                WritePlanner.settleName(of: &parent.children, at: index, shownAs: name)
            }
            guard changed || !extra.isEmpty else { return .none() }
            return WritePlan(changes: extra + [try planner.documentChange(document, at: documentPath, path: path)], message: "Update entry")
        }

        // MARK: New files

        func create(inFolder folder: String) throws(WriteError) -> WritePlan {
            let category = folder.isEmpty ? "binder" : PathBytes.first(folder).name
            if isMarkdown {
                let gitName = BinderNaming.documentName(shownAs: name)
                try BinderNaming.checkStored(gitName, path: path)
                let gitPath = join(folder, gitName)
                // `X.json` may hold the reference of an attachment shown under its sidecar's
                // name (`X.pdf`): it moves aside, as it is, and the record takes its place.
                var moved: [PlannedChange] = []
                if binder.entry(gitPath) != nil {
                    guard let aside = planner.referenceMovedAside(from: gitPath) else { throw .exists(path) }
                    moved = aside
                }
                var document = MedicalDocument(value: "", metadata: [:])
                _ = try apply(to: &document, isNew: true, isChild: false, defaultType: Categories.documentType(forFolder: folder))
                return WritePlan(changes: moved + [try planner.documentChange(document, at: gitPath, path: path)], message: "Add \(category) entry")
            }
            try BinderNaming.checkStored(BinderNaming.sidecarName(of: name), path: path)
            var record = AttachmentRecord.standalone(fileName: name, folder: folder, size: content.count, created: modified ?? now)
            guard binder.entry(record.sidecarPath) == nil else { throw .exists(path) }
            // The reference's name is not shown: when a record (`X.md`) holds `X.json`, it takes another.
            if binder.entry(record.documentPath) != nil {
                record.documentPath = planner.freeReferencePath(in: folder, stem: BinderNaming.splitExtension(name).stem)
            }
            return WritePlan(changes: [.sidecar(gitPath: record.sidecarPath, content: content),
                                       try planner.documentChange(record.document, at: record.documentPath, path: path)],
                             message: "Add attachment")
        }

        func create(childOf parent: Parent) throws(WriteError) -> WritePlan {
            var target = try planner.parentDocument(parent, path: path)
            var extra: [PlannedChange] = []
            let documentPath = target.documentPath
            try WritePlanner.modifyChild(&target.document, at: target.indexPath, path: path) { (owner) throws(WriteError) in
                if isMarkdown {
                    var child = MedicalDocument(value: "", metadata: [:])
                    _ = try apply(to: &child, isNew: true, isChild: true, defaultType: "addendum")
                    _ = WritePlanner.insertChild(child, into: &owner.children, shownAs: name)
                } else {
                    let record = AttachmentRecord.child(fileName: name, documentPath: documentPath, size: content.count,
                                                        created: modified ?? now, taken: { binder.entry($0) != nil })
                    _ = WritePlanner.insertChild(record.child, into: &owner.children, shownAs: name)
                    extra.append(.sidecar(gitPath: record.sidecarPath, content: content))
                }
            }
            return WritePlan(changes: extra + [try planner.documentChange(target.document, at: documentPath, path: path)],
                             message: target.isNew ? "Add entry" : "Update entry")
        }

        // MARK: Front matter

        /// Front matter -> metadata (kept from the previous version when the file has none),
        /// body -> value; `type` and `created` kept or made; `updated` as `updated(…)` says.
        /// False when the save changes nothing (the same bytes saved again).
        func apply(to document: inout MedicalDocument, isNew: Bool, isChild: Bool, defaultType: String? = nil) throws(WriteError) -> Bool {
            let parsed: (metadata: JSONObject?, value: String)
            do { parsed = try FrontMatter.parse(content) } catch { throw .invalid(path: path, reason: "\(error)") }
            let previous = document.metadata
            if !isNew, parsed.value == document.value, sameAsStored(parsed.metadata, previous) { return false }
            var metadata = parsed.metadata ?? previous
            // `attachment_ref` with a sidecar's name for its body would make this record show,
            // and on deletion remove, an attachment that is another record's.
            if !isChild, metadata["type"]?.stringValue == "attachment_ref", BinderNaming.isSidecarName(parsed.value) {
                throw .invalid(path: path, reason: "type attachment_ref is for attachments binder stores itself, not a record's front matter")
            }
            if metadata["type"]?.stringValue == nil {
                metadata["type"] = previous["type"] ?? .string(defaultType ?? Categories.defaultType)
            }
            if metadata["created"] == nil { metadata["created"] = previous["created"] ?? .string(now) }
            if let modifiedTime {
                // A time set on the file is the record's `updated`, unless what was written shows
                // it already (a restore sets each file's time to the one its front matter holds).
                let shownAlready = parsed.metadata != nil && (WritePlanner.shownTime(metadata)?.matches(set: modifiedTime) ?? false)
                if !shownAlready {
                    metadata["updated"] = .string(WritePlanner.iso(modifiedTime))
                }
            } else {
                metadata["updated"] = updated(written: parsed.metadata?["updated"], previous: previous["updated"],
                                              keepAbsent: isChild && (isNew || document.value.isEmpty && previous["updated"] == nil))
            }
            document.metadata = metadata
            document.value = parsed.value
            return true
        }

        /// Whether a save of the stored value with front matter `written` changes nothing: the
        /// same metadata (what it leaves out of `type`, `created` and `updated` is kept, as a
        /// change would keep it), and no time set on the file other than the one shown. Tools
        /// that copy a record out and back (`cp -p`, `rsync -a`, `tar --overwrite`) set the time
        /// they read; a file written without front matter keeps the stored metadata.
        private func sameAsStored(_ written: JSONObject?, _ previous: JSONObject) -> Bool {
            var metadata = written ?? previous
            for field in ["type", "created", "updated"] where metadata[field] == nil { metadata[field] = previous[field] }
            guard metadata == previous else { return false }
            guard let modifiedTime else { return true }
            return WritePlanner.shownTime(previous)?.matches(set: modifiedTime) ?? false
        }

        /// An `updated:` the writer changed (and that reads as a time); else now. A new child
        /// written without one is made without (the apps' children carry only `created`), and
        /// so is the first content of an empty child (the one made when `X.children/Y.children/`
        /// came before `Y.md`); a child changed later takes one, so that its time moves and
        /// backups (`rsync`, which compares sizes and times) see the change.
        private func updated(written: JSONValue?, previous: JSONValue?, keepAbsent: Bool) -> JSONValue? {
            if let written, written != previous, let text = written.stringValue, Timestamps.parse(text) != nil { return written }
            if keepAbsent && written == nil { return nil }
            return .string(now)
        }
    }

    /// The time a record with this metadata shows (`updated`, else `created`).
    static func shownTime(_ metadata: JSONObject) -> Timestamp? {
        for field in ["updated", "created"] {
            if let text = metadata[field]?.stringValue, let t = Timestamps.parse(text) {
                return Timestamp(seconds: t.seconds, nanoseconds: t.nanoseconds)
            }
        }
        return nil
    }

    /// An attachment's reference is named after its file (`X.json` for `X.pdf`), as a record
    /// is (`X.json` for `X.md`), but its name is never shown: when a record needs the name,
    /// the reference moves aside, as it is. The changes that move the reference at `gitPath`
    /// to a free name; nil when what is there is not an attachment's reference.
    func referenceMovedAside(from gitPath: String) -> [PlannedChange]? {
        guard let entry = binder.entry(gitPath), entry.kind == .blob,
              let document = try? binder.document(gitPath),
              BinderNaming.sidecarReference(of: document) != nil else { return nil }
        let (folder, name) = ViewPath.split(gitPath)
        let stem = BinderNaming.documentStem(name) ?? name
        return [.delete(gitPath: gitPath), .blob(gitPath: freeReferencePath(in: folder, stem: stem), id: entry.id)]
    }

    /// A name in `folder` for an attachment's reference that no entry holds: `stem-2.json`,
    /// `stem-3.json`… (a record saved later under that name moves it aside again).
    func freeReferencePath(in folder: String, stem: String) -> String {
        let fitted = BinderNaming.fitting(stem, maxBytes: BinderNaming.maximumBytes - 16)
        var n = 2
        while binder.entry(join(folder, BinderNaming.documentName(stem: "\(fitted)-\(n)"))) != nil { n += 1 }
        return join(folder, BinderNaming.documentName(stem: "\(fitted)-\(n)"))
    }

    /// The document a new child goes into, made (empty) when its `.children` folder was made
    /// before it: `X.children/` written before `X.md` (rsync, tar and cp restore in that order).
    struct ParentDocument {
        var documentPath: String
        var document: MedicalDocument
        /// Where in `document` the new child goes.
        var indexPath: [Int]
        var isNew: Bool
    }

    func parentDocument(_ parent: Parent, path: String) throws(WriteError) -> ParentDocument {
        switch parent {
        case .folder:
            throw .invalid(path: path, reason: "not a children folder")
        case .children(let documentPath, let indexPath):
            return ParentDocument(documentPath: documentPath, document: try binder.document(documentPath), indexPath: indexPath, isNew: false)
        case .childrenOfMissing(.folder(let folder), let stem):
            let gitPath = join(folder, BinderNaming.documentName(stem: stem))
            if binder.entry(gitPath) != nil {  // written meanwhile, or an attachment's record
                let document = try binder.document(gitPath)
                guard document.type != "attachment_ref" else {
                    throw .notPermitted(path: path, reason: "\(stem) is an attachment; attachments have no children")
                }
                return ParentDocument(documentPath: gitPath, document: document, indexPath: [], isNew: false)
            }
            let document = MedicalDocument(type: Categories.documentType(forFolder: folder), value: "", now: now)
            return ParentDocument(documentPath: gitPath, document: document, indexPath: [], isNew: true)
        case .childrenOfMissing(let outer, let stem):
            var target = try parentDocument(outer, path: path)
            let shown = BinderNaming.recordName(stem: stem)
            var index = 0
            let now = self.now
            try Self.modifyChild(&target.document, at: target.indexPath, path: path) { (owner) throws(WriteError) in
                if let existing = owner.children.indices.first(where: { Self.shownName(owner.children, $0) == shown }) {
                    index = existing
                    return
                }
                index = Self.insertChild(MedicalDocument(value: "", metadata: ["type": "addendum", "created": .string(now)]),
                                         into: &owner.children, shownAs: shown)
            }
            target.indexPath.append(index)
            return target
        }
    }

    /// The name child `index` is shown under (before names taken twice get `-2`).
    static func shownName(_ children: [MedicalDocument], _ index: Int) -> String {
        let child = children[index]
        return BinderNaming.childName(child, index: index, count: children.count, sidecar: BinderNaming.sidecarReference(of: child))
    }
}

/// The apps' form of an attachment (docs/FORMAT.md): an `attachment_ref` document naming a DEK
/// sidecar. Pure: the one place that knows the names and metadata, for the planner and
/// `BinderWriter` alike.
enum AttachmentRecord {
    /// A standalone attachment shown as `folder/fileName`: `folder/<stem>.json` and its sidecar
    /// `folder/<fileName>.enc`.
    static func standalone(fileName: String, folder: String, size: Int, created: String)
        -> (documentPath: String, sidecarPath: String, document: MedicalDocument) {
        let (stem, ext) = BinderNaming.splitExtension(fileName)
        let sidecarName = BinderNaming.sidecarName(of: fileName)
        let document = MedicalDocument(value: sidecarName, metadata: metadata(ext: ext, size: size, created: created))
        return (join(folder, BinderNaming.documentName(stem: stem)), join(folder, sidecarName), document)
    }

    /// An `attachment_ref` child of the document at `documentPath`, its sidecar beside that
    /// document (`<document stem>-<fileName>.enc`, or `-2`, `-3`… when `taken` says so).
    static func child(fileName: String, documentPath: String, size: Int, created: String,
                      taken: (String) -> Bool = { _ in false }) -> (sidecarPath: String, child: MedicalDocument) {
        let (folder, documentName) = ViewPath.split(documentPath)
        let documentStem = BinderNaming.documentStem(documentName) ?? documentName
        // The sidecar's name is binder's own (the child is shown under `fileName`): cut to fit
        // git's and disks' 255 bytes.
        func sidecar(_ name: String) -> String { BinderNaming.fittedSidecarName(of: documentStem + "-" + name) }
        var sidecarName = sidecar(fileName)
        var n = 2
        while taken(join(folder, sidecarName)) {
            sidecarName = sidecar(BinderNaming.suffixed(fileName, n))
            n += 1
        }
        var metadata = metadata(ext: BinderNaming.splitExtension(fileName).ext, size: size, created: created)
        // The name it is shown under in `X.children/` (see BinderNaming.childName).
        metadata["fileName"] = .string(fileName)
        return (join(folder, sidecarName), MedicalDocument(value: sidecarName, metadata: metadata))
    }

    static func metadata(ext: String, size: Int, created: String) -> JSONObject {
        let format = AttachmentFormats.format(forExtension: String(ext.dropFirst())) ?? String(ext.dropFirst())
        return ["type": "attachment_ref", "format": .string(format),
                "encoding": .string(AttachmentFormats.defaultEncoding(format: format)),
                "originalSizeBytes": JSONValue(size), "created": .string(created)]
    }
}
