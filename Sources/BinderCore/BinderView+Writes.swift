import BinderCrypto
import BinderFormat
import BinderGit

/// Changes through the view. Each call is one commit (or none), planned against the current
/// snapshot and committed compare-and-swap onto it; when `main` moved underneath (another
/// writer), the snapshot is reloaded and the change planned again. See docs/DESIGN.md, "Writes".
extension BinderView {
    /// What a change amounts to in git.
    struct Plan {
        var changes: [TreeChange] = []
        var message: String
    }

    /// Where a file of the view lives in git.
    enum Parent {
        /// A real folder (git path; "" is the root).
        case folder(String)
        /// The `.children` folder of a document (or of one of its children, by index path).
        case children(documentPath: String, indexPath: [Int])
    }

    // MARK: - Public operations

    /// Creates or replaces the file at `path` with `content` (what the user saved). `updated`
    /// is the record's new modification time (ISO 8601); now when nil.
    public func store(_ path: String, content: [UInt8], updated: String? = nil) throws(WriteError) {
        let path = Self.normalize(path)
        try perform { () throws(WriteError) in try self.planStore(path, content: content, updated: updated) }
    }

    /// Deletes a file (a record, an attachment, a child, or a raw file).
    public func remove(_ path: String) throws(WriteError) {
        let path = Self.normalize(path)
        try perform { () throws(WriteError) in try self.planRemove(path) }
    }

    /// Creates a folder: a real one gets an encrypted `.meta.json` (one commit); `X.children`
    /// beside a document only makes room for a first child (nothing is committed).
    public func makeDirectory(_ path: String) throws(WriteError) {
        let path = Self.normalize(path)
        let (parentPath, name) = Self.parent(path)
        guard NameMapping.isSafeName(name), !name.hasPrefix(BinderView.controlDirectory) || !parentPath.isEmpty else {
            throw .invalid(path: path, reason: "not a usable folder name")
        }
        if (try? node(path)) != nil || state.withLock({ $0.pendingFolders[path] != nil }) { throw .exists(path) }
        if name.hasSuffix(NameMapping.childrenSuffix) {
            let stem = String(name.dropLast(NameMapping.childrenSuffix.count))
            if let owner = try? node(join(parentPath, stem + NameMapping.markdownExtension)), case .document = owner.source {
                state.withLock { $0.pendingFolders[path] = .children(documentPath: owner.gitPath, indexPath: []) }
                return
            }
        }
        guard case .folder(let gitParent) = try resolveParent(parentPath) else {
            throw .invalid(path: path, reason: "folders cannot be made inside a document's children")
        }
        try perform { () throws(WriteError) in
            let meta = try self.encrypt(JSONValue.object(["displayName": .string(name)]).serializedBytes(), path: path)
            return Plan(changes: [.write(path: join(join(gitParent, name), NameMapping.folderMetadataName), blob: meta)],
                        message: "Add folder")
        }
    }

    /// Removes an empty folder.
    public func removeDirectory(_ path: String) throws(WriteError) {
        let path = Self.normalize(path)
        if state.withLock({ $0.pendingFolders.removeValue(forKey: path) }) != nil { return }
        let node: Node
        do { node = try self.node(path) } catch { throw .notFound(path) }
        guard node.isDirectory else { throw .notDirectory(path) }
        let entries: [(name: String, attributes: NodeAttributes)]
        do { entries = try list(path) } catch { throw .notFound(path) }
        guard entries.isEmpty else { throw .notEmpty(path) }
        guard snapshot.gitFolders[path] != nil else { return }  // an empty `.children` folder: nothing stored
        try perform { () throws(WriteError) in Plan(changes: [.delete(path: path)], message: "Delete folder") }
    }

