import BinderCrypto
import BinderGit
import Dispatch
import Foundation
import Synchronization

/// Decrypts the next files of a folder while a reader works through it in order (grep -r,
/// cp -r, tar: readdir, then open and read each file in turn), on all cores, into the
/// plaintext cache. Opening a file schedules the `window` files after it in the folder's
/// order; a job is dropped when the shown commit changed or another folder is being read, and
/// never holds a lock while it decrypts. A FUSE request never waits for work it does not
/// need: only an open of the very file a worker is decrypting waits for that result.
public final class ReadAhead: Sendable {
    /// Files ahead of the reader: enough to keep every core busy while the reader takes one.
    public static let defaultWindow = 8

    struct Job: Sendable {
        let path: String
        let node: Node
        let commit: ObjectID?
    }

    private struct State: ~Copyable {
        var pending: [Job] = []
        /// Sources being decrypted, with the group an open of the same file waits on.
        var inFlight: [Node.Source: DispatchGroup] = [:]
        /// Files of the current folder a worker has read ahead and no reader has opened yet.
        var prefetched: Set<Node.Source> = []
        /// The folder read most recently (jobs of another one are dropped), at which commit,
        /// and how many entries its listing had (its order is the listing's own,
        /// `Listing.sortedEntries`).
        var folder = ""
        var folderCommit: ObjectID?
        var listedCount = 0
        var workers = 0
        var stopped = false
    }

    let window: Int
    private let workerLimit: Int
    /// Guards the pending jobs, those in flight, the folder and the workers' count.
    private let state = Mutex(State())
    /// Every worker is in it while it runs (`stop` waits for them).
    private let running = DispatchGroup()
    private let queue = DispatchQueue(label: "binder.read-ahead", qos: .utility, attributes: .concurrent)

    init(window: Int, workers: Int = ProcessInfo.processInfo.activeProcessorCount) {
        self.window = max(window, 0)
        workerLimit = max(workers, 1)
    }

    /// The reader opened `path` (a file of folder `listing`): schedules the files after it
    /// that are not cached yet, at most `window` of them and at most a quarter of the cache's
    /// room, so that read-ahead never pushes out what it just read.
    func opened(_ path: String, listing: Listing, commit: ObjectID?, cache: PlaintextCache,
                decrypt: @escaping @Sendable (Job) -> Void) {
        guard window > 0 else { return }
        let (folder, name) = ViewPath.split(path)
        state.withLock { state in
            if state.folder != folder || state.folderCommit != commit || state.listedCount != listing.nodes.count {
                state.pending.removeAll()
                state.prefetched.removeAll()
                state.folder = folder
                state.folderCommit = commit
                state.listedCount = listing.nodes.count
            }
        }
        let entries = listing.sortedEntries
        let after = Self.firstIndex(after: name, in: entries)
        var jobs: [Job] = []
        var bytes = 0
        for (next, node) in entries[after..<min(after + window, entries.count)] {
            // A large attachment would be decrypted for nothing: the cache does not keep it.
            guard !node.isDirectory, PlaintextCache.keeps(node.source, count: node.size), cache.get(node.source) == nil else { continue }
            bytes += node.size
            if bytes > cache.capacity / 4 { break }
            jobs.append(Job(path: join(folder, next), node: node, commit: commit))
        }
        let start = state.withLock { state -> Int in
            guard !state.stopped, state.folder == folder else { return 0 }
            let queued = Set(state.pending.map(\.node.source)).union(state.inFlight.keys)
            state.pending.append(contentsOf: jobs.filter { !queued.contains($0.node.source) })
            let wanted = max(min(workerLimit, state.pending.count) - state.workers, 0)
            state.workers += wanted
            return wanted
        }
        for _ in 0..<start {
            queue.async(group: running) { [self] in work(decrypt) }
        }
    }

    /// The index of the first entry after `name` in bytewise order (binary search).
    static func firstIndex(after name: String, in entries: [(name: String, node: Node)]) -> Int {
        var low = 0, high = entries.count
        while low < high {
            let mid = (low + high) / 2
            if ViewPath.precedesBytewise(name, entries[mid].name) { high = mid } else { low = mid + 1 }
        }
        return low
    }

    /// Takes pending jobs until there are none.
    private func work(_ decrypt: @Sendable (Job) -> Void) {
        while let taken = next() {
            let (job, group) = taken
            decrypt(job)
            state.withLock { state in
                _ = state.inFlight.removeValue(forKey: job.node.source)
                state.prefetched.insert(job.node.source)
            }
            group.leave()
        }
    }

    private func next() -> (Job, DispatchGroup)? {
        state.withLock { state in
            guard !state.stopped, !state.pending.isEmpty else {
                state.workers -= 1
                return nil
            }
            let job = state.pending.removeFirst()
            let group = DispatchGroup()
            group.enter()
            state.inFlight[job.node.source] = group
            return (job, group)
        }
    }

    /// Whether `source` was read ahead and not opened since (then forgets it): the reader is
    /// following the read-ahead, which should go on ahead of it. Asked on every open of a
    /// cached file: with nothing read ahead and unopened (a warm reader's case) nothing is hashed.
    func takePrefetched(_ source: Node.Source) -> Bool {
        state.withLock { !$0.prefetched.isEmpty && $0.prefetched.remove(source) != nil }
    }

    /// Waits until a worker decrypting `source` has finished (at once if none is).
    func waitIfInFlight(_ source: Node.Source) {
        state.withLock { $0.inFlight[source] }?.wait()
    }

    /// Drops what is pending (the shown commit changed: those nodes may be gone).
    func cancelPending() { state.withLock { $0.pending.removeAll() } }

    /// Drops what is pending and waits for the workers (at unmount, before the cache is cleared).
    func stop() {
        state.withLock { state in
            state.stopped = true
            state.pending.removeAll()
        }
        running.wait()
    }

    /// Jobs pending and workers running (for tests).
    var load: (pending: Int, workers: Int) { state.withLock { ($0.pending.count, $0.workers) } }
}
