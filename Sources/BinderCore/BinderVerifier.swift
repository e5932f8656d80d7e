import BinderCrypto
import BinderFormat
import BinderGit
import Logging

/// `binder verify`: decrypts and checks every document, sidecar and folder metadata at `main`,
/// and lists every git folder with the mount's own rules (`ListingBuilder`), so that anything
/// the mount hides, shows raw or renames is reported with its path and why.
public struct BinderVerifier {
    public struct Finding: Sendable, CustomStringConvertible {
        public let path: String
        public let reason: String
        /// Problems make `verify` fail; notes (files that are not binder's) do not.
        public let isProblem: Bool

        /// `path: reason`, with control characters in the path escaped (a name in a crafted
        /// tree may hold newlines or terminal escapes).
        public var description: String {
            let shownPath = path.unicodeScalars.map { scalar in
                scalar.properties.generalCategory == .control ? "\\u{\(String(scalar.value, radix: 16))}" : String(scalar)
            }.joined()
            return "\(shownPath): \(reason)"
        }
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
        guard let tip = try repository.refs.branchTip(branch) else {
            report.findings.append(Finding(path: branch, reason: "the binder has no commits", isProblem: true))
            return report
        }
        let entries = try repository.trees.listTree(commit: tip)
        let files = Dictionary(entries.filter { $0.kind == .blob }.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
        func problem(_ path: String, _ reason: String) { report.findings.append(Finding(path: path, reason: reason, isProblem: true)) }

        // What the mount would show, folder by folder, by the mount's own rules. What is below
        // a folder it does not show is not looked at: the folder is the problem.
        let listingFindings = try listingFindings(entries, commit: tip)
        let trees = Set(entries.filter { $0.kind == .tree }.map(\.path))
        let hiddenFolders = Set(listingFindings.map(\.gitPath).filter(trees.contains))
        func isBelowHiddenFolder(_ path: String) -> Bool {
            GitTrees.ancestors(of: path).contains(where: hiddenFolders.contains)
        }
        for finding in listingFindings where !isBelowHiddenFolder(finding.gitPath) { problem(finding.gitPath, finding.reason) }
        let reportedByListing = Set(listingFindings.map(\.gitPath))

        if files[BinderNaming.patientInfoPath] == nil { problem(BinderNaming.patientInfoPath, "missing (every binder has one)") }
        // Sidecar path -> the first document that refers to it.
        var referencedBy: [String: String] = [:]

        for entry in entries where !isBelowHiddenFolder(entry.path) {
            let path = entry.path
            let name = String(entry.name)
            let folder = PathBytes.split(path).parent
            switch entry.kind {
            case .tree:
                report.folders += 1
                if !reportedByListing.contains(path) { checkFolderName(name, path: path, in: folder, files: files, problem: problem) }
                continue
            case .blob:
                break
            case .link, .submodule, .unreadable:
                continue  // reported by the listing
            }
            if name == BinderNaming.folderMetadataName {
                checkFolderMetadata(entry, problem: problem)
            } else if BinderNaming.hasDocumentExtension(name) {
                report.documents += 1
                checkDocument(entry, folder: folder, files: files, referencedBy: &referencedBy, problem: problem)
            } else if BinderNaming.isSidecarName(name) {
                report.attachments += 1
                checkSidecar(entry, problem: problem)
            } else if let unreadable = Self.unreadableBlob(entry, in: repository) {
                problem(path, unreadable)
            } else {
                report.findings.append(Finding(path: path, reason: "not part of the binder format (shown as stored)", isProblem: false))
            }
        }
        for (path, _) in files where BinderNaming.isSidecarName(path) && referencedBy[path] == nil
            && !isBelowHiddenFolder(path) {
            report.findings.append(Finding(path: path, reason: "attachment that no document refers to", isProblem: false))
        }
        report.findings.sort { $0.path.utf8.lexicographicallyPrecedes($1.path.utf8) }
        return report
    }

    /// A git folder named `X.children` beside a document `X.json`: the view shows the document's
    /// children under that name, so the folder is hidden as soon as the document has any.
    private func checkFolderName(_ name: String, path: String, in folder: String, files: [String: TreeEntry],
                                 problem: (String, String) -> Void) {
        guard let stem = BinderNaming.childrenOwnerStem(name) else { return }
        let document = BinderNaming.documentName(stem: stem)
        guard files[join(folder, document)] != nil else { return }
        problem(path, "a git folder named like the folder the view makes for the children of "
                + "\(document); once that document has children, it is not shown")
    }

