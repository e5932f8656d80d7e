import BinderGit
import Synchronization

/// A folder of `.binder/`, by what it lists.
enum ControlFolder: Sendable, Hashable {
    /// `.binder/` itself: `status` and the views.
    case root
    /// Every record, newest first, as links into the tree.
    case timeline
    /// One folder per tag.
    case tags
    /// The records whose `metadata.tags` hold this tag, as in the timeline.
    case tag(String)
    /// `history/F`: the folders and records (current or deleted) of view folder F ("" is the top).
    case history(folder: String)
    /// `history/P`: the committed versions of the record stored at git path `gitPath`.
    case versions(gitPath: String)
    /// `deleted/F`: the records deleted from view folder F, and the folders deleted records were in.
    case deleted(folder: String)

    static let names: [(String, ControlFolder)] = [
        ("timeline", .timeline), ("tags", .tags), ("history", .history(folder: "")), ("deleted", .deleted(folder: "")),
    ]
}

/// An entry of a `.binder/` folder.
enum ControlNode: Sendable {
    case folder(ControlFolder, modified: Timestamp)
    /// A past version of a record: read-only, its bytes produced like any node's.
    case file(Node)
    /// A link into the tree (relative: it works wherever the binder is mounted).
    case link(target: String, modified: Timestamp)
    case status

    var modifiedTime: Timestamp? {
        switch self {
        case .folder(_, let time), .link(_, let time): return time
        case .file(let node): return node.modified
        case .status: return nil
        }
    }
}

/// The entries of a `.binder/` folder in the order `readdir` gives them (the timeline and
/// history newest first), with a map for lookups. A listing walks `entries` in order and never
/// hashes a name: hashing each of 100,000 timeline names (Unicode-normalised, as `String`
/// hashes) was a seventh of the daemon's time for each `ls -l` of the timeline.
struct ControlListing: Sendable {
    private(set) var entries: [(name: String, node: ControlNode)] = []
    /// Each name's place in `entries`.
    private var positions: [String: Int] = [:]

    init() {}

    /// Room for `count` entries at once: each growth of the map would hash every name again.
    init(capacity count: Int) {
        entries.reserveCapacity(count)
        positions.reserveCapacity(count)
    }

    var isEmpty: Bool { entries.isEmpty }

    /// The entry called `name`, if any.
    func node(named name: String) -> ControlNode? {
        positions[name].map { entries[$0].node }
    }

    /// Adds `name` unless the listing holds it already (the first entry of a name stays).
    mutating func append(_ name: String, _ node: ControlNode) {
        // One lookup for a new name (the usual case), two for a name already there.
        if let first = positions.updateValue(entries.count, forKey: name) {
            positions[name] = first
            return
        }
        entries.append((name, node))
    }
}

/// What the `.binder/` views have worked out of one commit: listings of their folders, the
/// records deleted since, the timeline. Dropped when the commit shown changes (the listings of
/// the tree are the cache that makes rebuilding cheap), all but the last walks' removals and
/// versions, which the next walks extend. Its own lock, held only for the map; listings are
/// computed outside it.
final class ControlViewCache: Sendable {
    private struct Contents {
        var commit: ObjectID?
        var listings: [ControlFolder: ControlListing] = [:]
        var deleted: [DeletedRecord]?
        /// The last walk's removals, of whichever commit: kept when the commit shown changes,
        /// so that the next walk covers only the commits since (`GitHistory.removals`).
        var removals: Removals?
        /// The versions the last walks found of records, by git path, likewise (at most
        /// `versionsKept` records).
        var versions: [String: (tip: ObjectID, versions: [PathVersion])] = [:]
    }

    /// Records whose versions are kept for the next walk.
    static let versionsKept = 32

    private let contents = Mutex(Contents())

    /// The cached listing of `folder` for `commit`, else `make()`'s, kept if the commit is still
    /// the one shown.
    func listing(_ folder: ControlFolder, commit: ObjectID?, _ make: () throws(ViewError) -> ControlListing) throws(ViewError) -> ControlListing {
        if let cached = contents.withLock({ $0.commit == commit ? $0.listings[folder] : nil }) { return cached }
        let made = try make()
        contents.withLock { contents in
            if contents.commit != commit { contents = Contents(commit: commit, removals: contents.removals, versions: contents.versions) }
            contents.listings[folder] = made
        }
        return made
    }

    func deleted(commit: ObjectID?, _ make: () throws(ViewError) -> [DeletedRecord]) throws(ViewError) -> [DeletedRecord] {
        if let cached = contents.withLock({ $0.commit == commit ? $0.deleted : nil }) { return cached }
        let made = try make()
        contents.withLock { contents in
            if contents.commit != commit { contents = Contents(commit: commit, removals: contents.removals, versions: contents.versions) }
            contents.deleted = made
        }
        return made
    }

    /// The removals the last walk found (for some commit), to extend from.
    var lastRemovals: Removals? { contents.withLock { $0.removals } }

    func keep(_ removals: Removals) { contents.withLock { $0.removals = removals } }

    /// The versions the last walk found of the record at `gitPath` (for some commit).
    func lastVersions(of gitPath: String) -> (tip: ObjectID, versions: [PathVersion])? {
        contents.withLock { $0.versions[gitPath] }
    }

    func keep(_ versions: [PathVersion], of gitPath: String, tip: ObjectID) {
        contents.withLock { contents in
            if contents.versions[gitPath] == nil && contents.versions.count >= Self.versionsKept { contents.versions = [:] }
            contents.versions[gitPath] = (tip, versions)
        }
    }

    func removeAll() { contents.withLock { $0 = Contents() } }
}

/// A record the tip no longer has: where it was (git and view), and its last version.
struct DeletedRecord: Sendable {
    let gitPath: String
    let viewPath: String
    let node: Node
}
