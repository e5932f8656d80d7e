import BinderCrypto
import Foundation
import XCTest

/// Living with binder day to day (issue 15): installing it, its help and man page, exit
/// codes, "did you mean", --json, -q.
final class EverydayCommandTests: XCTestCase {
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// `scripts/install --prefix DIR` puts binder, its mount helper, the man page and the
    /// completions where the tools look; binder then runs from the PATH, and the README's first
    /// screen (key, create, mount) works as written.
    func testInstallIntoAPrefixThenRunFromThePath() throws {
        let sandbox = try BinderSandbox()
        let prefix = sandbox.root.appendingPathComponent("prefix").path
        let install = try shell("scripts/install --prefix '\(prefix)' --binary '\(BinderSandbox.binary)' --no-helper-link",
                                in: Self.repositoryRoot.path)
        XCTAssertEqual(install.status, 0, install.stderr)
        for file in ["bin/binder", "sbin/mount.fuse.binder", "share/man/man1/binder.1", "share/man/man8/mount.fuse.binder.8",
                     "share/bash-completion/completions/binder", "share/zsh/site-functions/_binder",
                     "share/fish/vendor_completions.d/binder.fish"] {
            XCTAssertTrue(FileManager.default.fileExists(atPath: prefix + "/" + file), "missing \(file)")
        }
        let manual = try String(contentsOfFile: prefix + "/share/man/man1/binder.1", encoding: .utf8)
        XCTAssertTrue(manual.hasPrefix(".TH BINDER 1"), manual)
        for section in ["binder mount BINDER MOUNTPOINT", "binder key generate", "EXIT STATUS", "idle=DURATION", "Examples:"] {
            XCTAssertTrue(manual.contains(ManualText.escape(section)), "man page lacks \(section)")
        }
        // man(1) renders it without warnings, where man is installed.
        if try shell("command -v man").status == 0 {
            let rendered = try shell("MANWIDTH=100 man --warnings -l '\(prefix)/share/man/man1/binder.1' 2>&1 >/dev/null")
            XCTAssertEqual(rendered.stdout, "", "man warns")
        }
        XCTAssertTrue(try String(contentsOfFile: prefix + "/share/bash-completion/completions/binder", encoding: .utf8).contains("mount"))
        XCTAssertTrue(try String(contentsOfFile: prefix + "/share/zsh/site-functions/_binder", encoding: .utf8).contains("#compdef binder"))
        XCTAssertTrue(try String(contentsOfFile: prefix + "/share/fish/vendor_completions.d/binder.fish", encoding: .utf8).contains("complete -c 'binder'"))
        let bashCompletion = try shell("source '\(prefix)/share/bash-completion/completions/binder' && COMP_WORDS=(binder mou) COMP_CWORD=1 && _binder && echo \"${COMPREPLY[@]}\"")
        XCTAssertTrue(bashCompletion.stdout.contains("mount"), bashCompletion.stdout + bashCompletion.stderr)

        // From the PATH, as the README's first screen has it.
        let environment = ["PATH": prefix + "/bin:" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"),
                           "BINDER_HOME": sandbox.home.path]
        let version = try shell("binder --version", environment: environment)
        XCTAssertEqual(version.status, 0, version.stderr)
        XCTAssertTrue(version.stdout.range(of: #"^\d+\.\d+\.\d+\n$"#, options: .regularExpression) != nil, version.stdout)
        let pass = try sandbox.file("pass", "first screen\n")
        let mountpoint = sandbox.root.appendingPathComponent("Health").path
        let firstScreen = try shell("""
            set -e
            binder key generate --passphrase-file '\(pass)' --log-n 8 >/dev/null
            printf 'Alex Doe\\n1984-07-12\\n' | binder create health --patient-name - --dob - --passphrase-file '\(pass)'
            mkdir '\(mountpoint)'
            binder mount health '\(mountpoint)' --passphrase-file '\(pass)'
            grep -q 'Alex Doe' '\(mountpoint)/patient-info.md'
            mkdir '\(mountpoint)/visits'
            echo '# Checkup' > '\(mountpoint)/visits/checkup.md'
            binder unmount '\(mountpoint)'
            """, environment: environment)
        defer { unmountQuietly(sandbox, mountpoint) }
        XCTAssertEqual(firstScreen.status, 0, firstScreen.stderr)
        let verify = try sandbox.run(["verify", "health", "--passphrase-file", pass])
        XCTAssertEqual(verify.status, 0, verify.stderr)
        XCTAssertTrue(verify.stdout.contains("all good"), verify.stdout)
        XCTAssertEqual(try shell("git -C '\(sandbox.home.path)/binders/health' ls-tree -r --name-only main").stdout
                        .split(separator: "\n").filter { $0.hasPrefix("visits/") && $0.hasSuffix(".json") }.count, 2,
                       "the record and the folder's .meta.json")
    }

    /// `binder help` and every command's `--help` show an example; `--version` answers.
    func testEveryHelpShowsAnExample() throws {
        let sandbox = try BinderSandbox()
        let dump = try sandbox.run(["--experimental-dump-help"])
        XCTAssertEqual(dump.status, 0, dump.stderr)
        let root = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])
        var paths: [[String]] = []
        func walk(_ command: [String: Any], _ path: [String]) {
            paths.append(path)
            for child in (command["subcommands"] as? [[String: Any]]) ?? [] where (child["shouldDisplay"] as? Bool ?? true) {
                let name = child["commandName"] as? String ?? ""
                if name != "help" { walk(child, path + [name]) }
            }
        }
        walk(try XCTUnwrap(root["command"] as? [String: Any]), [])
        XCTAssertGreaterThan(paths.count, 15)
        for path in paths {
            let help = try sandbox.run(path + ["--help"])
            XCTAssertEqual(help.status, 0, "\(path): \(help.stderr)")
            XCTAssertTrue(help.stdout.contains("EXAMPLES:\n  binder") || help.stdout.contains("EXAMPLES:\n  mount"),
                          "binder \(path.joined(separator: " ")) --help has no example:\n\(help.stdout)")
        }
        let help = try sandbox.run(["help"])
        XCTAssertEqual(help.status, 0)
        XCTAssertTrue(help.stdout.contains("EXAMPLES:") && help.stdout.contains("EXIT STATUS:") && help.stdout.contains("--quiet"), help.stdout)
        XCTAssertEqual(try sandbox.run(["help", "mount"]).stdout, try sandbox.run(["mount", "--help"]).stdout)
        XCTAssertEqual(try sandbox.run([]).stdout, help.stdout)
    }

