import BinderCrypto
import BinderFormat
import BinderGit
import Foundation

/// The doctor's notes of a share, brought home (designed by Limbo, never built there): every
/// document the staging repository has at `tip` that it did not have (or had otherwise) at the
/// last collection is decrypted with the throwaway key, checked to be a document, encrypted to
/// the patient's key and committed to the binder, each under a name nothing in the binder has
/// yet (`NAME-2.json`, …): nothing is ever overwritten.
public enum DoctorNotes {
    public static func collect(from staging: GitRepository, since: ObjectID, tip: ObjectID, throwaway: NIP44.ConversationKey,
                               into binder: GitRepository, key: NIP44.ConversationKey,
                               author: Signature) throws(StagingCopy.Failure) -> [String] {
        do {
            let before = try blobs(staging, since)
            let new = try blobs(staging, tip).filter { path, id in
                before[path] != id && path.hasSuffix(".json") && !path.hasSuffix("/.meta.json") && isSafe(path)
            }
            guard !new.isEmpty else { return [] }
            let parent = try binder.branchTip()
            var taken = Set(try parent.map { (commit) throws(GitError) in try binder.listTree(commit: commit).map(\.path) } ?? [])
            var changes: [TreeChange] = []
            for (path, id) in new.sorted(by: { $0.key < $1.key }) {
                let plaintext: SecureBytes
                do {
                    plaintext = try NIP44.decrypt(payload: try staging.readBlob(id), key: throwaway)
                    _ = try plaintext.withUnsafeBytes { (bytes) throws(FormatError) in try MedicalDocument(plaintext: Array(bytes)) }
                } catch let error as GitError { throw error } catch {
                    throw StagingCopy.Failure.unreadable(path: path, reason: "the doctor's file is not a document under the share's key (\(error))")
                }
                let destination = unique(path, taken)
                taken.insert(destination)
                let sealed: String
                do { sealed = try NIP44.encrypt(plaintext, key: key) } catch {
                    throw StagingCopy.Failure.unreadable(path: path, reason: "\(error)")
                }
                changes.append(.write(path: destination, blob: try binder.writeBlob(Array(sealed.utf8))))
            }
            _ = try binder.commitChanges(onto: parent, changes: changes, message: "Incorporate doctor note", author: author)
            try binder.syncWorkTreeToHead(paths: changes.map(\.path))
            return changes.map(\.path)
        } catch let failure as StagingCopy.Failure { throw failure } catch let error as GitError { throw .git(error) } catch {
            throw .unreadable(path: "the staging repository", reason: "\(error)")
        }
    }

    private static func blobs(_ repository: GitRepository, _ commit: ObjectID) throws(GitError) -> [String: ObjectID] {
        var out: [String: ObjectID] = [:]
        for entry in try repository.listTree(commit: commit) where entry.kind == .blob && entry.nameIsExact { out[entry.path] = entry.id }
        return out
    }

    /// A path from the doctor's side that may name a file in the binder: plain names, none hidden.
    static func isSafe(_ path: String) -> Bool {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        return parts.allSatisfy { !$0.isEmpty && !$0.hasPrefix(".") && $0.utf8.count <= 255 }
    }

    /// `path`, or `STEM-2.json`, `STEM-3.json`… whichever nothing in `taken` is.
    static func unique(_ path: String, _ taken: Set<String>) -> String {
        guard taken.contains(path) else { return path }
        let stem = String(path.dropLast(5))
        var n = 2
        while taken.contains("\(stem)-\(n).json") { n += 1 }
        return "\(stem)-\(n).json"
    }
}
