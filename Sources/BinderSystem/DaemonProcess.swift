internal import CLinux
import BinderCrypto
import Foundation
import Glibc
import Synchronization

/// What a daemon tells the process that started it, once, on fd 4: it serves, or why it could
/// not start. One line on the pipe (`line`); `init(line:)` is the only reader of it.
public enum DaemonReport: Equatable, Sendable {
    case ready
    case failed(reason: String)

    private static let readyLine = "ready"
    private static let failedPrefix = "failed: "

    /// The report as the line sent (a reason's line breaks become spaces: one line).
    var line: String {
        switch self {
        case .ready: return Self.readyLine
        case .failed(let reason): return Self.failedPrefix + reason.replacingOccurrences(of: "\n", with: " ")
        }
    }

    /// The report a line says; nil for anything else (a daemon that died mid-line).
    init?(line: String) {
        if line == Self.readyLine {
            self = .ready
        } else if line.hasPrefix(Self.failedPrefix) {
            self = .failed(reason: String(line.dropFirst(Self.failedPrefix.count)))
        } else {
            return nil
        }
    }
}

/// A detached copy of this program (the mount daemon): a new session, stdio on /dev/null,
/// a secret handed over on fd 3 (never argv or the environment), a `DaemonReport` back on fd 4,
/// and optionally one more open descriptor of the launcher's as fd 5 (the binder's writer lock).
public struct DaemonProcess {
    public let pid: Int32
    private let statusFD: Int32

    public enum Error: Swift.Error, CustomStringConvertible {
        case failed(String)
        public var description: String { if case .failed(let why) = self { return why }; return "" }
    }

    /// The descriptor number an `inherited` descriptor gets in the daemon.
    public static let inheritedDescriptor: Int32 = 5

    public static func spawnSelf(arguments: [String], secret: SecureBytes, inherited: Int32? = nil) throws(Error) -> DaemonProcess {
        var secretPipe: [Int32] = [0, 0], statusPipe: [Int32] = [0, 0]
        guard binder_pipe_cloexec(&secretPipe) == 0 else { throw .failed("pipe: \(String(cString: strerror(errno)))") }
        guard binder_pipe_cloexec(&statusPipe) == 0 else {
            close(secretPipe[0]); close(secretPipe[1])
            throw .failed("pipe: \(String(cString: strerror(errno)))")
        }
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, secretPipe[0], 3)
        posix_spawn_file_actions_adddup2(&actions, statusPipe[1], 4)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        // Moved above 3…5 first, so that the dup2s onto 3 and 4 cannot overwrite it.
        let moved = inherited.map { fcntl($0, F_DUPFD_CLOEXEC, 10) }
        defer { if let moved, moved >= 0 { close(moved) } }
        if let moved {
            guard moved >= 0 else {
                close(secretPipe[0]); close(secretPipe[1]); close(statusPipe[0]); close(statusPipe[1])
                throw .failed("fcntl: \(String(cString: strerror(errno)))")
            }
            posix_spawn_file_actions_adddup2(&actions, moved, Self.inheritedDescriptor)
        }
        _ = binder_spawn_close_from(&actions, Self.inheritedDescriptor + 1)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, binder_posix_spawn_setsid())

        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: Int32 = 0
        let spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, Glibc.environ)
        close(secretPipe[0])
        close(statusPipe[1])
        guard spawned == 0 else {
            close(secretPipe[1]); close(statusPipe[0])
            throw .failed(String(cString: strerror(spawned)))
        }
        secret.withUnsafeBytes { _ = write(secretPipe[1], $0.baseAddress, $0.count) }
        close(secretPipe[1])
        return DaemonProcess(pid: pid, statusFD: statusPipe[0])
    }

    /// Waits for the daemon's report; nil if it exited without one.
    public func awaitReport() -> DaemonReport? { DaemonReport(line: readStatusLine()) }

    /// The daemon's one status line; empty if it exited without one.
    private func readStatusLine() -> String {
        var line = [UInt8]()
        var byte: UInt8 = 0
        while true {
            let n = read(statusFD, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 || byte == 0x0A { break }
            line.append(byte)
        }
        close(statusFD)
        return String(decoding: line, as: UTF8.self)
    }

    public func wait() {
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
    }

    /// In the daemon: reads the secret handed over on fd 3 (exactly `count` bytes; nil when
    /// fewer came) and closes it.
    public static func receiveSecret(count: Int) throws(SecureMemoryError) -> SecureBytes? {
        defer { close(3) }
        let secret = try SecretInput.read(fd: 3, upTo: count)
        return secret.count == count ? secret : nil
    }

    /// Whether this process has sent its report (fd 4 is closed then, and its number may
    /// belong to another file).
    private static let reported = Atomic<Bool>(false)

    /// In the daemon: sends the report on fd 4, once (a failure after `ready` is the log's).
    public static func report(_ report: DaemonReport) {
        guard !reported.exchange(true, ordering: .relaxed) else { return }
        let bytes = Array((report.line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(4, $0.baseAddress, $0.count) }
        close(4)
    }
}
