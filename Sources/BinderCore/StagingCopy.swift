import BinderCrypto
import BinderFormat
import BinderGit
import Foundation

/// The staging repository of "Share with a doctor", made as the Limbo app makes it
/// (docs/FORMAT.md, "Sharing"): the chosen records of a binder's `main`, re-encrypted to a
/// throwaway key. Documents and `.meta.json` are decrypted and encrypted again under the
/// throwaway conversation key; a DEK sidecar keeps its nonce and bulk ciphertext and only
/// its data key is re-wrapped; a legacy sidecar is decrypted and sealed in the DEK format
/// with a new data key. Other files are left out, as the app does. Two commits, as the app's:
/// an empty "Initialize binder", then "Shared medical records".
public enum StagingCopy {
    public enum Failure: Error, CustomStringConvertible {
        case emptyBinder
        case noSuchPath(String)
        case unsafePath(String)
        case unreadable(path: String, reason: String)
        case git(GitError)

        public var description: String {
            switch self {
            case .emptyBinder: return "the binder has no commit to share"
            case .noSuchPath(let path): return "no record or folder '\(path)' in the binder"
            case .unsafePath(let path): return "'\(path)' is not a path inside the binder"
            case .unreadable(let path, let reason): return "cannot share \(path): \(reason)"
            case .git(let error): return "\(error)"
            }
        }
    }

    public struct Result: Sendable {
        /// The "Shared medical records" commit: what the doctor's additions come after.
        public let snapshot: ObjectID
        /// Every file put in the staging repository.
        public let paths: [String]
    }

    static let author = Signature(name: "Limbo Health", email: "app@limbo.health")

    /// Fills the new bare repository `staging` from `binder`'s `main`: everything (the app's
    /// only choice) when `selection` is empty, else the named records and folders (repository
    /// paths; a mount's `NAME.md` names `NAME.json`) with their attachments and the
    /// `.meta.json` of every folder on the way.
    public static func make(from binder: GitRepository, key: NIP44.ConversationKey, selection: [String],
                            staging: GitRepository, throwaway: NIP44.ConversationKey) throws(Failure) -> Result {
        let files: [String: ObjectID]
        do {
            guard let tip = try binder.refs.branchTip() else { throw Failure.emptyBinder }
            var all: [String: ObjectID] = [:]
            for entry in try binder.trees.listTree(commit: tip) where entry.kind == .blob && entry.nameIsExact { all[entry.path] = entry.id }
            files = all
        } catch let failure as Failure { throw failure } catch let error as GitError { throw .git(error) } catch {
            throw .unreadable(path: "main", reason: "\(error)")
        }
        let chosen = try choose(selection, from: files, binder: binder, key: key)
        var changes: [TreeChange] = []
        for path in chosen.sorted() {
            guard let id = files[path] else { continue }
            let bytes: [UInt8]
            do { bytes = try binder.objects.readBlob(id) } catch { throw .git(error) }
            let copied = try reencrypt(path: path, bytes, key: key, throwaway: throwaway)
            do { changes.append(.write(path: path, blob: try staging.objects.writeBlob(copied))) } catch { throw .git(error) }
        }
        do {
            let initial = try staging.commits.commitChanges(onto: nil, changes: [], message: "Initialize binder", author: author)
            let snapshot = try staging.commits.commitChanges(onto: initial, changes: changes, message: "Shared medical records", author: author)
            return Result(snapshot: snapshot, paths: changes.map(\.path))
        } catch { throw .git(error) }
    }

    /// Files the app copies: `.json` and `.enc`, not under a dot-named top-level entry.
    static func isShareable(_ path: String) -> Bool {
        !path.hasPrefix(".") && (BinderNaming.hasDocumentExtension(path) || BinderNaming.isSidecarName(path))
    }

