import ArgumentParser
import BinderCore
import BinderSystem
import Foundation

struct CreateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Create a new binder (local, no server) holding an encrypted patient-info.json.",
        discussion: """
        The patient's name and date of birth are health data, and a command line is readable by \
        every user of the computer: give them as - to read them from standard input (one line \
        each, name first), or leave them out to be asked on a terminal. A value typed on the \
        command line still works, with a warning.
        """)

    @Argument(help: "The binder's name (letters, digits, '-', '_', '.').")
    var name: String
    @Option(name: .customLong("patient-name"), help: "The patient's name, written into patient-info (encrypted); - reads a line of standard input.")
    var patientName: String?
    @Option(help: "Date of birth, YYYY-MM-DD; - reads a line of standard input.")
    var dob: String?
    @OptionGroup var passphrase: PassphraseOptions

    func validate() throws {
        guard BinderLocator.isSafeName(name) else {
            throw ValidationError("'\(name)' is not a usable binder name: use up to 100 letters, digits, '-', '_' and '.', not starting with '.' or '-'")
        }
        if let dob, dob != "-", !Self.isDate(dob) { throw ValidationError("--dob must be a date as YYYY-MM-DD") }
    }

    static func isDate(_ text: String) -> Bool {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
              parts.allSatisfy({ $0.allSatisfy { $0.isASCII && $0.isNumber } }),
              let month = Int(parts[1]), (1...12).contains(month), let day = Int(parts[2]), (1...31).contains(day) else { return false }
        return true
    }

    func run() throws {
        let state = StateDirectory()
        // A binder made now would be under the key the rotation is leaving.
        try KeyRotationRecord.refuseWhileUnderWay(state)
        let locator = BinderLocator(state: state)
        let path = locator.path(forName: name)
        guard !FileManager.default.fileExists(atPath: path) else {
            throw CommandFailure("a binder named '\(name)' already exists at \(path)")
        }
        let values = try ContentInput().values([
            ContentOption(name: "--patient-name", prompt: "Patient's name", given: patientName),
            ContentOption(name: "--dob", prompt: "Date of birth, YYYY-MM-DD", given: dob),
        ])
        let patientName = values[0], dob = values[1]
        if let dob, !Self.isDate(dob) { throw CommandFailure.usage("--dob must be a date as YYYY-MM-DD") }
        let key = try KeyStore(state: state).secretKey(passphrase: passphrase.source)
        try FileManager.default.createDirectory(atPath: state.bindersDirectory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        do {
            _ = try BinderCreator.create(at: path, key: BinderKey.conversationKey(owner: key), patientName: patientName,
                                         dateOfBirth: dob, author: commitAuthor())
        } catch {
            try? FileManager.default.removeItem(atPath: path)
            throw CommandFailure("cannot create the binder: \(error)")
        }
        printOut("Created binder '\(name)' at \(path)")
    }
}

/// The author of binder's commits: BINDER_AUTHOR_NAME / BINDER_AUTHOR_EMAIL, else the apps' default.
func commitAuthor() -> LocalBinder.Author {
    let env = ProcessInfo.processInfo.environment
    return LocalBinder.Author(name: env["BINDER_AUTHOR_NAME"] ?? BinderCreator.defaultAuthor.name,
                     email: env["BINDER_AUTHOR_EMAIL"] ?? BinderCreator.defaultAuthor.email)
}