    /// The same kind of error gives the same exit status in every command: 0 success, 1 a
    /// failure (one line on stderr), 64 a usage error.
    func testExitCodes() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        let s = binder.sandbox, pass = binder.passphraseFile, mnt = binder.mountpoint
        let table: [(arguments: [String], status: Int32)] = [
            (["--version"], 0), (["help"], 0), (["mount", "--help"], 0), (["key", "show"], 0),
            // Usage: unknown command or option, missing or malformed arguments.
            (["mout"], 64), (["key", "genrate"], 64), (["list", "--bogus"], 64), (["mount"], 64), (["verify"], 64),
            (["mount", binder.repository, mnt, "--cache-size", "lots"], 64),
            (["mount", binder.repository, mnt, "--idle", "soon"], 64),
            (["mount", binder.repository, mnt, "-o", "bogus"], 64),
            (["mount", binder.repository, mnt, "-o", "idle=never"], 64),
            (["unlock", "--timeout", "soon", "--passphrase-file", pass], 64),
            (["clone", "--qr", "x", "y"], 64), (["key", "export", "--nsec", "--passphrase-file", pass], 64),
            // Failures: the command was understood but could not be done.
            (["status", "no-such-binder"], 1), (["verify", "no-such-binder", "--passphrase-file", pass], 1),
            (["mount", "no-such-binder", mnt, "--passphrase-file", pass], 1), (["sync", "no-such-binder"], 1),
            (["unmount", mnt], 1),
            (["mount", binder.repository, mnt, "--passphrase-file", try s.file("wrong", "nope\n")], 1),
            (["verify", s.root.path, "--passphrase-file", pass], 1),
        ]
        for row in table {
            let run = try s.run(row.arguments)
            XCTAssertEqual(run.status, row.status, "binder \(row.arguments.joined(separator: " ")): \(run.stderr)")
            if row.status == 1 {
                XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, "one line on stderr: \(run.stderr)")
                XCTAssertTrue(run.stderr.hasPrefix("binder: "), run.stderr)
            }
            if row.status == 64 { XCTAssertFalse(run.stderr.isEmpty) }
        }
    }

    /// A mistyped command or binder name gets the nearest one suggested.
    func testDidYouMean() throws {
        let sandbox = try BinderSandbox()
        let pass = try sandbox.file("pass", "pass\n")
        XCTAssertEqual(try sandbox.run(["key", "generate", "--passphrase-file", pass, "--log-n", "8"]).status, 0)
        XCTAssertEqual(try sandbox.run(["create", "health", "--passphrase-file", pass]).status, 0)
        for (typed, meant) in [(["mout"], "mount"), (["unmonut"], "unmount"), (["staus"], "status"), (["key", "genrate"], "generate"),
                               (["sycn"], "sync"), (["lsit"], "list")] {
            let run = try sandbox.run(typed)
            XCTAssertEqual(run.status, 64, run.stderr)
            XCTAssertTrue(run.stderr.contains("did you mean '\(meant)'?"), "\(typed): \(run.stderr)")
        }
        let far = try sandbox.run(["frobnicate"])
        XCTAssertEqual(far.status, 64)
        XCTAssertFalse(far.stderr.contains("did you mean"), far.stderr)
        XCTAssertTrue(far.stderr.contains("unknown command"), far.stderr)
        for command in [["status", "helth"], ["verify", "healht", "--passphrase-file", pass], ["sync", "heath"]] {
            let run = try sandbox.run(command)
            assertFails(run, mentioning: "did you mean 'health'?")
            XCTAssertEqual(run.status, 1)
        }
    }

    /// `--json` on list, status and verify parses, with the fields scripts need.
    func testJSONOutputParses() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        let s = binder.sandbox, pass = binder.passphraseFile
        // A name of its own, so that `list` shows this binder alone.
        let name = "json-" + UUID().uuidString.prefix(8).lowercased()
        XCTAssertEqual(try s.run(["create", name, "--passphrase-file", pass]).status, 0)
        func object(_ run: BinderRun) throws -> [String: Any] {
            try XCTUnwrap(JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], run.stdout + run.stderr)
        }
        let list = try object(try s.run(["list", "--local", "--json"]))
        let local = try XCTUnwrap(list["local"] as? [[String: Any]])
        XCTAssertEqual(local.map { $0["name"] as? String }, [name])
        XCTAssertEqual(local.first?["pendingCommits"] as? Int, 1, "never synced: its one commit waits for the first sync")
        XCTAssertNotNil(local.first?["lastCommit"] as? String)

        let status = try object(try s.run(["status", name, "--json"]))
        XCTAssertEqual(status["name"] as? String, name)
        XCTAssertEqual(status["mounted"] as? [String], [])
        XCTAssertTrue(status["sync"] is NSNull)
        XCTAssertTrue(status["mount"] is NSNull, "not mounted: \(status)")
        try binder.mount()
        let mountedStatus = try object(try s.run(["status", binder.repository, "--json"]))
        // (Other tests may mount their own sample-binder meanwhile: this one is among them.)
        XCTAssertTrue((mountedStatus["mounted"] as? [String] ?? []).contains(binder.mountpoint), "\(mountedStatus)")
        XCTAssertEqual(mountedStatus["log"] as? String, s.home.path + "/logs/sample-binder.log")
        // The running mount's own sync state, asked over its control channel.
        let mount = try XCTUnwrap(mountedStatus["mount"] as? [String: Any], "\(mountedStatus)")
        XCTAssertNotNil(mount["pid"] as? Int, "\(mount)")
        XCTAssertEqual(mount["mountpoint"] as? String, binder.mountpoint)
        XCTAssertEqual(mount["sync"] as? String, "not configured", "\(mount)")
        XCTAssertTrue(mount["error"] is NSNull && mount["lastSync"] is NSNull, "\(mount)")

        let verify = try s.run(["verify", name, "--json", "--passphrase-file", pass])
        XCTAssertEqual(verify.status, 0, verify.stderr)
        let report = try object(verify)
        XCTAssertEqual(report["ok"] as? Bool, true)
        XCTAssertEqual(report["documents"] as? Int, 1)
        XCTAssertEqual((report["problems"] as? [Any])?.count, 0)
        // Problems: still JSON on stdout, exit status 1 as without --json.
        let repository = s.root.appendingPathComponent("broken").path
        // A git lock file no process holds: verify's problem.
        XCTAssertEqual(try shell("git clone -q --bare '\(s.home.path)/binders/\(name)' '\(repository)' && "
                                 + "echo x > '\(repository)/refs/heads/main.lock'").status, 0)
        let broken = try s.run(["verify", repository, "--json", "--passphrase-file", pass])
        XCTAssertEqual(broken.status, 1, broken.stderr)
        let brokenReport = try object(broken)
        XCTAssertEqual(brokenReport["ok"] as? Bool, false)
        XCTAssertEqual(((brokenReport["problems"] as? [[String: Any]])?.first?["path"] as? String), "refs/heads/main.lock")
    }

    /// `binder verify` hashes every object it reads (a mount does not, as git does not): a
    /// root tree whose bytes were swapped for another valid tree's (the same record, another
    /// file mode: a plain read takes it as it is) is reported, and the command fails.
    func testVerifyFindsAnObjectWhoseContentIsNotItsId() throws {
        let binder = try MountedBinder()
        let s = binder.sandbox, pass = binder.passphraseFile
        XCTAssertEqual(try s.run(["create", "health", "--passphrase-file", pass]).status, 0)
        let repository = s.root.appendingPathComponent("tampered").path
        let pack = s.root.appendingPathComponent("objects.pack").path
        // A bare copy with every object loose, then the root tree's file given another tree's bytes.
        let tamper = try shell("""
            set -e
            git clone -q --bare --no-local '\(s.home.path)/binders/health' '\(repository)'
            cat '\(repository)'/objects/pack/*.pack > '\(pack)'
            rm -f '\(repository)'/objects/pack/*
            git -C '\(repository)' unpack-objects -q < '\(pack)'
            root=$(git -C '\(repository)' rev-parse 'main^{tree}')
            # The same record under the same name, as an executable file: another valid tree.
            other=$(git -C '\(repository)' ls-tree main | sed 's/^100644/100755/' | git -C '\(repository)' mktree)
            test "$other" != "$root"
            target='\(repository)'/objects/${root:0:2}/${root:2}
            chmod u+w "$target"
            cp '\(repository)'/objects/${other:0:2}/${other:2} "$target"
            """)
        XCTAssertEqual(tamper.status, 0, tamper.stderr)
        let verify = try s.run(["verify", repository, "--passphrase-file", pass])
        XCTAssertEqual(verify.status, 1, verify.stdout + verify.stderr)
        XCTAssertTrue((verify.stdout + verify.stderr).contains("hash"), verify.stdout + verify.stderr)
    }

    /// `binder list` offline: the local binders, the reason the server's are missing, exit 0.
    func testListWorksOffline() throws {
        let binder = try MountedBinder()
        let s = binder.sandbox, pass = binder.passphraseFile
        XCTAssertEqual(try s.run(["create", "health", "--passphrase-file", pass]).status, 0)
        // Nothing listens on port 9 of this machine.
        let list = try s.run(["list", "--server", "http://127.0.0.1:9", "--passphrase-file", pass])
        XCTAssertEqual(list.status, 0, list.stderr)
        XCTAssertTrue(list.stdout.contains("  health  "), list.stdout)
        XCTAssertTrue(list.stdout.contains("unreachable"), list.stdout)
        let json = try s.run(["list", "--server", "http://127.0.0.1:9", "--passphrase-file", pass, "--json"])
        XCTAssertEqual(json.status, 0, json.stderr)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let server = try XCTUnwrap(object["server"] as? [String: Any])
        XCTAssertTrue((server["error"] as? String)?.contains("unreachable") ?? false, "\(server)")
        XCTAssertTrue(server["binders"] is NSNull)
    }

    /// `-q` keeps data and errors only; `-v` adds detail.
    func testQuietAndVerbose() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        let s = binder.sandbox
        let quiet = try s.run(["-q", "mount", binder.repository, binder.mountpoint, "--passphrase-file", binder.passphraseFile])
        binder.markMounted()
        XCTAssertEqual(quiet.status, 0, quiet.stderr)
        XCTAssertEqual(quiet.stdout, "")
        XCTAssertEqual(try s.run(["unmount", binder.mountpoint, "--quiet"]).stdout, "")
        binder.unmount()
        let verbose = try s.run(["mount", binder.repository, binder.mountpoint, "--passphrase-file", binder.passphraseFile, "-v"])
        binder.markMounted()
        XCTAssertEqual(verbose.status, 0, verbose.stderr)
        XCTAssertTrue(verbose.stderr.contains("mount daemon: pid "), verbose.stderr)
        let daemon = try XCTUnwrap(daemonPID(binder.mountpoint))
        let cmdline = try String(contentsOfFile: "/proc/\(daemon)/cmdline", encoding: .utf8)
        XCTAssertTrue(cmdline.contains("--verbose"), "the daemon logs at debug level")
        binder.unmount()
        // Data is still printed.
        XCTAssertTrue(try s.run(["key", "show", "-q"]).stdout.contains("npub1"))
        let failure = try s.run(["-q", "status", "nothing-here"])
        assertFails(failure, mentioning: "no binder named")
    }
}

