import ArgumentParser
import BinderCore
import BinderCrypto
import BinderSystem
import Foundation

struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Decrypt and check every document, attachment and folder of a binder; non-zero on problems.")

    @Argument(help: "A binder's name or the path of its git repository.")
    var binder: String
    @OptionGroup var passphrase: PassphraseOptions

    func run() throws {
        let state = StateDirectory()
        let (repository, path) = try BinderLocator(state: state).open(binder)
        let key = try KeyStore(state: state).secretKey(passphrase: passphrase.source)
        let report: BinderVerifier.Report
        do {
            report = try BinderVerifier(repository: repository, key: NIP44.ConversationKey(selfOf: key)).verify()
        } catch {
            throw CommandFailure("cannot read \(path): \(error)")
        }
        for finding in report.findings {
            printOut((finding.isProblem ? "problem: " : "note: ") + finding.description)
        }
        let problems = report.problems.count
        let summary = "\(report.documents) documents, \(report.attachments) attachments, \(report.folders) folders: "
            + (problems == 0 ? "all good" : "\(problems) problem\(problems == 1 ? "" : "s")")
        if problems > 0 {
            throw CommandFailure(summary)
        }
        printOut(summary)
    }
}
