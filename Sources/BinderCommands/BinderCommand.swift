import ArgumentParser
import BinderCrypto
import BinderSystem
import Foundation

/// `binder`: the command line. Each subcommand lives in its own file.
public struct BinderCommand: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "binder",
        abstract: "Mount an encrypted Limbo Health Medical Binder as an ordinary folder.",
        discussion: """
        State (key file, binders, tokens) lives under BINDER_HOME, else \
        $XDG_DATA_HOME/binder (~/.local/share/binder); mount logs under BINDER_HOME/logs, else \
        $XDG_STATE_HOME/binder (~/.local/state/binder). 'binder COMMAND --help' describes each command; \
        'man binder' has them all.
        """,
        version: BinderVersion.current,
        subcommands: [KeyCommand.self, UnlockCommand.self, LockCommand.self, CreateCommand.self,
                      MountCommand.self, UnmountCommand.self, VerifyCommand.self,
                      LoginCommand.self, ListCommand.self, CloneCommand.self, SyncCommand.self, StatusCommand.self,
                      ServeCommand.self, NewCommand.self, LogCommand.self, ExportCommand.self, ShareCommand.self,
                      OpenShareCommand.self, ImportCommand.self]
    )

    public init() {}

    /// Runs the command line: every process that may hold a secret is made non-dumpable first,
    /// and failures print one line on stderr and exit with the status of their kind
    /// (`ExitStatus`: 1 failure, 64 usage).
    public static func runMain() -> Never {
        Hardening.makeNonDumpable()
        var arguments = Array(CommandLine.arguments.dropFirst())
        let program = URL(fileURLWithPath: CommandLine.arguments.first ?? "binder").lastPathComponent
        if program == MountHelper.programName {
            do {
                let translation = try MountHelper.translate(arguments)
                if translation.fake { Foundation.exit(ExitStatus.success) }
                arguments = translation.arguments + (translation.verbose ? ["--verbose"] : [])
                if translation.verbose { printErr("\(MountHelper.programName): binder \(translation.arguments.joined(separator: " "))") }
            } catch {
                fail(CommandFailure.usage(error.description))
            }
        }
        let (kept, level) = Verbosity.extract(from: arguments)
        arguments = kept
        Verbosity.current.withLock { $0 = level }
        if arguments == ["--generate-manual"] {
            FileHandle.standardOutput.write(Data(ManualPage.render().utf8))
            Foundation.exit(ExitStatus.success)
        }
        if let asked = arguments.isEmpty ? [] : CommandHelp.helpRequest(arguments) {
            let (command, path, unknown) = CommandTree.resolve(asked)
            if let unknown { fail(unknownCommand(unknown, under: command, path: path)) }
            FileHandle.standardOutput.write(Data(CommandHelp.helpText(command, path: path).utf8))
            Foundation.exit(ExitStatus.success)
        }
        let typed = CommandTree.resolve(arguments)
        if let unknown = typed.unknown { fail(unknownCommand(unknown, under: typed.command, path: typed.path)) }
        do {
            var command = try parseAsRoot(arguments)
            try command.run()
            Foundation.exit(ExitStatus.success)
        } catch let failure as CommandFailure {
            fail(failure)
        } catch let exhausted as SecureMemoryError {
            fail(CommandFailure(exhausted.description))
        } catch {
            // swift-argument-parser's own: help and --version (0), usage errors (64).
            exit(withError: error)
        }
    }

    /// "unknown command 'mout'; did you mean 'mount'?" (a usage error).
    private static func unknownCommand(_ word: String, under command: ParsableCommand.Type, path: [String]) -> CommandFailure {
        let names = CommandTree.subcommands(of: command).map { CommandTree.name(of: $0) }
        let prefix = (["binder"] + path).joined(separator: " ")
        return CommandFailure.usage("unknown command '\(prefix) \(word)'\(Suggestion.phrase(for: word, in: names))"
                                    + " (see '\(prefix) --help')")
    }

    /// One line on stderr, whatever a library put in the message, and the failure's status.
    static func fail(_ failure: CommandFailure) -> Never {
        let line = failure.message.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }.joined(separator: "; ")
        FileHandle.standardError.write(Data("binder: \(line)\n".utf8))
        Foundation.exit(failure.exitCode)
    }
}

/// A failure the user should see as one clear line.
struct CommandFailure: Error {
    let message: String
    var exitCode: Int32 = 1

    init(_ message: String, exitCode: Int32 = 1) {
        self.message = message
        self.exitCode = exitCode
    }
}

/// Options shared by commands that may need the passphrase.
struct PassphraseOptions: ParsableArguments {
    @Option(name: .customLong("passphrase-file"), help: "Read the passphrase from the first line of FILE instead of the terminal.")
    var passphraseFile: String?

    var source: PassphraseSource { passphraseFile.map { .file($0) } ?? .terminal }
}

func printOut(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

func printErr(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}
