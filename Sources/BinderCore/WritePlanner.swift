import BinderCrypto
import BinderFormat
import BinderGit

/// The write rules of the mount (docs/PRODUCT.md, "Writing through the mount"): what one
/// filesystem operation becomes in git, or why it is refused. Pure: it reads the binder through
/// `StoredBinder`, encrypts nothing, writes nothing and takes no lock, so every rule is a row
/// of a test table (Tests/BinderCoreTests/WriteRuleTests.swift).
struct WritePlanner {
    let binder: any StoredBinder
    let limits: WriteLimits
    /// The time of this save, as the apps write it (ISO 8601, milliseconds, UTC).
    let now: String
    /// What may change at all (a doctor's share: new records only).
    let policy: WritePolicy

    init(binder: any StoredBinder, limits: WriteLimits = WriteLimits(), now: String = Timestamps.now(),
         policy: WritePolicy = .everything) {
        self.binder = binder
        self.limits = limits
        self.now = now
        self.policy = policy
    }

    /// The patient's own record: every binder has one, so it cannot be deleted or moved away.
    static let patientInfo = BinderNaming.patientInfoViewPath

    // MARK: - Store (write + close)

    /// A file saved with `content`; `modified` is the time the writer set on it (cp -p, rsync,
    /// tar), which becomes the record's `updated`.
    func store(_ path: String, content: [UInt8], modified: Timestamp? = nil) throws(WriteError) -> WritePlan {
        let (parentPath, name) = ViewPath.split(path)
        try BinderNaming.check(name, in: parentPath, path: path)
        let limit = limits.maximum(for: path)
        guard content.count <= limit else { throw .tooLarge(path: path, bytes: content.count, limit: limit) }
        let edit = Edit(planner: self, path: path, name: name, content: content, modifiedTime: modified)
        if binder.node(path) != nil { try policy.checkChange(path) } else { try policy.checkNew(path) }
        if let current = binder.node(path) {
            if current.isDirectory { throw .isDirectory(path) }
            if current.isRaw { throw .readOnly(path) }
            return try edit.replace(current)
        }
        switch try parent(of: parentPath) {
        case .folder(let folder):
            return try edit.create(inFolder: folder)
        case let parent:
            return try edit.create(childOf: parent)
        }
    }

    /// Where the files of folder `viewPath` are stored: the folder the view shows there (a git
    /// folder the view hides, such as a `P.children` git folder beside a record with children,
    /// never receives anything).
    func parent(of viewPath: String) throws(WriteError) -> Parent {
        if viewPath.isEmpty { return .folder("") }
        if binder.pendingFolder(viewPath) != nil { return try childrenFolder(viewPath) }
        if BinderView.isControlPath(viewPath) { throw .readOnly(viewPath) }
        guard let node = binder.node(viewPath) else { throw .notFound(viewPath) }
        guard node.isDirectory else { throw .notDirectory(viewPath) }
        switch node.owner {
        case .child(let documentPath, let indexPath)?:
            return .children(documentPath: documentPath, indexPath: indexPath)
        case nil where binder.gitFolders[viewPath] != nil:
            return .folder(viewPath)
        default:
            throw .notDirectory(viewPath)
        }
    }

    // MARK: - Remove

    /// `unlink` of a record, an attachment, a child or a raw file.
    func remove(_ path: String) throws(WriteError) -> WritePlan {
        guard let current = binder.node(path) else { throw .notFound(path) }
        try policy.checkChange(path)
        if path == Self.patientInfo {
            throw .notPermitted(path: path, reason: "every binder keeps its patient-info record (edit it instead)")
        }
        return try removal(of: current, path: path)
    }

    private func removal(of current: Node, path: String) throws(WriteError) -> WritePlan {
        switch current.source {
        case .directory:
            throw .isDirectory(path)
        case .raw:
            return WritePlan(changes: [.delete(gitPath: current.gitPath)], message: "Delete entry")
        case .document:
            let document = try binder.document(current.gitPath)
            let folder = ViewPath.split(current.gitPath).parent
            let sidecars = BinderNaming.sidecarReferences(document).map { PlannedChange.delete(gitPath: join(folder, $0)) }
            return WritePlan(changes: [.delete(gitPath: current.gitPath)] + sidecars, message: "Delete entry")
        case .sidecar:
            switch current.owner {
            case .document(let reference)?:
                // A sidecar another record also names (a crafted repository) stays for it.
                let sidecar: [PlannedChange] = isShared(sidecar: current.gitPath, by: reference) ? [] : [.delete(gitPath: current.gitPath)]
                return WritePlan(changes: [.delete(gitPath: reference)] + sidecar, message: "Delete entry")
            case .child(let documentPath, let indexPath)?:
                return try removeChild(documentPath: documentPath, indexPath: indexPath, path: path)
            case nil:
                return WritePlan(changes: [.delete(gitPath: current.gitPath)], message: "Delete entry")
            }
        case .child(_, let indexPath), .inlineAttachment(_, let indexPath):
            return try removeChild(documentPath: current.gitPath, indexPath: indexPath, path: path)
        }
    }