/// roff's escaping of text, as the man page has it.
enum ManualText {
    static func escape(_ text: String) -> String { text.replacingOccurrences(of: "-", with: "\\-") }
}

/// The README's backups: a `git bundle` of the raw repository restores the exact binder.
final class BackupRestoreTests: XCTestCase {
    func testAGitBundleRestoresTheExactBinder() throws {
        let binder = try MountedBinder()
        defer { binder.unmount() }
        let s = binder.sandbox, pass = binder.passphraseFile
        XCTAssertEqual(try s.run(["create", "health", "--passphrase-file", pass]).status, 0)
        binder.repository = s.home.path + "/binders/health"
        try binder.mount()
        XCTAssertEqual(try shell("mkdir '\(binder.path("visits"))' && printf -- '---\\ntitle: Checkup\\n---\\nAll well.\\n' > '\(binder.path("visits/checkup.md"))'").status, 0)
        binder.unmount()
        let bundle = s.root.appendingPathComponent("health.bundle").path
        let commands = """
            set -e
            git -C '\(binder.repository)' bundle create '\(bundle)' --all
            git -C '\(binder.repository)' bundle verify '\(bundle)'
            git clone -q --bare '\(bundle)' '\(s.home.path)/binders/health-restored'
            """
        let made = try shell(commands)
        XCTAssertEqual(made.status, 0, made.stderr)
        let verify = try s.run(["verify", "health-restored", "--passphrase-file", pass])
        XCTAssertEqual(verify.status, 0, verify.stdout + verify.stderr)
        let original = try shell("git -C '\(binder.repository)' rev-parse main").stdout
        let restored = try shell("git -C '\(s.home.path)/binders/health-restored' rev-parse main").stdout
        XCTAssertEqual(original, restored)
        XCTAssertFalse(original.isEmpty)
        binder.repository = s.home.path + "/binders/health-restored"
        try binder.mount()
        XCTAssertTrue(try String(contentsOfFile: binder.path("visits/checkup.md"), encoding: .utf8).contains("All well."))
    }
}

