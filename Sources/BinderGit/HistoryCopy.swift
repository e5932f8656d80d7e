internal import CGit2
import Foundation

/// One entry of a folder as stored, for a copy of a history that writes it back (the key
/// rotation's rewrite): the name exactly as the tree holds it, its raw mode, its object.
public struct FolderEntry: Sendable, Hashable {
    public let name: String
    public let mode: UInt32
    public let id: ObjectID

    public init(name: String, mode: UInt32, id: ObjectID) {
        self.name = name
        self.mode = mode
        self.id = id
    }

    public var kind: TreeEntry.Kind { TreeEntry.Kind(mode: mode) }
}

extension GitTrees {
    /// The own entries of tree `id` (not recursive), in git's order. Throws `.invalidPath`
    /// naming `path` (the folder's, for the message) when the tree cannot be read or an entry's
    /// name could not be written back as it is (empty, not UTF-8, holding '/'): a copy must
    /// never drop or rename an entry silently.
    public func folderEntries(tree id: ObjectID, path: String) throws(GitError) -> [FolderEntry] {
        try repository.locked { () throws(GitError) in
            guard let folder = try folderLocked(id) else {
                throw GitError.invalidPath(path.isEmpty ? "/" : path, reason: "the folder's tree \(id) cannot be read")
            }
            var entries: [FolderEntry] = []
            entries.reserveCapacity(folder.count)
            var index = 0
            while let entry = folder.entry(index) {
                guard entry.name.isExact, !entry.name.text.isEmpty else {
                    let shown = path.isEmpty ? entry.name.text : path + "/" + entry.name.text
                    throw GitError.invalidPath(shown, reason: "a name that is empty, not UTF-8 or holds '/'")
                }
                entries.append(FolderEntry(name: entry.name.text, mode: entry.mode, id: entry.id))
                index += 1
            }
            return entries
        }
    }

    /// Writes a tree holding `entries` (git sorts them) as a loose object, fsynced, and returns
    /// its id; every entry's object must be in this repository already. Writing a tree that
    /// exists is a no-op returning the same id.
    public func writeTree(_ entries: [FolderEntry]) throws(GitError) -> ObjectID {
        try repository.locked { () throws(GitError) in
            var builder: OpaquePointer?
            try check(git_treebuilder_new(&builder, repository.repo.pointer, nil), "make tree")
            defer { git_treebuilder_free(builder) }
            for entry in entries {
                var oid = entry.id.oid
                try check(git_treebuilder_insert(nil, builder, entry.name, &oid, git_filemode_t(rawValue: entry.mode)),
                          "put '\(entry.name)' in a tree")
            }
            var out = git_oid()
            try check(git_treebuilder_write(&out, builder), "write tree")
            return ObjectID(&out)
        }
    }
}

extension GitCommits {
    /// Writes a commit object as given (the message stored as it is, no newline added), as a
    /// loose object, fsynced; no reference moves. The tree and the parents must be in this
    /// repository already.
    public func writeCommit(tree: ObjectID, parents: [ObjectID], author: Signature, committer: Signature,
                            message: String) throws(GitError) -> ObjectID {
        guard !message.utf8.contains(0) else {
            throw GitError.failed(operation: "write commit", code: .invalid, message: "message contains NUL")
        }
        return try repository.locked { () throws(GitError) in
            let treeHandle = try repository.objects.lookupTreeLocked(tree)
            let parentHandles = try parents.map { id throws(GitError) in try repository.objects.lookupCommitLocked(id) }
            let authorHandle = try Self.signatureLocked(author)
            let committerHandle = try Self.signatureLocked(committer)
            var pointers: [OpaquePointer?] = parentHandles.map(\.pointer)
            var out = git_oid()
            let rc = pointers.withUnsafeMutableBufferPointer { buffer in
                git_commit_create(&out, repository.repo.pointer, nil, authorHandle.pointer, committerHandle.pointer,
                                  nil, message, treeHandle.pointer, buffer.count, buffer.baseAddress)
            }
            withExtendedLifetime((treeHandle, parentHandles, authorHandle, committerHandle)) {}
            try check(rc, "write commit")
            return ObjectID(&out)
        }
    }

    private static func signatureLocked(_ signature: Signature) throws(GitError) -> SignatureHandle {
        var pointer: UnsafeMutablePointer<git_signature>?
        try check(git_signature_new(&pointer, signature.name, signature.email, signature.seconds,
                                    Int32(signature.timeZoneOffsetMinutes)),
                  "make signature for '\(signature.name) <\(signature.email)>'")
        return SignatureHandle(pointer!)
    }
}