    /// Why a file shown as stored cannot be read (its object is missing, or is not a blob: a
    /// crafted tree's file mode on a folder); nil when it can. Only its header is read.
    private static func unreadableBlob(_ entry: TreeEntry, in repository: GitRepository) -> String? {
        do { _ = try repository.objects.blobSize(entry.id) } catch { return "\(error) (reading it through the mount fails with EIO)" }
        return nil
    }

    /// A folder's `.meta.json` decrypts to a JSON object.
    private func checkFolderMetadata(_ entry: TreeEntry, problem: (String, String) -> Void) {
        do {
            let plaintext = try BinderReader.decryptDocument(try repository.objects.readBlob(entry.id), key: key)
            guard case .object = try JSONValue.parse(plaintext.copyBytes()) else {
                return problem(entry.path, "folder metadata is not a JSON object")
            }
        } catch { problem(entry.path, "folder metadata: \(error)") }
    }

    /// A document decrypts, parses and validates, and each attachment it names is a sidecar of
    /// its folder that exists and that no other document claims (`referencedBy`: sidecar path →
    /// the first document naming it).
    private func checkDocument(_ entry: TreeEntry, folder: String, files: [String: TreeEntry],
                               referencedBy: inout [String: String], problem: (String, String) -> Void) {
        let path = entry.path
        let document: MedicalDocument
        do { document = try BinderReader.readDocument(try repository.objects.readBlob(entry.id), key: key, gitPath: path) } catch {
            return problem(path, "\(error) (shown as stored, read-only)")
        }
        if !(BinderReader.isPatientInfo(path) && document.metadata["type"] == nil) {
            for issue in document.validate() { problem(path, issue) }
        }
        for value in BinderNaming.attachmentValues(document) {
            // A path (`../x.enc`, `sub/x.enc`) is reported by `validate()`.
            if value.contains("/") || value == "." || value == ".." { continue }
            guard BinderNaming.isSidecarReference(value) else {
                problem(path, "refers to the attachment \"\(value)\", which is not the name of a sidecar in its folder "
                        + "(shown as a note, not as the attachment)")
                continue
            }
            let sidecarPath = join(folder, value)
            if let other = referencedBy[sidecarPath], other != path {
                problem(path, "refers to \(value), which \(other) refers to as well: a change to either attachment changes both, "
                        + "and deleting either deletes it for both")
            } else {
                referencedBy[sidecarPath] = path
            }
            if files[sidecarPath] == nil { problem(path, "refers to \(value), which is missing") }
        }
    }

    /// Decrypts a sidecar in full (the tag or MAC checked) and compares its size with the one
    /// the mount lists without decrypting (`Sidecar.plaintextSize`).
    private func checkSidecar(_ entry: TreeEntry, problem: (String, String) -> Void) {
        let bytes: [UInt8]
        let plaintext: SecureBytes
        do {
            bytes = try repository.objects.readBlob(entry.id)
            plaintext = try Sidecar.decrypt(bytes, key: key)
        } catch {
            problem(entry.path, "\(error) (reading it through the mount fails with EIO)")
            return
        }
        guard let listed = Sidecar.plaintextSize(bytes, key: key) else {
            problem(entry.path, "its size cannot be worked out without decrypting it (shown as stored, read-only)")
            return
        }
        if listed != plaintext.count {
            problem(entry.path, "decrypts to \(plaintext.count) bytes, but its length says \(listed) (the size the mount lists)")
        }
    }

    /// Lists every git folder as the mount does and returns what it would not show as the
    /// format names it.
    private func listingFindings(_ entries: [TreeEntry], commit: ObjectID) throws -> [ListingFinding] {
        var folders: [String: [TreeEntry]] = ["": []]
        for entry in entries {
            let parent = PathBytes.split(entry.path).parent
            folders[parent, default: []].append(entry)
        }
        let commitTime = Timestamp(seconds: try repository.commits.commit(commit).committer.seconds)
        let quiet = Logger(label: "binder.verify", factory: { _ in SwiftLogNoOpLogHandler() })
        var findings: [ListingFinding] = []
        for (folder, folderEntries) in folders {
            var builder = ListingBuilder(repository: repository, key: key, logger: quiet, commitTime: commitTime)
            builder.build(viewPath: folder, gitDirectory: folder, entries: folderEntries)
            findings += builder.findings
        }
        return findings
    }
}