    /// Renames or moves a file or folder. With `noReplace`, an existing target is an error;
    /// otherwise it is replaced in the same commit.
    public func rename(_ from: String, to: String, noReplace: Bool = false) throws(WriteError) {
        let from = Self.normalize(from), to = Self.normalize(to)
        guard from != to else { return }
        guard NameMapping.isSafeName(Self.parent(to).name) else { throw .invalid(path: to, reason: "not a usable name") }
        if noReplace, (try? node(to)) != nil { throw .exists(to) }
        try perform { () throws(WriteError) in try self.planRename(from, to: to) }
    }

    // MARK: - Committing

    /// Plans against the current snapshot and commits; on a concurrent update, reloads and
    /// plans once more.
    func perform(_ plan: () throws(WriteError) -> Plan) throws(WriteError) {
        try writeLock.withLock { _ throws(WriteError) in
            for attempt in 0..<3 {
                let planned = try plan()
                if planned.changes.isEmpty { return }
                let parent = snapshot.commit
                do {
                    let id = try repository.commitChanges(onto: parent, changes: planned.changes, message: planned.message, author: author)
                    try adopt(commitOnTop: id, changes: planned.changes)
                    hooks.withLock { $0 }.onCommit?(id)
                    if !repository.isBare {
                        // The work tree (ciphertext) and index follow, so `git status` stays clean.
                        do { try repository.syncWorkTreeToHead(paths: planned.changes.map(\.path)) } catch {
                            logger.warning("work tree not updated: \(error)")
                        }
                    }
                    logger.debug("committed", metadata: ["message": "\(planned.message)", "paths": "\(planned.changes.map(\.path))"])
                    return
                } catch let error as GitError where error.isConcurrentUpdate && attempt < 2 {
                    logger.info("main moved under a write; planning again")
                    do {
                        if let tip = try repository.branchTip(branch) { try adoptArrivedLocked(commit: tip) }
                        else { try adopt(commit: nil) }
                    } catch { throw WriteError.storage("\(error)") }
                } catch let error as WriteError {
                    throw error
                } catch {
                    throw WriteError.storage("\(error)")
                }
            }
        }
    }

    /// Shows `commit` from now on: a new snapshot, and listings rebuilt on next use.
    /// `changes`: what this view's own commit changed, so that only the listings of the
    /// folders it touched (and their ancestors) are rebuilt; nil (a commit from elsewhere)
    /// drops them all.
    func adopt(commit: ObjectID?, changes: [TreeChange]? = nil) throws {
        adopt(try Snapshot.load(repository, commit: commit), changes: changes)
    }

    /// Shows this view's own commit `id`, made of `changes` on top of the snapshot shown
    /// (`writeLock` held): only the folders it touched are read again.
    func adopt(commitOnTop id: ObjectID, changes: [TreeChange]) throws {
        let base = snapshot
        guard base.commit != nil else { return try adopt(commit: id, changes: changes) }
        let next = try base.advanced(to: id, changes: changes, repository: repository)
        #if DEBUG
        // The incremental snapshot must equal a full read (tests run debug builds).
        let full = try Snapshot.load(repository, commit: id)
        precondition(full.gitFolders == next.gitFolders, "incremental snapshot differs from a full read after \(changes)")
        #endif
        adopt(next, changes: changes)
    }

    func adopt(_ snapshot: Snapshot, changes: [TreeChange]?) {
        state.withLock { state in
            let old = state.snapshot
            state.snapshot = snapshot
            // Parts of folders that are gone can never be reused.
            state.documentParts = state.documentParts.filter { snapshot.gitFolders[$0.key] != nil }
            guard let changes else { return state.listings.removeAll() }
            var affected = Set<String>()
            for change in changes {
                var folder = Self.parent(change.path).parent
                affected.insert(change.path)  // a folder deleted or written into as a whole
                while true {
                    affected.insert(folder)
                    if folder.isEmpty { break }
                    folder = Self.parent(folder).parent
                }
            }
            // A listing belongs to the git folder it is in (`.children` listings to the folder
            // of their document).
            func gitFolder(_ viewPath: String) -> String {
                var path = viewPath
                while !path.isEmpty && old.gitFolders[path] == nil && snapshot.gitFolders[path] == nil {
                    path = Self.parent(path).parent
                }
                return path
            }
            for key in Array(state.listings.keys) {
                let folder = gitFolder(key)
                if affected.contains(folder) || snapshot.gitFolders[folder] == nil || affected.contains(where: { folder.hasPrefix($0 + "/") && !$0.isEmpty }) {
                    state.listings.removeValue(forKey: key)
                }
            }
        }
    }

