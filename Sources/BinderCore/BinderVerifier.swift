import BinderCrypto
import BinderFormat
import BinderGit

/// `binder verify`: decrypts and checks every document, sidecar and folder metadata at `main`.
public struct BinderVerifier {
    public struct Finding: Sendable, CustomStringConvertible {
        public let path: String
        public let reason: String
        /// Problems make `verify` fail; notes (files that are not binder's) do not.
        public let isProblem: Bool

        public var description: String { "\(path): \(reason)" }
    }

    public struct Report: Sendable {
        public var findings: [Finding] = []
        public var documents = 0
        public var attachments = 0
        public var folders = 0
        public var problems: [Finding] { findings.filter(\.isProblem) }
    }

    let repository: GitRepository
    let key: NIP44.ConversationKey

    public init(repository: GitRepository, key: NIP44.ConversationKey) {
        self.repository = repository
        self.key = key
    }

    public func verify(branch: String = "main") throws -> Report {
        var report = Report()
        guard let tip = try repository.branchTip(branch) else {
            report.findings.append(Finding(path: branch, reason: "the binder has no commits", isProblem: true))
            return report
        }
        let entries = try repository.listTree(commit: tip)
        let files = Dictionary(entries.filter { $0.kind == .blob }.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
        func problem(_ path: String, _ reason: String) { report.findings.append(Finding(path: path, reason: reason, isProblem: true)) }

        if files["patient-info.json"] == nil { problem("patient-info.json", "missing (every binder has one)") }
        var referenced = Set<String>()

        for entry in entries {
            let path = entry.path
            let name = String(entry.name)
            switch entry.kind {
            case .tree:
                report.folders += 1
                continue
            case .blob:
                break
            default:
                report.findings.append(Finding(path: path, reason: "not a regular file (\(entry.kind))", isProblem: false))
                continue
            }
            let folder = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? ""
            if name == ".meta.json" {
                do {
                    let plaintext = try BinderReader.decryptDocument(try repository.readBlob(entry.id), key: key)
                    guard case .object = try JSONValue.parse(plaintext.copyBytes()) else {
                        problem(path, "folder metadata is not a JSON object"); continue
                    }
                } catch { problem(path, "\(error)") }
            } else if name.hasSuffix(".json") {
                report.documents += 1
                let document: MedicalDocument
                do { document = try BinderReader.readDocument(try repository.readBlob(entry.id), key: key, gitPath: path) } catch {
                    problem(path, "\(error)"); continue
                }
                if !(BinderReader.isPatientInfo(path) && document.metadata["type"] == nil) {
                    for issue in document.validate() { problem(path, issue) }
                }
                for sidecar in Self.sidecarReferences(document) {
                    let sidecarPath = join(folder, sidecar)
                    referenced.insert(sidecarPath)
                    if files[sidecarPath] == nil { problem(path, "refers to \(sidecar), which is missing") }
                }
            } else if name.hasSuffix(".enc") {
                report.attachments += 1
                do { _ = try Sidecar.decrypt(try repository.readBlob(entry.id), key: key) } catch { problem(path, "\(error)") }
            } else {
                report.findings.append(Finding(path: path, reason: "not part of the binder format (shown as stored)", isProblem: false))
            }
        }
        for (path, _) in files where path.hasSuffix(".enc") && !referenced.contains(path) {
            report.findings.append(Finding(path: path, reason: "attachment that no document refers to", isProblem: false))
        }
        report.findings.sort { $0.path < $1.path }
        return report
    }

    /// Sidecar names an `attachment_ref` document or any of its descendants refers to.
    static func sidecarReferences(_ document: MedicalDocument) -> [String] {
        var names: [String] = []
        if document.type == "attachment_ref", !document.value.isEmpty { names.append(document.value) }
        for child in document.children { names += sidecarReferences(child) }
        return names
    }
}
