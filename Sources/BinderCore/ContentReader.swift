import BinderCrypto
import BinderFormat
import BinderGit

/// Produces a node's plaintext from git: decrypts (and renders) documents, children, inline
/// attachments and sidecars; raw files as stored. Runs outside every lock; the view caches
/// what it returns.
struct ContentReader {
    let repository: GitRepository
    let key: NIP44.ConversationKey
    /// Counts the git objects read (for `.binder/status`).
    let listings: ListingCache

    func produce(_ node: Node, path: String) throws(ViewError) -> SecureBytes {
        let gitPath = node.gitPath  // joined on each call (`Node.gitPath`): once here
        switch node.source {
        case .directory:
            throw .isDirectory(path)
        case .raw(let blob):
            let stored = try readObject(blob, gitPath: gitPath)
            return try ViewError.needingSecretMemory(path) { () throws(SecureMemoryError) in
                try stored.withUnsafeBytes { (bytes) throws(SecureMemoryError) in try SecureBytes(copying: bytes) }
            }
        case .sidecar(let blob):
            do {
                let stored = try readObject(blob, gitPath: gitPath)
                return try stored.withUnsafeBytes { (bytes) throws(Sidecar.Error) in try Sidecar.decrypt(bytes, key: key) }
            } catch let error as ViewError {
                throw error
            } catch Sidecar.Error.secretMemory(let error) {
                throw .storage(path: path, reason: error.description, code: .noMemory)
            } catch { throw .corrupt(path: gitPath, reason: "\(error)") }
        case .document(let blob):
            let document = try decoded(blob, gitPath: gitPath)
            let text = FrontMatter.render(metadata: document.metadata, value: document.value)
            return try ViewError.needingSecretMemory(path) { () throws(SecureMemoryError) in try SecureBytes(copyingUTF8: text) }
        case .child(let blob, let indexPath):
            let child = try descend(try decoded(blob, gitPath: gitPath), indexPath, gitPath: gitPath)
            let text = FrontMatter.render(metadata: child.metadata, value: child.value)
            return try ViewError.needingSecretMemory(path) { () throws(SecureMemoryError) in try SecureBytes(copyingUTF8: text) }
        case .inlineAttachment(let blob, let indexPath):
            let child = try descend(try decoded(blob, gitPath: gitPath), indexPath, gitPath: gitPath)
            guard let bytes = try ViewError.needingSecretMemory(path, { () throws(SecureMemoryError) in try Sidecar.decodeInline(child.value) }) else {
                throw .corrupt(path: gitPath, reason: "inline attachment is not base64")
            }
            return bytes
        }
    }

    /// A document, decrypted and parsed.
    func document(_ blob: ObjectID, gitPath: String) throws -> MedicalDocument {
        // The view's last commit wrote it: its plaintext is at hand (a save's next save).
        if let json = listings.written.json(of: blob) { return try BinderReader.parseDocument(json, gitPath: gitPath) }
        return try readObject(blob, gitPath: gitPath).withUnsafeBytes { (stored) throws in
            try BinderReader.readDocument(stored, key: key, gitPath: gitPath)
        }
    }

    private func decoded(_ blob: ObjectID, gitPath: String) throws(ViewError) -> MedicalDocument {
        do { return try document(blob, gitPath: gitPath) } catch let error as ViewError { throw error } catch {
            if let memory = exhaustedSecretMemory(error) { throw .storage(path: gitPath, reason: memory.description, code: .noMemory) }
            throw .corrupt(path: gitPath, reason: "\(error)")
        }
    }

    /// The blob, read under the repository's lock and decrypted after it from libgit2's buffer
    /// (no copy of the ciphertext: `StoredBlob`).
    private func readObject(_ id: ObjectID, gitPath: String) throws(ViewError) -> StoredBlob {
        listings.objectReads.add(1, ordering: .relaxed)
        do { return try repository.objects.blob(id) } catch {
            throw .storage(path: gitPath, reason: "\(error)", code: Committer.code(of: error))
        }
    }

    private func descend(_ document: MedicalDocument, _ indexPath: [Int], gitPath: String) throws(ViewError) -> MedicalDocument {
        var current = document
        for index in indexPath {
            guard index < current.children.count else { throw .corrupt(path: gitPath, reason: "child \(indexPath) no longer exists") }
            current = current.children[index]
        }
        return current
    }
}
