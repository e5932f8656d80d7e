import BinderFormat
import BinderGit

/// What one filesystem change amounts to in git, before encryption: the planner's answer.
/// The committer encrypts the documents and sidecars, writes the blobs and commits the whole
/// plan as one compare-and-swap commit; an empty plan commits nothing.
struct WritePlan {
    var changes: [PlannedChange] = []
    /// A structural message (`Add visits entry`, `Update entry`): never a name or content.
    var message: String

    static func none() -> WritePlan { WritePlan(message: "") }
}

/// One change to the tree of `main`, in plaintext terms.
enum PlannedChange {
    /// A document's JSON (already checked against NIP-44's limit), to encrypt at `gitPath`.
    case document(gitPath: String, json: [UInt8])
    /// An attachment's bytes, to store as a DEK sidecar at `gitPath`.
    case sidecar(gitPath: String, content: [UInt8])
    /// A folder's `.meta.json` (display data), to encrypt at `gitPath`.
    case folderMetadata(gitPath: String, json: [UInt8])
    /// Ciphertext already stored, placed at `gitPath` as it is (moves never re-encrypt).
    case blob(gitPath: String, id: ObjectID)
    /// A file or a whole folder removed.
    case delete(gitPath: String)

    var gitPath: String {
        switch self {
        case .document(let p, _), .sidecar(let p, _), .folderMetadata(let p, _), .blob(let p, _), .delete(let p): return p
        }
    }

    var isDeletion: Bool { if case .delete = self { return true } else { return false } }
}

/// Where a file of the view lives in git.
indirect enum Parent: Sendable, Equatable {
    /// A real folder (git path; "" is the root).
    case folder(String)
    /// The `.children` folder of a document (or of one of its children, by index path).
    case children(documentPath: String, indexPath: [Int])
    /// `X.children/` made before `X.md` exists (a restore writes a folder before the file
    /// beside it): `X` is made, empty, with the first child written into it. `parent` is where
    /// `X` itself goes; `stem` is its name without `.md`.
    case childrenOfMissing(parent: Parent, stem: String)
}

/// What the planner may ask of the binder as it is now. Answers come from the snapshot, the
/// listings and the decrypted documents; nothing here changes anything.
protocol StoredBinder {
    /// The node shown at a view path (scratch files and hidden records are not nodes).
    func node(_ viewPath: String) -> Node?
    /// The git folders of the snapshot, by path ("" is the root).
    var gitFolders: [String: [TreeEntry]] { get }
    /// A document, decrypted and parsed.
    func document(_ gitPath: String) throws(WriteError) -> MedicalDocument
    /// The bytes a reader of `node` sees (for moves that must store anew).
    func content(_ node: Node, viewPath: String) throws(WriteError) -> [UInt8]
    /// A `.children` folder made with mkdir that holds nothing yet.
    func pendingFolder(_ viewPath: String) -> Parent?
    /// The names shown in a folder (an empty array for an empty or unknown one).
    func names(in viewPath: String) -> [String]
}

extension StoredBinder {
    /// The blob or tree entry at git path `path`, if any.
    func entry(_ gitPath: String) -> TreeEntry? {
        let (folder, _) = ViewPath.split(gitPath)
        return gitFolders[folder]?.first { $0.path == gitPath }
    }
}

/// The limits a write is held to. The document limit is NIP-44's (a record's JSON must fit in
/// one payload); the attachment limit bounds the memory an open file may take.
public struct WriteLimits: Sendable, Equatable {
    public var documentBytes: Int
    public var attachmentBytes: Int

    public static let documentMaximum = 65_535
    public static let defaultAttachmentBytes = 256 << 20

    public init(documentBytes: Int = WriteLimits.documentMaximum, attachmentBytes: Int = WriteLimits.defaultAttachmentBytes) {
        self.documentBytes = documentBytes
        self.attachmentBytes = attachmentBytes
    }

    /// The most bytes a record's file may hold as the mount shows it. The limit that counts is
    /// `documentBytes`, on the JSON stored: front matter can render larger than its JSON (YAML's
    /// indentation and quoting), and a record the apps wrote near the limit must stay editable.
    /// This bound only keeps what a record being written holds in memory in proportion.
    public var renderedDocumentBytes: Int { documentBytes.multipliedReportingOverflow(by: 16).partialValue }

    /// Whether a file at `path` is a record (`.md` outside the control folder), whose stored
    /// JSON is held to `documentBytes`.
    static func isRecord(_ path: String) -> Bool {
        let name = ViewPath.split(path).name
        return BinderNaming.isRecordName(name) && !BinderNaming.isScratch(name)
    }

    /// The most bytes a file at `path` may hold: a record, as rendered (`renderedDocumentBytes`);
    /// anything else, scratch files included, is bounded like an attachment.
    func maximum(for path: String) -> Int {
        Self.isRecord(path) ? renderedDocumentBytes : attachmentBytes
    }
}
