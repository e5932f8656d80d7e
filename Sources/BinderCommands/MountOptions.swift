import Foundation

/// The `-o` options of `binder mount`, `mount -t fuse.binder` and an /etc/fstab line (through
/// `mount.fuse.binder`): binder's own, and the generic ones mount(8) passes along, which mean
/// nothing to a binder and are accepted so that an fstab line works as written.
struct MountOptions: Equatable {
    var readOnly = false
    var readWrite = false
    var nonempty = false
    var allowOther = false
    /// `idle=DURATION`: lock after this long without a file access.
    var idleSeconds: UInt32?
    /// `passphrase_file=PATH`: where the passphrase is when the key is not unlocked.
    var passphraseFile: String?

    /// What each of binder's own options does (help, man page).
    static let documented: [(name: String, meaning: String)] = [
        ("ro", "read-only: every change fails with EROFS"),
        ("rw", "read-write (the default)"),
        ("nonempty", "mount on a folder that is not empty (what is there is hidden while mounted)"),
        ("allow_other", "let other users in (needs user_allow_other in /etc/fuse.conf unless root); modes stay 0600/0700"),
        ("idle=DURATION", "lock after DURATION without a file access, e.g. idle=15m (as --idle)"),
        ("passphrase_file=PATH", "read the passphrase from PATH when the key is not unlocked (as --passphrase-file)"),
    ]

    /// Generic options mount(8) and fstab lines carry; accepted and ignored.
    static let ignored: Set<String> = [
        "defaults", "auto", "noauto", "user", "users", "nouser", "owner", "group", "_netdev", "nofail",
        "dev", "nodev", "suid", "nosuid", "exec", "noexec", "atime", "noatime", "relatime", "norelatime",
        "strictatime", "nodiratime", "diratime", "sync", "async", "loud", "silent", "lazytime", "nolazytime",
    ]

    init() {}

    struct Invalid: Error, CustomStringConvertible {
        let description: String
    }

    /// Parses `-o` values (each comma-separated). Unknown options are refused by name.
    init(parsing values: [String]) throws(Invalid) {
        let items = values.flatMap { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }.filter { !$0.isEmpty }
        var unknown: [String] = []
        for item in items {
            let parts = item.split(separator: "=", maxSplits: 1).map(String.init)
            let name = parts[0], value = parts.count > 1 ? parts[1] : nil
            switch (name, value) {
            case ("ro", nil): readOnly = true
            case ("rw", nil): readWrite = true
            case ("nonempty", nil): nonempty = true
            case ("allow_other", nil): allowOther = true
            case ("idle", let value?):
                guard let seconds = parseDuration(value) else {
                    throw Invalid(description: "-o idle=\(value): not a duration like 15m, 1h or 90s")
                }
                idleSeconds = seconds
            case ("passphrase_file", let value?):
                guard !value.isEmpty else { throw Invalid(description: "-o passphrase_file= needs a path") }
                passphraseFile = value
            case (let name, _) where Self.ignored.contains(name) || name.hasPrefix("x-") || name == "comment": continue
            default: unknown.append(item)
            }
        }
        if !unknown.isEmpty {
            let known = Self.documented.map(\.name).joined(separator: ", ")
            throw Invalid(description: "-o: unknown mount option\(unknown.count == 1 ? "" : "s") \(unknown.joined(separator: ", ")) (binder's: \(known))")
        }
        if readOnly && readWrite { throw Invalid(description: "-o: ro and rw contradict each other") }
    }
}

/// `mount.fuse.binder`: mount(8)'s helper for `-t fuse.binder` (and /etc/fstab lines). mount(8)
/// runs it as `mount.fuse.binder SOURCE MOUNTPOINT [-sfnvrw] [-o OPTIONS] [-t TYPE] [-N NS]`;
/// it becomes `binder mount SOURCE MOUNTPOINT -o OPTIONS`.
enum MountHelper {
    static let programName = "mount.fuse.binder"

    struct Translation: Equatable {
        var arguments: [String]
        /// `-f`: mount(8)'s "fake": do everything but the mount.
        var fake = false
        var verbose = false
    }

    static func translate(_ arguments: [String]) throws(MountOptions.Invalid) -> Translation {
        var positional: [String] = []
        var options: [String] = []
        var translation = Translation(arguments: [])
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            switch argument {
            case "-o", "-t", "-N":
                guard index + 1 < arguments.count else { throw MountOptions.Invalid(description: "\(argument) needs a value") }
                if argument == "-o" { options.append(arguments[index + 1]) }
                index += 2
                continue
            case "-f": translation.fake = true
            case "-v": translation.verbose = true
            case "-r": options.append("ro")
            case "-w": options.append("rw")
            case "-s", "-n": break
            default:
                if argument.hasPrefix("-o") && argument.count > 2 {
                    options.append(String(argument.dropFirst(2)))
                } else if argument.hasPrefix("-") {
                    throw MountOptions.Invalid(description: "unknown option \(argument) (usage: \(programName) BINDER MOUNTPOINT [-o OPTIONS])")
                } else {
                    positional.append(argument)
                }
            }
            index += 1
        }
        guard positional.count == 2 else {
            throw MountOptions.Invalid(description: "usage: \(programName) BINDER MOUNTPOINT [-o OPTIONS]")
        }
        // An fstab source may be written `binder:NAME`, as /proc/mounts shows it.
        var source = positional[0]
        if source.hasPrefix("binder:") { source.removeFirst("binder:".count) }
        translation.arguments = ["mount", source, positional[1]] + (options.isEmpty ? [] : ["-o", options.joined(separator: ",")])
        return translation
    }
}
