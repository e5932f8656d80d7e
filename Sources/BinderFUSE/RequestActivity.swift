import Glibc
import Synchronization

/// When the mount last served a request: the idle time `binder mount --idle` locks after.
/// Only requests that reach the daemon count (what the kernel answers from its caches does
/// not), so a mount is locked at most the kernel's cache time (60 s) later than the last use
/// a person made of it.
public final class RequestActivity: Sendable {
    /// CLOCK_MONOTONIC nanoseconds of the last request.
    private let last = Atomic<Int64>(RequestActivity.now())

    public init() {}

    /// Called at the start of every FUSE request; lock-free (never waits).
    func touch() { last.store(Self.now(), ordering: .relaxed) }

    public var secondsSinceLastRequest: Double {
        Double(Self.now() - last.load(ordering: .relaxed)) / 1e9
    }

    private static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }
}
