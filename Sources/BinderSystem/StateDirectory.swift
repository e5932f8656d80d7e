import Foundation

/// Where binder keeps its own state: `BINDER_HOME` if set, else `$XDG_DATA_HOME/binder`
/// (default `~/.local/share/binder`). Key file, binders and tokens live below it; logs too
/// under `BINDER_HOME`, else in `$XDG_STATE_HOME/binder` (default `~/.local/state/binder`).
public struct StateDirectory: Sendable {
    public let root: String
    /// The mount daemons' logs (`NAME.log`, rotated).
    public let logsDirectory: String

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        if let binderHome = environment["BINDER_HOME"], !binderHome.isEmpty {
            root = StateDirectory.absolute(binderHome)
            logsDirectory = root + "/logs"
            return
        }
        if let xdg = environment["XDG_DATA_HOME"], !xdg.isEmpty {
            root = StateDirectory.absolute(xdg) + "/binder"
        } else {
            root = home + "/.local/share/binder"
        }
        if let xdg = environment["XDG_STATE_HOME"], !xdg.isEmpty {
            logsDirectory = StateDirectory.absolute(xdg) + "/binder"
        } else {
            logsDirectory = home + "/.local/state/binder"
        }
    }

    /// The log of the mount of the binder named `name`.
    public func logPath(_ name: String) -> String { logsDirectory + "/\(name).log" }

    public static func absolute(_ path: String) -> String {
        path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    }

    public var keyFile: String { root + "/key.ncryptsec" }
    public var publicKeyFile: String { root + "/key.npub" }
    public var bindersDirectory: String { root + "/binders" }
    public var runDirectory: String { root + "/run" }
    /// Servers logged in to, with their tokens (each encrypted to the user's own key).
    public var accountsFile: String { root + "/accounts.json" }

    /// Creates the root (0700) if needed.
    public func ensureExists() throws {
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
    }
}
