import ArgumentParser
import BinderCore
import BinderCrypto
import BinderSystem
import Foundation

struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Decrypt and check every document, attachment and folder of a binder; non-zero on problems.",
        discussion: "Also reports git lock files left by a process that stopped (saves fail while one is there); --repair removes them.")

    @Argument(help: "A binder's name or the path of its git repository.")
    var binder: String
    @Flag(help: "Remove stale git lock files (not while the binder is mounted).")
    var repair = false
    @OptionGroup var passphrase: PassphraseOptions

    func run() throws {
        let state = StateDirectory()
        let (repository, path) = try BinderLocator(state: state).open(binder)
        // Repairs take the binder's writer lock: nothing else may write meanwhile.
        var writerLock: WriterLock?
        if repair {
            do { writerLock = try WriterLock.acquire(gitDirectory: repository.gitDirectory) } catch .held(let holder) {
                throw CommandFailure("cannot repair \(BinderLocator.displayName(path)) while it is \(holder): unmount it first")
            } catch {
                throw CommandFailure("cannot repair \(path): \(error)")
            }
            writerLock?.record(WriterLock.Holder(pid: getpid(), command: "verify --repair"))
            for lock in GitLockFiles.removeStale(gitDirectory: repository.gitDirectory) {
                printOut("repaired: removed \(lock.name), \(lock.what) left by a process that stopped")
            }
        }
        defer { withExtendedLifetime(writerLock) {} }
        let key = try KeyStore(state: state).secretKey(passphrase: passphrase.source)
        let report: BinderVerifier.Report
        do {
            report = try BinderVerifier(repository: repository, key: NIP44.ConversationKey(selfOf: key)).verify()
        } catch {
            throw CommandFailure("cannot read \(path): \(error)")
        }
        // Git's lock files: one no process has open makes every later update of what it locks fail.
        let stale = GitLockFiles.stale(gitDirectory: repository.gitDirectory)
        for lock in GitLockFiles.find(gitDirectory: repository.gitDirectory) {
            if stale.contains(where: { $0.name == lock.name }) {
                printOut("problem: \(lock.name): \(lock.what), left by a process that stopped: saves fail until it is removed ('binder verify --repair')")
            } else if !lock.holders.isEmpty {
                printOut("note: \(lock.name): \(lock.what), held by pid \(lock.holders.map(String.init).joined(separator: ", ")) (a git update in progress)")
            }
        }
        for finding in report.findings {
            printOut((finding.isProblem ? "problem: " : "note: ") + finding.description)
        }
        let problems = report.problems.count + stale.count
        let summary = "\(report.documents) documents, \(report.attachments) attachments, \(report.folders) folders: "
            + (problems == 0 ? "all good" : "\(problems) problem\(problems == 1 ? "" : "s")")
        if problems > 0 {
            throw CommandFailure(summary)
        }
        printOut(summary)
    }
}
