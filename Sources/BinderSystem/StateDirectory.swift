import Foundation

/// Where binder keeps its own state: `BINDER_HOME` if set, else `$XDG_DATA_HOME/binder`
/// (default `~/.local/share/binder`). Key file, binders, tokens and logs all live below it.
public struct StateDirectory: Sendable {
    public let root: String

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        if let home = environment["BINDER_HOME"], !home.isEmpty {
            root = StateDirectory.absolute(home)
        } else if let xdg = environment["XDG_DATA_HOME"], !xdg.isEmpty {
            root = StateDirectory.absolute(xdg) + "/binder"
        } else {
            let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
            root = home + "/.local/share/binder"
        }
    }

    static func absolute(_ path: String) -> String {
        path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    }

    public var keyFile: String { root + "/key.ncryptsec" }
    public var publicKeyFile: String { root + "/key.npub" }
    public var bindersDirectory: String { root + "/binders" }
    public var logsDirectory: String { root + "/logs" }
    public var runDirectory: String { root + "/run" }
    /// Servers logged in to, with their tokens (each encrypted to the user's own key).
    public var accountsFile: String { root + "/accounts.json" }

    /// Creates the root (0700) if needed.
    public func ensureExists() throws {
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
    }
}
