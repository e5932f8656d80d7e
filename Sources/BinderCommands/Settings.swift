import BinderSystem
import Foundation

/// The user's settings: `settings` in the state folder, lines `key = value` (`#` comments).
/// Command-line options win over them.
///
///     idle = 15m      # every mount locks after 15 minutes without a file access
///     notify = on     # every mount notifies the desktop of refused saves, failed syncs, conflicts
struct Settings: Equatable {
    var idleSeconds: UInt32?
    var notify = false

    static func path(_ state: StateDirectory) -> String { state.root + "/settings" }

    /// The settings, or the defaults where the file is missing; a line binder cannot read is
    /// skipped (and named on stderr with -v).
    static func load(_ state: StateDirectory) -> Settings {
        guard let text = try? String(contentsOfFile: path(state), encoding: .utf8) else { return Settings() }
        return parse(text)
    }

    static func parse(_ text: String) -> Settings {
        var settings = Settings()
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let parts = line.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2 else {
                if !line.trimmingCharacters(in: .whitespaces).isEmpty { printDetail("settings line \(number + 1): not 'key = value'") }
                continue
            }
            switch (parts[0], parts[1].lowercased()) {
            case ("idle", let value):
                if let seconds = parseDuration(value) { settings.idleSeconds = seconds == 0 ? nil : seconds }
                else { printDetail("settings line \(number + 1): idle: '\(value)' is not a duration") }
            case ("notify", let value):
                settings.notify = ["on", "yes", "true", "1"].contains(value)
            default:
                printDetail("settings line \(number + 1): unknown setting '\(parts[0])'")
            }
        }
        return settings
    }
}
