import ArgumentParser
import BinderCore
import BinderFormat
import BinderSystem
import Foundation

struct LogCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log",
        abstract: "List the history of a binder, or of one record: time, short commit, what changed.",
        discussion: """
        PATH is a record as the mount shows it (visits/2026-02-09-follow-up.md), relative to the \
        binder or inside its mount. Every version is also a file under MOUNT/.binder/history/PATH. \
        Commit messages are structural ("Update entry"): no content is shown, and no key is needed.
        """)

    @Argument(help: "A record (visits/x.md, labs/scan.pdf); default: the whole binder.")
    var path: String?
    @Option(help: "A binder's name or path (default: the only local binder, or the one mounted).")
    var binder: String?
    @Flag(help: "One JSON array of {time, commit, message}.")
    var json = false

    func run() throws {
        let state = StateDirectory()
        let (repository, location) = try BinderLocator(state: state).open(try binderForViews(binder, state: state))
        let history = BinderHistory(repository)
        guard try history.hasCommits() else { throw CommandFailure("\(location) has no commits yet") }
        let entries: [BinderHistory.Entry]
        do {
            if let path {
                let gitPath = try Self.gitPath(of: path, mounts: WriterLock.mountPoints(gitDirectory: repository.gitDirectory))
                entries = try history.versions(of: gitPath)
                guard !entries.isEmpty else { throw CommandFailure("\(path): no such record in the history of \(location)") }
            } else {
                entries = try history.entries()
            }
        } catch let failure as CommandFailure { throw failure } catch {
            throw CommandFailure("cannot read the history of \(location): \(error)")
        }
        json ? try printJSON(entries) : entries.forEach { printOut("\(Self.time($0.seconds))  \($0.commit.prefix(7))  \($0.message)") }
    }

    private func printJSON(_ entries: [BinderHistory.Entry]) throws {
        struct Version: Encodable { let time: String, commit: String, message: String }
        try JSONOutput.print(entries.map { Version(time: Self.time($0.seconds), commit: $0.commit, message: $0.message) })
    }

    static func time(_ seconds: Int64) -> String {
        String(Timestamps.string(seconds: seconds).prefix(19)) + "Z"
    }

    /// The git path of the document behind a record's path in the view: `X.md` → `X.json`, an
    /// attachment `Y.pdf` → `Y.json` (its `attachment_ref`); a path inside a mount of the
    /// binder is taken relative to it.
    static func gitPath(of viewPath: String, mounts: [String]) throws -> String {
        var relative = viewPath
        let absolute = viewPath.hasPrefix("/") ? viewPath : FileManager.default.currentDirectoryPath + "/" + viewPath
        let standardized = URL(fileURLWithPath: absolute).standardizedFileURL.path
        if let mount = mounts.first(where: { standardized.hasPrefix($0 + "/") }) {
            relative = String(standardized.dropFirst(mount.count + 1))
        }
        while relative.hasPrefix("./") { relative.removeFirst(2) }
        guard !relative.isEmpty, !relative.hasPrefix("/"), !relative.split(separator: "/").contains("..") else {
            throw CommandFailure("\(viewPath): give a record's path in the binder (visits/x.md) or in its mount")
        }
        return BinderNaming.documentPath(ofViewPath: relative)
    }
}
