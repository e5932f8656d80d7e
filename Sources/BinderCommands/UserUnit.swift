import BinderSystem
import Foundation

/// `binder mount --install-unit BINDER MOUNTPOINT`: a systemd user service that mounts the
/// binder at login (`binder mount --foreground`, the key from `binder unlock`) and unmounts it
/// cleanly at logout (systemd's SIGTERM).
struct UserUnit {
    let binder: String
    let mountpoint: String
    let options: [String]
    var environment = ProcessInfo.processInfo.environment

    /// `binder-NAME.service`.
    var name: String {
        let base = BinderLocator.isSafeName(binder) ? binder : BinderLocator.displayName(binder)
        let safe = String(base.unicodeScalars.map { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-_.".unicodeScalars.contains($0)) ? Character($0) : "_" })
        return "binder-\(safe).service"
    }

    /// `$XDG_CONFIG_HOME/systemd/user`, else `~/.config/systemd/user`.
    var directory: String {
        if let config = environment["XDG_CONFIG_HOME"], !config.isEmpty { return StateDirectory.absolute(config) + "/systemd/user" }
        return (environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()) + "/.config/systemd/user"
    }

    var text: String {
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let target = binder.contains("/") ? StateDirectory.absolute(binder) : binder
        let point = StateDirectory.absolute(mountpoint)
        var lines = [
            "# Written by 'binder mount --install-unit'. Enable: systemctl --user enable --now \(name)",
            "[Unit]",
            "Description=binder: mount \(target) at \(point)",
            "",
            "[Service]",
            "Type=simple",
        ]
        if let home = environment["BINDER_HOME"], !home.isEmpty {
            lines.append("Environment=" + Self.quote("BINDER_HOME=" + StateDirectory.absolute(home)))
        }
        lines += [
            "ExecStartPre=/bin/mkdir -p " + Self.quote(point),
            "ExecStart=" + ([executable, "mount", "--foreground", target, point] + options).map(Self.quote).joined(separator: " "),
            // --foreground unmounts cleanly on SIGTERM; a mount whose daemon died is cleared too.
            "ExecStopPost=-" + [executable, "unmount", point].map(Self.quote).joined(separator: " "),
            // At login the key may not be unlocked yet: tried again each minute until it is.
            // A lock (binder lock, --idle) ends the service with status 0: it stays locked.
            "Restart=on-failure",
            "RestartSec=60",
            "",
            "[Install]",
            "WantedBy=default.target",
            "",
        ]
        return lines.joined(separator: "\n")
    }

    /// A word for a systemd command line: `%` and `$` escaped; double-quoted (with `\\` and
    /// `"` escaped) when it holds a space, a quote or a backslash.
    static func quote(_ word: String) -> String {
        let escaped = word.replacingOccurrences(of: "%", with: "%%").replacingOccurrences(of: "$", with: "$$")
        guard escaped.isEmpty || escaped.contains(where: { $0 == " " || $0 == "\"" || $0 == "\\" || $0 == "'" || $0 == "\t" }) else {
            return escaped
        }
        return "\"" + escaped.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    /// Writes the unit; its path and name.
    func install() throws -> (path: String, name: String) {
        let path = directory + "/" + name
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        } catch {
            throw CommandFailure("cannot write \(path): \(error.localizedDescription)")
        }
        return (path, name)
    }
}
