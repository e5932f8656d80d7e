import BinderGit
import Synchronization

/// A file or folder of the mounted view. See docs/DESIGN.md, "The view".
///
/// A class, immutable: the same node sits in its folder's listing and in the `DocumentPart`
/// it came from, and a listing's dictionary holds a reference (8 bytes) rather than the node
/// (104 bytes, in a bucket of 120, 38% of them full: 29 MB for a folder of 100,000 records).
final class Node: Sendable {
    /// Where a node's bytes come from. Equal sources have equal bytes, so the source is also
    /// the plaintext cache's key.
    enum Source: Hashable, Sendable {
        /// A folder (a git tree, or the virtual `X.children/` of a document).
        case directory
        /// `X.json` rendered as markdown with front matter.
        case document(blob: ObjectID)
        /// A text child of a document, rendered like a document. `indexPath` walks `children`.
        case child(blob: ObjectID, indexPath: [Int])
        /// An inline base64 attachment child.
        case inlineAttachment(blob: ObjectID, indexPath: [Int])
        /// An attachment held in a sidecar (`attachment_ref` document or child, or a sidecar
        /// nothing refers to).
        case sidecar(blob: ObjectID)
        /// A file shown exactly as stored (cannot be decrypted or parsed, or not binder's).
        case raw(blob: ObjectID)
    }

    /// What a node belongs to, for writes: the `attachment_ref` document of a sidecar, or the
    /// document (and child, by index path) whose children a sidecar or `.children` folder is.
    enum Owner: Sendable, Hashable {
        case document(path: String)
        case child(documentPath: String, indexPath: [Int])
    }

    let source: Source
    let size: Int
    let modified: Timestamp
    let owner: Owner?
    /// The git path in two strings a folder's nodes already hold: the folder's path ("" when
    /// `gitName` is the whole path) and the name the node's part is kept by. A path of its own
    /// per node was 8 MB at 100,000 records.
    private let gitFolder: String
    private let gitName: String

    /// The path of the git object this node is stored in (for writes, logs and `verify`).
    var gitPath: String { gitFolder.isEmpty ? gitName : gitFolder + "/" + gitName }

    convenience init(source: Source, size: Int, modified: Timestamp, gitPath: String, owner: Owner? = nil) {
        self.init(source: source, size: size, modified: modified, gitFolder: "", gitName: gitPath, owner: owner)
    }

    /// A node stored at `gitFolder/gitName`.
    init(source: Source, size: Int, modified: Timestamp, gitFolder: String, gitName: String, owner: Owner? = nil) {
        self.source = source
        self.size = size
        self.modified = modified
        self.owner = owner
        self.gitFolder = gitFolder
        self.gitName = gitName
    }

    /// This node, belonging to `owner`.
    func owned(by owner: Owner) -> Node {
        Node(source: source, size: size, modified: modified, gitFolder: gitFolder, gitName: gitName, owner: owner)
    }

    /// This node with the time `time`.
    func retimed(_ time: Timestamp) -> Node {
        Node(source: source, size: size, modified: time, gitFolder: gitFolder, gitName: gitName, owner: owner)
    }

    var isDirectory: Bool { source == .directory }
    var isRaw: Bool { if case .raw = source { return true } else { return false } }
}

/// Seconds and nanoseconds since the epoch.
public struct Timestamp: Sendable, Hashable, Comparable {
    public var seconds: Int64
    public var nanoseconds: Int32

    public init(seconds: Int64, nanoseconds: Int32 = 0) {
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    public static func < (a: Timestamp, b: Timestamp) -> Bool {
        (a.seconds, a.nanoseconds) < (b.seconds, b.nanoseconds)
    }

    /// Whether a tool that set `time` meant this one: the same, or the same second from a tool
    /// that keeps whole seconds (tar's archives, `touch -d` without fractions).
    func matches(set time: Timestamp) -> Bool {
        self == time || (time.nanoseconds == 0 && time.seconds == seconds)
    }
}


/// What `stat` tells about a node.
public struct NodeAttributes: Sendable, Equatable {
    public enum Kind: Sendable, Equatable { case file, directory, symlink }
    public let kind: Kind
    public let size: Int
    public let modified: Timestamp
    /// Raw files (undecryptable or unparsable) are never writable.
    public let readOnly: Bool
}

extension Node {
    var attributes: NodeAttributes {
        NodeAttributes(kind: isDirectory ? .directory : .file, size: size, modified: modified, readOnly: isRaw)
    }
}

/// The listing of one folder of the view: names sorted bytewise, as `readdir` returns them.
struct Listing: Sendable {
    var nodes: [String: Node] = [:] {
        // Any change: the entries are sorted again when next asked for. A box no other copy
        // holds and nothing has filled yet is kept (a listing being built changes 100,000
        // times); any other is replaced, never emptied, since copies made before share it.
        didSet {
            if !isKnownUniquelyReferenced(&order) || order.isFilled { order = SortedEntries() }
        }
    }

    /// The entries sorted, worked out at the first `sortedEntries` after a change and kept for
    /// the copies made since: each `ls` of a folder of 100,000 records sorted its names
    /// afresh, half of the daemon's time for it, then looked each one up again.
    private var order = SortedEntries()

    /// The entries sorted bytewise by name, with their nodes.
    var sortedEntries: [(name: String, node: Node)] {
        order.entries {
            nodes.sorted { ViewPath.precedesBytewise($0.key, $1.key) }.map { (name: $0.key, node: $0.value) }
        }
    }

    /// Adds `node` under `name`, or under `name-2`, `name-3`… (before the extension) if the
    /// name is taken. Sources are added in a fixed order, so the choice is stable.
    mutating func insertUnique(_ name: String, _ node: Node) -> String {
        let candidate = BinderNaming.firstFree(name) { nodes[$0] != nil }
        nodes[candidate] = node
        return candidate
    }
}

/// A listing's entries in order, once worked out (`Listing.sortedEntries`). Shared by copies
/// of one listing, which the listing cache hands to any thread: the lock guards the entries.
final class SortedEntries: Sendable {
    private let sorted = Mutex<[(name: String, node: Node)]?>(nil)

    var isFilled: Bool { sorted.withLock { $0 != nil } }

    /// The entries, from `sort` the first time.
    func entries(_ sort: () -> [(name: String, node: Node)]) -> [(name: String, node: Node)] {
        sorted.withLock { sorted in
            if let sorted { return sorted }
            let entries = sort()
            sorted = entries
            return entries
        }
    }
}
