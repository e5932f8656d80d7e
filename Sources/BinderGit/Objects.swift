internal import CGit2
internal import BinderCrypto
import Foundation

/// The object database: whether an object is there, blobs read (whole or in libgit2's own
/// buffer, bounded by `limitBlobs`) and written, the ids objects get, and the lookups of
/// commits, trees and blobs by id the other owners share. `GitRepository.objects`.
public struct GitObjects: Sendable {
    /// The repository whose handle this owner uses, under its lock.
    let repository: GitRepository

    /// Whether the object database holds `id` (any type).
    public func objectExists(_ id: ObjectID) -> Bool {
        // Cannot fail: a lookup answers yes or no.
        (try? repository.locked { () throws(GitError) in
            var oid = id.oid
            return git_odb_exists(repository.odb.pointer, &oid) == 1
        }) ?? false
    }

    /// The size in bytes of blob `id`, read from the object header (loose
    /// objects inflate only their header; packed deltas resolve only sizes).
    public func blobSize(_ id: ObjectID) throws(GitError) -> Int {
        try repository.locked { () throws(GitError) in
            var oid = id.oid
            var size = 0
            var type = GIT_OBJECT_INVALID
            try check(git_odb_read_header(&size, &type, repository.odb.pointer, &oid), "read size of blob \(id)")
            guard type == GIT_OBJECT_BLOB else {
                throw GitError.failed(operation: "read size of blob \(id)", code: .notFound,
                                      message: "object is a \(Self.typeName(type)), not a blob")
            }
            return size
        }
    }

    /// From now on, this process hashes every object it reads and refuses one whose content
    /// does not match its id (a serving process does not: see `LibGit2.ready`).
    public static func hashObjectsOnRead() { LibGit2.hashObjectsOnRead() }

    public func limitBlobs(to bytes: Int) { repository.maximumBlobBytes.store(bytes, ordering: .relaxed) }

    /// The content of blob `id`, refused when over `maxSize` bytes (or the repository's limit).
    public func readBlob(_ id: ObjectID, maxSize: Int = .max) throws(GitError) -> [UInt8] {
        try blob(id, maxSize: maxSize).withUnsafeBytes { [UInt8]($0) }
    }

    /// Blob `id` as libgit2 read it, for reading after the lock is let go without a copy.
    public func blob(_ id: ObjectID, maxSize: Int = .max) throws(GitError) -> StoredBlob {
        let limit = min(maxSize, repository.maximumBlobBytes.load(ordering: .relaxed))
        return try repository.locked { () throws(GitError) in
            if limit < .max {
                var oid = id.oid
                var size = 0
                var type = GIT_OBJECT_INVALID
                try check(git_odb_read_header(&size, &type, repository.odb.pointer, &oid), "read blob \(id)")
                guard size <= limit else {
                    throw GitError.failed(operation: "read blob \(id)", code: .invalid,
                                          message: "\(size) bytes, more than the \(limit) a file may have here")
                }
            }
            return StoredBlob(try lookupBlobLocked(id))
        }
    }

    /// Stores `bytes` as a blob (fsynced) and returns its id. Storing content
    /// that already exists is a no-op returning the same id.
    public func writeBlob(_ bytes: [UInt8]) throws(GitError) -> ObjectID {
        try repository.locked { () throws(GitError) in
            var oid = git_oid()
            let count = bytes.count
            // libgit2 wants a non-NULL buffer even for length 0.
            let rc = (count == 0 ? [0] : bytes).withUnsafeBytes { buffer in
                git_blob_create_from_buffer(&oid, repository.repo.pointer, buffer.baseAddress, count)
            }
            try check(rc, "write blob")
            return ObjectID(&oid)
        }
    }

    /// Lock held.
    func lookupBlobLocked(_ id: ObjectID) throws(GitError) -> BlobHandle {
        var oid = id.oid
        var pointer: OpaquePointer?
        try check(git_blob_lookup(&pointer, repository.repo.pointer, &oid), "read blob \(id)")
        return BlobHandle(pointer!)
    }

    /// The id `bytes` get as a blob (nothing is written).
    public static func blobID(of bytes: [UInt8]) throws(GitError) -> ObjectID {
        try objectID(of: bytes, type: GIT_OBJECT_BLOB, "hash blob")
    }

