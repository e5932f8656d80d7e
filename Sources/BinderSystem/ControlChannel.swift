internal import CLinux
import Foundation
import Glibc

public struct ControlChannelError: Error, CustomStringConvertible {
    public let description: String
    init(_ what: String, _ code: Int32) { description = "\(what): \(String(cString: strerror(code)))" }
}

/// The requests a mount answers on its control channel.
public enum ControlRequest {
    /// Fetch, merge and push now (`binder sync` on a mounted binder); `sync SERVER [REPO_ID]`
    /// for a binder with no server yet names one, and the mount starts syncing there.
    public static let sync = "sync"
    /// The mount's sync state, one line of JSON (`binder status`).
    public static let status = "status"
    /// Lock: unmount (refused while a file is open there), dropping plaintext and key
    /// (`binder lock`). Answer `ok locked MOUNTPOINT`, or `error …` naming what holds it.
    public static let lock = "lock"
    /// `share-collect ID`: bring the doctor's notes of the share ID home now (`binder share
    /// --collect`, and before `--revoke`, while the binder is mounted). Answer `ok ["path", …]`.
    public static let shareCollect = "share-collect"
    /// `import LENGTH`, then LENGTH bytes (`ControlPayload`): `binder import` on a mounted
    /// binder hands the mount what it read, and the mount stores it as one commit. Answer
    /// `ok LENGTH` and LENGTH bytes (what was stored), or a `ControlRefusal` line.
    public static let importRecords = "import"
}

/// A running mount's control channel: a unix socket (0600, in binder's run folder, 0700) on
/// which the user's other binder commands ask the mount to do what only the binder's one writer
/// may do, or what only it knows. One request line per connection (a word and arguments:
/// `ControlRequest`), one answer line: `ok …` or `error …`. Only the mount's own user is answered.
public final class ControlServer: @unchecked Sendable {
    /// Answers one request; may take long (a sync), and is awaited off the accepting thread.
    public typealias Handler = @Sendable (_ request: String) async -> String
    /// Answers one request that carries bytes (`ControlPayload`): the answer line, and the
    /// bytes that follow it (none for a refusal).
    public typealias PayloadHandler = @Sendable (_ request: String, _ payload: [UInt8]) async -> ControlPayload.Answer

    public let path: String
    private let listener: Int32
    private let handler: Handler
    private let payloadHandler: PayloadHandler?
    /// Guards `stopped`.
    private let lock = NSLock()
    private var stopped = false
    /// Requests being answered: `stop` lets them finish writing their answer (a `lock` request
    /// ends the mount, and its asker must still hear "ok").
    private let inFlight = DispatchGroup()

    /// `run/mount-PID.sock` under the state folder: one per mount daemon.
    public static func path(runDirectory: String, pid: Int32 = getpid()) -> String {
        runDirectory + "/mount-\(pid).sock"
    }

    /// Listens at `path` (replacing a socket left by a daemon that died).
    public init(path: String, handler: @escaping Handler, payloadHandler: PayloadHandler? = nil) throws(ControlChannelError) {
        self.path = path
        self.handler = handler
        self.payloadHandler = payloadHandler
        let folder = (path as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch { throw ControlChannelError("cannot create \(folder)", EACCES) }
        unlink(path)
        // The socket is created 0600: no moment where another user could connect.
        let previous = umask(0o177)
        let fd = binder_unix_listen(path, 8)
        let code = errno
        umask(previous)
        guard fd >= 0 else { throw ControlChannelError("cannot listen on \(path)", code) }
        listener = fd
    }

    deinit { stop() }

    /// Accepts on a thread of its own; each connection's line is read on a thread of its own
    /// (a slow client must not hold up the next) and answered by a task (a `sync` may take
    /// long; nothing waits for it but that connection).
    public func start() {
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "binder-control"
        thread.start()
    }

    public func stop() {
        lock.lock()
        let first = !stopped
        stopped = true
        lock.unlock()
        guard first else { return }
        unlink(path)
        // Wakes the blocked accept(), which then sees `stopped` and closes the socket.
        shutdown(listener, Int32(SHUT_RDWR))
        _ = inFlight.wait(timeout: .now() + 10)
    }

    private var isStopped: Bool {
        lock.lock(); defer { lock.unlock() }
        return stopped
    }

    private func acceptLoop() {
        while true {
            let connection = binder_unix_accept(listener)
            if isStopped {
                if connection >= 0 { close(connection) }
                close(listener)
                return
            }
            guard connection >= 0 else {
                if errno == EINTR || errno == ECONNABORTED { continue }
                close(listener)
                return
            }
            var uid: UInt32 = 0
            guard binder_peer_uid(connection, &uid) == 0, uid == getuid() else {
                close(connection)
                continue
            }
            let handler = self.handler, payloadHandler = self.payloadHandler
            let inFlight = self.inFlight
            inFlight.enter()
            let worker = Thread {
                var rest: [UInt8] = []
                guard let request = ControlLine.read(connection, rest: &rest) else {
                    close(connection)
                    inFlight.leave()
                    return
                }
                if let payloadHandler, let length = ControlPayload.declaredLength(request) {
                    guard let payload = ControlPayload.receive(connection, request: request, length: length, rest: rest) else {
                        close(connection)
                        inFlight.leave()
                        return
                    }
                    Task {
                        let answer = await payloadHandler(request, payload)
                        ControlLine.write(connection, answer.line)
                        ControlLine.send(connection, answer.payload)
                        close(connection)
                        inFlight.leave()
                    }
                    return
                }
                Task {
                    ControlLine.write(connection, await handler(request))
                    close(connection)
                    inFlight.leave()
                }
            }
            worker.name = "binder-control-request"
            worker.start()
        }
    }

    /// Removes sockets in `runDirectory` left by mount daemons that died (their pid is gone or a zombie).
    public static func removeDeadSockets(runDirectory: String) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: runDirectory)) ?? [] {
            guard name.hasPrefix("mount-"), name.hasSuffix(".sock"),
                  let pid = Int32(name.dropFirst("mount-".count).dropLast(".sock".count)) else { continue }
            if !ProcessLiveness.isRunning(pid) { unlink(runDirectory + "/" + name) }
        }
    }
}

