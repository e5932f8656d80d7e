import ArgumentParser
import BinderCore
import BinderExport
import BinderSystem
import Foundation

extension ExportFormat: ExpressibleByArgument {}

/// `binder export`: records to hand to a clinic, made from the decrypted view in memory (mounted
/// or not; the mount is not used), written as one file readable by its owner only.
struct ExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export records as a printable PDF, one self-contained HTML file, or a FHIR R4 document bundle.",
        discussion: """
        PATHs are records or folders as the mount shows them (visits, labs/2025-02-25-lipid-panel.md); \
        without any, the whole binder. The file is written 0600; without --output it is named after the \
        patient and the day, in the current folder. Nothing else decrypted is written anywhere.
        """)

    @Argument(help: "Records or folders to export, as paths in the mount (default: everything).")
    var paths: [String] = []
    @Option(help: "What to write.")
    var format: ExportFormat
    @Option(name: .shortAndLong, help: "The file to write (default: PATIENT-records-DATE.pdf|html|fhir.json here).")
    var output: String?
    @Option(help: "A binder's name or path (default: the only local binder, or the one mounted).")
    var binder: String?
    @Option(help: "Only records created on or after this day (YYYY-MM-DD, UTC).")
    var since: String?
    @Option(help: "Only records created on or before this day (YYYY-MM-DD, UTC).")
    var until: String?
    @Option(name: .customLong("category"), help: "Only this top-level folder (visits, labs…); repeat for more.")
    var categories: [String] = []
    @OptionGroup var passphrase: PassphraseOptions

    func validate() throws {
        for (name, value) in [("--since", since), ("--until", until)] {
            if let value, !ExportSelection.isDay(value) { throw ValidationError("\(name) \(value): give a day as YYYY-MM-DD") }
        }
        if let since, let until, since > until { throw ValidationError("--since \(since) is after --until \(until)") }
    }

    func run() throws {
        let state = StateDirectory()
        let (repository, path) = try BinderLocator(state: state).open(try binderForViews(binder, state: state))
        let key = try BinderKey.conversationKey(owner: KeyStore(state: state).secretKey(passphrase: passphrase.source))
        do { try BinderCreator.checkIsBinder(repository, key: key) } catch {
            throw CommandFailure("cannot export \(path): \(error)")
        }
        // What the view would log (a file that cannot be read) comes back as the export's error:
        // one line on stderr, not the same failure twice.
        var logger = quietLogger("binder.export")
        logger.logLevel = .critical
        let view: BinderView
        do { view = try BinderView(repository: repository, key: key, logger: logger) } catch {
            throw CommandFailure("cannot read \(path): \(error)")
        }
        defer { view.close() }
        let selection = ExportSelection(paths: paths, since: since, until: until, categories: categories)
        let content: ExportContent
        let bytes: [UInt8]
        do {
            content = try ExportReader(view: view).read(selection)
            bytes = try Exporter.render(content, as: format)
        } catch let error as ExportError {
            throw CommandFailure("\(error)")
        }
        let target = output.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
            ?? Self.freeName(Exporter.defaultFileName(for: content, format: format))
        do { try Exporter.write(bytes, to: target) } catch { throw CommandFailure("\(error)") }
        let records = content.records.count
        var summary = "exported \(records) record\(records == 1 ? "" : "s") (\(content.imageCount) image\(content.imageCount == 1 ? "" : "s"), "
            + "\(content.otherAttachmentCount) other attachment\(content.otherAttachmentCount == 1 ? "" : "s")) as \(format.rawValue.uppercased())"
            + " to \(target) (\(bytes.count) bytes, readable by you only)"
        if content.skippedRawFiles > 0 {
            summary += "; left out \(content.skippedRawFiles) file(s) shown as stored ('binder verify' explains them)"
        }
        printOut(summary)
    }

    /// `NAME` in the current folder, or `NAME-2`… (before the extension) if it is taken.
    static func freeName(_ name: String) -> String {
        let folder = FileManager.default.currentDirectoryPath
        let dot = name.range(of: ".")?.lowerBound ?? name.endIndex
        var candidate = name
        var n = 2
        while FileManager.default.fileExists(atPath: folder + "/" + candidate) || (try? FileManager.default.destinationOfSymbolicLink(
            atPath: folder + "/" + candidate)) != nil {
            candidate = String(name[..<dot]) + "-\(n)" + String(name[dot...])
            n += 1
        }
        return folder + "/" + candidate
    }
}
