import BinderFUSE
import BinderSystem
import Foundation
import Glibc
import Logging
import Synchronization

/// Locks a running mount: at once on `binder lock` (the control channel's `lock` request), or
/// after `idleSeconds` without a file access reaching the daemon. Locking is a normal unmount:
/// the kernel refuses it while a file is open there (an editor may still save into it), so a
/// lock never cuts a save short; every save already closed is committed. Once unmounted, the
/// mount loop ends and the daemon exits, taking all plaintext and the key with it.
final class MountLocker: Sendable {
    let activity: RequestActivity
    let mountpoint: String
    let idleSeconds: UInt32?
    let logger: Logger
    /// Serialises locks (the idle watcher and a `binder lock` may meet); guards whether a busy
    /// idle mount was already logged (once per idle spell, not every check).
    private let state = Mutex<(stopped: Bool, loggedBusy: Bool, lockedBecause: String?)>((false, false, nil))

    init(activity: RequestActivity, mountpoint: String, idleSeconds: UInt32?, logger: Logger) {
        self.activity = activity
        self.mountpoint = mountpoint
        self.idleSeconds = idleSeconds
        self.logger = logger
    }

    /// Starts the idle watcher (when an idle time is set).
    func start() {
        guard let idleSeconds else { return }
        let limit = Double(idleSeconds)
        // Checked often enough to lock within a quarter of the idle time (at most 15 s late).
        let interval = min(15, max(0.2, limit / 4))
        let thread = Thread { [self] in
            while !isStopped {
                Thread.sleep(forTimeInterval: interval)
                if isStopped { return }
                let idle = activity.secondsSinceLastRequest
                guard idle >= limit else {
                    state.withLock { $0.loggedBusy = false }
                    continue
                }
                let answer = lock(reason: "idle for \(formatDuration(UInt32(idle)))", quietWhenBusy: true)
                if answer.hasPrefix("ok") { return }
                // In use: try again later, not at every check (each try runs fusermount3).
                Thread.sleep(forTimeInterval: max(interval, 5))
            }
        }
        thread.name = "binder-idle"
        thread.start()
    }

    /// Stops the idle watcher once the mount loop has ended, and logs how it ended: the daemon
    /// exits next, and with it all plaintext and the key.
    func stop() {
        let reason = state.withLock { state in
            state.stopped = true
            return state.lockedBecause
        }
        if let reason {
            logger.info("locked: plaintext and key dropped", metadata: ["mountpoint": "\(mountpoint)", "reason": "\(reason)"])
        }
    }

    private var isStopped: Bool { state.withLock { $0.stopped } }

    /// Unmounts; the control channel's answer: `ok locked MOUNTPOINT` or `error …` naming what
    /// holds the mount.
    func lock(reason: String, quietWhenBusy: Bool = false) -> String {
        logger.info("locking", metadata: ["reason": "\(reason)", "mountpoint": "\(mountpoint)"])
        // Recorded before the unmount: the mount loop ends (and `stop` reads it) as soon as the
        // kernel lets go, possibly before `unmountNormally` has returned here.
        state.withLock { $0.lockedBecause = reason }
        if unmountNormally(mountpoint) { return "ok locked \(mountpoint)" }
        state.withLock { $0.lockedBecause = nil }
        let holders = MountHolders.find(under: mountpoint)
        let why = "\(mountpoint) is in use" + (holders.isEmpty ? "" : " by " + MountHolders.describe(holders))
        let firstTime = state.withLock { state in
            defer { state.loggedBusy = true }
            return !state.loggedBusy
        }
        if !quietWhenBusy || firstTime {
            logger.warning("not locked: \(why); will lock once it is closed", metadata: ["reason": "\(reason)"])
        }
        return "error not locked: \(why) (close them, or 'binder unmount --lazy \(mountpoint)')"
    }
}

/// A normal (not lazy) unmount: fails while anything is open or has its working folder there.
func unmountNormally(_ mountpoint: String) -> Bool {
    if runQuietly("fusermount3", ["-u", mountpoint]) == 0 { return true }
    if getuid() == 0, umount2(mountpoint, 0) == 0 { return true }
    return MountTable.entry(at: mountpoint) == nil
}

/// "90s", "15m", "2h", "1d" (the largest unit that divides exactly).
func formatDuration(_ seconds: UInt32) -> String {
    for (unit, size) in [("d", UInt32(86_400)), ("h", 3600), ("m", 60)] where seconds >= size && seconds % size == 0 {
        return "\(seconds / size)\(unit)"
    }
    return "\(seconds)s"
}

/// The processes that keep a mount busy: an open file, a working or root folder under it.
/// Read from /proc (the links' text, never a stat inside the mount).
enum MountHolders {
    struct Holder: Equatable {
        let pid: Int32
        let command: String
    }

    /// The parent's pid, from /proc/PID/stat (the field after the command, which may hold
    /// spaces and parentheses: read after its last ')').
    private static func parent(of pid: String) -> Int32? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 1 ? Int32(fields[1]) : nil
    }

    static func find(under mountpoint: String) -> [Holder] {
        let me = getpid()
        var holders: [Holder] = []
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            // Not this process, nor one it started (they inherit its descriptors: a shell's
            // open file into the mount would name binder itself as a holder).
            guard let pid = Int32(entry), pid != me, parent(of: entry) != me else { continue }
            let base = "/proc/\(entry)"
            var links = ["\(base)/cwd", "\(base)/root"]
            links += ((try? FileManager.default.contentsOfDirectory(atPath: "\(base)/fd")) ?? []).map { "\(base)/fd/\($0)" }
            let inside = links.contains { link in
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: link) else { return false }
                return target == mountpoint || target.hasPrefix(mountpoint + "/")
            }
            if inside {
                let command = (try? String(contentsOfFile: "\(base)/comm", encoding: .utf8))?
                    .trimmingCharacters(in: .whitespacesAndNewlines) ?? "?"
                holders.append(Holder(pid: pid, command: command))
            }
        }
        return holders.sorted { $0.pid < $1.pid }
    }

    /// "pid 4242 (vim), pid 4250 (bash)".
    static func describe(_ holders: [Holder]) -> String {
        holders.map { "pid \($0.pid) (\($0.command))" }.joined(separator: ", ")
    }
}
