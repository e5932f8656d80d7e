import Foundation
import Glibc
import Synchronization

/// One progress line for long transfers (clone, sync, a first mount): on a terminal it is
/// rewritten in place (carriage return, erase to end of line), at most `interval` apart; on
/// anything else (a log, a pipe) it is a plain line at most every `plainInterval`, and always
/// the final one, so logs are not flooded and never hold control characters.
///
///     let line = ProgressLine()
///     line.update("Receiving objects: 120/400, 1.2 MB, 300 KB/s")
///     line.finish("Received 400 objects, 4.1 MB")
final class ProgressLine: Sendable {
    let isTerminal: Bool
    let interval: TimeInterval
    let plainInterval: TimeInterval
    private let fd: Int32
    /// Guards when the line was last drawn and whether a terminal line is open (unfinished).
    private let drawn = Mutex<(at: Date, open: Bool)>((.distantPast, false))

    init(fd: Int32 = 2, isTerminal: Bool? = nil, interval: TimeInterval = 0.1, plainInterval: TimeInterval = 5) {
        self.fd = fd
        self.isTerminal = isTerminal ?? (isatty(fd) == 1)
        self.interval = interval
        self.plainInterval = plainInterval
    }

    /// Shows `text` unless the last update was too recent.
    func update(_ text: String) {
        let now = Date()
        let due = drawn.withLock { drawn -> Bool in
            guard now.timeIntervalSince(drawn.at) >= (isTerminal ? interval : plainInterval) else { return false }
            drawn = (now, isTerminal)
            return true
        }
        if due { emit(isTerminal ? "\r\u{1B}[K" + text : text + "\n") }
    }

    /// Shows the final `text` and ends the line.
    func finish(_ text: String) {
        let open = drawn.withLock { drawn -> Bool in
            defer { drawn = (Date(), false) }
            return drawn.open
        }
        emit((isTerminal && open ? "\r\u{1B}[K" : "") + text + "\n")
    }

    /// Erases a terminal line still open (an update not yet finished), so that what is
    /// printed next (an error) starts at the line's beginning; nothing otherwise.
    func clear() {
        let open = drawn.withLock { drawn -> Bool in
            defer { drawn.open = false }
            return drawn.open
        }
        if isTerminal && open { emit("\r\u{1B}[K") }
    }

    /// "1.2 MB", "340 KB", "12 B".
    static func bytes(_ count: Int) -> String {
        if count >= 1 << 20 { return String(format: "%.1f MB", Double(count) / 1_048_576) }
        if count >= 1 << 10 { return "\(count >> 10) KB" }
        return "\(count) B"
    }

    /// "objects 120/400, 1.2 MB, 300 KB/s".
    static func transfer(objects: Int, of total: Int, bytes count: Int, elapsed: TimeInterval) -> String {
        let rate = elapsed > 0 ? ", \(bytes(Int(Double(count) / elapsed)))/s" : ""
        return "objects \(objects)/\(total), \(bytes(count))\(rate)"
    }

    private func emit(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    }
}
