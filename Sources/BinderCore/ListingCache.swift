import BinderCrypto
import BinderGit
import Logging
import Synchronization

/// The commit shown and what the view has worked out of it: folder listings (names, sizes,
/// mtimes) and what each document contributed to them. It exists so that a folder is decrypted
/// once, not per lookup, and so that a commit costs only the folders it touched.
final class ListingCache: Sendable {
    private struct Contents: ~Copyable {
        var snapshot: Snapshot
        /// Listings by view path ("" is the root), built on first use.
        var listings: [String: Listing] = [:]
        /// What each document contributed to its folder's listing, by git folder and file name:
        /// kept when a listing is dropped, so that rebuilding it decrypts only what changed.
        var documentParts: [String: [String: DocumentPart]] = [:]
        /// Beside each git folder's listing built or patched (and only those, not `.children`
        /// listings), what patching it after a commit needs (see `ListingPatch`).
        var bookkeeping: [String: PatchBookkeeping] = [:]
        /// The listing index being loaded, until its parts are taken into `documentParts`
        /// (`takeLoadedIndex`).
        var indexLoad: ListingIndexLoad?
    }

    private let repository: GitRepository
    private let key: NIP44.ConversationKey
    private let logger: Logger
    /// Rendered documents go straight here while a folder is listed.
    private let plaintext: PlaintextCache
    /// Git objects read since the mount began (documents, sidecars, raw files).
    let objectReads = Atomic<Int>(0)
    /// Documents decrypted to list their folders since the mount began (not counting reads).
    let documentDecryptions = Atomic<Int>(0)
    /// The documents of the view's last commit, in plaintext (read instead of their blobs).
    let written = WrittenDocuments()
    /// Keeps the document parts across mounts (nil: not kept, as in tests that want cold builds).
    let indexWriter: ListingIndexWriter?
    /// Guards the snapshot, the listings and the document parts. Never held while decrypting.
    private let contents: Mutex<Contents>

    init(repository: GitRepository, key: NIP44.ConversationKey, logger: Logger, plaintext: PlaintextCache, snapshot: Snapshot,
         index: ListingIndex? = nil, indexLoad: ListingIndexLoad? = nil) {
        self.repository = repository
        self.key = key
        self.logger = logger
        self.plaintext = plaintext
        var contents = Contents(snapshot: snapshot)
        contents.indexLoad = indexLoad ?? index.map { ListingIndexLoad(index: $0, logger: logger) }
        self.contents = Mutex(contents)
        indexWriter = index.map { ListingIndexWriter(index: $0, logger: logger) }
        indexWriter?.provide { [weak self] in
            self?.takeLoadedIndex()
            return self?.contents.withLock { $0.documentParts }
        }
    }

    /// Takes the parts the listing index holds for folders of the snapshot shown (none if it
    /// cannot be used: it is written again as folders are listed), waiting for the load if it
    /// is still under way; once: by the first listing after the load is over, by
    /// `documentParts` (the timeline) or by the index's writer (while it loads, a listing takes
    /// its own folder's parts from it, `ListingIndexLoad.parts(of:)`). Parts are only ever a shortcut
    /// (`DocumentPart.isValid`), so a commit shown meanwhile makes them cost nothing but checks.
    private func takeLoadedIndex() {
        guard let load = contents.withLock({ $0.indexLoad }) else { return }
        let loaded = load.parts  // waits outside the lock
        contents.withLock { contents in
            guard contents.indexLoad != nil else { return }  // another thread took it meanwhile
            contents.indexLoad = nil
            for (folder, parts) in loaded where contents.snapshot.gitFolders[folder] != nil && contents.documentParts[folder] == nil {
                contents.documentParts[folder] = parts
            }
        }
    }

    var snapshot: Snapshot { contents.withLock { $0.snapshot } }

    var listedFolders: Int { contents.withLock { $0.listings.count } }

    /// The listings built so far, by view path (to compare before and after a commit arrives).
    var builtListings: [String: Listing] { contents.withLock { $0.listings } }

    /// What each document of git folder `path` contributed to its listing, by file name (as
    /// far as it has been listed).
    func documentParts(_ path: String) -> [String: DocumentPart] {
        takeLoadedIndex()
        return contents.withLock { $0.documentParts[path] ?? [:] }
    }

    /// The node at `path` ("" has none: the root is not in a listing).
    func node(_ path: String) throws(ViewError) -> Node {
        let (parent, name) = ViewPath.split(path)
        guard !path.isEmpty, let node = try listing(parent).nodes[name] else { throw .notFound(path) }
        return node
    }

