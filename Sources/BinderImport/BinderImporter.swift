import BinderCore
import BinderCrypto
import BinderFormat
import BinderGit

/// Reads what a binder holds (its records, its patient) and commits an `ImportPlan` as one
/// commit through `BinderWriter`: documents as NIP-44 payloads, attachments as DEK sidecars,
/// folders with their `.meta.json`; plaintext never reaches disk.
public final class BinderImporter: Sendable {
    let repository: GitRepository
    let key: NIP44.ConversationKey
    let author: Signature

    public init(repository: GitRepository, key: NIP44.ConversationKey, author: Signature) {
        self.repository = repository
        self.key = key
        self.author = author
    }

    public enum Failure: Error, CustomStringConvertible {
        case unreadable(path: String, reason: String)
        case write(reason: String)

        public var description: String {
            switch self {
            case .unreadable(let path, let reason): return "cannot read \(path) in the binder: \(reason)"
            case .write(let reason): return "cannot store the import (nothing was stored): \(reason)"
            }
        }
    }

    /// Every file of `main`: documents decrypted (attachment references too: their names are
    /// taken), every other file (sidecars, raw files, unreadable documents) as a name in use.
    public func existingRecords() throws(Failure) -> [ExistingRecord] {
        try existingRecords(at: try tip())
    }

    /// The tip of `main` (nil in a binder with no commit yet).
    public func tip() throws(Failure) -> ObjectID? {
        do { return try repository.refs.branchTip() } catch { throw .unreadable(path: "main", reason: "\(error)") }
    }

    /// `existingRecords` as of the commit `tip` (nil: none).
    public func existingRecords(at tip: ObjectID?) throws(Failure) -> [ExistingRecord] {
        let entries: [TreeEntry]
        do {
            guard let tip else { return [] }
            entries = try repository.trees.listTree(commit: tip)
        } catch { throw .unreadable(path: "main", reason: "\(error)") }
        var records: [ExistingRecord] = []
        // Every file's name is taken, whatever it holds; a document that cannot be read (damaged,
        // another key's) is no item to compare with, and does not stop the import.
        for entry in entries where entry.kind == .blob {
            var document = MedicalDocument(value: "", metadata: ["type": "unreadable", "created": ""])
            if entry.nameIsExact, BinderNaming.isDocumentPath(entry.path),
               let read = try? BinderReader.readDocument(try repository.objects.readBlob(entry.id, maxSize: BinderReader.maximumDocumentBlobBytes),
                                                         key: key, gitPath: entry.path) {
                document = read
            }
            records.append(ExistingRecord(gitPath: entry.path, document: document))
        }
        return records
    }

    /// The patient `patient-info` names: its first heading and a `DOB:` (or `Date of birth:`)
    /// line, or a flat legacy object's `name` and `dob`.
    public static func patient(in records: [ExistingRecord]) -> PatientFacts {
        guard let info = records.first(where: { $0.gitPath == BinderNaming.patientInfoPath })?.document else { return PatientFacts() }
        var facts = PatientFacts(name: info.metadata["name"]?.stringValue, birthDate: info.metadata["dob"]?.stringValue)
        for line in info.value.split(separator: "\n").prefix(100) {
            let text = line.trimmingCharacters(in: .whitespaces)
            if facts.name == nil, text.hasPrefix("# ") { facts.name = String(text.dropFirst(2)) }
            for label in ["DOB:", "Date of birth:", "Born:"] where facts.birthDate == nil && text.hasPrefix(label) {
                let value = text.dropFirst(label.count).trimmingCharacters(in: .whitespaces)
                if value.utf8.count >= 10 { facts.birthDate = String(value.prefix(10)) }
            }
        }
        return facts
    }

    /// Commits `plan` onto `main` as one commit; nil when there is nothing to store.
    @discardableResult
    public func store(_ plan: ImportPlan) throws(Failure) -> ObjectID? {
        guard !plan.isEmpty else { return nil }
        let writer = BinderWriter(repository: repository, key: key, author: author)
        do {
            // One pack for every blob below: a folder's `.meta.json`, each record's document and
            // attachments' sidecars, each updated document.
            try writer.packBlobs(count: plan.newFolders.count + plan.created.reduce(0) { $0 + 1 + $1.attachments.count } + plan.updated.count)
            for folder in plan.newFolders {
                let name = String(folder.split(separator: "/").last ?? "")
                try writer.putFolder(folder, displayName: name.prefix(1).uppercased() + name.dropFirst())
            }
            for record in plan.created {
                var document = record.document
                for attachment in record.attachments {
                    document.children.append(try writer.attachmentChild(attachment.bytes, fileName: attachment.fileName,
                                                                        documentPath: record.gitPath, created: document.created ?? Timestamps.now()))
                }
                try writer.putDocument(document, at: record.gitPath)
            }
            for record in plan.updated { try writer.putDocument(record.document, at: record.gitPath) }
            return try writer.commit(message: "Import records")
        } catch { throw .write(reason: "\(error)") }
    }
}
