import BinderCrypto
import BinderFormat
import BinderGit

/// Writes records the way the Limbo Health apps do (docs/FORMAT.md): documents as NIP-44
/// payloads, attachments as `attachment_ref` documents with DEK sidecars, folders with an
/// encrypted `.meta.json`. Changes are staged, then committed together as one commit.
public final class BinderWriter {
    let repository: GitRepository
    let key: NIP44.ConversationKey
    let author: Signature
    private var changes: [TreeChange] = []
    /// Where blobs go after `packBlobs`: one pack, installed by `commit` (else loose objects).
    private var pack: BlobPack?

    public init(repository: GitRepository, key: NIP44.ConversationKey, author: Signature) {
        self.repository = repository
        self.key = key
        self.author = author
    }

    public enum Error: Swift.Error, CustomStringConvertible {
        case tooLarge(path: String, bytes: Int)

        public var description: String {
            switch self {
            case .tooLarge(let path, let bytes):
                return "\(path): \(bytes) bytes of JSON is over NIP-44's 65,535-byte limit (keep large content in attachments)"
            }
        }
    }

    /// From now on, the blobs staged are written into one pack of exactly `count` blobs (one per
    /// document, sidecar and folder staged), made durable by `commit` before the branch moves:
    /// a bulk import's thousands of blobs are not thousands of fsynced loose objects
    /// (`BlobPack`). A `count` of 0 changes nothing.
    public func packBlobs(count: Int) throws {
        guard count > 0, pack == nil else { return }
        pack = try repository.objects.blobPack(objects: count)
    }

    private func storeBlob(_ bytes: [UInt8]) throws -> ObjectID {
        if let pack { return try pack.add(bytes) }
        return try repository.objects.writeBlob(bytes)
    }

    /// Stages `document` at `path` (a `.json` path).
    public func putDocument(_ document: MedicalDocument, at path: String) throws {
        let json = document.serializedBytes()
        guard json.count <= NIP44.maxPlaintextSize else { throw Error.tooLarge(path: path, bytes: json.count) }
        let payload = try NIP44.encrypt(json, key: key)
        changes.append(.write(path: path, blob: try storeBlob(Array(payload.utf8))))
    }

    /// Stages an attachment's sidecar (DEK format) at `sidecarPath`.
    public func putSidecar(_ content: [UInt8], at sidecarPath: String) throws {
        changes.append(.write(path: sidecarPath, blob: try storeBlob(try Sidecar.encrypt(content, key: key))))
    }

    /// Stages a standalone attachment shown as `folder/fileName` (e.g. `2026-02-10-photo.jpg`):
    /// `folder/<stem>.json` (type `attachment_ref`) and its sidecar `folder/<fileName>.enc`.
    public func putAttachment(_ content: [UInt8], fileName: String, folder: String, created: String = Timestamps.now()) throws {
        let record = AttachmentRecord.standalone(fileName: fileName, folder: folder, size: content.count, created: created)
        try putSidecar(content, at: record.sidecarPath)
        try putDocument(record.document, at: record.documentPath)
    }

    /// An `attachment_ref` child for a note at `documentPath`, its sidecar staged beside it.
    public func attachmentChild(_ content: [UInt8], fileName: String, documentPath: String,
                                created: String = Timestamps.now()) throws -> MedicalDocument {
        let record = AttachmentRecord.child(fileName: fileName, documentPath: documentPath, size: content.count, created: created)
        try putSidecar(content, at: record.sidecarPath)
        return record.child
    }

    /// Stages a folder's encrypted `.meta.json` (display data, as the app writes it).
    public func putFolder(_ path: String, displayName: String, icon: String? = nil, color: String? = nil, displayOrder: Int? = nil) throws {
        var meta: JSONObject = ["displayName": .string(displayName)]
        if let icon { meta["icon"] = .string(icon) }
        if let color { meta["color"] = .string(color) }
        if let displayOrder { meta["displayOrder"] = JSONValue(displayOrder) }
        let payload = try NIP44.encrypt(JSONValue.object(meta).serializedBytes(), key: key)
        changes.append(.write(path: BinderNaming.folderMetadataPath(in: path), blob: try storeBlob(Array(payload.utf8))))
    }

    /// Commits everything staged onto the tip of `main` (a structural message, never content).
    @discardableResult
    public func commit(message: String) throws -> ObjectID {
        if let pack {
            self.pack = nil
            try pack.install()
        }
        let parent = try repository.refs.branchTip("main")
        let id = try repository.commits.commitChanges(onto: parent, changes: changes, message: message, author: author)
        // A repository with a work tree (a clone by an older binder) follows the commit, as the
        // mount's saves do, so that `git status` stays clean; a failure loses nothing.
        if !repository.isBare { try? repository.checkout.syncWorkTreeToHead(paths: changes.map(\.path)) }
        changes.removeAll()
        return id
    }
}
