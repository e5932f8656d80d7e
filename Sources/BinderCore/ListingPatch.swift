import BinderCrypto
import BinderGit
import Logging

/// A git folder's listing patched in place after the view's own commit, instead of assembled
/// again from all its parts: a save then costs the documents it changed, not the size of its
/// folder (assembling sorts, checks and hashes every entry: two thirds of a save at 10,000
/// records; docs/BENCHMARKS.md, "Issue 13: saves").
///
/// Only what gives the listing a full build would give is patched; anything else is built
/// again as before (`ListingCache.adopt` drops it). Patched: a folder on a changed path whose
/// own changes are writes of plain documents (`X.json`: no sidecar, no children, a date of
/// their own, before and after) that keep their name or take a free one, and whose folders on
/// the changed paths were folders before and after (only their ids changed), in a folder git
/// writes back as it is (not one of the snapshot's `irregularFolders`). Nodes that show
/// the commit's time (folders, raw files, sidecars nothing refers to) take the new one. Debug
/// builds check every patch against a full build (`ListingCache.checkPatches`);
/// `ListingPatchTests` holds the table of cases.
struct ListingPatch: Sendable {
    /// The git folder (also its view path).
    let folder: String
    /// The nodes of the documents written, by name shown.
    let nodes: [String: Node]
    /// The new commit's time, which the nodes named in `bookkeeping` take.
    let commitTime: Timestamp
    /// The written documents' parts, by file name.
    let parts: [String: DocumentPart]
    let bookkeeping: PatchBookkeeping

    /// Patches `listing` (the one this patch was worked out from) in place: a folder's listing
    /// is not copied (the cache holds the only reference), so this costs the change.
    func apply(to listing: inout Listing) {
        for name in bookkeeping.commitTimed where nodes[name] == nil {
            if let node = listing.nodes[name] { listing.nodes[name] = node.retimed(commitTime) }
        }
        for (name, node) in nodes { listing.nodes[name] = node }
    }
}

/// What `ListingCache` keeps beside a git folder's listing so that patching it costs the
/// change, not the folder: which names show the commit's time, and whether a readable document
/// takes its time from the commit (its part is then worked out again at every commit by a full
/// build, so the folder is not patched).
struct PatchBookkeeping: Sendable {
    var commitTimed: Set<String> = []
    var documentsUseCommitTime = false

    init(listing: Listing, parts: [String: DocumentPart]) {
        for (name, node) in listing.nodes where node.showsCommitTime { commitTimed.insert(name) }
        documentsUseCommitTime = parts.values.contains { $0.usesCommitTime && !$0.node.isRaw }
    }
}

/// What one commit did to one folder on its paths, as far as patching is concerned.
struct FolderChange: Equatable {
    /// Documents written directly in the folder: file name and blob. Nil when the folder
    /// had a change a patch does not cover (a delete, anything but a plain `X.json` written).
    var written: [String: ObjectID]? = [:]
    /// Its sub-folders on the changed paths (they must stay folders).
    var subfolders: Set<String> = []

    /// The folders on the paths of `changes` (each change's folder and that folder's ancestors).
    static func of(_ changes: [TreeChange]) -> [String: FolderChange] {
        var folders: [String: FolderChange] = [:]
        for change in changes {
            let (parent, name) = ViewPath.split(change.path)
            var child = parent
            for ancestor in ViewPath.ancestors(of: parent) {
                folders[ancestor, default: FolderChange()].subfolders.insert(child)
                child = ancestor
            }
            var folder = folders[parent, default: FolderChange()]
            if case .write(_, let blob) = change, BinderNaming.isDocumentPath(name), folder.written?[name] == nil {
                folder.written?[name] = blob
            } else {
                folder.written = nil
            }
            folders[parent] = folder
        }
        return folders
    }
}

