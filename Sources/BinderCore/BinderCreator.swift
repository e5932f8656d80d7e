import BinderCrypto
import BinderFormat
import BinderGit

/// `binder create`: a new local binder with its encrypted `patient-info.json`.
public enum BinderCreator {
    /// The apps' default author; binder's commits carry it unless configured otherwise.
    public static let defaultAuthor = (name: "Limbo Health", email: "app@limbo.health")

    public static func create(at path: String, key: NIP44.ConversationKey, patientName: String?, dateOfBirth: String?,
                              author: Signature) throws -> ObjectID {
        let repository = try GitRepository.create(path: path, bare: true, initialBranch: "main")
        var value = "# \(patientName ?? "Patient information")\n"
        if let dateOfBirth { value += "\nDOB: \(dateOfBirth)\n" }
        let document = MedicalDocument(type: "patient-info", value: value)
        let payload = try NIP44.encrypt(document.serializedBytes(), key: key)
        let blob = try repository.writeBlob(Array(payload.utf8))
        return try repository.commitChanges(onto: nil, changes: [.write(path: "patient-info.json", blob: blob)],
                                            message: "Initialize binder", author: author)
    }

    /// Whether `key` opens this binder: its `patient-info.json` decrypts (an empty binder is
    /// anyone's). Throws a reason when it does not.
    public static func checkKey(_ repository: GitRepository, key: NIP44.ConversationKey) throws {
        guard let tip = try repository.branchTip("main") else { return }
        guard let entry = try repository.entry(at: "patient-info.json", commit: tip) else { return }
        do { _ = try BinderReader.decryptDocument(try repository.readBlob(entry.id), key: key) } catch BinderReader.Error.decrypt(.invalidMAC) {
            throw KeyMismatch()
        }
    }

    public struct KeyMismatch: Error, CustomStringConvertible {
        public var description: String { "this binder is encrypted for another key" }
    }
}
