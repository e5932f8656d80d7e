import ArgumentParser
import BinderSystem
import Foundation

/// `binder`: the command line. Each subcommand lives in its own file.
public struct BinderCommand: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "binder",
        abstract: "Mount an encrypted Limbo Health Medical Binder as an ordinary folder.",
        discussion: """
        State (key file, binders, tokens, logs) lives under BINDER_HOME, else \
        $XDG_DATA_HOME/binder (~/.local/share/binder).
        """,
        subcommands: [KeyCommand.self, UnlockCommand.self, LockCommand.self, CreateCommand.self,
                      MountCommand.self, UnmountCommand.self, VerifyCommand.self,
                      LoginCommand.self, ListCommand.self, CloneCommand.self, SyncCommand.self, StatusCommand.self,
                      ServeCommand.self, NewCommand.self, LogCommand.self]
    )

    public init() {}

    /// Runs the command line: every process that may hold a secret is made non-dumpable first,
    /// and failures print one line on stderr and exit non-zero.
    public static func runMain() -> Never {
        Hardening.makeNonDumpable()
        do {
            var command = try parseAsRoot()
            try command.run()
            Foundation.exit(0)
        } catch let failure as CommandFailure {
            // One line, whatever a library put in its message.
            let line = failure.message.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty }.joined(separator: "; ")
            FileHandle.standardError.write(Data("binder: \(line)\n".utf8))
            Foundation.exit(failure.exitCode)
        } catch {
            exit(withError: error)
        }
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
