import ArgumentParser
import Foundation

/// `--help` with examples, and the man page, both from the ArgumentParser definitions.
/// Examples are kept here, by command path, so that every command's help shows some without
/// each command's file repeating the help layout.
enum CommandHelp {
    /// Examples by command path ("" is `binder` itself), each a command line and what it does.
    static let examples: [String: [(command: String, what: String)]] = [
        "": [("binder key generate", "make your key (asks for a passphrase)"),
             ("binder create health", "a new local binder (asks for the patient's name and date of birth)"),
             ("binder mount health ~/Health", "open it as a folder"),
             ("binder unmount ~/Health", "close it")],
        "key": [("binder key generate", "make a new key"),
                ("binder key show", "your npub"),
                ("binder key passphrase", "change the passphrase (same key)"),
                ("binder key backup --sheet key-sheet.pdf", "a printable recovery sheet"),
                ("binder key rotate", "a new key for a leaked one; every local binder re-encrypted")],
        "key generate": [("binder key generate", "asks for a passphrase twice, shows the nsec once"),
                         ("binder key generate --passphrase-file ~/.binder-pass", "in a script")],
        "key import": [("binder key import < key.txt", "an nsec1…, 64 hex characters or an ncryptsec1…"),
                       ("binder key import --qr photo-of-sheet.jpg", "from a photo or scan of a recovery sheet")],
        "key show": [("binder key show", "npub and hex, even while locked"),
                     ("binder key show --retired", "the keys 'binder key rotate' retired")],
        "key rotate": [("binder key rotate", "generates the new key, asks both passphrases, re-encrypts every binder"),
                       ("binder key rotate --import < new-key.txt", "rotate to a key you have (nsec, hex or ncryptsec)"),
                       ("binder key rotate --abandon", "undo a rotation that was interrupted")],
        "key export": [("binder key export > key.ncryptsec", "the encrypted key, for a backup"),
                       ("binder key export --nsec --confirm-plaintext", "the bare nsec (keep it secret)")],
        "key backup": [("binder key backup --sheet key-sheet.pdf", "a printable page: the ncryptsec as a QR code and as text"),
                       ("binder key import --qr photo-of-sheet.jpg", "restore from a photo or scan of it")],
        "key passphrase": [("binder key passphrase", "asks the current passphrase, then the new one twice"),
                           ("binder key passphrase --passphrase-file old.txt --new-passphrase-file new.txt", "in a script")],
        "unlock": [("binder unlock", "cache the key for 8 hours"),
                   ("binder unlock --timeout 30m", "for 30 minutes")],
        "lock": [("binder lock", "forget the key and lock (unmount) every running mount"),
                 ("binder lock --keep-mounts", "forget the key only")],
        "create": [("binder create health", "a new local binder named health; asks for the patient's name and date of birth"),
                   ("printf '%s\\n%s\\n' \"$NAME\" \"$DOB\" | binder create health --patient-name - --dob -", "in a script: from standard input, never in argv")],
        "mount": [("binder mount health ~/Health", "mount the binder named health"),
                  ("binder mount health ~/Health --idle 15m", "lock it after 15 minutes unused"),
                  ("binder mount health ~/Health -o ro,idle=1h", "read-only, locked after an hour"),
                  ("binder mount --install-unit health ~/Health", "mount it at every login (systemd user unit)"),
                  ("mount -t fuse.binder health /mnt/health -o passphrase_file=/root/pass", "through mount(8) (root)")],
        "unmount": [("binder unmount ~/Health", "unmount; names the processes that keep it busy"),
                    ("binder unmount --lazy ~/Health", "detach now, finish when the last file closes")],
        "verify": [("binder verify health", "decrypt and check everything"),
                   ("binder verify health --json | jq .problems", "for scripts"),
                   ("binder verify health --repair", "remove stale git locks")],
        "login": [("binder login", "log in to https://limbo.health"),
                  ("binder login --server http://127.0.0.1:8417", "to your own binder serve")],
        "list": [("binder list", "local binders and yours on the server (offline: the local ones)"),
                 ("binder list --local --json", "for scripts, no network")],
        "clone": [("binder clone 3f2a…", "clone by repository id"),
                  ("binder clone --qr payload.json --name health", "from the web app's QR")],
        "sync": [("binder sync health", "fetch, merge, push"),
                 ("binder sync health --repo-id health", "the first sync of a local binder")],
        "status": [("binder status health", "sync state, mounts, log"),
                   ("binder status health --json", "for scripts")],
        "serve": [("binder serve --repos ~/binder-server", "on 127.0.0.1:8417")],
        "new": [("binder new visits", "a record from the visits template (asks for its title); prints its path"),
                ("echo Follow-up | binder new visits --title -", "the title from standard input, never in argv"),
                ("binder new labs --edit", "and open it in $EDITOR (mounted binders)")],
        "share": [("binder share", "the whole binder for an hour; prints the QR payload for limbo.health/scan"),
                  ("echo 'Dr. Lee' | binder share conditions/asthma --expires 30m --label -", "one folder, for 30 minutes, labelled from standard input"),
                  ("binder share visits --qr-png - | display", "the QR code as an image, never written to a disk"),
                  ("binder share --list", "active shares"),
                  ("binder share --collect", "bring the doctors' notes home (never overwriting)"),
                  ("binder share --revoke scan-19b2f3c4d5e", "end one now: token revoked, staging copy deleted")],
        "open-share": [("binder open-share --qr payload.json ~/Shared", "a doctor opens a patient's share from its QR payload"),
                       ("binder open-share --qr qr-photo.jpg", "from a picture of the QR code, on a new folder here"),
                       ("binder unmount ~/Shared", "close it; the fetched copy is deleted")],
        "export": [("binder export --format pdf", "every record, as PATIENT-records-DAY.pdf here"),
                   ("binder export visits labs --format html -o ~/clinic.html", "two folders, one self-contained HTML file"),
                   ("binder export --category medications --since 2025-01-01 --format fhir", "a FHIR R4 document bundle")],
        "import": [("binder import ~/Downloads/ccd.xml --dry-run", "what a portal's CCD would make, storing nothing"),
                   ("binder import ccd.xml discharge.xml fhir-bundle.json", "several sources, one commit; items named twice kept once"),
                   ("binder import export.ndjson --json", "FHIR NDJSON, the summary for scripts")],
        "log": [("binder log", "the binder's history: time, short commit, what changed"),
                ("binder log visits/2025-02-25-annual-physical.md --json", "one record's versions, for scripts")],
    ]