    /// Whether a record of the folder other than `owner` shows the sidecar at `gitPath` as its
    /// attachment: two references to one sidecar (which the apps never write, but a crafted
    /// repository or another tool can) must not let a change through one destroy the other's.
    func isShared(sidecar gitPath: String, by owner: String) -> Bool {
        let folder = ViewPath.split(gitPath).parent
        return binder.names(in: folder).contains { name in
            guard let node = binder.node(join(folder, name)), case .sidecar = node.source, node.gitPath == gitPath,
                  case .document(let other)? = node.owner else { return false }
            return other != owner
        }
    }

    private func removeChild(documentPath: String, indexPath: [Int], path: String) throws(WriteError) -> WritePlan {
        var document = try binder.document(documentPath)
        let folder = ViewPath.split(documentPath).parent
        var removed: [MedicalDocument] = []
        try Self.modifyChild(&document, at: Array(indexPath.dropLast()), path: path) { (parent) throws(WriteError) in
            guard let index = indexPath.last, index < parent.children.count else { throw .notFound(path) }
            removed.append(parent.children.remove(at: index))
        }
        let sidecars = removed.flatMap(BinderNaming.sidecarReferences).map { PlannedChange.delete(gitPath: join(folder, $0)) }
        return WritePlan(changes: sidecars + [try documentChange(document, at: documentPath, path: path)], message: "Update entry")
    }

    // MARK: - Folders

    /// What `mkdir` does: a real folder gets an encrypted `.meta.json` (a plan); `X.children`
    /// only makes room in memory for a first child (the `Parent` to remember).
    enum FolderPlan {
        case commit(WritePlan)
        case inMemory(Parent)
    }

    func makeDirectory(_ path: String) throws(WriteError) -> FolderPlan {
        let (parentPath, name) = ViewPath.split(path)
        try BinderNaming.check(name, in: parentPath, path: path)
        if binder.node(path) != nil || binder.pendingFolder(path) != nil { throw .exists(path) }
        try policy.checkFolder(path)
        if BinderNaming.isChildrenFolder(name) { return .inMemory(try childrenFolder(path)) }
        guard case .folder(let gitParent) = try parent(of: parentPath) else {
            throw .notPermitted(path: path, reason: "a record's children folder holds records and attachments, not folders")
        }
        let meta = JSONValue.object(["displayName": .string(name)]).serializedBytes()
        try BinderNaming.checkStored(name, path: path)
        return .commit(WritePlan(changes: [.folderMetadata(gitPath: BinderNaming.folderMetadataPath(in: join(gitParent, name)), json: meta)],
                                 message: "Add folder"))
    }

    /// Where children written into `path`, a `.children` folder that holds none yet, go: the
    /// record or child of its name, looked up each time (a sibling written meanwhile may have
    /// moved that child), or one made for them when it is not written yet (restores write
    /// folders first).
    func childrenFolder(_ path: String) throws(WriteError) -> Parent {
        let (parentPath, name) = ViewPath.split(path)
        let parent = try parent(of: parentPath)
        let stem = BinderNaming.childrenOwnerStem(name) ?? name
        let owner = BinderNaming.recordName(stem: stem)
        guard let node = binder.node(join(parentPath, owner)) else { return .childrenOfMissing(parent: parent, stem: stem) }
        switch node.source {
        case .document:
            return .children(documentPath: node.gitPath, indexPath: [])
        case .child(_, let indexPath):
            return .children(documentPath: node.gitPath, indexPath: indexPath)
        default:
            throw .notPermitted(path: path, reason: "\(owner) is not a record that can have children")
        }
    }

