import BinderCrypto
import BinderFormat
import BinderGit
import Logging

/// Turns one git folder into the view's listings: its own, and those of the virtual
/// `X.children/` folders of its documents. Decrypts the folder's documents (their rendered
/// size is needed for `stat`), never its attachments: a sidecar's size comes from its length
/// (see `sidecarSize`). Runs outside every lock; `ListingCache` keeps what it builds.
struct ListingBuilder {
    let repository: GitRepository
    let key: NIP44.ConversationKey
    let logger: Logger
    /// Time of the commit being shown: the mtime of folders and of files without a date.
    let commitTime: Timestamp
    /// Plaintext produced while listing (rendered documents), handed to the cache.
    var rendered: [(Node.Source, SecureBytes)] = []
    /// Set when a decryption ran out of secret memory: the listing shows such a record as
    /// stored, so it must not be kept or shown (`ListingCache` answers ENOMEM instead).
    var outOfSecretMemory: SecureMemoryError?
    /// Finished listings by view path ("" is the root).
    var listings: [String: Listing] = [:]
    /// What each document of the folder contributed last time, by file name: reused when the
    /// blob and what it depends on are unchanged, so that a folder rebuilt after a commit
    /// decrypts only the documents that changed.
    var previousParts: [String: DocumentPart] = [:]
    /// This build's parts, to keep for the next build of the folder.
    var parts: [String: DocumentPart] = [:]
    /// Git objects this build read: documents decrypted (the others' parts were reused) and
    /// sidecars sized.
    var objectReads = 0
    /// The documents the view's last commit wrote, in plaintext: read instead of their blobs.
    var written: WrittenDocuments?
    /// Documents this build decrypted (the others' parts were reused, from memory or the index).
    var documentDecryptions = 0
    /// Entries not shown as the format names them, with why (see `ListingFinding`): logged by
    /// the mount, reported by `binder verify`.
    var findings: [ListingFinding] = []

    // Per document being computed: what it looked up, and whether it took the commit time.
    private var lookups: [String: ObjectID?] = [:]
    private var usedCommitTime = false

    init(repository: GitRepository, key: NIP44.ConversationKey, logger: Logger, commitTime: Timestamp) {
        self.repository = repository
        self.key = key
        self.logger = logger
        self.commitTime = commitTime
    }

    /// Builds the listing of git folder `gitDirectory` (its entries given), shown at `viewPath`.
    mutating func build(viewPath: String, gitDirectory: String, entries allEntries: [TreeEntry]) {
        let findingsBefore = findings.count
        defer { logFindings(since: findingsBefore) }
        var entries = showableEntries(allEntries, gitDirectory: gitDirectory)
        // Git's order is bytewise for files; a folder sorts as if its name ended in '/'. Only
        // a folder out of place makes a sorted copy (of 100,000 entries: 6 MB at its peak).
        if !entries.indices.dropFirst().allSatisfy({ !ViewPath.precedesBytewise(entries[$0].name, entries[$0 - 1].name) }) {
            entries.sort { ViewPath.precedesBytewise($0.name, $1.name) }
        }
        var listing = Listing()
        // Documents first: they decide which sidecars are theirs.
        let consumedSidecars = addDocuments(entries, viewPath: viewPath, gitDirectory: gitDirectory, into: &listing)
        addOtherEntries(entries, gitDirectory: gitDirectory, consumedSidecars: consumedSidecars, into: &listing)
        listings[viewPath] = listing
        removeUnsafeNames()
    }

    /// The git path of `entry`, an entry of `gitDirectory`: the snapshot's own string, which
    /// every node of the entry then shares (a copy per record was 8 MB at 100,000 records).
    private func storedPath(of entry: TreeEntry, in gitDirectory: String) -> String {
        entry.folder.utf8.elementsEqual(gitDirectory.utf8) ? entry.path : join(gitDirectory, String(entry.name))
    }

    private func logFindings(since start: Int) {
        for finding in findings[start...] {
            logger.warning("\(finding.reason)", metadata: ["path": "\(finding.gitPath)"])
        }
    }

