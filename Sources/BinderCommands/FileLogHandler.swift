import BinderFormat
import Foundation
import Glibc
import Logging
import Synchronization

/// A swift-log handler appending one line per message to a 0600 file (and, in the foreground,
/// to stderr). Lines carry paths and reasons; callers never log plaintext, keys or tokens.
/// The file is rotated at `rotationBytes`: `NAME.log` becomes `NAME.log.1`, and so on up to
/// `keptFiles` old files.
struct FileLogHandler: LogHandler {
    static let rotationBytes = 1 << 20
    static let keptFiles = 3

    final class Sink: Sendable {
        /// Guards writes so lines from libfuse's threads do not interleave, and the open file
        /// with its size (replaced at rotation).
        private let file: Mutex<(fd: Int32, size: Int)>
        let path: String
        let echo: Bool
        /// Desktop notifications for what the user must learn without reading logs.
        let notifier: Notifier?

        init(path: String, echo: Bool, notifier: Notifier?) {
            self.path = path
            self.echo = echo
            self.notifier = notifier
            var info = stat()
            if stat(path, &info) == 0, Int(info.st_size) >= FileLogHandler.rotationBytes { Self.rotate(path) }
            let fd = Self.open(path)
            file = Mutex((fd, fd >= 0 && fstat(fd, &info) == 0 ? Int(info.st_size) : 0))
        }

        deinit { file.withLock { if $0.fd >= 0 { close($0.fd) } } }

        private static func open(_ path: String) -> Int32 {
            Glibc.open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        }

        /// NAME.log.2 → NAME.log.3 (the oldest dropped), …, NAME.log → NAME.log.1.
        private static func rotate(_ path: String) {
            unlink("\(path).\(FileLogHandler.keptFiles)")
            for index in stride(from: FileLogHandler.keptFiles - 1, through: 1, by: -1) {
                rename("\(path).\(index)", "\(path).\(index + 1)")
            }
            rename(path, "\(path).1")
        }

        func write(_ line: String) {
            let bytes = Array(line.utf8)
            file.withLock { file in
                if file.fd >= 0 && file.size + bytes.count > FileLogHandler.rotationBytes && file.size > 0 {
                    close(file.fd)
                    Self.rotate(path)
                    file = (Self.open(path), 0)
                }
                if file.fd >= 0 {
                    let written = bytes.withUnsafeBytes { Glibc.write(file.fd, $0.baseAddress, $0.count) }
                    if written > 0 { file.size += written }
                }
                if echo { _ = bytes.withUnsafeBytes { Glibc.write(2, $0.baseAddress, $0.count) } }
            }
        }
    }

    let sink: Sink
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var all = metadata
        if let extra = event.metadata { all.merge(extra) { $1 } }
        let fields = all.sorted { $0.key < $1.key }.map { " \($0.key)=\(Self.escaped("\($0.value)"))" }.joined()
        // Formatted by hand (`Timestamps`), not by `ISO8601DateFormatter`: that one opens an
        // ICU calendar, and the daemon kept 6 MB of ICU's pages resident for it (issue 13).
        let stamp = Timestamps.now()
        sink.write("\(stamp) \(event.level) \(Self.escaped("\(event.message)"))\(fields)\n")
        // Errors (a refused save, a failed store), a sync that made conflict copies, and
        // warnings that carry an error (a failed sync) are what the user must hear of.
        if let notifier = sink.notifier {
            if event.level >= .error { notifier.send(.refused) }
            else if Self.conflictCount(all) > 0 { notifier.send(.conflict) }
            else if event.level >= .warning && all["error"] != nil { notifier.send(.syncFailed) }
        }
    }

    /// The metadata key with which a sync pass logs how many conflicts it resolved (each
    /// leaves a visible conflict copy, or its other side in history): SyncScheduler's
    /// `synced` line, at info level, `conflicts=N`.
    static let conflictCountKey = "conflicts"

    /// The conflicts an event reports (0 when it reports none).
    static func conflictCount(_ metadata: Logger.Metadata) -> Int {
        guard let value = metadata[conflictCountKey] else { return 0 }
        return Int("\(value)") ?? 0
    }

    /// `text` with control characters (C0, DEL, C1) written as `\u{…}`: a message is one
    /// line, whatever a name in it holds. File names come from repositories and from the
    /// network, and a newline in one would forge a line of the log (and `binder status`
    /// shows the last error line); an escape sequence would drive the terminal that shows it.
    static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            if isControl(scalar) { out += "\\u{\(String(scalar.value, radix: 16))}" } else { out.unicodeScalars.append(scalar) }
        }
        return out
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    /// A logger writing to `path`; `notify` names the binder in desktop notifications (nil: none).
    static func logger(label: String, path: String, echo: Bool, notify: String? = nil) -> Logger {
        let sink = Sink(path: path, echo: echo, notifier: notify.flatMap { Notifier(binder: $0) })
        // BINDER_LOG_LEVEL=debug (or -v) also logs each commit (its structural message and paths).
        let level = Verbosity.isVerbose ? .debug
            : ProcessInfo.processInfo.environment["BINDER_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        return Logger(label: label) { _ in FileLogHandler(sink: sink, logLevel: level) }
    }
}

/// Desktop notifications through `notify-send`, where a desktop session is (a D-Bus session
/// bus, or a display). At most one every few seconds, and the same kind at most once a minute.
/// The text says what kind of thing happened and where to read more, never a file's name or
/// content: notify-send takes it on its command line, which other processes can read.
final class Notifier: Sendable {
    enum Kind: String, Sendable {
        case refused = "A save was refused or could not be stored."
        case syncFailed = "Sync failed; retrying."
        case conflict = "A change from another device conflicted with yours; both are kept in history."
    }

    let title: String
    /// Where to read more: `binder status NAME`.
    let details: String
    static let minimumGap: TimeInterval = 5
    static let repeatGap: TimeInterval = 60
    /// Guards when the last notification went out, and which messages went when.
    private let sent = Mutex<(last: Date, messages: [String: Date])>((.distantPast, [:]))

    /// Nil without a desktop session.
    init?(binder name: String, environment: [String: String] = ProcessInfo.processInfo.environment) {
        let session = ["DBUS_SESSION_BUS_ADDRESS", "DISPLAY", "WAYLAND_DISPLAY"].contains { !(environment[$0] ?? "").isEmpty }
        guard session else { return nil }
        title = "binder: \(name)"
        details = "Details: binder status \(name)"
    }

    func send(_ kind: Kind) {
        let message = kind.rawValue + " " + details
        let now = Date()
        let due = sent.withLock { sent -> Bool in
            guard now.timeIntervalSince(sent.last) >= Self.minimumGap,
                  now.timeIntervalSince(sent.messages[message] ?? .distantPast) >= Self.repeatGap else { return false }
            sent.last = now
            sent.messages = sent.messages.filter { now.timeIntervalSince($0.value) < Self.repeatGap }
            sent.messages[message] = now
            return true
        }
        guard due else { return }
        // Off the caller's thread (a FUSE callback must never wait on a process).
        let title = self.title
        Thread.detachNewThread {
            _ = runQuietly("notify-send", ["--app-name=binder", "--urgency=normal", title, message])
        }
    }
}