    /// The listing of folder `path`, built on first use. A git folder is built from its tree
    /// entries; a `.children` folder is built along with the git folder that holds its document.
    func listing(_ path: String) throws(ViewError) -> Listing {
        let (built, snapshot, knownParts, load) = contents.withLock {
            ($0.listings[path], $0.snapshot, $0.documentParts[path], $0.indexLoad)
        }
        if let built { return built }
        var parts = knownParts
        if let load {
            if load.isFinished {
                takeLoadedIndex()
                return try listing(path)
            }
            // While the index loads, a listing waits for its own folder's parts only (outside
            // the lock): the first `ls` does not wait for the decoding of a large folder.
            if parts == nil { parts = load.parts(of: path) }
        }
        // A git folder is listed only where its parent shows it as one: a `P.children` git
        // folder beside a record with children, or one under an unsafe name, is hidden.
        if !path.isEmpty {
            let (parent, name) = ViewPath.split(path)
            guard let node = try listing(parent).nodes[name] else { throw .notFound(path) }
            guard node.isDirectory else { throw .notDirectory(path) }
            if node.owner != nil {  // a `.children` folder: built with its parent
                if let built = contents.withLock({ $0.listings[path] }) { return built }
                throw .notFound(path)
            }
        }
        if let entries = snapshot.gitFolders[path] {
            var builder = ListingBuilder(repository: repository, key: key, logger: logger, commitTime: snapshot.commitTime)
            builder.previousParts = parts ?? [:]
            builder.build(viewPath: path, gitDirectory: path, entries: entries)
            objectReads.add(builder.objectReads, ordering: .relaxed)
            documentDecryptions.add(builder.documentDecryptions, ordering: .relaxed)
            if let memory = builder.outOfSecretMemory {
                throw .storage(path: path, reason: memory.description, code: .noMemory)
            }
            for (source, bytes) in builder.rendered { plaintext.put(source, bytes) }
            let own = builder.listings[path] ?? Listing()
            return contents.withLock { contents in
                // A commit may have replaced the snapshot meanwhile: then this listing is only
                // good for this answer, not for keeping.
                guard contents.snapshot.commit == snapshot.commit else { return own }
                contents.documentParts[path] = builder.parts
                if builder.documentDecryptions > 0 || builder.parts.count != parts?.count { indexWriter?.changed() }
                // Another thread may have built it meanwhile; the first one stays.
                for (viewPath, listing) in builder.listings where contents.listings[viewPath] == nil {
                    contents.listings[viewPath] = listing
                    contents.bookkeeping[viewPath] = viewPath == path ? PatchBookkeeping(listing: listing, parts: builder.parts) : nil
                }
                return contents.listings[path] ?? own
            }
        }
        // The parent listed it, and a commit took the folder away meanwhile.
        throw .notFound(path)
    }

    /// The listings of the folders on the paths of `changes` (the view's own commit from
    /// `old` to `new`), patched in place where that gives what a full build would (see
    /// `ListingPatch`), by git folder. Decrypts the documents written, outside the lock.
    func patches(for changes: [TreeChange], from old: Snapshot, to new: Snapshot) -> [String: ListingPatch] {
        let folders = FolderChange.of(changes)
        let kept = contents.withLock { contents in
            var kept: [(String, FolderChange, Listing, [String: DocumentPart], PatchBookkeeping)] = []
            guard contents.snapshot.commit == old.commit else { return kept }
            for (folder, change) in folders {
                guard let bookkeeping = contents.bookkeeping[folder], let listing = contents.listings[folder] else { continue }
                kept.append((folder, change, listing, contents.documentParts[folder] ?? [:], bookkeeping))
            }
            return kept
        }
        var patcher = ListingPatcher(repository: repository, key: key, logger: logger, old: old, new: new, written: written)
        var patches: [String: ListingPatch] = [:]
        for (folder, change, listing, parts, bookkeeping) in kept {
            patches[folder] = patcher.patch(folder: folder, change: change, listing: listing, parts: parts, bookkeeping: bookkeeping)
        }
        objectReads.add(patcher.objectReads, ordering: .relaxed)
        plaintext.forget(Self.supersededBlobs(changes, in: old))
        for (source, bytes) in patcher.rendered { plaintext.put(source, bytes) }
        return patches
    }