    /// Adds the folder's documents (and their `X.children` folders) to `listing`, each from its
    /// part of the last build or the listing index when still valid, else decrypted. Returns
    /// the sidecars the documents took as theirs.
    private mutating func addDocuments(_ entries: [TreeEntry], viewPath: String, gitDirectory: String,
                                       into listing: inout Listing) -> Set<String> {
        let files = FolderFiles(sortedEntries: entries)
        parts.reserveCapacity(parts.count + entries.count)
        listing.nodes.reserveCapacity(listing.nodes.count + entries.count)
        var consumedSidecars = Set<String>()
        for entry in entries where entry.kind == .blob {
            var name = String(entry.name)
            guard BinderNaming.isDocumentPath(name) else { continue }
            let part: DocumentPart
            if let known = previousParts.index(forKey: name), previousParts[known].value.isValid(blob: entry.id, files: files, commitTime: commitTime) {
                // The name as the parts kept it, not this copy: each record's name is then
                // held once (a copy per record was 8 MB at 100,000 records).
                (name, part) = previousParts[known]
            } else {
                part = documentPart(entry, name: name, gitPath: storedPath(of: entry, in: gitDirectory), gitDirectory: gitDirectory, files: files)
            }
            parts[name] = part
            consumedSidecars.formUnion(part.consumedSidecars)
            let shown = insert(part.name, part.node, into: &listing)
            if let children = part.children {
                let childrenName = BinderNaming.childrenFolderName(of: shown)
                _ = insert(childrenName, children.node, into: &listing)
                let childrenView = join(viewPath, childrenName)
                for (relative, childListing) in children.listings {
                    listings[relative.isEmpty ? childrenView : join(childrenView, relative)] = childListing
                }
            }
        }
        return consumedSidecars
    }

    /// Adds what is not a document: git folders, links, sidecars no document took, raw files.
    private mutating func addOtherEntries(_ entries: [TreeEntry], gitDirectory: String, consumedSidecars: Set<String>,
                                          into listing: inout Listing) {
        for entry in entries {
            let name = String(entry.name)
            let gitPath = storedPath(of: entry, in: gitDirectory)
            switch entry.kind {
            case .tree:
                // A git folder is found by its own name: under another one it would be empty.
                if let taken = listing.nodes[name] {
                    let owner = if case .child(let document, []) = taken.owner { "the folder of \(document)'s children" } else { taken.gitPath }
                    findings.append(ListingFinding(gitPath: gitPath, reason: "git folder not shown: its name \(name) is taken by \(owner)"))
                    continue
                }
                listing.nodes[name] = Node(source: .directory, size: 0, modified: commitTime, gitPath: gitPath)
            case .link:
                // Never followed: the link's target is shown as stored, read-only.
                findings.append(ListingFinding(gitPath: gitPath, reason: "a symbolic link: shown as a read-only file holding its target, never followed"))
                _ = insert(name, rawNode(entry, gitPath: gitPath), into: &listing)
            case .blob:
                if BinderNaming.hasDocumentExtension(name) { continue }  // added as documents, .meta.json hidden
                if BinderNaming.isSidecarName(name) {
                    if consumedSidecars.contains(name) { continue }
                    // A sidecar nothing refers to is still shown, decrypted if it can be.
                    if let node = sidecarNode(entry, gitPath: gitPath, metadata: nil) {
                        _ = insert(BinderNaming.attachmentName(sidecar: name, format: nil), node, into: &listing)
                        continue
                    }
                }
                _ = insert(name, rawNode(entry, gitPath: gitPath), into: &listing)
            case .submodule, .unreadable:
                continue  // left out by `showableEntries`
            }
        }
    }

    /// A name made from a document (`X.children` of a long `X`, a child's) must be a file name too.
    private mutating func removeUnsafeNames() {
        for (path, built) in listings {
            for (name, node) in built.nodes {
                // At the root, `.binder` too: an attachment shown by its sidecar's name
                // (`.binder.enc`) would stand where the views are.
                guard let unsafe = BinderNaming.unsafeNameReason(name, atRoot: path.isEmpty) else { continue }
                findings.append(ListingFinding(gitPath: node.gitPath, reason: "not shown: its name in the view would be " + unsafe))
                listings[path]?.nodes.removeValue(forKey: name)
            }
        }
    }

