import Foundation
import Glibc

/// One writer per binder: an exclusive `flock(2)` on `<git dir>/binder.lock`, held for its whole
/// life by whatever may write the binder (the mount daemon, a foreground mount, `binder sync`,
/// `binder verify --repair`). The kernel drops it when the holder dies, however it dies, so it
/// is never stale. The file's content (pid, command, mount point, control socket) only says who
/// holds it, for the refusal message and for reaching a running mount: the lock is what counts.
public final class WriterLock {
    public static let fileName = "binder.lock"

    /// Who holds the lock, as its content says (fields may be missing while a holder starts).
    public struct Holder: Sendable, Equatable, CustomStringConvertible {
        public var pid: Int32?
        /// What holds it: "mount", "sync", "verify --repair".
        public var command: String?
        public var mountpoint: String?
        /// The mount's control socket (see `ControlServer`).
        public var control: String?

        public init(pid: Int32? = nil, command: String? = nil, mountpoint: String? = nil, control: String? = nil) {
            self.pid = pid
            self.command = command
            self.mountpoint = mountpoint
            self.control = control
        }

        /// "mounted at /mnt/health (pid 4242)", "in use by binder sync (pid 4242)".
        public var description: String {
            let pidText = pid.map { " (pid \($0))" } ?? ""
            if let mountpoint { return "mounted at \(mountpoint)\(pidText)" }
            if let command { return "in use by binder \(command)\(pidText)" }
            return "in use by another binder process\(pidText)"
        }

        /// A mount whose mount point is no longer mounted: its daemon is about to exit.
        var isEndingMount: Bool {
            guard command == "mount", let mountpoint else { return false }
            return MountTable.entry(at: mountpoint) == nil
        }

        var text: String {
            var lines = ""
            if let pid { lines += "pid: \(pid)\n" }
            if let command { lines += "command: \(command)\n" }
            if let mountpoint { lines += "mountpoint: \(mountpoint)\n" }
            if let control { lines += "control: \(control)\n" }
            return lines
        }

        init(text: String) {
            for line in text.split(separator: "\n") {
                guard let colon = line.firstIndex(of: ":") else { continue }
                let key = line[..<colon], value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                guard !value.isEmpty else { continue }
                switch key {
                case "pid": pid = Int32(value)
                case "command": command = value
                case "mountpoint": mountpoint = value
                case "control": control = value
                default: continue
                }
            }
        }
    }

    public enum Failure: Error, CustomStringConvertible {
        /// Another process holds it.
        case held(Holder)
        /// The lock file cannot be opened or locked (`errno`), e.g. `EROFS` on a read-only disk.
        case system(path: String, errno: Int32)

        public var description: String {
            switch self {
            case .held(let holder): return holder.description
            case .system(let path, let code): return "cannot lock \(path): \(String(cString: strerror(code)))"
            }
        }
    }

    /// The open lock file; the lock lives as long as this descriptor (and any copy a spawned
    /// daemon inherited) stays open.
    public let fd: Int32
    public let path: String

    private init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit { close(fd) }

    public static func path(gitDirectory: String) -> String { gitDirectory + "/" + fileName }

    /// Takes the lock, or says who holds it. Waits (up to `patience` seconds) only for a mount
    /// that is ending: unmounted already, its daemon still zeroing its memory before it exits
    /// (`binder unmount` then `binder mount` at once must not be refused).
    public static func acquire(gitDirectory: String, patience: TimeInterval = 10) throws(Failure) -> WriterLock {
        let deadline = Date().addingTimeInterval(patience)
        while true {
            do {
                return try acquireNow(gitDirectory: gitDirectory)
            } catch .held(let holder) where holder.isEndingMount && Date() < deadline {
                usleep(50_000)
            }
        }
    }

    private static func acquireNow(gitDirectory: String) throws(Failure) -> WriterLock {
        let path = path(gitDirectory: gitDirectory)
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .system(path: path, errno: errno) }
        var rc: Int32
        repeat { rc = flock(fd, LOCK_EX | LOCK_NB) } while rc != 0 && errno == EINTR
        if rc != 0 {
            let code = errno
            let holder = Holder(text: readAll(fd))
            close(fd)
            if code == EWOULDBLOCK { throw .held(holder) }
            throw .system(path: path, errno: code)
        }
        return WriterLock(fd: fd, path: path)
    }

    /// In a spawned daemon: the lock its launcher took and handed over as descriptor `fd`.
    /// Checked to be that very file, locked by this open file description (a second `flock` on
    /// the same description succeeds at once; on any other file it would take a new lock).
    public static func inherited(fd: Int32, gitDirectory: String) throws(Failure) -> WriterLock {
        let path = path(gitDirectory: gitDirectory)
        var held = stat(), onDisk = stat()
        guard fstat(fd, &held) == 0 else { throw .system(path: path, errno: errno) }
        guard stat(path, &onDisk) == 0 else { throw .system(path: path, errno: errno) }
        guard held.st_dev == onDisk.st_dev, held.st_ino == onDisk.st_ino else { throw .system(path: path, errno: EBADF) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { throw .held(Holder(text: readAll(fd))) }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return WriterLock(fd: fd, path: path)
    }

    /// Says who holds the lock (for the next process that finds it held).
    public func record(_ holder: Holder) {
        let bytes = Array(holder.text.utf8)
        _ = ftruncate(fd, 0)
        _ = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
    }

    private static func readAll(_ fd: Int32) -> String {
        var bytes = [UInt8](repeating: 0, count: 4096)
        let count = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        return count > 0 ? String(decoding: bytes[..<count], as: UTF8.self) : ""
    }
}
