import BinderCrypto
import BinderGit

/// The doctor's copy of a patient's share (`binder open-share`): a bare repository fetched
/// from the staging repository with the scan token, its records encrypted to the share's
/// throwaway key (the payload's `ephemeralPrivkey`), never to the patient's own.
public struct SharedCopy: Sendable {
    /// Why the payload's key does not open the copy: what failed, in words.
    public struct KeyRefused: Error, CustomStringConvertible {
        public let description: String
    }

    /// The author of the doctor's commits in the copy (as the scan page writes them).
    public static let doctorAuthor = Signature(name: "Doctor", email: "scan@limbo.health")

    /// The bare repository at `path`.
    public let repository: GitRepository
    public let path: String
    /// The share's conversation key: encrypt-to-self of the throwaway key.
    public let key: NIP44.ConversationKey

    /// The copy kept at `path` (reopened to push notes that never left).
    public static func open(path: String, key: NIP44.ConversationKey) throws -> SharedCopy {
        SharedCopy(repository: try GitRepository.open(path: path), path: path, key: key)
    }

    /// A new empty copy at `path`, for the first fetch.
    public static func create(path: String, key: NIP44.ConversationKey) throws -> SharedCopy {
        SharedCopy(repository: try GitRepository.create(path: path, bare: true), path: path, key: key)
    }

    /// A second handle on the same repository (a pusher's own, so that the mount's readers
    /// never wait on the network).
    public func reopened() throws -> GitRepository { try GitRepository.open(path: path) }

    /// The payload's key opens the copy: its first document decrypts (an empty copy passes).
    public func checkKey() throws(KeyRefused) {
        do {
            guard let tip = try repository.refs.branchTip(),
                  let document = try repository.trees.listTree(commit: tip)
                      .first(where: { $0.kind == .blob && BinderNaming.hasDocumentExtension($0.path) })
            else { return }
            _ = try NIP44.decrypt(payload: try repository.objects.readBlob(document.id), key: key)
        } catch {
            throw KeyRefused(description: "\(error)")
        }
    }

    /// The notes (documents) the doctor's commits in the copy at `path` changed that the staging
    /// repository has not got: what would be lost with the copy (0 when there is no copy).
    public static func unpushedNotes(at path: String) -> Int {
        guard let repository = try? GitRepository.open(path: path), let tip = try? repository.refs.branchTip() else { return 0 }
        let pushed = try? repository.refs.reference(GitRefs.trackingRef())
        guard pushed != tip, let changed = try? BinderMerger.changedPaths(repository, from: pushed, to: tip) else { return 0 }
        // A commit not pushed that changed no document (a merge of the other side's notes)
        // still counts as one, so that the copy is kept.
        let notes = changed.filter(BinderNaming.isDocumentPath).count
        let ahead = (try? repository.history.aheadBehind(local: tip, upstream: pushed).ahead) ?? 1
        return ahead == 0 ? 0 : max(notes, 1)
    }
}
