internal import CLinux

/// The daemon's code, resident only as far as it runs.
///
/// Each page of code a process touches stays in its page tables, with its neighbours: the
/// kernel maps up to 64 KiB around every fault from the page cache. Starting a mount runs code
/// the daemon never runs again (parsing the command line, opening the repository, loading the
/// listing index, Foundation's and the Swift runtime's setup), and left 33 MiB of code counted
/// in its memory; serving reads touches a third of that (docs/BENCHMARKS.md).
public enum CodePages {
    /// Drops the pages of every executable file mapping (unmodified code) from the page
    /// tables, once the mount is up: they stay in the page cache, and what runs afterwards maps
    /// them again at its first touch. The bytes of the mappings released; nil when
    /// /proc/self/smaps cannot be read (nothing is dropped then).
    @discardableResult
    public static func releaseStartupCode() -> Int? {
        let released = binder_release_code_pages()
        return released < 0 ? nil : released
    }
}