    /// The id git gives `bytes` as an object of `type`: the SHA-1 of "<type> <size>\0" and the
    /// content, by OpenSSL (the CPU's SHA extensions). libgit2's own SHA-1 detects collision
    /// attacks and is several times slower: a third of a save in a folder of 100,000 records,
    /// whose tree is 7 MB (docs/BENCHMARKS.md). The bytes hashed here are objects binder is
    /// writing (ciphertext it made, trees and commits it builds); what comes from elsewhere is
    /// hashed where it enters, by libgit2 (the indexer of a fetched pack).
    static func objectID(of bytes: [UInt8], type: git_object_t, _ operation: String) throws(GitError) -> ObjectID {
        let name: String
        switch type {
        case GIT_OBJECT_BLOB: name = "blob"
        case GIT_OBJECT_TREE: name = "tree"
        case GIT_OBJECT_COMMIT: name = "commit"
        case GIT_OBJECT_TAG: name = "tag"
        default: throw GitError.failed(operation: operation, code: .invalid, message: "not an object type")
        }
        var hash = SHA1Stream()
        Array("\(name) \(bytes.count)\0".utf8).withUnsafeBytes { hash.update($0) }
        bytes.withUnsafeBytes { hash.update($0) }
        guard let id = hash.finish().withUnsafeBytes({ ObjectID(bytes: $0) }) else {
            throw GitError.failed(operation: operation, code: .other(-1), message: "no digest")
        }
        return id
    }

    // MARK: - Lock held: the lookups every owner shares

    func lookupCommitLocked(_ id: ObjectID) throws(GitError) -> CommitHandle {
        var oid = id.oid
        var pointer: OpaquePointer?
        try check(git_commit_lookup(&pointer, repository.repo.pointer, &oid), "read commit \(id)")
        return CommitHandle(pointer!)
    }

    func lookupTreeLocked(_ id: ObjectID) throws(GitError) -> TreeHandle {
        var oid = id.oid
        var pointer: OpaquePointer?
        try check(git_tree_lookup(&pointer, repository.repo.pointer, &oid), "read tree \(id)")
        return TreeHandle(pointer!)
    }

    /// Whether `id` names an object in the object database.
    func objectExistsLocked(_ id: ObjectID) -> Bool {
        var oid = id.oid
        return git_odb_exists(repository.odb.pointer, &oid) != 0
    }

    /// Whether `id` names a tree in the object database (false: missing, or another type).
    func isTreeObjectLocked(_ id: ObjectID) -> Bool {
        var oid = id.oid
        var size = 0
        var type = GIT_OBJECT_INVALID
        defer { GitError.clearLast() }
        return git_odb_read_header(&size, &type, repository.odb.pointer, &oid) == 0 && type == GIT_OBJECT_TREE
    }

    /// Tree `id`'s content, read through libgit2 (zlib checks the stream; `TreeBases` then
    /// checks each delta it makes rebuilds these bytes). Lock held.
    func treeContentLocked(_ id: ObjectID) throws(GitError) -> [UInt8] {
        var oid = id.oid
        var pointer: OpaquePointer?
        try check(git_odb_read(&pointer, repository.odb.pointer, &oid), "read tree \(id)")
        let object = OdbObjectHandle(pointer!)
        guard git_odb_object_type(object.pointer) == GIT_OBJECT_TREE else {
            throw GitError.failed(operation: "read tree", code: .other(-1), message: "\(id) is not a tree", posixErrno: EIO)
        }
        let size = git_odb_object_size(object.pointer)
        guard size > 0, let data = git_odb_object_data(object.pointer) else { return [] }
        return [UInt8](UnsafeRawBufferPointer(start: data, count: size))
    }

    static func typeName(_ type: git_object_t) -> String {
        git_object_type2string(type).map { String(cString: $0) } ?? "object"
    }
}


/// A blob's content in libgit2's own buffer (inflated from its pack), held by this owner once the
/// repository's lock is let go: a 3 MB attachment is then decrypted from the one copy of its
/// ciphertext, not from a second one taken under the lock.
///
/// Reading and freeing the blob without the lock is safe because nothing else refers to it:
/// libgit2 caches no blob (`LibGit2.ready` pins the blob cache limit at 0), so the blob and
/// its buffer belong to this handle alone, and its buffer is not tied to the pack it came from
/// (which a fold may remove meanwhile). Not Sendable: it is read where it was looked up.
public final class StoredBlob {
    private let handle: BlobHandle

    init(_ handle: BlobHandle) { self.handle = handle }

    /// The content's length in bytes.
    public var count: Int { Int(git_blob_rawsize(handle.pointer)) }

    /// Runs `body` over the content (empty for an empty blob); the bytes live as long as `self`.
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        let size = count
        guard size > 0, let content = git_blob_rawcontent(handle.pointer) else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return try withExtendedLifetime(handle) { () throws(E) -> R in try body(UnsafeRawBufferPointer(start: content, count: size)) }
    }
}
