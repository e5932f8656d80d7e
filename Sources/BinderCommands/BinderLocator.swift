import BinderCore
import BinderSystem
import Foundation

/// `BINDER` arguments: a binder's name (under the state folder's `binders/`) or the path of a
/// git repository, bare or not.
struct BinderLocator {
    let state: StateDirectory

    func path(forName name: String) -> String { state.bindersDirectory + "/" + name }

    /// The repository path for `argument`.
    func resolve(_ argument: String) throws -> String {
        let fm = FileManager.default
        if argument.contains("/") || argument == "." || argument == ".." {
            return URL(fileURLWithPath: argument).standardizedFileURL.path
        }
        let named = path(forName: argument)
        if fm.fileExists(atPath: named) { return named }
        if fm.fileExists(atPath: argument) { return URL(fileURLWithPath: argument).standardizedFileURL.path }
        let names = ((try? fm.contentsOfDirectory(atPath: state.bindersDirectory)) ?? []).filter { !$0.hasPrefix(".") }
        if let nearest = Suggestion.nearest(to: argument, in: names) {
            throw CommandFailure("no binder named '\(argument)'; did you mean '\(nearest)'? (binders are in \(state.bindersDirectory))")
        }
        throw CommandFailure("no binder named '\(argument)' (looked in \(state.bindersDirectory)); give a name from 'binder list' or a path")
    }

    func open(_ argument: String) throws -> (repository: LocalBinder.Repository, path: String) {
        let binder = try binder(argument)
        return (binder.repository, binder.path)
    }

    /// The binder `argument` names, opened.
    func binder(_ argument: String) throws -> LocalBinder {
        // Mid-rotation a binder may be on either key, and its key file on the old one.
        try KeyRotationRecord.refuseWhileUnderWay(state)
        let path = try resolve(argument)
        // Before git opens anything: a FIFO where git expects a file would hang the command.
        let gitDirectory = FileManager.default.fileExists(atPath: path + "/.git") ? path + "/.git" : path
        let blocking = BlockingGitFiles.find(gitDirectory: gitDirectory)
        guard blocking.isEmpty else {
            throw CommandFailure("\(path) holds what git never writes and opening would hang on (a FIFO, a socket or a device): "
                                 + blocking.joined(separator: ", ") + "; remove it")
        }
        do {
            return try LocalBinder.open(path: path)
        } catch {
            throw CommandFailure("\(path) is not a binder (not a git repository)")
        }
    }

    /// A short name for logs: the folder name without `.git`.
    static func displayName(_ path: String) -> String {
        var name = URL(fileURLWithPath: path).lastPathComponent
        if name == ".git" { name = URL(fileURLWithPath: path).deletingLastPathComponent().lastPathComponent }
        if name.hasSuffix(".git") { name.removeLast(4) }
        return name.isEmpty ? "binder" : name
    }

    static func isSafeName(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 100 && !name.hasPrefix(".") && !name.hasPrefix("-")
            && name.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-_.".unicodeScalars.contains($0)) }
    }
}