    // MARK: - Planning

    func resolveParent(_ parentPath: String) throws(WriteError) -> Parent {
        if parentPath.isEmpty || snapshot.gitFolders[parentPath] != nil { return .folder(parentPath) }
        if let pending = state.withLock({ $0.pendingFolders[parentPath] }) { return pending }
        if parentPath == BinderView.controlDirectory { throw .readOnly(parentPath) }
        let node: Node
        do { node = try self.node(parentPath) } catch { throw .notFound(parentPath) }
        guard node.isDirectory, case .child(let documentPath, let indexPath)? = node.owner else { throw .notDirectory(parentPath) }
        return .children(documentPath: documentPath, indexPath: indexPath)
    }

    private func existing(_ path: String) -> Node? { try? node(path) }

    func planStore(_ path: String, content: [UInt8], updated: String? = nil) throws(WriteError) -> Plan {
        let now = updated ?? Timestamps.now()
        let (parentPath, name) = Self.parent(path)
        guard NameMapping.isSafeName(name) else { throw .invalid(path: path, reason: "not a usable file name") }
        let isMarkdown = name.hasSuffix(NameMapping.markdownExtension)
        let current = existing(path)
        if let current {
            if current.isDirectory { throw .isDirectory(path) }
            if current.isRaw { throw .readOnly(path) }
        }
        switch try resolveParent(parentPath) {
        case .folder(let folder):
            if let current {
                switch current.source {
                case .document:
                    var document = try loadDocument(current.gitPath)
                    try apply(content, to: &document, path: path, now: now)
                    return Plan(changes: [try write(document, at: current.gitPath, path: path)], message: "Update entry")
                case .sidecar:
                    return try replaceSidecar(current, content: content, path: path, now: now)
                default:
                    throw .readOnly(path)
                }
            }
            let (stem, _) = NameMapping.splitExtension(name)
            if isMarkdown {
                let gitPath = join(folder, stem + NameMapping.documentExtension)
                guard snapshot.entry(at: gitPath) == nil else { throw .exists(path) }
                var document = MedicalDocument(value: "", metadata: [:])
                try apply(content, to: &document, path: path, defaultType: Categories.documentType(forFolder: folder), now: now)
                let category = folder.split(separator: "/").first.map(String.init) ?? "binder"
                return Plan(changes: [try write(document, at: gitPath, path: path)], message: "Add \(category) entry")
            }
            let writer = BinderWriter(repository: repository, key: key, author: author)
            guard snapshot.entry(at: join(folder, stem + NameMapping.documentExtension)) == nil,
                  snapshot.entry(at: join(folder, name + NameMapping.sidecarExtension)) == nil else { throw .exists(path) }
            do { try writer.putAttachment(content, fileName: name, folder: folder, created: now) } catch { throw storageError(error, path) }
            return Plan(changes: writer.stagedChanges, message: "Add attachment")

        case .children(let documentPath, let indexPath):
            var document = try loadDocument(documentPath)
            var extra: [TreeChange] = []
            try modifyChild(&document, at: indexPath, path: path) { (parent) throws(WriteError) in
                if let current, let index = Self.childIndex(current, under: indexPath) {
                    guard index < parent.children.count else { throw .corrupt(path: documentPath, reason: "child \(index) is gone") }
                    if case .sidecar = current.source {
                        let sidecar = current.gitPath
                        extra.append(.write(path: sidecar, blob: try self.encryptSidecar(content, path: path)))
                        parent.children[index].metadata["originalSizeBytes"] = JSONValue(content.count)
                        parent.children[index].metadata["updated"] = .string(now)
                    } else if isMarkdown {
                        try self.apply(content, to: &parent.children[index], path: path, now: now)
                    } else {
                        // An inline attachment replaced: it becomes a sidecar, as new writes are.
                        let (child, changes) = try self.attachmentChild(content, fileName: name, documentPath: documentPath, path: path)
                        parent.children[index] = child
                        extra += changes
                    }
                    return
                }
                if isMarkdown {
                    var child = MedicalDocument(value: "", metadata: [:])
                    try self.apply(content, to: &child, path: path, defaultType: "addendum", now: now)
                    child.metadata["fileName"] = .string(name)
                    parent.children.append(child)
                } else {
                    let (child, changes) = try self.attachmentChild(content, fileName: name, documentPath: documentPath, path: path)
                    parent.children.append(child)
                    extra += changes
                }
            }
            state.withLock { _ = $0.pendingFolders.removeValue(forKey: parentPath) }
            return Plan(changes: extra + [try write(document, at: documentPath, path: path)], message: "Update entry")
        }
    }

