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
        let blob = try repository.objects.writeBlob(Array(payload.utf8))
        return try repository.commits.commitChanges(onto: nil, changes: [.write(path: BinderNaming.patientInfoPath, blob: blob)],
                                            message: "Initialize binder", author: author)
    }

    /// Whether `key` opens this binder: its `patient-info.json` decrypts (an empty binder is
    /// anyone's). Throws a reason when it does not.
    public static func checkKey(_ repository: GitRepository, key: NIP44.ConversationKey) throws {
        guard let tip = try repository.refs.branchTip("main") else { return }
        guard let entry = try repository.trees.entry(at: BinderNaming.patientInfoPath, commit: tip) else { return }
        do { _ = try BinderReader.decryptDocument(try repository.objects.readBlob(entry.id), key: key) } catch BinderReader.Error.decrypt(.invalidMAC) {
            throw KeyMismatch()
        }
    }

    public struct KeyMismatch: Error, CustomStringConvertible {
        public var description: String { "this binder is encrypted for another key" }
    }

    /// Why a repository is not a binder: what `binder mount` refuses unless forced.
    public enum NotABinder: Error, CustomStringConvertible, Equatable {
        /// No commit on `main`: an empty repository, or one whose branches are named otherwise.
        case noMainBranch
        /// `main` has no `patient-info.json`, which every binder has (an unrelated repository).
        case noPatientInfo
        /// `patient-info.json` is not a NIP-44 payload that decrypts to a JSON document.
        case unreadablePatientInfo(String)

        public var description: String {
            switch self {
            case .noMainBranch: return "it has no commit on branch main (an empty or unrelated git repository)"
            case .noPatientInfo: return "branch main has no \(BinderNaming.patientInfoPath) (an unrelated git repository)"
            case .unreadablePatientInfo(let why): return "its \(BinderNaming.patientInfoPath) is not an encrypted binder document (\(why))"
            }
        }
    }

    /// Whether the repository looks like a binder before any key is at hand: a `main` branch
    /// holding a `patient-info.json`. Throws `NotABinder`.
    public static func checkLooksLikeBinder(_ repository: GitRepository) throws {
        guard let tip = try repository.refs.branchTip("main") else { throw NotABinder.noMainBranch }
        guard try repository.trees.entry(at: BinderNaming.patientInfoPath, commit: tip) != nil else { throw NotABinder.noPatientInfo }
    }

    /// Whether `key` opens this binder's `patient-info.json`: `KeyMismatch` when it is
    /// encrypted for another key, `NotABinder` when it is missing or not an encrypted document.
    public static func checkIsBinder(_ repository: GitRepository, key: NIP44.ConversationKey) throws {
        try checkLooksLikeBinder(repository)
        guard let tip = try repository.refs.branchTip("main"), let entry = try repository.trees.entry(at: BinderNaming.patientInfoPath, commit: tip) else {
            throw NotABinder.noPatientInfo
        }
        let plaintext: SecureBytes
        do { plaintext = try BinderReader.decryptDocument(try repository.objects.readBlob(entry.id), key: key) } catch BinderReader.Error.decrypt(.invalidMAC) {
            throw KeyMismatch()
        } catch let error as BinderReader.Error {
            throw NotABinder.unreadablePatientInfo("\(error)")
        }
        do {
            guard case .object = try JSONValue.parse(plaintext.copyBytes()) else {
                throw NotABinder.unreadablePatientInfo("not a JSON object")
            }
        } catch let error as NotABinder { throw error } catch {
            throw NotABinder.unreadablePatientInfo("not JSON")
        }
    }
}