    /// `rmdir` of an empty folder; an empty `.children` folder has nothing stored.
    func removeDirectory(_ path: String) throws(WriteError) -> WritePlan {
        guard let node = binder.node(path) else { throw .notFound(path) }
        guard node.isDirectory else { throw .notDirectory(path) }
        try policy.checkChange(path)
        guard binder.names(in: path).isEmpty else { throw .notEmpty(path) }
        guard let entries = binder.gitFolders[path] else { return .none() }
        // What the view hides (a name not UTF-8 or over 255 bytes, `.git`, a submodule) is
        // still stored: the folder is not empty, and rmdir must not delete it unseen.
        if entries.contains(where: { $0.name != BinderNaming.folderMetadataName }) {
            throw .notEmpty(path)
        }
        return WritePlan(changes: [.delete(gitPath: path)], message: "Delete folder")
    }

    // MARK: - Times

    /// `utimensat` on a closed file: the record's `updated` becomes `time` (children and
    /// attachments likewise, in the document that holds them); folders and raw files keep theirs.
    func setModified(_ path: String, to time: Timestamp) throws(WriteError) -> WritePlan {
        guard let current = binder.node(path) else {
            if path.isEmpty || binder.pendingFolder(path) != nil { return .none() }
            throw .notFound(path)
        }
        try policy.checkChange(path)
        if current.modified.matches(set: time) { return .none() }
        let iso = Self.iso(time)
        switch (current.source, current.owner) {
        case (.document, _), (.sidecar, .document?):
            let documentPath: String
            if case .document(let reference)? = current.owner { documentPath = reference } else { documentPath = current.gitPath }
            var document = try binder.document(documentPath)
            document.metadata["updated"] = .string(iso)
            return WritePlan(changes: [try documentChange(document, at: documentPath, path: path)], message: "Update entry")
        case (.child(_, let indexPath), _), (.inlineAttachment(_, let indexPath), _), (.sidecar, .child(_, let indexPath)?):
            var documentPath = current.gitPath
            if case .child(let owner, _)? = current.owner { documentPath = owner }
            var document = try binder.document(documentPath)
            try Self.modifyChild(&document, at: indexPath, path: path) { (child) throws(WriteError) in
                child.metadata["updated"] = .string(iso)
            }
            return WritePlan(changes: [try documentChange(document, at: documentPath, path: path)], message: "Update entry")
        default:
            return .none()  // folders and raw files keep the times they have
        }
    }

    // MARK: - Rename

    /// `rename`: records keep their ciphertext where they can (folders, records, attachments
    /// move as they are); anything else is stored anew at the target and removed at the source,
    /// in one commit. A replaced target is removed in the same commit.
    func rename(_ from: String, to: String) throws(WriteError) -> WritePlan {
        guard let source = binder.node(from) else { throw .notFound(from) }
        let (toParentPath, toName) = ViewPath.split(to)
        try BinderNaming.check(toName, in: toParentPath, path: to)
        try policy.checkChange(from)
        if binder.node(to) != nil { try policy.checkChange(to) } else if !source.isDirectory { try policy.checkNew(to) }
        if from == Self.patientInfo {
            throw .notPermitted(path: from, reason: "every binder keeps its patient-info record under this name")
        }
        // Replaced by another record, it would be that record (its type, its metadata): an
        // editor's save of it goes through a scratch name or a new file, not a stored record.
        if to == Self.patientInfo {
            throw .notPermitted(path: to, reason: "patient-info.md is saved in place, not replaced by another record")
        }
        if PathBytes.isInside(to, folder: from) { throw .invalid(path: to, reason: "a folder cannot move into itself") }
        let target = try parent(of: toParentPath)
        var plan = WritePlan(message: "Rename entry")
        if let replaced = binder.node(to) {
            if replaced.isDirectory != source.isDirectory { throw replaced.isDirectory ? .isDirectory(to) : .notDirectory(to) }
            if replaced.isDirectory {
                guard binder.names(in: to).isEmpty else { throw .notEmpty(to) }
                if binder.gitFolders[to] != nil { plan.changes.append(.delete(gitPath: to)) }
            } else if let kept = try childrenKept(replacing: replaced, by: source, to: to) {
                // The record takes the place of the one it replaces, with that one's children.
                plan.changes += [.delete(gitPath: source.gitPath), try documentChange(kept, at: replaced.gitPath, path: to)]
                return plan
            } else {
                plan.changes += try removal(of: replaced, path: to).changes
            }
        }
        // Git paths this rename may write over: what it removes (a replaced record) or moves away.
        var freed = Set(plan.changes.filter(\.isDeletion).map(\.gitPath))
        freed.insert(source.gitPath)
        if case .document(let reference)? = source.owner { freed.insert(reference) }
        if let moved = try moveAsStored(source, from: from, to: to, target: target, freed: freed) {
            plan.changes += moved
            return plan
        }
        guard !source.isDirectory else { throw .invalid(path: from, reason: "this folder cannot be moved there") }
        if case .document = source.source, !(try binder.document(source.gitPath)).children.isEmpty {
            // EPERM, not EINVAL: mv reads EINVAL as "a subdirectory of itself".
            throw .notPermitted(path: to, reason: "a record with children can only be renamed to another .md name in a folder")
        }
        // Anything else moves by content: stored anew at the target, removed at the source.
        var content = try binder.content(source, viewPath: from)
        defer { secureZero(&content) }
        let removal = try removal(of: source, path: from)
        let removed = PlannedBinder(base: binder, removing: removal.changes, replacedView: [from, to])
        let store = try WritePlanner(binder: removed, limits: limits, now: now, policy: policy).store(to, content: content)
        // Both halves were planned on the same snapshot: if they rewrite the same record (a child
        // moved between two `.children` folders of one record), the second would undo the first.
        let rewritten = Set(removal.changes.filter { !$0.isDeletion }.map(\.gitPath))
        if store.changes.contains(where: { !$0.isDeletion && rewritten.contains($0.gitPath) }) {
            throw .invalid(path: to, reason: "moving a child between the children folders of one record is not supported")
        }
        plan.changes += removal.changes.filter { change in
            // A path the store writes again is not deleted first (one change per path).
            !(change.isDeletion && store.changes.contains { $0.gitPath == change.gitPath })
        } + store.changes
        return plan
    }