    /// The entries that can be shown: not a gitlink, not a second entry of one name, and not
    /// a name that is not a file name here, leads out of the folder or belongs to git or binder.
    private mutating func showableEntries(_ entries: [TreeEntry], gitDirectory: String) -> [TreeEntry] {
        // Two names are one where the view's names compare equal (by Unicode equivalence, as
        // `String` does). Each name's hash is kept, not the name, and names are compared only
        // where two hashes meet: a set of 100,000 names was 9 MB at the peak of a listing.
        var hashes = Set<Int>(minimumCapacity: entries.count)
        var sharedHashes = Set<Int>()
        for entry in entries where entry.nameIsExact {
            let hash = entry.name.hashValue
            if !hashes.insert(hash).inserted { sharedHashes.insert(hash) }
        }
        hashes = []
        var seen = Set<Substring>()
        var hidden: [Int] = []
        for (index, entry) in entries.enumerated() {
            let name = String(entry.name)
            var reason: String?
            if !entry.nameIsExact {
                reason = "not shown: its name is not valid UTF-8 or holds '/' (here U+FFFD stands in for them)"
            } else if let unsafe = BinderNaming.unsafeNameReason(name, atRoot: gitDirectory.isEmpty) {
                reason = "not shown: its name is " + unsafe
            } else if entry.kind == .submodule {
                reason = "not shown: a submodule (gitlink), whose commit is not in this repository"
            } else if entry.kind == .unreadable {
                reason = "not shown: a folder whose tree cannot be read (its object \(entry.id) is missing, is not a tree, "
                    + "or does not parse); saves beside it keep it as it is"
            } else if !sharedHashes.isEmpty, sharedHashes.contains(entry.name.hashValue), !seen.insert(entry.name).inserted {
                reason = "not shown: a second entry of this name in its folder"
            }
            if let reason {
                findings.append(ListingFinding(gitPath: join(gitDirectory, name), reason: reason))
                hidden.append(index)
            }
        }
        // Nearly always all of them: the snapshot's array, shared, rather than a copy.
        guard !hidden.isEmpty else { return entries }
        let hiddenIndices = Set(hidden)
        var showable: [TreeEntry] = []
        showable.reserveCapacity(entries.count - hidden.count)
        for (index, entry) in entries.enumerated() where !hiddenIndices.contains(index) { showable.append(entry) }
        return showable
    }

    /// `listing.insertUnique`, noting a name that was taken.
    private mutating func insert(_ name: String, _ node: Node, into listing: inout Listing) -> String {
        let shown = listing.insertUnique(name, node)
        if shown != name {
            let holder = listing.nodes[name].map(Self.storedAt) ?? "another entry"
            findings.append(ListingFinding(gitPath: Self.storedAt(node), reason: "shown as \(shown): the name \(name) is taken by \(holder)"))
        }
        return shown
    }

    /// The git path that stands for a node: an attachment's document rather than its sidecar.
    private static func storedAt(_ node: Node) -> String {
        if case .document(let path) = node.owner { return path }
        return node.gitPath
    }