/// Works out the patches of one commit: pure, but for decrypting the documents written.
struct ListingPatcher {
    let repository: GitRepository
    let key: NIP44.ConversationKey
    let logger: Logger
    /// The snapshots before and after the commit.
    let old: Snapshot
    let new: Snapshot
    /// The documents the commit wrote, in plaintext (not read from git again).
    let written: WrittenDocuments?
    /// Plaintext rendered while patching (for the cache), and git objects read.
    var rendered: [(Node.Source, SecureBytes)] = []
    var objectReads = 0

    /// `listing` (with the `parts` and `bookkeeping` kept beside it) patched for `change`;
    /// nil when only a full build can tell.
    mutating func patch(folder: String, change: FolderChange, listing: Listing, parts: [String: DocumentPart],
                        bookkeeping: PatchBookkeeping) -> ListingPatch? {
        guard let written = change.written, !bookkeeping.documentsUseCommitTime,
              old.gitFolders[folder] != nil, new.gitFolders[folder] != nil,
              !old.irregularFolders.contains(folder), !new.irregularFolders.contains(folder),
              change.subfolders.allSatisfy({ old.gitFolders[$0] != nil && new.gitFolders[$0] != nil }) else { return nil }
        var bookkeeping = bookkeeping
        guard !written.isEmpty else {
            return ListingPatch(folder: folder, nodes: [:], commitTime: new.commitTime, parts: [:], bookkeeping: bookkeeping)
        }

        // The written documents alone, as a full build would work them out.
        var builder = ListingBuilder(repository: repository, key: key, logger: logger, commitTime: new.commitTime)
        builder.written = self.written
        let entries = written.map { name, blob in TreeEntry(path: join(folder, name), id: blob, kind: .blob, mode: 0o100644) }
        builder.build(viewPath: folder, gitDirectory: folder, entries: entries)
        objectReads += builder.objectReads
        rendered += builder.rendered
        guard builder.outOfSecretMemory == nil, builder.listings.count == 1,
              let alone = builder.listings[folder], alone.nodes.count == written.count else { return nil }

        var newParts: [String: DocumentPart] = [:]
        var nodes: [String: Node] = [:]
        for (name, blob) in written {
            guard let part = builder.parts[name], part.blob == blob, part.isPlain, let node = alone.nodes[part.name] else { return nil }
            if let before = parts[name] {
                // It keeps its name, which it held (nobody else wanted it: then they would
                // hold `-2` and could move up when it left).
                guard before.isPlain, before.name == part.name,
                      listing.nodes[before.name]?.source == before.node.source else { return nil }
            } else {
                // A new document takes a name nobody holds (so nobody wanted it).
                guard listing.nodes[part.name] == nil else { return nil }
            }
            nodes[part.name] = node
            newParts[name] = part
            if node.showsCommitTime { bookkeeping.commitTimed.insert(part.name) } else { bookkeeping.commitTimed.remove(part.name) }
        }
        return ListingPatch(folder: folder, nodes: nodes, commitTime: new.commitTime, parts: newParts, bookkeeping: bookkeeping)
    }
}

extension DocumentPart {
    /// A document shown as one file under a name of its own: no sidecar looked up, no
    /// children, and its time its own (or a raw file's, which any build gives the commit's).
    var isPlain: Bool {
        children == nil && sidecarLookups.isEmpty && (!usesCommitTime || node.isRaw)
    }
}

extension Node {
    /// Whether a full build gives this node the commit's time: a git folder, a raw file (a
    /// document that cannot be read included), a sidecar nothing refers to.
    var showsCommitTime: Bool {
        switch source {
        case .directory, .sidecar: owner == nil
        case .raw: true
        case .document, .child, .inlineAttachment: false
        }
    }

    /// Field by field (nothing else compares nodes, so `Node` is not `Equatable`).
    func isSame(as other: Node) -> Bool {
        source == other.source && size == other.size && modified == other.modified && gitPath == other.gitPath
            && owner == other.owner
    }
}

extension Listing {
    func isSame(as other: Listing) -> Bool {
        nodes.count == other.nodes.count && nodes.allSatisfy { name, node in other.nodes[name].map(node.isSame) ?? false }
    }
}
