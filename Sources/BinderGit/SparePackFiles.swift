import Foundation
import Glibc

/// A file a save's pack or index is written to before it is put in place: made then under a
/// temporary name (`path`: `tmp_pack_*`, `tmp_idx_*`), or made ahead with no name at all
/// (`path` nil: `O_TMPFILE`, `SparePackFiles`), which `PackWriter.place` links under its final
/// name once it is durable.
struct PackFileInProgress {
    /// -1 for a named file its writer closed already (a fold's or an import's pack, fsynced).
    let fd: Int32
    let path: String?
}

/// The two files a save's pack and its index are written to, made ahead on a thread of this
/// instance's own so that the save does not create them. Creating a file in `objects/pack`
/// cost a save 50–110 µs each on the bench's ext4, which has no journal: a new inode is found
/// by looking past every one freed in the last 30 s (`recently_deleted`), and each save frees
/// the ref's old inode, each fold 64 more (docs/BENCHMARKS.md, "Saves: the pack's files made
/// ahead").
///
/// They are made with `O_TMPFILE`: a file with no name, which nothing can see or open until
/// it is linked into place, and which the kernel frees when its last descriptor closes. So no
/// spare is ever left in the folder, whether the process exits, is killed, or forks (a child
/// inherits the descriptors but not the thread, and `take` serves only the process that made
/// them, so two processes never write one file). Where the file system cannot make one, or
/// /proc is not mounted to link one through, `take` answers nil and the save makes a named
/// file, as before.
final class SparePackFiles: @unchecked Sendable {  // state guarded by `condition`
    enum Kind: CaseIterable {
        case pack, index
    }

    private let directory: String
    private let owner = getpid()
    /// Guards `spares`, `wanted`, `closed` and `taken`; signalled when a file is taken or at `close`.
    private let condition = NSCondition()
    /// The descriptor of the spare of each kind, when made.
    private var spares: [Kind: Int32] = [:]
    /// Whether the thread should make the missing spares.
    private var wanted = true
    /// Set by `close`, or when this file system cannot make such files: no more are made.
    private var closed = false
    /// How many spares `take` handed over.
    private var taken = 0

    /// Starts the thread that makes the spares in `directory` (`objects/pack`).
    init(directory: String) {
        self.directory = directory
        let thread = Thread { [self] in refill() }
        thread.name = "binder-spare-packs"
        thread.start()
    }

    /// The spare of `kind`, now the caller's, if one is ready; nil otherwise (the caller makes
    /// its own). Asks the thread for a new one.
    func take(_ kind: Kind) -> PackFileInProgress? {
        guard getpid() == owner else { return nil }
        condition.lock()
        defer { condition.unlock() }
        guard !closed else { return nil }
        wanted = true
        condition.signal()
        guard let fd = spares.removeValue(forKey: kind) else { return nil }
        taken += 1
        return PackFileInProgress(fd: fd, path: nil)
    }

    /// How many spares are ready now (for tests).
    var ready: Int {
        condition.lock()
        defer { condition.unlock() }
        return spares.count
    }

    /// How many spares `take` handed over (for tests).
    var takenCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return taken
    }

    /// Stops the thread and closes the spares not taken (freeing them: they have no name).
    /// In a process forked from the one that made them, nothing: the thread is not there, and
    /// may have held the lock when the process was forked.
    func close() {
        guard getpid() == owner else { return }
        condition.lock()
        closed = true
        let left = spares
        spares = [:]
        condition.signal()
        condition.unlock()
        for fd in left.values { Glibc.close(fd) }
    }

    /// The thread: makes the missing spares whenever asked, until `close`.
    private func refill() {
        condition.lock()
        // A spare is linked into place through `/proc/self/fd` (`PackWriter.place`): without
        // /proc mounted, none is made, and the saves name their own files.
        if access("/proc/self/fd", X_OK) != 0 { closed = true }
        while true {
            while !wanted && !closed { condition.wait() }
            if closed { break }
            wanted = false
            let missing = Kind.allCases.filter { spares[$0] == nil }
            condition.unlock()
            var made: [Kind: Int32] = [:]
            var unsupported = false
            for kind in missing {
                // Read-only, as git makes packs and indexes; the descriptor writes all the same.
                // O_TMPFILE is __O_TMPFILE | O_DIRECTORY (Swift does not import the macro).
                let fd = open(directory, __O_TMPFILE | O_DIRECTORY | O_RDWR | O_CLOEXEC, 0o444)
                if fd >= 0 {
                    made[kind] = fd
                } else if errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL {
                    unsupported = true  // this file system has no O_TMPFILE: the saves name their files
                }
                // Any other failure (a full disk, the folder gone) leaves the save to make its
                // own file, and to report what failed.
            }
            condition.lock()
            if unsupported { closed = true }
            for (kind, fd) in made {
                if closed {
                    Glibc.close(fd)
                } else {
                    spares[kind] = fd
                }
            }
        }
        condition.unlock()
    }
}