    func planRemove(_ path: String) throws(WriteError) -> Plan {
        guard let current = existing(path) else { throw .notFound(path) }
        switch current.source {
        case .directory:
            throw .isDirectory(path)
        case .raw:
            return Plan(changes: [.delete(path: current.gitPath)], message: "Delete entry")
        case .document:
            let document = try loadDocument(current.gitPath)
            let folder = Self.parent(current.gitPath).parent
            let sidecars = BinderVerifier.sidecarReferences(document).map { TreeChange.delete(path: join(folder, $0)) }
            return Plan(changes: [.delete(path: current.gitPath)] + sidecars, message: "Delete entry")
        case .sidecar:
            switch current.owner {
            case .document(let reference)?:
                return Plan(changes: [.delete(path: reference), .delete(path: current.gitPath)], message: "Delete entry")
            case .child(let documentPath, let indexPath)?:
                return try removeChild(documentPath: documentPath, indexPath: indexPath, path: path)
            case nil:
                return Plan(changes: [.delete(path: current.gitPath)], message: "Delete entry")
            }
        case .child(_, let indexPath), .inlineAttachment(_, let indexPath):
            return try removeChild(documentPath: current.gitPath, indexPath: indexPath, path: path)
        }
    }

    func planRename(_ from: String, to: String) throws(WriteError) -> Plan {
        guard let source = existing(from) else { throw .notFound(from) }
        let (toParentPath, toName) = Self.parent(to)
        let target = try resolveParent(toParentPath)
        let replaced = existing(to)
        if let replaced, replaced.isDirectory != source.isDirectory {
            throw replaced.isDirectory ? .isDirectory(to) : .notDirectory(to)
        }
        var plan = Plan(message: "Rename entry")
        if let replaced {
            if replaced.isDirectory {
                guard (try? list(to))?.isEmpty ?? true else { throw .notEmpty(to) }
                if snapshot.gitFolders[to] != nil { plan.changes.append(.delete(path: to)) }
            } else {
                plan.changes += try planRemove(to).changes
            }
        }
        let sourceParent = try resolveParent(Self.parent(from).parent)
        switch (source.source, sourceParent, target) {
        case (.directory, .folder, .folder(let folder)) where snapshot.gitFolders[from] != nil:
            // A real folder: every object moves as it is (no re-encryption).
            let destination = join(folder, toName)
            for entry in snapshot.gitFolders.filter({ $0.key == from || $0.key.hasPrefix(from + "/") }).values.joined()
            where entry.kind == .blob {
                plan.changes.append(.write(path: destination + entry.path.dropFirst(from.count), blob: entry.id))
            }
            plan.changes.append(.delete(path: from))
            return plan
        case (.document(let blob), .folder, .folder(let folder)) where toName.hasSuffix(NameMapping.markdownExtension):
            // A record keeps its ciphertext; its children's sidecars move with it.
            let stem = String(toName.dropLast(NameMapping.markdownExtension.count))
            let destination = join(folder, stem + NameMapping.documentExtension)
            plan.changes += [.delete(path: source.gitPath), .write(path: destination, blob: blob)]
            let fromFolder = Self.parent(source.gitPath).parent
            if fromFolder != folder {
                for sidecar in BinderVerifier.sidecarReferences(try loadDocument(source.gitPath)) {
                    guard let entry = snapshot.entry(at: join(fromFolder, sidecar)) else { continue }
                    plan.changes += [.delete(path: entry.path), .write(path: join(folder, sidecar), blob: entry.id)]
                }
            }
            return plan
        case (.sidecar(let blob), .folder, .folder(let folder)) where !toName.hasSuffix(NameMapping.markdownExtension):
            guard case .document(let reference)? = source.owner else { break }
            // An attachment: its sidecar moves as it is; its reference names the new sidecar.
            let sidecarName = toName + NameMapping.sidecarExtension
            var document = try loadDocument(reference)
            document.value = sidecarName
            let stem = NameMapping.splitExtension(toName).stem
            plan.changes += [.delete(path: reference), .delete(path: source.gitPath),
                             .write(path: join(folder, sidecarName), blob: blob),
                             try write(document, at: join(folder, stem + NameMapping.documentExtension), path: to)]
            return plan
        case (_, .children(let fromDocument, let fromIndex), .children(let toDocument, let toIndex))
            where fromDocument == toDocument && fromIndex == toIndex && !source.isDirectory:
            // Within one `.children` folder: the child keeps its place and takes the new name.
            guard let index = Self.childIndex(source, under: fromIndex) else { break }
            var document = try loadDocument(fromDocument)
            try modifyChild(&document, at: fromIndex, path: to) { (parent) throws(WriteError) in
                parent.children[index].metadata["fileName"] = .string(toName)
            }
            plan.changes.append(try write(document, at: fromDocument, path: to))
            return plan
        default:
            break
        }
        guard !source.isDirectory else { throw .invalid(path: from, reason: "this folder cannot be moved there") }
        // Anything else moves by content: stored anew at the target, removed at the source.
        let content: [UInt8]
        do { content = try self.content(of: source, path: from).copyBytes() } catch { throw .corrupt(path: from, reason: "\(error)") }
        let removal = try planRemove(from)
        let store = try planStore(to, content: content)
        // Both halves were planned on the same snapshot: if they rewrite the same record (a child
        // moved between two `.children` folders of one record), the second would undo the first.
        let rewritten = Set(removal.changes.compactMap { if case .write(let path, _) = $0 { return path } else { return nil } })
        if store.changes.contains(where: { if case .write(let path, _) = $0 { return rewritten.contains(path) } else { return false } }) {
            throw .invalid(path: to, reason: "moving a child between the children folders of one record is not supported")
        }
        plan.changes += removal.changes + store.changes
        return plan
    }

