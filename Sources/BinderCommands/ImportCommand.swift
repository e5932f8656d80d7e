import ArgumentParser
import BinderCore
import BinderFormat
import BinderImport
import BinderSystem
import Foundation

struct ImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Bring records in: C-CDA documents, FHIR R4 JSON, health cards, and folders of PDFs, photos and notes.",
        discussion: """
        Formats are recognised by content: a C-CDA document (CCD, discharge summary, referral…) or FHIR R4 JSON \
        (a Bundle, one resource, or NDJSON). Problems go to conditions/, medications to medications/, allergies to \
        allergies/, immunizations to immunizations/, results and vital signs to labs/ (a panel is one record), \
        procedures to procedures/, encounters to visits/, payers to insurance/; the file itself is kept once as the \
        attachment of a record in documents/ listing what was made from it. A PDF, image, audio or video file becomes \
        the attachment of a record made for it, a markdown or text file a record (its front matter kept), in documents/ \
        (or --into), a folder's subfolders naming the categories (labs/, visits/… by name). Importing the same records again adds \
        nothing (items are matched by their codes and dates, not by the ids a portal gives them). One import is one \
        commit, or nothing when any source cannot be read. On a mounted binder the import goes through the mount (no \
        passphrase asked: the mount holds the key): the records show in the mounted folder at once, saves made meanwhile \
        are kept, and one import carries at most 256 MiB; a read-only mount refuses it.
        """)

    @Argument(help: "The files to import (C-CDA XML, FHIR JSON or NDJSON, health cards, PDFs, images, audio, video, notes), or folders of them (a folder's FHIR files are one source); - reads a health card's shc:/ text from standard input.")
    var sources: [String]
    @Option(help: "A binder's name or path (default: the only local binder).")
    var binder: String?
    @Flag(help: "Print the records it would make and store nothing.")
    var dryRun = false
    @Option(help: "The folder that keeps the imported files themselves, and the records of PDFs, photos and notes (default: documents).")
    var into: String?
    @Flag(help: "The summary as JSON.")
    var json = false
    @Flag(help: "Import a document about a different person than the binder's patient-info.")
    var force = false
    @Option(help: "Refuse a source larger than this many bytes (64 MiB): a file; a folder's files together (a file over it inside a folder is left out and listed); an export.zip's clinical records inflated.")
    var maxSize: Int = ImportLimits.defaultMaximumBytes
    @Option(help: "The health card issuer's public keys (the JWKS it publishes under .well-known): each card's signature is checked, a bad one refused.")
    var issuerKeys: String?
    @OptionGroup var passphrase: PassphraseOptions

    func validate() throws {
        if maxSize <= 0 { throw ValidationError("--max-size must be a positive number of bytes") }
        if let into {
            let parts = into.split(separator: "/", omittingEmptySubsequences: false)
            if parts.isEmpty || parts.contains(where: { $0.isEmpty || $0.hasPrefix(".") || $0.utf8.count > 200 }) {
                throw ValidationError("--into must be a folder path like documents or documents/portal (no empty or dot names)")
            }
        }
    }

    func run() throws {
        // On a terminal only: a pipe or a log gets the summary alone.
        let progress = isatty(2) != 0 ? ProgressLine() : nil
        // Whatever fails, its message starts a line of its own, not the end of a half-drawn one.
        do { try importSources(progress: progress) } catch {
            progress?.clear()
            throw error
        }
    }

    private func importSources(progress: ProgressLine?) throws {
        let importDate = String(Timestamps.now().prefix(10))
        // Every source is read and understood before the binder is touched: one bad file stores nothing.
        var documents: [SourceDocument] = []
        let started = Date()
        let keys: IssuerKeys?
        do { keys = try issuerKeys.map { path throws(ImportError) in try IssuerKeys.read(path: path) } } catch {
            throw CommandFailure("--issuer-keys: \(error) (nothing was imported)")
        }
        for (index, source) in sources.enumerated() {
            progress?.update("Reading \(index + 1) of \(sources.count): \(source)")
            do {
                if source == "-" {
                    documents.append(try SourceReader.standardInput(maximumBytes: maxSize, importDate: importDate, issuerKeys: keys))
                } else {
                    documents += try SourceReader.sources(path: source, file: source, maximumBytes: maxSize, importDate: importDate, into: into,
                                                          issuerKeys: keys, scanner: ImportQRScanner())
                }
            } catch {
                throw CommandFailure("\(error) (nothing was imported)")
            }
        }
        let state = StateDirectory()
        let local = try BinderLocator(state: state).binder(try defaultBinder(binder, state: state))
        let path = local.path
        let writerLock: WriterLock
        do { writerLock = try WriterLock.acquire(gitDirectory: local.gitDirectory, patience: 0) } catch .held(let holder) {
            guard let mountpoint = holder.mountpoint else { throw CommandFailure("\(path) is \(holder): try again when it is done") }
            progress?.update("Handing \(documents.count) source(s) to the mount at \(mountpoint)")
            let outcome = try ImportThroughMount(gitDirectory: local.gitDirectory, mountpoint: mountpoint).run(
                ImportRequest(sources: documents, documentsFolder: into ?? "documents", importDate: importDate, force: force, dryRun: dryRun))
            return report(outcome.plan, commit: outcome.commitID, documents: documents, progress: progress, started: started)
        } catch {
            throw CommandFailure("cannot write \(path): \(error)")
        }
        writerLock.record(WriterLock.Holder(pid: getpid(), command: "import"))
        defer { withExtendedLifetime(writerLock) {} }
        progress?.clear()  // a passphrase prompt starts its own line
        let key = try BinderKey.conversationKey(owner: KeyStore(state: state).secretKey(passphrase: passphrase.source))
        let importer = BinderImporter(repository: local.repository, key: key, author: commitAuthor())
        let existing = try readBinder(importer)
        let patient = BinderImporter.patient(in: existing)
        for document in documents {
            if let difference = patient.difference(from: document.patient), !force {
                throw CommandFailure("\(ImportError.differentPatient(file: document.file, reason: difference)) (nothing was imported)")
            }
        }
        let plan = ImportPlanner(documentsFolder: into ?? "documents", importDate: importDate).plan(documents, existing: existing)
        var commit: LocalBinder.CommitID?
        if !dryRun {
            progress?.update("Storing \(plan.created.count) records and \(plan.attachmentCount) attachments")
            do { commit = try importer.store(plan) } catch { throw CommandFailure("\(error)") }
        }
        report(plan, commit: commit, documents: documents, progress: progress, started: started)
    }

    /// The summary: for people (the tree first on a dry run), or `--json`.
    private func report(_ plan: ImportPlan, commit: LocalBinder.CommitID?, documents: [SourceDocument], progress: ProgressLine?, started: Date) {
        progress?.finish(dryRun ? "Read \(sources.count) file(s)" : "Read \(sources.count) file(s), stored in one commit")
        let seconds = Date().timeIntervalSince(started)
        if json {
            printOut(ImportSummary.json(plan, commit: commit, dryRun: dryRun, seconds: seconds, signatures: documents.compactMap { document in
                document.signature.map { (document.file, $0) }
            }))
        } else {
            if dryRun { printOut(ImportSummary.tree(plan)) }
            for document in documents { if let signature = document.signature { printOut("\(document.file): signature \(signature)") } }
            printOut(ImportSummary.text(plan, dryRun: dryRun))
        }
    }

    private func readBinder(_ importer: BinderImporter) throws -> [ExistingRecord] {
        do { return try importer.existingRecords() } catch { throw CommandFailure("\(error) (nothing was imported)") }
    }
}

