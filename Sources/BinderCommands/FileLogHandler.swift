import Foundation
import Glibc
import Logging
import Synchronization

/// A swift-log handler appending one line per message to a 0600 file (and, in the foreground,
/// to stderr). Lines carry paths and reasons; callers never log plaintext, keys or tokens.
struct FileLogHandler: LogHandler {
    final class Sink: Sendable {
        /// Guards writes so lines from libfuse's threads do not interleave.
        private let lock = Mutex(())
        let fd: Int32
        let echo: Bool

        init(path: String, echo: Bool) {
            fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
            self.echo = echo
        }

        deinit { if fd >= 0 { close(fd) } }

        func write(_ line: String) {
            let bytes = Array(line.utf8)
            lock.withLock { _ in
                if fd >= 0 { _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) } }
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
        let fields = all.sorted { $0.key < $1.key }.map { " \($0.key)=\($0.value)" }.joined()
        let stamp = ISO8601DateFormatter().string(from: Date())
        sink.write("\(stamp) \(event.level) \(event.message)\(fields)\n")
    }

    /// A logger writing to `path`.
    static func logger(label: String, path: String, echo: Bool) -> Logger {
        let sink = Sink(path: path, echo: echo)
        // BINDER_LOG_LEVEL=debug also logs each commit (its structural message and paths).
        let level = ProcessInfo.processInfo.environment["BINDER_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        return Logger(label: label) { _ in FileLogHandler(sink: sink, logLevel: level) }
    }
}