    /// A record renamed over a record with children (a tool's save by a temporary file it
    /// renames, `mv new.md X.md`): rename(2) replaces a file and leaves the folder beside it, so
    /// `X.children/` stays: the source's document with the replaced one's children. Nil when
    /// the replaced record has no children (it is replaced whole); refused when the source has
    /// children of its own, which would have to go where the others are.
    private func childrenKept(replacing replaced: Node, by source: Node, to: String) throws(WriteError) -> MedicalDocument? {
        guard case .document = replaced.source, replaced.owner == nil, case .document = source.source, source.owner == nil else { return nil }
        let children = try binder.document(replaced.gitPath).children
        guard !children.isEmpty else { return nil }
        var document = try binder.document(source.gitPath)
        guard document.children.isEmpty else {
            throw .notEmpty(BinderNaming.childrenFolderName(of: to))
        }
        document.children = children
        return document
    }

    /// The changes that move `source` without re-encrypting it, or nil when it must be stored
    /// anew (between a folder and a `.children` folder, document <-> attachment, …). A git path
    /// it would write that holds another record (not in `freed`) refuses the move with EEXIST,
    /// as creating that name would; an attachment's reference there moves aside (a record
    /// takes its name) or the attachment's own reference takes a free name.
    private func moveAsStored(_ source: Node, from: String, to: String, target: Parent,
                              freed: Set<String>) throws(WriteError) -> [PlannedChange]? {
        let claim = { (gitPath: String) throws(WriteError) in
            if binder.entry(gitPath) != nil && !freed.contains(gitPath) { throw .exists(to) }
        }
        let toName = ViewPath.split(to).name
        let sourceParent = try parent(of: ViewPath.split(from).parent)
        switch (source.source, sourceParent, target) {
        case (.directory, .folder, .folder(let folder)) where binder.gitFolders[from] != nil:
            return try moveFolder(from, to: join(folder, toName))
        case (.document(let blob), .folder, .folder(let folder)) where BinderNaming.isRecordName(toName):
            return try moveDocument(source, blob: blob, into: folder, as: toName, path: to, claim: claim)
        case (.sidecar(let blob), .folder, .folder(let folder)) where !BinderNaming.isRecordName(toName):
            guard case .document(let reference)? = source.owner else { return nil }
            // An attachment: its sidecar moves as it is; its reference names the new sidecar.
            let sidecarName = BinderNaming.sidecarName(of: toName)
            try BinderNaming.checkStored(sidecarName, path: to)
            var document = try binder.document(reference)
            document.value = sidecarName
            let stem = BinderNaming.splitExtension(toName).stem
            try claim(join(folder, sidecarName))
            var referencePath = join(folder, BinderNaming.documentName(stem: stem))
            if binder.entry(referencePath) != nil && !freed.contains(referencePath) {
                referencePath = freeReferencePath(in: folder, stem: stem)
            }
            return [.delete(gitPath: reference), .delete(gitPath: source.gitPath),
                    .blob(gitPath: join(folder, sidecarName), id: blob),
                    try documentChange(document, at: referencePath, path: to)]
        case (_, .children(let fromDocument, let fromIndex), .children(let toDocument, let toIndex))
            where fromDocument == toDocument && fromIndex == toIndex && !source.isDirectory:
            // Within one `.children` folder: the child keeps its place and takes the new name.
            guard let index = Self.childIndex(source, under: fromIndex) else { return nil }
            var document = try binder.document(fromDocument)
            try Self.modifyChild(&document, at: fromIndex, path: to) { (parent) throws(WriteError) in
                Self.settleName(of: &parent.children, at: index, shownAs: toName)
            }
            return [try documentChange(document, at: fromDocument, path: to)]
        default:
            return nil
        }
    }

