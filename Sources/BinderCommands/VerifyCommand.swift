import ArgumentParser
import BinderCore
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
    @Flag(help: "Print one JSON object (counts, problems, notes, repairs); the exit status is the same.")
    var json = false
    @OptionGroup var passphrase: PassphraseOptions

    func run() throws {
        // Every object read is hashed again: a changed object is reported, not read as it is.
        RepositoryCare.hashObjectsOnRead()
        let state = StateDirectory()
        let (repository, path) = try BinderLocator(state: state).open(binder)
        // Repairs take the binder's writer lock: nothing else may write meanwhile.
        var writerLock: WriterLock?
        // Each line of the report, kept for --json; printed as it comes otherwise.
        var repaired: [Entry] = [], problems: [Entry] = [], notes: [Entry] = []
        func add(_ entry: Entry, to list: inout [Entry], prefix: String) {
            list.append(entry)
            if !json { printOut(prefix + entry.line) }
        }
        if repair {
            do { writerLock = try WriterLock.acquire(gitDirectory: repository.gitDirectory) } catch .held(let holder) {
                throw CommandFailure("cannot repair \(BinderLocator.displayName(path)) while it is \(holder): unmount it first")
            } catch {
                throw CommandFailure("cannot repair \(path): \(error)")
            }
            writerLock?.record(WriterLock.Holder(pid: getpid(), command: "verify --repair"))
            for lock in GitLockFiles.removeStale(gitDirectory: repository.gitDirectory) {
                add(Entry(path: lock.name, reason: "\(lock.what) left by a process that stopped", shown: "removed \(lock.name), \(lock.what) left by a process that stopped"),
                    to: &repaired, prefix: "repaired: ")
            }
            for name in GitTemporaryPacks.removeStale(gitDirectory: repository.gitDirectory).names {
                add(Entry(path: "objects/pack/" + name, reason: "an unfinished pack file left by a process that stopped",
                          shown: "removed objects/pack/\(name), an unfinished pack file left by a process that stopped"),
                    to: &repaired, prefix: "repaired: ")
            }
        }
        defer { withExtendedLifetime(writerLock) {} }
        // Loose objects cut short are moved aside (--repair) or reported, before anything
        // reads them: libgit2 would inflate one forever (RepositoryCare).
        let damaged = repair ? RepositoryCare.moveDamagedObjectsAside(gitDirectory: repository.gitDirectory)
                             : RepositoryCare.damagedObjects(gitDirectory: repository.gitDirectory)
        for object in damaged {
            if repair {
                add(Entry(path: "objects/" + object, reason: "a damaged git object (cut short)",
                          shown: "moved objects/\(object), a damaged git object (cut short), to binder/damaged-objects"),
                    to: &repaired, prefix: "repaired: ")
            } else {
                add(Entry(path: "objects/" + object, reason: "a damaged git object (cut short): 'binder verify --repair' or the next mount moves it aside"),
                    to: &problems, prefix: "problem: ")
            }
        }
        if !repair && !damaged.isEmpty {
            // Reading on would hang on them.
            if json {
                try JSONOutput.print(JSON(binder: path, documents: 0, attachments: 0, folders: 0, ok: false, problems: problems, notes: notes,
                                          repaired: repaired))
            }
            throw CommandFailure("\(damaged.count) damaged git object\(damaged.count == 1 ? "" : "s"): the rest is not read until they are moved aside")
        }
        let key = try KeyStore(state: state).secretKey(passphrase: passphrase.source)
        let report: BinderVerifier.Report
        do {
            report = try BinderVerifier(repository: repository, key: BinderKey.conversationKey(owner: key)).verify()
        } catch {
            throw CommandFailure("cannot read \(path): \(error)")
        }
        // Git's lock files: one no process has open makes every later update of what it locks fail.
        let stale = GitLockFiles.stale(gitDirectory: repository.gitDirectory)
        for lock in GitLockFiles.find(gitDirectory: repository.gitDirectory) {
            if stale.contains(where: { $0.name == lock.name }) {
                add(Entry(path: lock.name, reason: "\(lock.what), left by a process that stopped: saves fail until it is removed ('binder verify --repair')"),
                    to: &problems, prefix: "problem: ")
            } else if !lock.holders.isEmpty {
                add(Entry(path: lock.name, reason: "\(lock.what), held by pid \(lock.holders.map(String.init).joined(separator: ", ")) (a git update in progress)"),
                    to: &notes, prefix: "note: ")
            }
        }
        for finding in report.findings {
            let entry = Entry(path: finding.path, reason: finding.reason, shown: finding.description)
            if finding.isProblem { add(entry, to: &problems, prefix: "problem: ") } else { add(entry, to: &notes, prefix: "note: ") }
        }
        let summary = "\(report.documents) documents, \(report.attachments) attachments, \(report.folders) folders: "
            + (problems.isEmpty ? "all good" : "\(problems.count) problem\(problems.count == 1 ? "" : "s")")
        if json {
            try JSONOutput.print(JSON(binder: path, documents: report.documents, attachments: report.attachments,
                                      folders: report.folders, ok: problems.isEmpty, problems: problems, notes: notes,
                                      repaired: repaired))
        }
        if !problems.isEmpty { throw CommandFailure(summary) }
        if !json { printOut(summary) }
    }

    /// `--json`'s shape.
    private struct JSON: Encodable {
        let binder: String
        let documents: Int
        let attachments: Int
        let folders: Int
        let ok: Bool
        let problems: [Entry]
        let notes: [Entry]
        let repaired: [Entry]
    }

    /// One line of the report: a path and why.
    private struct Entry: Encodable {
        let path: String
        let reason: String
        /// The text line when it is not `path: reason` (a finding's path with control
        /// characters escaped; a repair in words).
        var shown: String?
        var line: String { shown ?? "\(path): \(reason)" }
        /// JSON carries the path and the reason (`shown` is the text line's form of them).
        private enum CodingKeys: String, CodingKey { case path, reason }
    }
}