/// The other end: `binder sync` (and later commands) asking a running mount.
public enum ControlClient {
    /// Sends `request` and returns the answer line. Waits as long as the mount works on it.
    public static func send(_ request: String, to path: String) throws(ControlChannelError) -> String {
        let fd = binder_unix_connect(path)
        guard fd >= 0 else { throw ControlChannelError("cannot reach the mount at \(path)", errno) }
        defer { close(fd) }
        ControlLine.write(fd, request)
        guard let answer = ControlLine.read(fd) else { throw ControlChannelError("the mount did not answer", ECONNRESET) }
        return answer
    }
}

/// One line each way, at most 64 KB; a line break inside a message becomes "; ".
enum ControlLine {
    static let limit = 65_536

    static func write(_ fd: Int32, _ text: String) {
        send(fd, Array((text.split(whereSeparator: \.isNewline).joined(separator: "; ") + "\n").utf8))
    }

    /// Sends all of `bytes` (short of a peer that went away).
    static func send(_ fd: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
    }

    static func read(_ fd: Int32) -> String? {
        var rest: [UInt8] = []
        return read(fd, rest: &rest)
    }

    /// The line, and in `rest` what was received past it (the start of a payload).
    static func read(_ fd: Int32, rest: inout [UInt8]) -> String? {
        var line: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while line.count < limit {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            if let end = buffer[..<n].firstIndex(of: 0x0A) {
                line += buffer[..<end]
                rest = Array(buffer[(end + 1)..<n])
                return String(decoding: line, as: UTF8.self)
            }
            line += buffer[..<n]
        }
        return line.isEmpty ? nil : String(decoding: line, as: UTF8.self)
    }

    /// Exactly `count` bytes, `received` first; nil when the peer stops short.
    static func read(_ fd: Int32, count: Int, received: [UInt8]) -> [UInt8]? {
        guard received.count <= count else { return nil }
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.replaceSubrange(0..<received.count, with: received)
        var offset = received.count
        while offset < count {
            let n = bytes.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + offset, count - offset, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return nil }
            offset += n
        }
        return bytes
    }
}

extension WriterLock {
    /// What the lock file says of the process that last held it (its first 4 KB), read only
    /// if it is a regular file: opened without blocking, so that a FIFO in its place cannot
    /// hang `binder status`.
    static func recordedHolder(gitDirectory: String) -> Holder? {
        let fd = open(path(gitDirectory: gitDirectory), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        var bytes = [UInt8](repeating: 0, count: 4096)
        let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
        guard count >= 0 else { return nil }
        return Holder(text: String(decoding: bytes.prefix(count), as: UTF8.self))
    }

    /// Where this binder is mounted: the mount point its lock file names, while a mount is
    /// there whose daemon is alive or has died without being cleared (`binder status` reports
    /// either). Found by the binder's own lock, not by the mount's name: a binder of the same
    /// name in another state folder (another `BINDER_HOME`) is not this one.
    public static func mountPoints(gitDirectory: String) -> [String] {
        guard let holder = recordedHolder(gitDirectory: gitDirectory), holder.command == "mount", let mountpoint = holder.mountpoint,
              let entry = MountTable.entry(at: mountpoint), entry.fsType.hasPrefix("fuse") else { return [] }
        let alive = holder.pid.map(ProcessLiveness.isRunning) ?? false
        return alive || MountTable.isDisconnected(mountpoint) ? [mountpoint] : []
    }

    /// The control socket of the mount that holds the binder, as its lock file names it, if
    /// that daemon is alive (read without taking the lock: asking must never refuse a mount
    /// that starts meanwhile). A stale file's socket fails to connect, which callers report.
    public static func mountControl(gitDirectory: String) -> (holder: Holder, control: String)? {
        guard let holder = recordedHolder(gitDirectory: gitDirectory) else { return nil }
        guard holder.command == "mount", let control = holder.control, let pid = holder.pid, ProcessLiveness.isRunning(pid) else { return nil }
        return (holder, control)
    }
}