    /// A real folder: every object moves as it is, to the git folder `destination`.
    private func moveFolder(_ from: String, to destination: String) throws(WriteError) -> [PlannedChange] {
        var changes: [PlannedChange] = []
        for (path, entries) in binder.gitFolders where path == from || PathBytes.isInside(path, folder: from) {
            for entry in entries {
                if BinderNaming.unsafeNameReason(String(entry.name), atRoot: false) != nil || entry.kind != .blob && entry.kind != .tree {
                    throw .notPermitted(path: from, reason: "the folder holds \(entry.path), which binder does not show (see binder verify): move it with git")
                }
            }
            for entry in entries where entry.kind == .blob {
                changes.append(.blob(gitPath: destination + String(decoding: entry.path.utf8.dropFirst(from.utf8.count), as: UTF8.self),
                                     id: entry.id))
            }
        }
        return changes + [.delete(gitPath: from)]
    }

    /// A record keeps its ciphertext, stored as `folder/<stem of name>.json`; its children's
    /// sidecars move with it.
    private func moveDocument(_ source: Node, blob: ObjectID, into folder: String, as name: String, path: String,
                              claim: (String) throws(WriteError) -> Void) throws(WriteError) -> [PlannedChange] {
        let gitName = BinderNaming.documentName(shownAs: name)
        try BinderNaming.checkStored(gitName, path: path)
        var changes: [PlannedChange] = [.delete(gitPath: source.gitPath)]
        if let aside = referenceMovedAside(from: join(folder, gitName)), join(folder, gitName) != source.gitPath {
            changes += aside.filter { !$0.isDeletion }
        } else {
            try claim(join(folder, gitName))
        }
        changes.append(.blob(gitPath: join(folder, gitName), id: blob))
        let fromFolder = ViewPath.split(source.gitPath).parent
        guard fromFolder != folder else { return changes }
        for sidecar in BinderNaming.sidecarReferences(try binder.document(source.gitPath)) {
            guard let entry = binder.entry(join(fromFolder, sidecar)) else { continue }
            try claim(join(folder, sidecar))
            changes += [.delete(gitPath: entry.path), .blob(gitPath: join(folder, sidecar), id: entry.id)]
        }
        return changes
    }

    // MARK: - Pieces shared by the rules

    /// The change storing `document` at `gitPath`, refused if its JSON is over NIP-44's limit.
    func documentChange(_ document: MedicalDocument, at gitPath: String, path: String) throws(WriteError) -> PlannedChange {
        let json = document.serializedBytes()
        guard json.count <= limits.documentBytes else { throw .tooLarge(path: path, bytes: json.count, limit: limits.documentBytes) }
        // What is stored must read back (a child's metadata can nest the whole document past
        // what a JSON reader takes): checked here, at most 65,535 bytes.
        guard (try? JSONValue.parse(json)) != nil else {
            throw .invalid(path: path, reason: "the record would be nested too deeply to be read again")
        }
        return .document(gitPath: gitPath, json: json)
    }

    static func iso(_ time: Timestamp) -> String { Timestamps.string(seconds: time.seconds, nanoseconds: time.nanoseconds) }