    /// Decrypts one document and works out its nodes (see `DocumentPart`).
    private mutating func documentPart(_ entry: TreeEntry, name: String, gitPath: String, gitDirectory: String,
                                       files: FolderFiles) -> DocumentPart {
        lookups = [:]
        usedCommitTime = false
        var consumed = Set<String>()
        var facts: RecordFacts?
        func finish(_ name: String, _ node: Node, children: DocumentPart.Children? = nil) -> DocumentPart {
            DocumentPart(blob: entry.id, name: name, node: node, children: children, consumedSidecars: consumed,
                         sidecarLookups: lookups, usesCommitTime: usedCommitTime, commitTime: commitTime, facts: facts)
        }
        guard let document = readDocument(entry, gitPath: gitPath) else {
            usedCommitTime = true
            return finish(name, rawNode(entry, gitPath: gitPath))
        }
        let stem = BinderNaming.documentStem(name) ?? name
        facts = RecordFacts(document, fileStem: stem)
        if let reference = BinderNaming.sidecarReference(of: document), let sidecar = lookup(reference, files),
           let sidecarNode = sidecarNode(sidecar, gitPath: storedPath(of: sidecar, in: gitDirectory), metadata: document.metadata) {
            let node = sidecarNode.owned(by: .document(path: gitPath))
            consumed.insert(reference)
            return finish(BinderNaming.attachmentName(sidecar: reference, format: document.metadata["format"]?.stringValue), node)
        }
        let source = Node.Source.document(blob: entry.id)
        let size = keepRendered(source, FrontMatter.render(metadata: document.metadata, value: document.value))
        let time = modified(document.metadata)
        let node = Node(source: source, size: size, modified: time, gitPath: gitPath)
        guard !document.children.isEmpty else { return finish(BinderNaming.recordName(stem: stem), node) }
        var childListings: [String: Listing] = [:]
        buildChildren(of: document, blob: entry.id, indexPath: [], viewPath: "", gitPath: gitPath,
                      gitDirectory: gitDirectory, files: files, consumed: &consumed, into: &childListings)
        let folder = Node(source: .directory, size: 0, modified: time, gitPath: gitPath, owner: .child(documentPath: gitPath, indexPath: []))
        return finish(BinderNaming.recordName(stem: stem), node, children: DocumentPart.Children(node: folder, listings: childListings))
    }

    /// Keeps `text` (a rendered document or child) for the cache, in secret memory; returns its
    /// size. When secret memory is exhausted it is not kept: a read renders it again, and
    /// fails with ENOMEM if memory is still short. Listing never fails for lack of it.
    private mutating func keepRendered(_ source: Node.Source, _ text: String) -> Int {
        if let bytes = try? SecureBytes(copyingUTF8: text) { rendered.append((source, bytes)) }
        return text.utf8.count
    }

    /// The file `name` of the folder, remembered as something the document being computed depends on.
    private mutating func lookup(_ name: String, _ files: FolderFiles) -> TreeEntry? {
        let entry = files.file(named: name)
        lookups[name] = entry?.id
        return entry
    }

    /// Builds the listings of a document's `.children` folder (and nested ones) into `out`,
    /// keyed by view path relative to the document's `.children` folder ("" is that folder).
    private mutating func buildChildren(of document: MedicalDocument, blob: ObjectID, indexPath: [Int], viewPath: String,
                                        gitPath: String, gitDirectory: String, files: FolderFiles,
                                        consumed: inout Set<String>, into out: inout [String: Listing]) {
        var listing = Listing()
        for (index, child) in document.children.enumerated() {
            let childPath = indexPath + [index]
            let parentTime = modified(document.metadata)
            let time = child.metadata["updated"] != nil || child.metadata["created"] != nil ? modified(child.metadata) : parentTime
            if let reference = BinderNaming.sidecarReference(of: child), let sidecar = lookup(reference, files),
               let sidecarNode = sidecarNode(sidecar, gitPath: storedPath(of: sidecar, in: gitDirectory), metadata: child.metadata, time: time) {
                let node = sidecarNode.owned(by: .child(documentPath: gitPath, indexPath: childPath))
                consumed.insert(reference)
                _ = listing.insertUnique(BinderNaming.childName(child, index: index, count: document.children.count, sidecar: reference), node)
                continue
            }
            let name = BinderNaming.childName(child, index: index, count: document.children.count, sidecar: nil)
            if BinderNaming.isInlineAttachment(child) {
                let source = Node.Source.inlineAttachment(blob: blob, indexPath: childPath)
                do {
                    if let bytes = try Sidecar.decodeInline(child.value) {
                        rendered.append((source, bytes))
                        _ = listing.insertUnique(name, Node(source: source, size: bytes.count, modified: time, gitPath: gitPath))
                        continue
                    }
                } catch {
                    // No secret memory to keep it for the cache: the size is worked out from
                    // the text, and a read decodes it again (or fails with ENOMEM).
                    if let size = Sidecar.inlineSize(child.value) {
                        _ = listing.insertUnique(name, Node(source: source, size: size, modified: time, gitPath: gitPath))
                        continue
                    }
                }
                logger.warning("inline attachment is not base64", metadata: ["path": "\(gitPath)", "child": "\(childPath)"])
            }
            let source = Node.Source.child(blob: blob, indexPath: childPath)
            let size = keepRendered(source, FrontMatter.render(metadata: child.metadata, value: child.value))
            let shown = listing.insertUnique(BinderNaming.isInlineAttachment(child) ? BinderNaming.recordName(stem: BinderNaming.splitExtension(name).stem) : name,
                                             Node(source: source, size: size, modified: time, gitPath: gitPath))
            if !child.children.isEmpty {
                let childrenName = BinderNaming.childrenFolderName(of: shown)
                _ = listing.insertUnique(childrenName, Node(source: .directory, size: 0, modified: time, gitPath: gitPath,
                                                            owner: .child(documentPath: gitPath, indexPath: childPath)))
                buildChildren(of: child, blob: blob, indexPath: childPath, viewPath: join(viewPath, childrenName), gitPath: gitPath,
                              gitDirectory: gitDirectory, files: files, consumed: &consumed, into: &out)
            }
        }
        out[viewPath] = listing
    }