    /// The blobs at the paths `changes` write or delete in `old` that the commit does not
    /// write again (a rename writes the same blob elsewhere): versions no path shows after it.
    static func supersededBlobs(_ changes: [TreeChange], in old: Snapshot) -> Set<ObjectID> {
        var replaced = Set<ObjectID>(), written = Set<ObjectID>()
        for change in changes {
            if case .write(_, let blob) = change { written.insert(blob) }
            if let entry = old.fileEntry(at: change.path) { replaced.insert(entry.id) }
        }
        return replaced.subtracting(written)
    }

    /// Shows `snapshot` from now on. `changes`: what a commit changed, so that only the listings
    /// of the git folders it touched (and their ancestors) are dropped, or patched where
    /// `patches` has them (with the `.children` listings of their documents kept); nil drops
    /// them all.
    func adopt(_ snapshot: Snapshot, changes: [TreeChange]?, patches: [String: ListingPatch] = [:]) {
        contents.withLock { contents in
            let old = contents.snapshot
            contents.snapshot = snapshot
            Self.adoptLocked(&contents, oldFolders: old.gitFolders, changes: changes, patches: patches)
        }
    }

    /// Moves the snapshot shown to `patch`'s commit in place (`Snapshot.apply`), then drops or
    /// patches the listings as `adopt` does. False, and nothing changed, when the snapshot shown
    /// is not the patch's base (the caller then adopts a snapshot made anew). The caller holds
    /// no copy of the snapshot shown, so that its folders are patched, not copied.
    func adopt(applying patch: SnapshotPatch, changes: [TreeChange], patches: [String: ListingPatch]) -> Bool {
        contents.withLock { contents in
            guard contents.snapshot.apply(patch) else { return false }
            // A patch adds and removes no folder: the folders of before are those of now.
            Self.adoptLocked(&contents, oldFolders: nil, changes: changes, patches: patches)
            return true
        }
    }

    /// `adopt`'s work once `contents.snapshot` is the new one; `oldFolders` are the folders of
    /// the one before (nil: the same folders).
    private static func adoptLocked(_ contents: inout Contents, oldFolders: [String: [TreeEntry]]?, changes: [TreeChange]?,
                                    patches: [String: ListingPatch]) {
        let snapshot = contents.snapshot
        // Parts of folders that are gone can never be reused.
        if oldFolders != nil { contents.documentParts = contents.documentParts.filter { snapshot.gitFolders[$0.key] != nil } }
        guard let changes else {
            contents.bookkeeping.removeAll()
            return contents.listings.removeAll()
        }
        var affected = Set<String>()
        for change in changes {
            affected.insert(change.path)  // a folder deleted or written into as a whole
            affected.formUnion(ViewPath.ancestors(of: change.path))
        }
        // A listing belongs to the git folder it is in (`.children` listings to the folder
        // of their document).
        func gitFolder(_ viewPath: String) -> String {
            var path = viewPath
            while !path.isEmpty && (oldFolders ?? snapshot.gitFolders)[path] == nil && snapshot.gitFolders[path] == nil {
                path = ViewPath.split(path).parent
            }
            return path
        }
        for (folder, patch) in patches where contents.listings[folder] != nil {
            patch.apply(to: &contents.listings[folder, default: Listing()])
            contents.bookkeeping[folder] = patch.bookkeeping
            contents.documentParts[folder, default: [:]].merge(patch.parts) { _, new in new }
        }
        for key in Array(contents.listings.keys)
        where patches[key] == nil && !Self.isChildrenListing(key, patchedIn: patches, listings: contents.listings) {
            let folder = gitFolder(key)
            if affected.contains(folder) || snapshot.gitFolders[folder] == nil
                || affected.contains(where: { !$0.isEmpty && PathBytes.isInside(folder, folder: $0) }) {
                contents.listings.removeValue(forKey: key)
                contents.bookkeeping.removeValue(forKey: key)
            }
        }
    }

    /// Forgets the part of the document at `gitPath` and the listings built from it: its size
    /// in the view disagreed with its content (see `ViewReader.content(of:path:)`).
    func forgetPart(gitPath: String) {
        let (folder, name) = ViewPath.split(gitPath)
        contents.withLock { contents in
            contents.documentParts[folder]?.removeValue(forKey: name)
            for key in Array(contents.listings.keys) where key == folder || folder.isEmpty || PathBytes.isInside(key, folder: folder) {
                contents.listings.removeValue(forKey: key)
            }
        }
        indexWriter?.changed()
    }

