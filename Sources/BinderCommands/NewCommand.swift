import ArgumentParser
import BinderCore
import BinderFormat
import BinderSystem
import Foundation

struct NewCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "new",
        abstract: "Create a record from its category's template and print its path.",
        discussion: """
        Templates: visits (date and provider), labs (test, facility, results table), medications \
        (drug, dosage, prescriber), conditions (diagnosis, date of diagnosis), plain otherwise. \
        A file CATEGORY.md under $XDG_CONFIG_HOME/binder/templates (~/.config/binder/templates) \
        replaces the built-in one; {{title}} and {{date}} in it are filled in. In a mounted binder \
        the record is written through the mount; otherwise straight into git (one commit). A title \
        is health data and a command line is readable by every user of the computer: give --title - \
        to read it from standard input, or leave it out to be asked on a terminal.
        """)

    @Argument(help: "The folder (category) to create the record in: visits, labs, medications, conditions, or any other.")
    var category: String
    @Option(help: "The record's title (its first heading and file name); - reads a line of standard input. Default: the category's (Visit, Lab…).")
    var title: String?
    @Option(help: "A binder's name or path (default: the only local binder, or the one mounted).")
    var binder: String?
    @Flag(help: "Open the new record in $VISUAL or $EDITOR (the binder must be mounted: plaintext never touches disk).")
    var edit = false
    @OptionGroup var passphrase: PassphraseOptions

    func validate() throws {
        let parts = category.split(separator: "/", omittingEmptySubsequences: false)
        if parts.isEmpty || parts.contains(where: { $0.isEmpty || $0.hasPrefix(".") || $0.utf8.count > BinderNaming.maximumBytes }) {
            throw ValidationError("CATEGORY must be a folder path like visits or conditions/back-acne (no empty or dot names)")
        }
    }

    func run() throws {
        let state = StateDirectory()
        let (repository, path) = try BinderLocator(state: state).open(try binderForViews(binder, state: state))
        let date = String(Timestamps.now().prefix(10))
        let title = try ContentInput().values([
            ContentOption(name: "--title", prompt: "Title", given: self.title, whenEmpty: Self.defaultTitle(category)),
        ])[0] ?? Self.defaultTitle(category)
        let text = RecordTemplates.text(for: category, title: title, date: date)
        let writerLock: WriterLock
        do { writerLock = try WriterLock.acquire(gitDirectory: repository.gitDirectory, patience: 0) } catch .held(let holder) {
            guard let mountpoint = holder.mountpoint else { throw CommandFailure("\(path) is \(holder): try again when it is done") }
            return try createThroughMount(mountpoint, text: text, title: title, date: date)
        } catch {
            throw CommandFailure("cannot write \(path): \(error)")
        }
        writerLock.record(WriterLock.Holder(pid: getpid(), command: "new"))
        defer { withExtendedLifetime(writerLock) {} }
        if edit { throw CommandFailure("--edit needs the binder mounted ('binder mount'): an editor needs a file, and plaintext never touches disk") }
        let key = try BinderKey.conversationKey(owner: KeyStore(state: state).secretKey(passphrase: passphrase.source))
        let view: BinderView
        do { view = try BinderView(repository: repository, key: key, logger: quietLogger("new"), options: BinderView.Options(author: commitAuthor())) } catch {
            throw CommandFailure("cannot read \(path): \(error)")
        }
        defer { view.close() }
        let relative = try createInView(view, text: text, title: title, date: date)
        printOut(relative)
    }

    /// Writes the record through the mount (the mount commits it) and opens it if asked.
    private func createThroughMount(_ mountpoint: String, text: String, title: String, date: String) throws {
        let folder = mountpoint + "/" + category
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let name = Self.freeName(title: title, date: date) { FileManager.default.fileExists(atPath: folder + "/" + $0) }
        let file = folder + "/" + name
        guard FileManager.default.createFile(atPath: file, contents: Data(text.utf8)) else {
            throw CommandFailure("cannot create \(file) (see 'binder status' for the reason)")
        }
        printOut(file)
        if edit { try openEditor(file) }
    }

    /// Writes the record through a view of the unmounted binder: the folder if missing, then the
    /// record (one commit each, as through the mount). Returns its path in the binder.
    private func createInView(_ view: BinderView, text: String, title: String, date: String) throws -> String {
        var folder = ""
        do {
            for part in category.split(separator: "/") {
                folder = folder.isEmpty ? String(part) : folder + "/" + part
                if (try? view.attributes(folder)) == nil { try view.makeDirectory(folder) }
            }
            let name = Self.freeName(title: title, date: date) { (try? view.attributes(folder + "/" + $0)) != nil }
            try view.store(folder + "/" + name, content: Array(text.utf8))
            return folder + "/" + name
        } catch {
            throw CommandFailure("cannot create the record: \(error)")
        }
    }

    /// Runs `$VISUAL`/`$EDITOR` on `file` in the terminal's foreground process group (see
    /// `TerminalProgram`: an editor in a group of its own is stopped by the terminal). The
    /// shell that splits the command `exec`s the editor: a Ctrl-C the editor takes must not end
    /// the shell binder waits for while the editor keeps running.
    private func openEditor(_ file: String) throws {
        let environment = ProcessInfo.processInfo.environment
        let editor = [environment["VISUAL"], environment["EDITOR"]].compactMap { $0 }.first { !$0.isEmpty } ?? "vi"
        let outcome: TerminalProgram.Outcome
        do { outcome = try TerminalProgram.run("/bin/sh", arguments: ["-c", "exec " + editor + " \"$1\"", "sh", file]) } catch {
            throw CommandFailure("cannot start the editor (\(editor)): \(error)")
        }
        switch outcome {
        case .exited(0): return
        case .exited(let status): throw CommandFailure("\(editor) exited with status \(status); the record is kept as it was last saved")
        case .signalled(let signal): throw CommandFailure("\(editor) was ended by signal \(signal); the record is kept as it was last saved")
        }
    }

    /// `YYYY-MM-DD-title-words.md`, or with `-2`, `-3`… when taken (as the apps name files).
    static func freeName(title: String, date: String, taken: (String) -> Bool) -> String {
        BinderNaming.firstFree(BinderNaming.recordName(stem: date + "-" + fileWords(title)), isTaken: taken)
    }

    /// Lowercase letters and digits of `title`, joined by hyphens ("Lab results" → "lab-results").
    static func fileWords(_ title: String) -> String {
        let words = title.lowercased().split { !($0.isLetter || $0.isNumber) || !$0.isASCII }
        let joined = words.joined(separator: "-")
        return joined.isEmpty ? "entry" : String(joined.prefix(80))
    }

    /// "Visit" for visits, "Lab" for labs…, "Note" for a folder of no known category.
    static func defaultTitle(_ category: String) -> String {
        Categories.documentType(forFolder: category).capitalized
    }
}

