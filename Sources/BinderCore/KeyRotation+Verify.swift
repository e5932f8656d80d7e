import BinderCrypto
import BinderGit
import Foundation

/// The check a rotation passes before the new repository's `main` is set: read back from the
/// new repository, never from what the rewrite remembers of it.
extension HistoryRewriter {
    /// Every blob of the map: a document or sidecar decrypts with the new key to what the old
    /// one decrypts with the old key, and the old key opens none of them; a copied file has
    /// its old id. Every commit: its new commit has the mapped parents, the same message,
    /// author and committer, and a tree that is the old one with every blob mapped.
    func verify(_ commits: [CommitInfo]) throws(KeyRotation.Failure) {
        var blobPaths: [ObjectID: String] = [:]
        var checkedTrees = Set<Pair>()
        for commit in commits {
            guard let newID = journal.commits[commit.id] else {
                throw .verificationFailed(path: "/", reason: "commit \(commit.id) was not rewritten")
            }
            let rewritten = try KeyRotation.git { () throws(GitError) in try new.commits.commit(newID) }
            guard rewritten.message == commit.message, rewritten.author == commit.author,
                  rewritten.committer == commit.committer,
                  rewritten.parents.map(Optional.some) == commit.parents.map({ journal.commits[$0] }) else {
                throw .verificationFailed(path: "/", reason: "commit \(commit.id) differs from its copy \(newID)")
            }
            try verifyTree(old: commit.tree, new: rewritten.tree, path: "", checked: &checkedTrees, blobPaths: &blobPaths)
        }
        for (oldID, path) in blobPaths {
            guard let rotated = journal.blobs[oldID] else { throw .verificationFailed(path: path, reason: "not in the map") }
            try verifyBlob(old: oldID, rotated, path: path)
        }
    }

    struct Pair: Hashable {
        let old: ObjectID
        let new: ObjectID
    }

    /// The new tree holds the old one's names and modes, its folders' copies (checked the same
    /// way) and its blobs' mapped ids; each pair of trees is checked once.
    private func verifyTree(old oldTree: ObjectID, new newTree: ObjectID, path: String, checked: inout Set<Pair>,
                            blobPaths: inout [ObjectID: String]) throws(KeyRotation.Failure) {
        guard checked.insert(Pair(old: oldTree, new: newTree)).inserted else { return }
        let before: [FolderEntry], after: [FolderEntry]
        do {
            before = try old.trees.folderEntries(tree: oldTree, path: path)
            after = try new.trees.folderEntries(tree: newTree, path: path)
        } catch { throw .verificationFailed(path: path.isEmpty ? "/" : path, reason: "\(error)") }
        let copies = Dictionary(after.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        guard before.count == after.count, copies.count == after.count else {
            throw .verificationFailed(path: path.isEmpty ? "/" : path, reason: "the folder's entries differ")
        }
        for entry in before {
            let entryPath = path.isEmpty ? entry.name : path + "/" + entry.name
            guard let copy = copies[entry.name], copy.mode == entry.mode else {
                throw .verificationFailed(path: entryPath, reason: "missing or of another mode in the copy")
            }
            if entry.kind == .tree {
                try verifyTree(old: entry.id, new: copy.id, path: entryPath, checked: &checked, blobPaths: &blobPaths)
            } else {
                guard journal.blobs[entry.id]?.id == copy.id else {
                    throw .verificationFailed(path: entryPath, reason: "the copy is not the blob's rotated one")
                }
                if blobPaths[entry.id] == nil { blobPaths[entry.id] = entryPath }
            }
        }
    }

    /// One blob and its copy, read back from both repositories.
    private func verifyBlob(old oldID: ObjectID, _ rotated: RotatedBlob, path: String) throws(KeyRotation.Failure) {
        if rotated.kind == .plain {
            guard rotated.id == oldID else { throw .verificationFailed(path: path, reason: "a copied file has another id") }
            return
        }
        let (before, after) = try KeyRotation.git { () throws(GitError) in
            (try old.objects.readBlob(oldID), try new.objects.readBlob(rotated.id))
        }
        let matches: Bool
        do {
            if rotated.kind == .document {
                matches = try NIP44.decrypt(payload: after, key: newKey)
                    .constantTimeEquals(try NIP44.decrypt(payload: before, key: oldKey))
            } else {
                matches = try Sidecar.decrypt(after, key: newKey).constantTimeEquals(try Sidecar.decrypt(before, key: oldKey))
            }
        } catch {
            throw .verificationFailed(path: path, reason: "\(error)")
        }
        guard matches else { throw .verificationFailed(path: path, reason: "the new key opens it to other content") }
        guard !Self.opens(after, key: oldKey) else { throw .verificationFailed(path: path, reason: "the old key still opens it") }
    }
}