    /// The examples of the command at `path`, as help text ("" when it has none).
    static func examplesText(_ path: [String]) -> String {
        guard let list = examples[path.joined(separator: " ")], !list.isEmpty else { return "" }
        let width = min(60, list.map(\.command.count).max() ?? 0)
        let lines = list.map { example in
            example.command.count <= width
                ? "  " + example.command.padding(toLength: width, withPad: " ", startingAt: 0) + "   # " + example.what
                : "  " + example.command + "\n  " + String(repeating: " ", count: width) + "   # " + example.what
        }
        return "EXAMPLES:\n" + lines.joined(separator: "\n") + "\n"
    }

    /// The help screen of the command at `path`: swift-argument-parser's, then the examples.
    static func helpText(_ command: ParsableCommand.Type, path: [String]) -> String {
        var text = BinderCommand.helpMessage(for: command)
        if !text.hasSuffix("\n") { text += "\n" }
        let examples = examplesText(path)
        if !examples.isEmpty { text += "\n" + examples }
        if path.isEmpty {
            text += "\nGLOBAL OPTIONS (any command):\n  -q, --quiet             Only data and errors.\n"
                + "  -v, --verbose           More detail on stderr; debug-level mount logs.\n"
            text += "\nEXIT STATUS:\n" + ExitStatusTable.rows.map { "  \($0.code)  \($0.meaning)" }.joined(separator: "\n") + "\n"
        }
        return text
    }

    /// True when `arguments` ask for help (`-h`, `--help`, `-help` before a `--`, or the
    /// `help` command); the words naming the command asked about.
    static func helpRequest(_ arguments: [String]) -> [String]? {
        if arguments.first == "help" { return Array(arguments.dropFirst()) }
        for argument in arguments {
            if argument == "--" { return nil }
            if argument == "-h" || argument == "--help" || argument == "-help" { return arguments }
        }
        return nil
    }
}

/// The exit statuses, for `binder --help`, the man page and PRODUCT.md.
enum ExitStatusTable {
    static let rows: [(code: Int32, meaning: String)] = [
        (ExitStatus.success, "success"),
        (ExitStatus.failure, "failure, one line 'binder: REASON' on stderr (verify: problems found)"),
        (ExitStatus.usage, "usage error: unknown command or option, missing or malformed argument"),
    ]
}

