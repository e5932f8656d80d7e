internal import CGit2
import Foundation

/// The pack builder's settings for serving, as a config level of libgit2's that lives in
/// memory and only in one repository handle: libgit2 1.5's builder reads them from the
/// repository's config alone (`pack.windowMemory`, `pack.deltaCache*`; not
/// `pack.bigFileThreshold` nor `pack.window`), and the engine never writes to a repository.
/// `pack.windowMemory` of 1 MiB: the builder's delta search keeps its window of ten objects
/// while they are small (trees, commits), but past a MiB of them drops the oldest, so a large
/// blob is tried against one neighbour only instead of ten. binder's blobs are ciphertext, for
/// which a delta is never found: through the engine, a clone of 60 random 1 MB files in two packs
/// took 17 s without it, 6.6 s with it (debug build).
enum ServedPackSettings {
    static let key: StaticString = "pack.windowmemory"
    static let windowMemory: StaticString = "1048576"

    /// Adds the level to `repo`'s config (highest priority, read-only: writes still go to the
    /// repository's own file). Best effort: without it packs are the same, only slower to make.
    static func apply(to repo: OpaquePointer) {
        var config: OpaquePointer?
        guard git_repository_config(&config, repo) == 0 else { return }
        defer { git_config_free(config) }
        let backend = makeBackend()
        if git_config_add_backend(config, backend, GIT_CONFIG_LEVEL_APP, repo, 0) != 0 { backend.deallocate() }
    }

    private static func cString(_ text: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(text.utf8Start).assumingMemoryBound(to: CChar.self)
    }

    /// A backend answering `key` only; its snapshot is another such backend.
    static func makeBackend() -> UnsafeMutablePointer<git_config_backend> {
        let backend = UnsafeMutablePointer<git_config_backend>.allocate(capacity: 1)
        backend.initialize(to: git_config_backend())
        backend.pointee.version = UInt32(GIT_CONFIG_BACKEND_VERSION)
        backend.pointee.readonly = 1
        backend.pointee.open = { _, _, _ in 0 }
        backend.pointee.get = { _, key, out in
            guard let key, let out, strcmp(key, ServedPackSettings.cString(ServedPackSettings.key)) == 0 else {
                return GIT_ENOTFOUND.rawValue
            }
            let entry = UnsafeMutablePointer<git_config_entry>.allocate(capacity: 1)
            entry.initialize(to: git_config_entry())
            entry.pointee.name = ServedPackSettings.cString(ServedPackSettings.key)
            entry.pointee.value = ServedPackSettings.cString(ServedPackSettings.windowMemory)
            entry.pointee.level = GIT_CONFIG_LEVEL_APP
            entry.pointee.free = { $0?.deallocate() }
            out.pointee = entry
            return 0
        }
        backend.pointee.set = { _, _, _ in -1 }
        backend.pointee.set_multivar = { _, _, _, _ in -1 }
        backend.pointee.del = { _, _ in -1 }
        backend.pointee.del_multivar = { _, _, _ in -1 }
        backend.pointee.iterator = { out, backend in
            guard let out else { return -1 }
            // Lists nothing: `get` is how the builder reads.
            let iterator = UnsafeMutablePointer<git_config_iterator>.allocate(capacity: 1)
            iterator.initialize(to: git_config_iterator())
            iterator.pointee.backend = backend
            iterator.pointee.next = { _, _ in GIT_ITEROVER.rawValue }
            iterator.pointee.free = { $0?.deallocate() }
            out.pointee = iterator
            return 0
        }
        backend.pointee.snapshot = { out, _ in
            guard let out else { return -1 }
            out.pointee = ServedPackSettings.makeBackend()
            return 0
        }
        backend.pointee.lock = { _ in 0 }
        backend.pointee.unlock = { _, _ in 0 }
        backend.pointee.free = { $0?.deallocate() }
        return backend
    }

    /// The window memory the pack builder of `repo` reads (what its config snapshot answers).
    static func windowMemory(of repo: OpaquePointer) -> Int64? {
        var snapshot: OpaquePointer?
        guard git_repository_config_snapshot(&snapshot, repo) == 0 else { return nil }
        defer { git_config_free(snapshot) }
        var value: Int64 = 0
        return git_config_get_int64(&value, snapshot, "pack.windowMemory") == 0 ? value : nil
    }
}
