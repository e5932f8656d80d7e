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
    /// Keeps the document parts across mounts (nil: not kept, as in tests that want cold builds).
    let indexWriter: ListingIndexWriter?
    /// Guards the snapshot, the listings and the document parts. Never held while decrypting.
    private let contents: Mutex<Contents>

    init(repository: GitRepository, key: NIP44.ConversationKey, logger: Logger, plaintext: PlaintextCache, snapshot: Snapshot,
         index: ListingIndex? = nil) {
        self.repository = repository
        self.key = key
        self.logger = logger
        self.plaintext = plaintext
        var contents = Contents(snapshot: snapshot)
        if let index { contents.documentParts = Self.loadIndex(index, snapshot: snapshot, logger: logger) }
        self.contents = Mutex(contents)
        indexWriter = index.map { ListingIndexWriter(index: $0, logger: logger) }
        indexWriter?.provide { [weak self] in self?.contents.withLock { $0.documentParts } }
    }

    /// The parts the index holds for folders of `snapshot` (none if it cannot be used: it is
    /// written again as folders are listed).
    private static func loadIndex(_ index: ListingIndex, snapshot: Snapshot, logger: Logger) -> [String: [String: DocumentPart]] {
        do throws(ListingIndexError) { return try index.load().filter { snapshot.gitFolders[$0.key] != nil } } catch {
            if error != .missing { logger.notice("listing index not used: \(error)") }
            return [:]
        }
    }

    var snapshot: Snapshot { contents.withLock { $0.snapshot } }

    var listedFolders: Int { contents.withLock { $0.listings.count } }

    /// The listings built so far, by view path (to compare before and after a commit arrives).
    var builtListings: [String: Listing] { contents.withLock { $0.listings } }

    /// What each document of git folder `path` contributed to its listing, by file name (as
    /// far as it has been listed).
    func documentParts(_ path: String) -> [String: DocumentPart] { contents.withLock { $0.documentParts[path] ?? [:] } }

    /// The node at `path` ("" has none: the root is not in a listing).
    func node(_ path: String) throws(ViewError) -> Node {
        let (parent, name) = ViewPath.split(path)
        guard !path.isEmpty, let node = try listing(parent).nodes[name] else { throw .notFound(path) }
        return node
    }

    /// The listing of folder `path`, built on first use. A git folder is built from its tree
    /// entries; a `.children` folder is built along with the git folder that holds its document.
    func listing(_ path: String) throws(ViewError) -> Listing {
        let (built, snapshot, parts) = contents.withLock { ($0.listings[path], $0.snapshot, $0.documentParts[path]) }
        if let built { return built }
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
                }
                return contents.listings[path] ?? own
            }
        }
        // The parent listed it, and a commit took the folder away meanwhile.
        throw .notFound(path)
    }

    /// Shows `snapshot` from now on. `changes`: what a commit changed, so that only the listings
    /// of the git folders it touched (and their ancestors) are dropped; nil drops them all.
    func adopt(_ snapshot: Snapshot, changes: [TreeChange]?) {
        contents.withLock { contents in
            let old = contents.snapshot
            contents.snapshot = snapshot
            // Parts of folders that are gone can never be reused.
            contents.documentParts = contents.documentParts.filter { snapshot.gitFolders[$0.key] != nil }
            guard let changes else { return contents.listings.removeAll() }
            var affected = Set<String>()
            for change in changes {
                affected.insert(change.path)  // a folder deleted or written into as a whole
                affected.formUnion(ViewPath.ancestors(of: change.path))
            }
            // A listing belongs to the git folder it is in (`.children` listings to the folder
            // of their document).
            func gitFolder(_ viewPath: String) -> String {
                var path = viewPath
                while !path.isEmpty && old.gitFolders[path] == nil && snapshot.gitFolders[path] == nil {
                    path = ViewPath.split(path).parent
                }
                return path
            }
            for key in Array(contents.listings.keys) {
                let folder = gitFolder(key)
                if affected.contains(folder) || snapshot.gitFolders[folder] == nil
                    || affected.contains(where: { !$0.isEmpty && folder.hasPrefix($0 + "/") }) {
                    contents.listings.removeValue(forKey: key)
                }
            }
        }
    }

    /// Forgets the part of the document at `gitPath` and the listings built from it: its size
    /// in the view disagreed with its content (see `BinderView.content`).
    func forgetPart(gitPath: String) {
        let (folder, name) = ViewPath.split(gitPath)
        contents.withLock { contents in
            contents.documentParts[folder]?.removeValue(forKey: name)
            for key in Array(contents.listings.keys) where key == folder || key.hasPrefix(folder.isEmpty ? "" : folder + "/") {
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
        }
    }
}

/// Paths of the view: relative, `/`-separated, "" for the root.
enum ViewPath {
    /// "a/b/c" for "/a/b/c/" (any leading or trailing slashes).
    static func normalize(_ path: String) -> String {
        var p = Substring(path)
        while p.hasPrefix("/") { p = p.dropFirst() }
        while p.hasSuffix("/") { p = p.dropLast() }
        return String(p)
    }

    /// ("a/b", "c") for "a/b/c"; ("", "c") for "c".
    static func split(_ path: String) -> (parent: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return ("", path) }
        return (String(path[..<slash]), String(path[path.index(after: slash)...]))
    }

    /// Every folder above `path`, "" included: ["a/b", "a", ""] for "a/b/c".
    static func ancestors(of path: String) -> [String] {
        var out: [String] = []
        var current = path
        while !current.isEmpty {
            current = split(current).parent
            out.append(current)
        }
        return out
    }
}

func join(_ directory: String, _ name: String) -> String {
    directory.isEmpty ? name : directory + "/" + name
}