/// `binder --generate-manual`: the man page (roff), made from the same definitions as
/// `--help` (swift-argument-parser's dump of the command tree) and the examples above. Needs
/// nothing but the binary: `scripts/install` runs it offline.
enum ManualPage {
    static func render() -> String {
        guard let data = BinderCommand._dumpHelp().data(using: .utf8),
              let command = (try? JSONDecoder().decode(HelpDump.self, from: data))?.command else { return "" }
        var out = ".TH BINDER 1 \"\" \"binder \(BinderVersion.current)\" \"User Commands\"\n"
        out += ".SH NAME\nbinder \\- \(escape(command.abstract ?? ""))\n"
        out += ".SH SYNOPSIS\n.B binder\n.I command\n.RI [ options ]\n.br\n.B mount \\-t fuse.binder\n.I binder mountpoint\n.RI [ \\-o\\ options ]\n"
        out += ".SH DESCRIPTION\n" + paragraph(command.discussion ?? "")
        out += ".PP\nEvery command takes \\fB\\-q\\fR (\\fB\\-\\-quiet\\fR: only data and errors) and "
            + "\\fB\\-v\\fR (\\fB\\-\\-verbose\\fR: more detail on stderr), \\fB\\-h\\fR and \\fB\\-\\-help\\fR.\n"
        out += section(command, path: [])
        out += ".SH COMMANDS\n"
        for child in children(command) { out += commandSection(child, path: [child.commandName ?? ""]) }
        out += ".SH MOUNT OPTIONS\n"
        out += "Given as \\fB\\-o\\fR to \\fBbinder mount\\fR, to \\fBmount \\-t fuse.binder\\fR or in an /etc/fstab line:\n"
        for (name, meaning) in MountOptions.documented {
            out += ".TP\n.B \(escape(name))\n\(escape(meaning))\n"
        }
        out += ".SH EXIT STATUS\n"
        for row in ExitStatusTable.rows { out += ".TP\n.B \(row.code)\n\(escape(row.meaning))\n" }
        out += """
        .SH ENVIRONMENT
        .TP
        .B BINDER_HOME
        binder's state folder (key, binders, tokens, logs); default $XDG_DATA_HOME/binder (~/.local/share/binder), logs in $XDG_STATE_HOME/binder (~/.local/state/binder)
        .TP
        .B BINDER_SERVER
        default server for login, list, clone, sync
        .TP
        .B BINDER_LOG_LEVEL
        mount log level (debug also logs each commit's structural message and paths)
        .SH FILES
        .TP
        .I ~/.local/share/binder/key.ncryptsec
        your key, NIP-49 encrypted (0600)
        .TP
        .I ~/.local/share/binder/key.retired
        keys retired by binder key rotate, each under its old passphrase (0600)
        .TP
        .I ~/.local/share/binder/binders/
        local binders
        .TP
        .I ~/.local/state/binder/NAME.log
        a mount's log: paths and reasons, never content, keys or tokens
        .SH SEE ALSO
        .BR mount (8),
        .BR fusermount3 (1),
        .BR fstab (5)

        """
        return out
    }

    /// The part of swift-argument-parser's help dump (`ToolInfoV0`) the page is made of.
    private struct HelpDump: Decodable {
        struct Command: Decodable {
            var commandName: String?
            var abstract: String?
            var discussion: String?
            var shouldDisplay: Bool?
            var subcommands: [Command]?
            var arguments: [Argument]?
        }
        struct Argument: Decodable {
            struct Name: Decodable { var kind: String; var name: String }
            var names: [Name]?
            var valueName: String?
            var kind: String?
            var abstract: String?
            var defaultValue: String?
            var shouldDisplay: Bool?
            var isOptional: Bool?
        }
        var command: Command
    }

    private static func children(_ command: HelpDump.Command) -> [HelpDump.Command] {
        (command.subcommands ?? []).filter { ($0.shouldDisplay ?? true) && $0.commandName != "help" }
    }

    private static func commandSection(_ command: HelpDump.Command, path: [String]) -> String {
        var out = ".SS \"binder \(escape(path.joined(separator: " ")))\(escape(synopsis(command)))\"\n"
        out += paragraph(command.abstract ?? "")
        if let discussion = command.discussion, !discussion.isEmpty { out += ".PP\n" + paragraph(discussion) }
        out += section(command, path: path)
        for child in children(command) {
            out += commandSection(child, path: path + [child.commandName ?? ""])
        }
        return out
    }

    /// Options and examples of one command.
    private static func section(_ command: HelpDump.Command, path: [String]) -> String {
        var out = ""
        for argument in command.arguments ?? [] where argument.shouldDisplay ?? true {
            let names = (argument.names ?? []).map { ($0.kind == "long" ? "--" : "-") + $0.name }
            guard !names.contains("--help"), !names.contains("--version") else { continue }
            let value = argument.valueName.map { " " + $0.uppercased() } ?? ""
            let kind = argument.kind ?? ""
            let label = kind == "positional" ? (argument.valueName ?? "").uppercased()
                : names.joined(separator: ", ") + (kind == "option" ? value : "")
            var help = argument.abstract ?? ""
            if let defaultValue = argument.defaultValue, !defaultValue.isEmpty, kind == "option" {
                help += " (default: \(defaultValue))"
            }
            out += ".TP\n.B \(escape(label))\n\(escape(help))\n"
        }
        if let examples = CommandHelp.examples[path.joined(separator: " ")], !examples.isEmpty {
            out += ".PP\nExamples:\n.PP\n.RS\n.nf\n"
            for example in examples { out += escape(example.command) + "\n    # " + escape(example.what) + "\n" }
            out += ".fi\n.RE\n"
        }
        return out
    }

    private static func synopsis(_ command: HelpDump.Command) -> String {
        let positionals = (command.arguments ?? []).filter { $0.kind == "positional" }
        return positionals.map { argument -> String in
            let name = (argument.valueName ?? "").uppercased()
            return (argument.isOptional ?? false) ? " [\(name)]" : " \(name)"
        }.joined()
    }

    private static func paragraph(_ text: String) -> String {
        text.isEmpty ? "" : escape(text) + "\n"
    }

    /// roff escapes: backslashes, hyphens, and a leading dot or quote on any line.
    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\e").replacingOccurrences(of: "-", with: "\\-")
            .split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix(".") || $0.hasPrefix("'") ? "\\&" + $0 : String($0) }
            .joined(separator: "\n")
    }
}
