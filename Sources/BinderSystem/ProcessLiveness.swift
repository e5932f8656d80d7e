import Glibc

/// Whether a process a file names (a lock's holder, a socket's owner) still runs. Not
/// `kill(pid, 0)` alone: a daemon that has exited but is not yet reaped (a zombie: orphaned
/// daemons are reaped by whatever runs as pid 1, which may take seconds, or longer in a
/// container) still answers it, and was taken for a mount still there: `binder share
/// --collect` then asked its removed control socket instead of doing the work itself.
public enum ProcessLiveness {
    /// True while `pid` exists and has not exited (state neither zombie nor dead).
    public static func isRunning(_ pid: Int32) -> Bool {
        guard pid > 0, kill(pid, 0) == 0 || errno == EPERM else { return false }
        guard let state = state(of: pid) else { return true }
        return state != UInt8(ascii: "Z") && state != UInt8(ascii: "X")
    }

    /// The state letter of /proc/PID/stat (after "pid (comm) "), nil when unreadable.
    static func state(of pid: Int32) -> UInt8? {
        let fd = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 512)
        let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
        guard count > 0 else { return nil }
        // The command name may hold ") ": the state follows the last one.
        let text = bytes.prefix(count)
        guard let close = text.lastIndex(of: UInt8(ascii: ")")), close + 2 < text.endIndex else { return nil }
        return text[close + 2]
    }
}