    /// Decrypts and parses a document; nil (and a log line) if it cannot be.
    private mutating func readDocument(_ entry: TreeEntry, gitPath: String) -> MedicalDocument? {
        if let json = written?.json(of: entry.id), let document = try? BinderReader.parseDocument(json, gitPath: gitPath) {
            return document
        }
        objectReads += 1
        documentDecryptions += 1
        do {
            return try BinderReader.readDocument(repository.objects.readBlob(entry.id, maxSize: BinderReader.maximumDocumentBlobBytes),
                                                 key: key, gitPath: gitPath)
        } catch {
            if let memory = exhaustedSecretMemory(error) {
                outOfSecretMemory = memory
                return nil
            }
            logger.warning("shown as stored: \(error)", metadata: ["path": "\(gitPath)"])
            return nil
        }
    }

    private func rawNode(_ entry: TreeEntry, gitPath: String) -> Node {
        let size = (try? repository.objects.blobSize(entry.id)) ?? 0
        return Node(source: .raw(blob: entry.id), size: size, modified: commitTime, gitPath: gitPath)
    }

    /// An attachment node for a sidecar, with its exact size; nil when the sidecar cannot be
    /// read as one (then it is shown as stored).
    private mutating func sidecarNode(_ entry: TreeEntry, gitPath: String, metadata: JSONObject?, time: Timestamp? = nil) -> Node? {
        guard let size = sidecarSize(entry) else {
            logger.warning("sidecar cannot be decrypted; shown as stored", metadata: ["path": "\(gitPath)"])
            return nil
        }
        let modified: Timestamp
        if let time { modified = time } else if let metadata { modified = self.modified(metadata) } else {
            usedCommitTime = true
            modified = commitTime
        }
        return Node(source: .sidecar(blob: entry.id), size: size, modified: modified, gitPath: gitPath)
    }

    /// The attachment's exact size, from the sidecar's length and the last ChaCha20 block
    /// (`Sidecar.plaintextSize`): the attachment itself is not decrypted. The apps'
    /// `originalSizeBytes` cannot stand in for this: a sidecar's length pins the size only to
    /// within two bytes, and `stat` must be exact.
    private mutating func sidecarSize(_ entry: TreeEntry) -> Int? {
        objectReads += 1
        // Read where libgit2 holds it: no copy of the ciphertext.
        guard let blob = try? repository.objects.blob(entry.id) else { return nil }
        return blob.withUnsafeBytes { bytes in
            // Text the length cannot speak for (wrapped into lines): decrypted whole, once.
            if let size = Sidecar.plaintextSize(bytes, key: key) { return size }
            do { return try Sidecar.decrypt(bytes, key: key).count } catch {
                if let memory = exhaustedSecretMemory(error) { outOfSecretMemory = memory }
                return nil
            }
        }
    }