    // MARK: - Pieces

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

    func loadDocument(_ gitPath: String) throws(WriteError) -> MedicalDocument {
        guard let entry = snapshot.entry(at: gitPath) else { throw .notFound(gitPath) }
        do { return try decodeDocument(entry.id, gitPath: gitPath) } catch { throw .corrupt(path: gitPath, reason: "\(error)") }
    }

    /// Front matter -> metadata (kept from the previous version when the file has none),
    /// body -> value; `updated` is now; `type` and `created` are kept or made.
    func apply(_ content: [UInt8], to document: inout MedicalDocument, path: String, defaultType: String? = nil,
               now: String = Timestamps.now()) throws(WriteError) {
        let parsed: (metadata: JSONObject?, value: String)
        do { parsed = try FrontMatter.parse(content) } catch { throw .invalid(path: path, reason: "front matter: \(error)") }
        let previous = document.metadata
        var metadata = parsed.metadata ?? previous
        if metadata["type"]?.stringValue == nil {
            metadata["type"] = previous["type"] ?? .string(defaultType ?? Categories.defaultType)
        }
        if metadata["created"] == nil { metadata["created"] = previous["created"] ?? .string(now) }
        metadata["updated"] = .string(now)
        document.metadata = metadata
        document.value = parsed.value
    }

