import BinderCrypto
import BinderFormat
import BinderGit
import Logging

/// Turns one git folder into the view's listings: its own, and those of the virtual
/// `X.children/` folders of its documents. Decrypts the folder's documents (their rendered
/// size is needed for `stat`), never its attachments: a sidecar's size comes from its length
/// (see `sidecarSize`). Runs under `BinderView`'s state lock.
struct ListingBuilder {
    let repository: GitRepository
    let key: NIP44.ConversationKey
    let logger: Logger
    /// Time of the commit being shown: the mtime of folders and of files without a date.
    let commitTime: Timestamp
    /// Plaintext produced while listing (rendered documents), handed to the cache.
    var rendered: [(Node.Source, SecureBytes)] = []
    /// Finished listings by view path ("" is the root).
    var listings: [String: Listing] = [:]

    init(repository: GitRepository, key: NIP44.ConversationKey, logger: Logger, commitTime: Timestamp) {
        self.repository = repository
        self.key = key
        self.logger = logger
        self.commitTime = commitTime
    }

    /// Builds the listing of git folder `gitDirectory` (its entries given), shown at `viewPath`.
    mutating func build(viewPath: String, gitDirectory: String, entries: [TreeEntry]) {
        var listing = Listing()
        var files: [String: TreeEntry] = [:]
        for entry in entries where entry.kind == .blob || entry.kind == .link {
            files[String(entry.name)] = entry
        }
        var consumedSidecars = Set<String>()
        let sortedEntries = entries.sorted { Array($0.name.utf8).lexicographicallyPrecedes(Array($1.name.utf8)) }

        // Documents first: they decide which sidecars are theirs.
        for entry in sortedEntries where entry.kind == .blob {
            let name = String(entry.name)
            guard name.hasSuffix(NameMapping.documentExtension), name != NameMapping.folderMetadataName else { continue }
            let gitPath = join(gitDirectory, name)
            guard let document = readDocument(entry, gitPath: gitPath) else {
                _ = listing.insertUnique(name, rawNode(entry, gitPath: gitPath))
                continue
            }
            let stem = String(name.dropLast(NameMapping.documentExtension.count))
            if document.type == "attachment_ref", let sidecar = files[document.value], document.value.hasSuffix(NameMapping.sidecarExtension),
               var node = sidecarNode(sidecar, gitPath: join(gitDirectory, document.value), metadata: document.metadata) {
                node.owner = .document(path: gitPath)
                consumedSidecars.insert(document.value)
                _ = listing.insertUnique(NameMapping.attachmentName(sidecar: document.value, format: document.metadata["format"]?.stringValue), node)
                continue
            }
            let source = Node.Source.document(blob: entry.id)
            let bytes = SecureBytes(utf8: FrontMatter.render(metadata: document.metadata, value: document.value))
            rendered.append((source, bytes))
            let shown = listing.insertUnique(stem + NameMapping.markdownExtension,
                                             Node(source: source, size: bytes.count, modified: modified(document.metadata), gitPath: gitPath))
            if !document.children.isEmpty {
                let childrenName = NameMapping.splitExtension(shown).stem + NameMapping.childrenSuffix
                let childrenView = join(viewPath, childrenName)
                _ = listing.insertUnique(childrenName, Node(source: .directory, size: 0, modified: modified(document.metadata), gitPath: gitPath,
                                                            owner: .child(documentPath: gitPath, indexPath: [])))
                buildChildren(of: document, blob: entry.id, indexPath: [], viewPath: childrenView, gitPath: gitPath,
                              gitDirectory: gitDirectory, files: files, consumed: &consumedSidecars)
            }
        }

        for entry in sortedEntries {
            let name = String(entry.name)
            let gitPath = join(gitDirectory, name)
            switch entry.kind {
            case .tree:
                _ = listing.insertUnique(name, Node(source: .directory, size: 0, modified: commitTime, gitPath: gitPath))
            case .blob, .link:
                if name.hasSuffix(NameMapping.documentExtension) { continue }  // handled above, .meta.json hidden
                if name.hasSuffix(NameMapping.sidecarExtension) {
                    if consumedSidecars.contains(name) { continue }
                    // A sidecar nothing refers to is still shown, decrypted if it can be.
                    if let node = sidecarNode(entry, gitPath: gitPath, metadata: nil) {
                        _ = listing.insertUnique(NameMapping.attachmentName(sidecar: name, format: nil), node)
                        continue
                    }
                }
                _ = listing.insertUnique(name, rawNode(entry, gitPath: gitPath))
            default:
                continue  // submodules are not binder content
            }
        }
        listings[viewPath] = listing
    }