    /// The index of `node` among the children at `indexPath`, if it is one of them.
    static func childIndex(_ node: Node, under indexPath: [Int]) -> Int? {
        switch node.source {
        case .child(_, let path), .inlineAttachment(_, let path):
            return path.count == indexPath.count + 1 ? path.last : nil
        case .sidecar:
            if case .child(_, let path)? = node.owner, path.count == indexPath.count + 1 { return path.last }
            return nil
        default:
            return nil
        }
    }

    static func modifyChild(_ document: inout MedicalDocument, at indexPath: [Int], path: String,
                            _ body: (inout MedicalDocument) throws(WriteError) -> Void) throws(WriteError) {
        guard let first = indexPath.first else { return try body(&document) }
        guard first < document.children.count else { throw .corrupt(path: path, reason: "child \(indexPath) is gone") }
        try modifyChild(&document.children[first], at: Array(indexPath.dropFirst()), path: path, body)
    }

    /// A child shown as `name`: `metadata.fileName` holds the name only when it differs from
    /// the one the child would get anyway (`NN-<type>.md`), so that a child restored under its
    /// own name is stored exactly as it was.
    static func settleName(of children: inout [MedicalDocument], at index: Int, shownAs name: String) {
        var child = children[index]
        child.metadata.removeValue(forKey: "fileName")
        let sidecar = BinderNaming.sidecarReference(of: child)
        if BinderNaming.childName(child, index: index, count: children.count, sidecar: sidecar) != name {
            child.metadata["fileName"] = .string(name)
        }
        children[index] = child
    }

    /// Adds `child`, shown as `name`, to `children`; returns its index. A numbered name
    /// (`NN-…`, as the view numbers children) goes before the first sibling numbered higher,
    /// so that children written in any order (`cp -a` restores in inode order) take the places
    /// their numbers give and need no `fileName`; any other name goes last. Every sibling
    /// keeps the name it is shown under (a handle open on it, or the next file a restore
    /// writes, finds it there).
    static func insertChild(_ child: MedicalDocument, into children: inout [MedicalDocument], shownAs name: String) -> Int {
        let siblings = children.indices.map { shownName(children, $0) }
        var index = children.count
        if let number = childNumber(name) {
            index = siblings.firstIndex { sibling in childNumber(sibling).map { $0 > number } ?? false } ?? children.count
        }
        children.insert(child, at: index)
        for (old, sibling) in siblings.enumerated() {
            // Those before it stay as stored unless their name would change (a 100th child
            // widens the numbers); those after it moved, and keep a `fileName` only if needed.
            let new = old < index ? old : old + 1
            if new != old || shownName(children, new) != sibling { settleName(of: &children, at: new, shownAs: sibling) }
        }
        settleName(of: &children, at: index, shownAs: name)
        return index
    }

    /// The number a child's name starts with (`03` in `03-follow-up-note.md`), if any.
    static func childNumber(_ name: String) -> Int? {
        let digits = name.utf8.prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        guard !digits.isEmpty, name.utf8.dropFirst(digits.count).first == UInt8(ascii: "-") else { return nil }
        return Int(String(decoding: digits, as: UTF8.self))
    }
}

/// The binder as a plan that removes some files would leave it: what a move by content checks
/// its target against (so that `mv X.md X.txt` may reuse the `X.json` it frees).
private struct PlannedBinder: StoredBinder {
    let base: any StoredBinder
    /// View paths that the move empties (its source and the target it replaces).
    let replacedView: Set<String>
    /// The base's git folders less what the removal deletes (worked out once: the store asks
    /// for entries many times).
    let gitFolders: [String: [TreeEntry]]

    init(base: any StoredBinder, removing: [PlannedChange], replacedView: Set<String>) {
        self.base = base
        self.replacedView = replacedView
        let deleted = Set(removing.filter(\.isDeletion).map(\.gitPath))
        var folders = base.gitFolders
        for folder in Set(deleted.map { ViewPath.split($0).parent }) {
            folders[folder] = folders[folder]?.filter { !deleted.contains($0.path) }
        }
        gitFolders = folders
    }

    func node(_ viewPath: String) -> Node? { replacedView.contains(viewPath) ? nil : base.node(viewPath) }
    func document(_ gitPath: String) throws(WriteError) -> MedicalDocument { try base.document(gitPath) }
    func content(_ node: Node, viewPath: String) throws(WriteError) -> [UInt8] { try base.content(node, viewPath: viewPath) }
    func pendingFolder(_ viewPath: String) -> Parent? { base.pendingFolder(viewPath) }
    func names(in viewPath: String) -> [String] { base.names(in: viewPath) }
}