/// The templates of new records, by category (the phone app's: §4.5 of its requirements),
/// and the user's own under the config folder.
enum RecordTemplates {
    static let builtIn: [String: String] = [
        "visits": "# {{title}}\n\nDate: {{date}}\nProvider: \n\n## Reason for visit\n\n## Notes\n",
        "labs": "# {{title}}\n\nTest: \nFacility: \nDate: {{date}}\n\n## Results\n\n| Test | Result | Range |\n|---|---|---|\n|  |  |  |\n",
        "medications": "# {{title}}\n\nDrug: \nDosage: \nPrescriber: \nStarted: {{date}}\n",
        "conditions": "# {{title}}\n\nDiagnosis: \nDate of diagnosis: {{date}}\n\n## Notes\n",
    ]
    static let plain = "# {{title}}\n\n"

    /// `$XDG_CONFIG_HOME/binder/templates`, else `~/.config/binder/templates`.
    static var userFolder: String {
        let environment = ProcessInfo.processInfo.environment
        let config = environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? (environment["HOME"] ?? NSHomeDirectory()) + "/.config"
        return config + "/binder/templates"
    }

    /// The template of the top folder of `category`, filled in.
    static func text(for category: String, title: String, date: String) -> String {
        let top = String(category.split(separator: "/").first ?? "").lowercased()
        let own = try? String(contentsOfFile: userFolder + "/" + top + ".md", encoding: .utf8)
        let template = own ?? builtIn[top] ?? plain
        return template.replacingOccurrences(of: "{{title}}", with: title).replacingOccurrences(of: "{{date}}", with: date)
    }
}

/// `BINDER` for commands about a binder's records: the one given, else the only local binder,
/// else the only one mounted.
func binderForViews(_ argument: String?, state: StateDirectory) throws -> String {
    do { return try defaultBinder(argument, state: state) } catch {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: state.bindersDirectory)) ?? []
        let mounted = names.filter { name in
            !name.hasPrefix(".") && !WriterLock.mountPoints(gitDirectory: state.bindersDirectory + "/" + name).isEmpty
        }
        guard mounted.count == 1 else { throw error }
        return mounted[0]
    }
}