    private mutating func buildChildren(of document: MedicalDocument, blob: ObjectID, indexPath: [Int], viewPath: String,
                                        gitPath: String, gitDirectory: String, files: [String: TreeEntry],
                                        consumed: inout Set<String>) {
        var listing = Listing()
        for (index, child) in document.children.enumerated() {
            let childPath = indexPath + [index]
            let parentTime = modified(document.metadata)
            let time = child.metadata["updated"] != nil || child.metadata["created"] != nil ? modified(child.metadata) : parentTime
            if child.type == "attachment_ref", child.value.hasSuffix(NameMapping.sidecarExtension), let sidecar = files[child.value],
               var node = sidecarNode(sidecar, gitPath: join(gitDirectory, child.value), metadata: child.metadata, time: time) {
                node.owner = .child(documentPath: gitPath, indexPath: childPath)
                consumed.insert(child.value)
                _ = listing.insertUnique(NameMapping.childName(child, index: index, count: document.children.count, sidecar: child.value), node)
                continue
            }
            let name = NameMapping.childName(child, index: index, count: document.children.count, sidecar: nil)
            if NameMapping.isInlineAttachment(child) {
                let source = Node.Source.inlineAttachment(blob: blob, indexPath: childPath)
                if let bytes = Sidecar.decodeInline(child.value) {
                    rendered.append((source, bytes))
                    _ = listing.insertUnique(name, Node(source: source, size: bytes.count, modified: time, gitPath: gitPath))
                    continue
                }
                logger.warning("inline attachment is not base64", metadata: ["path": "\(gitPath)", "child": "\(childPath)"])
            }
            let source = Node.Source.child(blob: blob, indexPath: childPath)
            let bytes = SecureBytes(utf8: FrontMatter.render(metadata: child.metadata, value: child.value))
            rendered.append((source, bytes))
            let shown = listing.insertUnique(NameMapping.isInlineAttachment(child) ? NameMapping.splitExtension(name).stem + ".md" : name,
                                             Node(source: source, size: bytes.count, modified: time, gitPath: gitPath))
            if !child.children.isEmpty {
                let childrenName = NameMapping.splitExtension(shown).stem + NameMapping.childrenSuffix
                _ = listing.insertUnique(childrenName, Node(source: .directory, size: 0, modified: time, gitPath: gitPath,
                                                            owner: .child(documentPath: gitPath, indexPath: childPath)))
                buildChildren(of: child, blob: blob, indexPath: childPath, viewPath: join(viewPath, childrenName), gitPath: gitPath,
                              gitDirectory: gitDirectory, files: files, consumed: &consumed)
            }
        }
        listings[viewPath] = listing
    }

    /// Decrypts and parses a document; nil (and a log line) if it cannot be.
    private func readDocument(_ entry: TreeEntry, gitPath: String) -> MedicalDocument? {
        do {
            return try BinderReader.readDocument(repository.readBlob(entry.id), key: key, gitPath: gitPath)
        } catch {
            logger.warning("shown as stored: \(error)", metadata: ["path": "\(gitPath)"])
            return nil
        }
    }

    private func rawNode(_ entry: TreeEntry, gitPath: String) -> Node {
        let size = (try? repository.blobSize(entry.id)) ?? 0
        return Node(source: .raw(blob: entry.id), size: size, modified: commitTime, gitPath: gitPath)
    }

    /// An attachment node for a sidecar, with its exact size; nil when the sidecar cannot be
    /// read as one (then it is shown as stored).
    private func sidecarNode(_ entry: TreeEntry, gitPath: String, metadata: JSONObject?, time: Timestamp? = nil) -> Node? {
        guard let size = sidecarSize(entry) else {
            logger.warning("sidecar cannot be decrypted; shown as stored", metadata: ["path": "\(gitPath)"])
            return nil
        }
        return Node(source: .sidecar(blob: entry.id), size: size, modified: time ?? metadata.map(modified) ?? commitTime, gitPath: gitPath)
    }

    /// The attachment's exact size, from the sidecar's length and the last ChaCha20 block
    /// (`Sidecar.plaintextSize`): the attachment itself is not decrypted. The apps'
    /// `originalSizeBytes` cannot stand in for this: a sidecar's length pins the size only to
    /// within two bytes, and `stat` must be exact.
    private func sidecarSize(_ entry: TreeEntry) -> Int? {
        guard let bytes = try? repository.readBlob(entry.id) else { return nil }
        return Sidecar.plaintextSize(bytes, key: key)
    }

    private func modified(_ metadata: JSONObject) -> Timestamp {
        for field in ["updated", "created"] {
            if let text = metadata[field]?.stringValue, let t = Timestamps.parse(text) {
                return Timestamp(seconds: t.seconds, nanoseconds: t.nanoseconds)
            }
        }
        return commitTime
    }
}

func join(_ directory: String, _ name: String) -> String {
    directory.isEmpty ? name : directory + "/" + name
}