    func modifyChild(_ document: inout MedicalDocument, at indexPath: [Int], path: String,
                     _ body: (inout MedicalDocument) throws(WriteError) -> Void) throws(WriteError) {
        guard let first = indexPath.first else { return try body(&document) }
        guard first < document.children.count else { throw .corrupt(path: path, reason: "child \(indexPath) is gone") }
        try modifyChild(&document.children[first], at: Array(indexPath.dropFirst()), path: path, body)
    }

    func removeChild(documentPath: String, indexPath: [Int], path: String) throws(WriteError) -> Plan {
        var document = try loadDocument(documentPath)
        let folder = Self.parent(documentPath).parent
        var removed: [MedicalDocument] = []
        try modifyChild(&document, at: Array(indexPath.dropLast()), path: path) { (parent) throws(WriteError) in
            guard let index = indexPath.last, index < parent.children.count else { throw .notFound(path) }
            removed.append(parent.children.remove(at: index))
        }
        let sidecars = removed.flatMap(BinderVerifier.sidecarReferences).map { TreeChange.delete(path: join(folder, $0)) }
        return Plan(changes: sidecars + [try write(document, at: documentPath, path: path)], message: "Update entry")
    }

    func replaceSidecar(_ node: Node, content: [UInt8], path: String, now: String) throws(WriteError) -> Plan {
        var changes: [TreeChange] = [.write(path: node.gitPath, blob: try encryptSidecar(content, path: path))]
        if case .document(let reference)? = node.owner {
            var document = try loadDocument(reference)
            document.metadata["originalSizeBytes"] = JSONValue(content.count)
            document.metadata["updated"] = .string(now)
            changes.append(try write(document, at: reference, path: path))
        }
        return Plan(changes: changes, message: "Update attachment")
    }

    func attachmentChild(_ content: [UInt8], fileName: String, documentPath: String, path: String) throws(WriteError) -> (MedicalDocument, [TreeChange]) {
        let writer = BinderWriter(repository: repository, key: key, author: author)
        do {
            let child = try writer.attachmentChild(content, fileName: fileName, documentPath: documentPath)
            return (child, writer.stagedChanges)
        } catch { throw storageError(error, path) }
    }

    func write(_ document: MedicalDocument, at gitPath: String, path: String) throws(WriteError) -> TreeChange {
        let json = document.serializedBytes()
        guard json.count <= NIP44.maxPlaintextSize else { throw .tooLarge(path: path, bytes: json.count) }
        return .write(path: gitPath, blob: try encrypt(json, path: path))
    }

    func encrypt(_ plaintext: [UInt8], path: String) throws(WriteError) -> ObjectID {
        do {
            let payload = try NIP44.encrypt(plaintext, key: key)
            return try repository.writeBlob(Array(payload.utf8))
        } catch { throw storageError(error, path) }
    }

    func encryptSidecar(_ content: [UInt8], path: String) throws(WriteError) -> ObjectID {
        do { return try repository.writeBlob(try Sidecar.encrypt(content, key: key)) } catch { throw storageError(error, path) }
    }

    func storageError(_ error: any Error, _ path: String) -> WriteError {
        if case NIP44.Error.plaintextSize(let n) = error { return .tooLarge(path: path, bytes: n) }
        return .storage("\(path): \(error)")
    }
}
