internal import CLinux

/// How the C allocator serves a long-running mount daemon.
public enum Allocator {
    /// Allocations from this size up get pages of their own, given back to the kernel when
    /// freed. glibc's default threshold rises to the largest block freed, so after libfuse freed
    /// one large directory buffer (25 MB for a folder of 100,000 records) every later one came
    /// from an arena and stayed resident there. Above 1 MiB: libgit2's pack builder takes a
    /// 1 MiB buffer for each object it deflates (its zlib output), and libfuse one of 1 MiB and
    /// a page per worker; at 1 MiB each was a mapping of its own, and a fold mapped and unmapped
    /// one per commit it packed (each unmap a TLB shootdown on every core).
    public static let mmapThreshold = 2 << 20
    /// Malloc arenas at most. glibc makes up to eight per core, one per thread that finds the
    /// others busy; each kept what its FUSE thread freed, so every `ls -l` of a large folder,
    /// answered by whichever thread, left another copy of its buffers resident.
    public static let arenaLimit = 2

    /// Sets both for this process; false if glibc refused (nothing else changes then).
    @discardableResult
    public static func tuneForDaemon() -> Bool {
        binder_malloc_tune(Int32(mmapThreshold), Int32(arenaLimit)) == 0
    }

    /// The bytes the C allocator has handed out and not had back (glibc's `mallinfo2`), for
    /// tests and measurements of what a part of the program keeps (libgit2's caches among them).
    public static var heapBytesInUse: Int { Int(binder_heap_bytes_in_use()) }
}