    /// Forgets every listing and part (at unmount), after writing the listing index.
    func removeAll() {
        indexWriter?.finish()
        contents.withLock { contents in
            contents.listings.removeAll()
            contents.documentParts.removeAll()
            contents.bookkeeping.removeAll()
        }
    }

    /// Whether `key` is the listing of a `.children` folder of a document in a patched folder
    /// (kept with it: such listings are built only along with their git folder).
    private static func isChildrenListing(_ key: String, patchedIn patches: [String: ListingPatch],
                                          listings: [String: Listing]) -> Bool {
        guard !patches.isEmpty else { return false }
        var child = key
        for folder in ViewPath.ancestors(of: key) {
            if patches[folder] != nil { return listings[folder]?.nodes[ViewPath.split(child).name]?.owner != nil }
            child = folder
        }
        return false
    }

    #if DEBUG
    /// Checks each patched listing, and the `.children` listings kept with it, against a full
    /// build of its folder at the snapshot shown (tests run debug builds).
    func checkPatches(_ patches: [String: ListingPatch]) {
        let (snapshot, kept, parts) = contents.withLock { ($0.snapshot, $0.listings, $0.documentParts) }
        for folder in patches.keys {
            guard let patched = kept[folder], let entries = snapshot.gitFolders[folder] else { continue }
            var builder = ListingBuilder(repository: repository, key: key, logger: logger, commitTime: snapshot.commitTime)
            builder.previousParts = parts[folder] ?? [:]
            builder.build(viewPath: folder, gitDirectory: folder, entries: entries)
            guard builder.outOfSecretMemory == nil else { continue }
            precondition(builder.listings[folder].map(patched.isSame) ?? false, "patched listing of \(folder) differs from a full build")
            for (viewPath, listing) in builder.listings where viewPath != folder {
                precondition(kept[viewPath].map(listing.isSame) ?? false, "kept listing \(viewPath) differs from a full build")
            }
        }
    }
    #endif
}

/// Paths of the view: relative, `/`-separated, "" for the root.
public enum ViewPath {
    /// "a/b/c" for "/a/b/c/" (any leading or trailing slashes).
    ///
    /// Slashes are found as bytes (`PathBytes`; finding Characters from the end was a tenth of
    /// each `readlink` in `.binder/timeline`).
    static func normalize(_ path: String) -> String {
        let utf8 = path.utf8
        guard utf8.first == slash || utf8.last == slash else { return path }
        guard let first = utf8.firstIndex(where: { $0 != slash }), let last = utf8.lastIndex(where: { $0 != slash }) else { return "" }
        return String(decoding: utf8[first...last], as: UTF8.self)
    }

    /// ("a/b", "c") for "a/b/c"; ("", "c") for "c" (cut at the byte `/`: `PathBytes`).
    public static func split(_ path: String) -> (parent: String, name: String) { PathBytes.split(path) }

    private static let slash = UInt8(ascii: "/")

    /// Whether `a` comes before `b` in the bytewise order of their UTF-8 (readdir's order, and
    /// git's for files), compared on the strings' own bytes: the generic
    /// `utf8.lexicographicallyPrecedes` was an eighth of a 100,000-record folder's first listing.
    static func precedesBytewise(_ a: String, _ b: String) -> Bool {
        let answer = a.utf8.withContiguousStorageIfAvailable { x in b.utf8.withContiguousStorageIfAvailable { y in precedes(x, y) } }
        return (answer ?? nil) ?? a.utf8.lexicographicallyPrecedes(b.utf8)
    }

    static func precedesBytewise(_ a: Substring, _ b: Substring) -> Bool {
        let answer = a.utf8.withContiguousStorageIfAvailable { x in b.utf8.withContiguousStorageIfAvailable { y in precedes(x, y) } }
        return (answer ?? nil) ?? a.utf8.lexicographicallyPrecedes(b.utf8)
    }

    private static func precedes(_ x: UnsafeBufferPointer<UInt8>, _ y: UnsafeBufferPointer<UInt8>) -> Bool {
        let common = min(x.count, y.count)
        var i = 0
        while i < common {
            if x[i] != y[i] { return x[i] < y[i] }
            i += 1
        }
        return x.count < y.count
    }

    /// Every folder above `path`, "" included: ["a/b", "a", ""] for "a/b/c".
    static func ancestors(of path: String) -> [String] { PathBytes.ancestors(of: path) }
}

func join(_ directory: String, _ name: String) -> String {
    directory.isEmpty ? name : directory + "/" + name
}
