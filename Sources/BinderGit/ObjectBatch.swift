internal import CGit2
import Foundation

/// New objects of a history written object by object (the key rotation's rewrite), gathered
/// and written as one durable pack at `write()` (`PackWriter`: three fsyncs), where
/// `writeBlob`, `writeTree` and `writeCommit` write a loose object each, with two fsyncs
/// (the file and its folder). Trees and commits are made here as libgit2 makes them (its
/// order of entries, its signature lines), so their ids are the same.
///
/// Nothing is readable before `write()`: a caller records what it wrote (a progress file)
/// only after. Objects the repository holds already are not written again. Held in memory
/// until written (`byteCount` says how much). One thread at a time uses an instance.
public final class ObjectBatch {
    private let repository: GitRepository
    private var objects: [PackObject] = []
    private var ids = Set<ObjectID>()
    /// The contents' bytes gathered.
    public private(set) var byteCount = 0

    init(repository: GitRepository) {
        self.repository = repository
    }

    public var isEmpty: Bool { objects.isEmpty }

    public func blob(_ bytes: [UInt8]) throws(GitError) -> ObjectID {
        try add(.blob, bytes, id: GitObjects.blobID(of: bytes))
    }

    /// A tree of `entries` (any order; git's is made here). Throws `.invalidPath` for a name
    /// that is empty, `.`, `..`, holds `/` or NUL, or comes twice.
    public func tree(_ entries: [FolderEntry]) throws(GitError) -> ObjectID {
        var names = Set<String>()
        let modes: Set<UInt32> = [0o040000, 0o100644, 0o100755, 0o120000, 0o160000]
        for entry in entries {
            guard modes.contains(entry.mode) else { throw GitError.invalidPath(entry.name, reason: "mode \(String(entry.mode, radix: 8))") }
            guard !entry.name.isEmpty, entry.name != ".", entry.name != "..", !entry.name.utf8.contains(where: { $0 == 0x2F || $0 == 0 }),
                  names.insert(entry.name).inserted else {
                throw GitError.invalidPath(entry.name, reason: "a name a tree cannot hold, or twice in one")
            }
        }
        // git's order: names compared byte by byte, a folder's as if it ended with '/'.
        let sorted = entries.map { entry in (entry, Array(entry.name.utf8) + (entry.kind == .tree ? [0x2F] : [])) }
            .sorted { $0.1.lexicographicallyPrecedes($1.1) }
        var bytes: [UInt8] = []
        for (entry, _) in sorted {
            bytes += Array(String(entry.mode, radix: 8).utf8) + [0x20] + Array(entry.name.utf8) + [0] + entry.id.bytes
        }
        return try add(.tree, bytes, id: GitObjects.objectID(of: bytes, type: GIT_OBJECT_TREE, "hash tree"))
    }

    public func commit(tree: ObjectID, parents: [ObjectID], author: Signature, committer: Signature,
                       message: String) throws(GitError) -> ObjectID {
        let text = "tree " + tree.hex + "\n" + parents.map { "parent " + $0.hex + "\n" }.joined()
            + "author " + (try GitCommits.signatureLine(author)) + "committer " + (try GitCommits.signatureLine(committer)) + "\n" + message
        let bytes = Array(text.utf8)
        return try add(.commit, bytes, id: GitObjects.objectID(of: bytes, type: GIT_OBJECT_COMMIT, "hash commit"))
    }

    private func add(_ kind: PackObject.Kind, _ content: [UInt8], id: ObjectID) throws(GitError) -> ObjectID {
        guard ids.insert(id).inserted else { return id }
        let stored = try repository.locked { () throws(GitError) -> Bool in
            var oid = id.oid
            defer { GitError.clearLast() }
            return git_odb_exists_ext(repository.odb.pointer, &oid, GIT_ODB_LOOKUP_NO_REFRESH.rawValue) == 1
        }
        if stored { return id }
        objects.append(PackObject(id: id, kind: kind, content: content))
        byteCount += content.count
        return id
    }

    /// Writes what was gathered as one pack, durable, readable by the repository on return;
    /// then starts again empty. Nothing to write: nothing done.
    public func write() throws(GitError) {
        guard !objects.isEmpty else { return }
        try repository.locked { () throws(GitError) in
            _ = try PackWriter.write(objects, into: repository.gitDirectory + "/objects/pack")
            _ = git_odb_refresh(repository.odb.pointer)
        }
        objects = []
        ids = []
        byteCount = 0
    }
}

extension GitObjects {
    /// A batch of new objects written as one pack (`ObjectBatch`).
    public func batch() -> ObjectBatch { ObjectBatch(repository: repository) }
}

extension GitCommits {
    /// A signature's line in a commit ("Name <email> time +hhmm\n"), as libgit2's
    /// `git_commit_create` writes it (checked and trimmed by `git_signature_new`, as there).
    static func signatureLine(_ signature: Signature) throws(GitError) -> String {
        var pointer: UnsafeMutablePointer<git_signature>?
        try check(git_signature_new(&pointer, signature.name, signature.email, signature.seconds, Int32(signature.timeZoneOffsetMinutes)),
                  "make signature for '\(signature.name) <\(signature.email)>'")
        let handle = SignatureHandle(pointer!)
        let name = String(cString: handle.pointer.pointee.name)
        let email = String(cString: handle.pointer.pointee.email)
        let when = handle.pointer.pointee.when
        let offset = Int(when.offset)
        let sign = offset < 0 || when.sign == CChar(UInt8(ascii: "-")) ? "-" : "+"
        let hours = abs(offset) / 60, minutes = abs(offset) % 60
        let zone = sign + (hours < 10 ? "0" : "") + String(hours) + (minutes < 10 ? "0" : "") + String(minutes)
        // libgit2 prints the time as an unsigned 32-bit number.
        return name + " <" + email + "> " + String(UInt32(truncatingIfNeeded: when.time)) + " " + zone + "\n"
    }
}