    static func choose(_ selection: [String], from files: [String: ObjectID], binder: GitRepository,
                       key: NIP44.ConversationKey) throws(Failure) -> Set<String> {
        let shareable = files.keys.filter(isShareable)
        guard !selection.isEmpty else { return Set(shareable) }
        var chosen = Set<String>()
        for asked in selection {
            var path = asked.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
            // ("." and ".." begin with a dot too.)
            guard !path.isEmpty, !PathBytes.components(path).contains(where: { $0.utf8.first == UInt8(ascii: ".") })
            else { throw .unsafePath(asked) }
            if BinderNaming.isRecordName(path), files[path] == nil { path = BinderNaming.documentName(shownAs: path) }
            let matches = shareable.filter { $0 == path || PathBytes.isInside($0, folder: path) }
            guard !matches.isEmpty else { throw .noSuchPath(asked) }
            chosen.formUnion(matches)
        }
        // Attachments of the chosen documents, and the folder names on the way.
        for path in chosen where BinderNaming.isDocumentPath(path) {
            guard let id = files[path] else { continue }
            let folder = PathBytes.split(path).parent
            for sidecar in BinderNaming.sidecarReferences(try document(path, id: id, binder: binder, key: key)) {
                let sidecarPath = folder.isEmpty ? sidecar : folder + "/" + sidecar
                if files[sidecarPath] != nil { chosen.insert(sidecarPath) }
            }
        }
        for path in chosen {
            var folders = Array(PathBytes.components(path).dropLast())
            while !folders.isEmpty {
                let meta = BinderNaming.folderMetadataPath(in: folders.joined(separator: "/"))
                if files[meta] != nil { chosen.insert(meta) }
                folders.removeLast()
            }
        }
        return chosen
    }

    private static func document(_ path: String, id: ObjectID, binder: GitRepository,
                                 key: NIP44.ConversationKey) throws(Failure) -> MedicalDocument {
        do {
            let plaintext = try NIP44.decrypt(payload: try binder.objects.readBlob(id), key: key)
            return try plaintext.withUnsafeBytes { (bytes) throws(FormatError) in try MedicalDocument(plaintext: Array(bytes)) }
        } catch { throw .unreadable(path: path, reason: "\(error)") }
    }

    /// One file under the throwaway key.
    static func reencrypt(path: String, _ bytes: [UInt8], key: NIP44.ConversationKey,
                          throwaway: NIP44.ConversationKey) throws(Failure) -> [UInt8] {
        do {
            if BinderNaming.hasDocumentExtension(path) {
                let plaintext = try NIP44.decrypt(payload: bytes, key: key)
                return Array(try NIP44.encrypt(plaintext, key: throwaway).utf8)
            }
            switch Sidecar.format(of: bytes) {
            case .dek: return try rewrap(bytes, key: key, throwaway: throwaway)
            case .legacy:
                let content = try Sidecar.decrypt(bytes, key: key)
                return try content.withUnsafeBytes { (c) throws(Sidecar.Error) in try Sidecar.encrypt(c, key: throwaway) }
            }
        } catch let failure as Failure {
            throw failure
        } catch {
            throw .unreadable(path: path, reason: "\(error)")
        }
    }

    /// A DEK sidecar with its data key wrapped to `throwaway`: `0x02 ‖ u16-BE length ‖ wrapped
    /// key ‖` the same nonce and ciphertext, copied once.
    static func rewrap(_ bytes: [UInt8], key: NIP44.ConversationKey, throwaway: NIP44.ConversationKey) throws -> [UInt8] {
        guard bytes.count >= 3 else { throw Sidecar.Error.truncated("no wrapped-key length") }
        let wrappedLength = Int(bytes[1]) << 8 | Int(bytes[2])
        guard bytes.count >= 3 + wrappedLength else { throw Sidecar.Error.truncated("the wrapped key is cut short") }
        let dekHex = try bytes.withUnsafeBytes { b in
            try NIP44.decrypt(payload: UnsafeRawBufferPointer(rebasing: b[3..<(3 + wrappedLength)]), key: key)
        }
        guard dekHex.count == 64 else { throw Sidecar.Error.wrappedKeyNotHex }
        let wrapped = Array(try NIP44.encrypt(dekHex, key: throwaway).utf8)
        guard wrapped.count <= 0xFFFF else { throw Sidecar.Error.truncated("wrapped key too long") }
        var out = [UInt8]()
        out.reserveCapacity(bytes.count - wrappedLength + wrapped.count)
        out.append(2)
        out.append(UInt8(wrapped.count >> 8))
        out.append(UInt8(wrapped.count & 0xFF))
        out += wrapped
        out += bytes[(3 + wrappedLength)...]
        return out
    }
}