    private mutating func modified(_ metadata: JSONObject) -> Timestamp {
        for field in ["updated", "created"] {
            if let text = metadata[field]?.stringValue, let t = Timestamps.parse(text) {
                return Timestamp(seconds: t.seconds, nanoseconds: t.nanoseconds)
            }
        }
        usedCommitTime = true
        return commitTime
    }
}

/// An entry of a git folder the view does not show as the format names it (hidden, shown as
/// a raw file, or under another name), and why in plain words.
struct ListingFinding: Sendable {
    let gitPath: String
    let reason: String
}

/// What one document contributes to its folder's listings: computed once per blob (decrypting
/// it), reused while the blob, the sidecars it names and (if it has no date) the commit time
/// stay the same. Holds names, sizes and times, and the facts the `.binder/` views are named by.
///
/// A class, immutable: a folder's parts sit in dictionaries (the loaded listing index's, each
/// build's, the index writer's) that share them. Held inline, a part of a few hundred bytes
/// made a 100,000-record folder's dictionaries 100+ MB each, at a quarter of their buckets.
final class DocumentPart: Sendable {
    struct Children: Sendable {
        /// The `X.children` folder's node; its name follows the document's shown name.
        let node: Node
        /// Listings keyed by view path relative to the `X.children` folder ("" is itself).
        let listings: [String: Listing]
    }

    /// A box for the few documents that have children: kept inline, the optional took 112 of
    /// the part's 368 bytes for every record (11 MB of a 100,000-record folder's parts).
    private final class ChildrenBox: Sendable {
        let children: Children
        init(_ children: Children) { self.children = children }
    }

    let blob: ObjectID
    /// The name wanted in the folder (made unique when the folder is assembled).
    let name: String
    let node: Node
    private let childrenBox: ChildrenBox?
    var children: Children? { childrenBox?.children }
    let consumedSidecars: Set<String>
    /// Sidecar files looked up, by name, with the blob found (nil: there was none).
    let sidecarLookups: [String: ObjectID?]
    let usesCommitTime: Bool
    let commitTime: Timestamp
    /// Date, title and tags of the record, for the timeline and tag views (`.binder/`); nil
    /// for what cannot be read. The one piece of content kept here, in memory only.
    let facts: RecordFacts?

    init(blob: ObjectID, name: String, node: Node, children: Children?, consumedSidecars: Set<String>,
         sidecarLookups: [String: ObjectID?], usesCommitTime: Bool, commitTime: Timestamp, facts: RecordFacts?) {
        self.blob = blob
        self.name = name
        self.node = node
        childrenBox = children.map(ChildrenBox.init)
        self.consumedSidecars = consumedSidecars
        self.sidecarLookups = sidecarLookups
        self.usesCommitTime = usesCommitTime
        self.commitTime = commitTime
        self.facts = facts
    }

    func isValid(blob: ObjectID, files: FolderFiles, commitTime: Timestamp) -> Bool {
        guard blob == self.blob, !usesCommitTime || commitTime == self.commitTime else { return false }
        return sidecarLookups.allSatisfy { name, id in files.file(named: name)?.id == id }
    }
}

/// A git folder's files by exact name (a document's sidecars are looked up here): a binary
/// search over its entries, which the builder has sorted bytewise already. (A dictionary of
/// them was 19 MB while a folder of 100,000 records was listed, and matched names by
/// Unicode equivalence where git compares bytes.)
struct FolderFiles {
    /// Bytewise by name, as `ListingBuilder.build` sorts them.
    let sortedEntries: [TreeEntry]

    /// The file (not a folder, link or submodule: a link is never read through) named `name`.
    func file(named name: String) -> TreeEntry? {
        let wanted = Substring(name)
        var low = 0, high = sortedEntries.count
        while low < high {
            let middle = (low + high) / 2
            if ViewPath.precedesBytewise(sortedEntries[middle].name, wanted) { low = middle + 1 } else { high = middle }
        }
        guard low < sortedEntries.count else { return nil }
        let entry = sortedEntries[low]
        guard entry.kind == .blob, entry.name.utf8.elementsEqual(wanted.utf8) else { return nil }
        return entry
    }
}