/// What an import made, for people and for scripts.
enum ImportSummary {
    /// The records it would make, as the mount would show them, folder by folder.
    static func tree(_ plan: ImportPlan) -> String {
        var lines: [String] = []
        var lastFolder: String?
        let shown = plan.created.map { ($0.gitPath, "", $0.attachments.map(\.fileName)) }
            + plan.updated.map { ($0.gitPath, " (gains a source)", [String]()) }
        for (gitPath, note, attachments) in shown.sorted(by: { $0.0 < $1.0 }) {
            let parts = gitPath.split(separator: "/")
            let folder = parts.dropLast().joined(separator: "/")
            if folder != lastFolder {
                lines.append(folder + "/")
                lastFolder = folder
            }
            lines.append("  " + BinderNaming.recordName(ofDocument: String(parts.last ?? "")) + note)
            for attachment in attachments { lines.append("    + " + attachment) }
        }
        return lines.joined(separator: "\n")
    }

    static func text(_ plan: ImportPlan, dryRun: Bool) -> String {
        var lines: [String] = []
        let verb = dryRun ? "Would import" : "Imported"
        let perFolder = plan.createdPerFolder.map { "\($0.folder) \($0.count)" }.joined(separator: ", ")
        lines.append("\(verb) \(plan.created.count) record\(plan.created.count == 1 ? "" : "s")" + (perFolder.isEmpty ? "" : " (\(perFolder))")
                     + ", \(plan.attachmentCount) attachment\(plan.attachmentCount == 1 ? "" : "s")")
        if !plan.updated.isEmpty { lines.append("\(plan.updated.count) record(s) already in the binder now name this source too") }
        if plan.unchanged > 0 { lines.append("\(plan.unchanged) item(s) already in the binder") }
        if !plan.skipped.isEmpty {
            lines.append("Left out (\(plan.skipped.count)):")
            lines += plan.skipped.map { "  \($0.file): \($0.what): \($0.reason)" }
        }
        if plan.isEmpty && !dryRun { lines.append("Nothing new: the binder is unchanged") }
        return lines.joined(separator: "\n")
    }

    static func json(_ plan: ImportPlan, commit: LocalBinder.CommitID?, dryRun: Bool, seconds: Double, signatures: [(file: String, says: String)] = []) -> String {
        var folders = JSONObject()
        for (folder, count) in plan.createdPerFolder { folders[folder] = JSONValue(count) }
        var object: JSONObject = [
            "dryRun": .bool(dryRun),
            "commit": commit.map { .string("\($0)") } ?? .null,
            "created": .array(plan.created.map { .string(BinderNaming.recordName(ofDocument: $0.gitPath)) }),
            "updated": .array(plan.updated.map { .string(BinderNaming.recordName(ofDocument: $0.gitPath)) }),
            "recordsPerFolder": .object(folders),
            "attachments": JSONValue(plan.attachmentCount),
            "unchanged": JSONValue(plan.unchanged),
            "skipped": .array(plan.skipped.map { .object(["file": .string($0.file), "what": .string($0.what), "reason": .string($0.reason)]) }),
            "seconds": JSONValue((seconds * 1000).rounded() / 1000),
        ]
        if !signatures.isEmpty {
            object["signatures"] = .array(signatures.map { .object(["file": .string($0.file), "signature": .string($0.says)]) })
        }
        return JSONValue.object(object).serialized()
    }
}
