import ArgumentParser
import Foundation
import Synchronization

/// binder's version, shown by `binder --version` and in the man page.
enum BinderVersion {
    static let current = "0.9.0"
}

/// Exit statuses: the same kind of failure gives the same status in every command
/// (docs/PRODUCT.md, "Exit codes"; `EverydayCommandTests.testExitCodes` holds the rows).
enum ExitStatus {
    /// Done.
    static let success: Int32 = 0
    /// The command was understood but failed (a missing binder, a wrong passphrase, problems
    /// found by `verify`, a busy mount…): one line `binder: REASON` on stderr.
    static let failure: Int32 = 1
    /// The command line itself is wrong: an unknown command or option, a missing or malformed
    /// argument, a value that is not a duration or a size (swift-argument-parser's EX_USAGE).
    static let usage: Int32 = 64
}

extension CommandFailure {
    /// A malformed command line: exits 64, like swift-argument-parser's own usage errors.
    static func usage(_ message: String) -> CommandFailure { CommandFailure(message, exitCode: ExitStatus.usage) }
}

/// `-q`/`--quiet` and `-v`/`--verbose`, accepted by every command (before or after the
/// subcommand): quiet drops the informational lines ("Mounted …", "Locked."), keeping data and
/// errors; verbose adds detail on stderr and debug-level mount logs (paths and reasons only).
enum Verbosity: Sendable {
    case quiet, normal, verbose

    /// Set once by `BinderCommand.runMain` before any command runs.
    static let current = Mutex<Verbosity>(.normal)

    static var isQuiet: Bool { current.withLock { $0 } == .quiet }
    static var isVerbose: Bool { current.withLock { $0 } == .verbose }

    static let flags: [String: Verbosity] = ["-q": .quiet, "--quiet": .quiet, "-v": .verbose, "--verbose": .verbose]

    /// The arguments without the verbosity flags (up to a `--`), and the level they asked for.
    static func extract(from arguments: [String]) -> (arguments: [String], level: Verbosity) {
        var level = Verbosity.normal
        var kept: [String] = []
        var passedDoubleDash = false
        for argument in arguments {
            if !passedDoubleDash, let flag = flags[argument] {
                level = flag
                continue
            }
            if argument == "--" { passedDoubleDash = true }
            kept.append(argument)
        }
        return (kept, level)
    }
}

/// An informational line on stdout, dropped by `-q`.
func printInfo(_ text: String) {
    if !Verbosity.isQuiet { printOut(text) }
}

/// A detail line on stderr, shown only with `-v`.
func printDetail(_ text: String) {
    if Verbosity.isVerbose { printErr(text) }
}

/// "Did you mean" for a mistyped command or binder name.
enum Suggestion {
    /// The candidate nearest to `word` when it is near enough to be a typo: an edit distance
    /// (insertions, deletions, substitutions, swaps of neighbours) of at most a third of the
    /// word's length (at least 1), or a candidate that `word` begins.
    static func nearest(to word: String, in candidates: [String]) -> String? {
        let lowered = word.lowercased()
        let limit = max(1, lowered.count / 3)
        let scored = candidates.map { (candidate: $0, distance: distance(lowered, $0.lowercased())) }
        if let best = scored.min(by: { $0.distance < $1.distance }), best.distance <= limit { return best.candidate }
        if lowered.count >= 2, let prefixed = candidates.first(where: { $0.lowercased().hasPrefix(lowered) }) { return prefixed }
        return nil
    }

    /// Optimal string alignment distance between two strings (by characters).
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var table = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { table[i][0] = i }
        for j in 0...b.count { table[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1)
                }
            }
        }
        return table[a.count][b.count]
    }

    /// "; did you mean 'X'?" or "".
    static func phrase(for word: String, in candidates: [String]) -> String {
        nearest(to: word, in: candidates).map { "; did you mean '\($0)'?" } ?? ""
    }
}

/// The command tree as the user types it: `binder key generate` is the path
/// ["key", "generate"].
enum CommandTree {
    static func subcommands(of command: ParsableCommand.Type) -> [ParsableCommand.Type] {
        command.configuration.subcommands.filter { $0.configuration.shouldDisplay }
    }

    static func name(of command: ParsableCommand.Type) -> String { command._commandName }

    /// Walks `arguments` from the root while the command reached has subcommands. Returns the
    /// command, the words that named it, and a word that names no subcommand where one was due.
    static func resolve(_ arguments: [String]) -> (command: ParsableCommand.Type, path: [String], unknown: String?) {
        var command: ParsableCommand.Type = BinderCommand.self
        var path: [String] = []
        var skipValue = false
        for argument in arguments {
            let children = subcommands(of: command)
            if children.isEmpty || argument == "--" { break }
            if skipValue { skipValue = false; continue }
            // The root's one option with a separate value.
            if argument == "--generate-completion-script" { skipValue = true; continue }
            if argument.hasPrefix("-") { continue }
            guard let child = children.first(where: { name(of: $0) == argument }) else {
                return (command, path, argument)
            }
            command = child
            path.append(argument)
        }
        return (command, path, nil)
    }
}