/// Transfer progress: one line rewritten in place on a terminal, plain lines otherwise.
final class ProgressLineTests: XCTestCase {
    func testCloneProgressIsOneLineOnATerminalAndPlainLinesOtherwise() throws {
        let nsec = String(decoding: try SecretKey.generate().nsec().copyBytes(), as: UTF8.self)
        let serverRoot = try BinderSandbox()
        let server = try TestServer(root: serverRoot.root)
        let laptop = try Device(nsec: nsec), phone = try Device(nsec: nsec)
        try laptop.binder(["login", "--server", server.url])
        try laptop.binder(["create", "health", "--patient-name", "Alex Doe"])
        try laptop.binder(["sync", "health", "--repo-id", "health"])
        try phone.binder(["login", "--server", server.url])

        // Not a terminal: with --progress, plain lines, no carriage returns or escapes.
        let plain = try phone.binder(["clone", "health", "--progress"])
        XCTAssertTrue(plain.stderr.contains("Receiving objects "), plain.stderr)
        XCTAssertFalse(plain.stderr.contains("\r") || plain.stderr.contains("\u{1B}"), plain.stderr)
        XCTAssertTrue(plain.stderr.hasSuffix("\n"))

        // A terminal (script(1) gives it one): the line is redrawn in place, then ended.
        let command = "BINDER_HOME='\(phone.sandbox.home.path)' '\(BinderSandbox.binary)' clone health --name again 2>&1"
        let onTerminal = try shell("script -qec \"\(command)\" /dev/null")
        XCTAssertEqual(onTerminal.status, 0, onTerminal.stdout)
        XCTAssertTrue(onTerminal.stdout.contains("\r\u{1B}[KReceiving objects "), onTerminal.stdout.debugDescription)
    }
}

