import BinderCore
import Synchronization

/// The listing each open folder handle reads from, taken at opendir: `readdir` then serves
/// it by offset (the index of the entry after the last one returned), so the kernel's chunks
/// cost what they return. Without offsets libfuse keeps the listing itself as a linked list
/// and walks it from its head for every chunk: 3,300 chunks of a 100,000-record folder made
/// the first `ls -l` quadratic (a third of the daemon's time was that walk).
final class OpenFolders: Sendable {
    typealias Entry = (name: String, attributes: NodeAttributes)

    /// Listings by handle. Guarded by its own lock; never held while listing.
    private let listings = Mutex<(next: UInt64, open: [UInt64: [Entry]])>((1, [:]))

    /// A handle for `entries` (as `fi->fh`).
    func open(_ entries: [Entry]) -> UInt64 {
        listings.withLock { state in
            let handle = state.next
            state.next += 1
            state.open[handle] = entries
            return handle
        }
    }

    /// The listing of `handle`; nil for a handle not opened here.
    func entries(_ handle: UInt64) -> [Entry]? { listings.withLock { $0.open[handle] } }

    func close(_ handle: UInt64) { listings.withLock { _ = $0.open.removeValue(forKey: handle) } }

    var count: Int { listings.withLock { $0.open.count } }
}