/// `--notify` hears of conflicts: a sync of the running mount that makes a conflict copy sends
/// a desktop notification (here to a stand-in notify-send on the PATH that records what it
/// was asked to show), naming neither the record nor its content.
final class ConflictNotificationTests: XCTestCase {
    func testASyncThatMakesAConflictCopyNotifies() throws {
        let nsec = String(decoding: try SecretKey.generate().nsec().copyBytes(), as: UTF8.self)
        let serverRoot = try BinderSandbox()
        let server = try TestServer(root: serverRoot.root)
        defer { server.stop() }
        let laptop = try Device(nsec: nsec), phone = try Device(nsec: nsec)
        try laptop.binder(["login", "--server", server.url])
        try laptop.binder(["create", "health"])
        try laptop.mount("health", ["--no-sync"])
        try laptop.write("visits/knee.md", "# Knee\n\nline one\nline two\n")
        laptop.unmount()
        try laptop.binder(["sync", "health", "--repo-id", "health"])
        try phone.binder(["login", "--server", server.url])
        try phone.binder(["clone", "health"])

        // The same line edited on both, each offline; the laptop's reaches the server first.
        for (device, words) in [(laptop, "says the laptop"), (phone, "says the phone")] {
            try device.mount("health", ["--no-sync"])
            let edited = try shell("sed -i 's/^line two$/line two, \(words)/' visits/knee.md", in: device.mountpoint)
            // Its words and the daemon's: sed once exited 4 here in a full run (not reproduced).
            XCTAssertEqual(edited.status, 0, edited.stderr + device.diagnostics())
            device.unmount()
        }
        try laptop.binder(["sync", "health"])

        // The phone mounts with --notify and sync on: its first pass merges and makes the copy.
        let tools = phone.sandbox.root.appendingPathComponent("tools").path
        let shown = phone.sandbox.root.appendingPathComponent("notified").path
        try FileManager.default.createDirectory(atPath: tools, withIntermediateDirectories: true)
        let fake = tools + "/notify-send"
        try Data("#!/bin/sh\nprintf '%s\\n' \"$@\" >> '\(shown)'\n".utf8).write(to: URL(fileURLWithPath: fake))
        chmod(fake, 0o755)
        let mounted = try phone.sandbox.run(["mount", "health", phone.mountpoint, "--notify"],
                                            environment: ["PATH": tools + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"),
                                                          "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent"])
        XCTAssertEqual(mounted.status, 0, mounted.stderr)
        defer { unmountQuietly(phone.sandbox, phone.mountpoint) }
        eventually(60, "the conflict copy", diagnostics: { phone.diagnostics() }) {
            ((try? FileManager.default.contentsOfDirectory(atPath: phone.mountpoint + "/visits")) ?? []).contains { $0.hasPrefix("knee (conflict ") }
        }
        waitUntil { ((try? String(contentsOfFile: shown, encoding: .utf8)) ?? "").contains("conflicted") }
        let text = (try? String(contentsOfFile: shown, encoding: .utf8)) ?? ""
        XCTAssertTrue(text.contains("binder: health") && text.contains("conflicted") && text.contains("binder status health"), text)
        XCTAssertFalse(text.contains("knee") || text.contains("says the"), text)
    }
}
