import BinderCore
internal import CFuse3
import Foundation
import Glibc
import Logging

public enum FUSEError: Error, CustomStringConvertible {
    case setup(String)
    case mount(String)

    public var description: String {
        switch self {
        case .setup(let why): return "FUSE setup failed: \(why)"
        case .mount(let why): return why
        }
    }
}

/// One mounted binder: owns the libfuse handle (freed in deinit) and the retained context.
public final class FUSEMount {
    public struct Options: Sendable {
        public var readOnly: Bool
        /// Shown by `mount` and `df` as the source, e.g. `binder:health`.
        public var fsName: String
        /// Lets other users reach the mount (FUSE's allow_other); modes and
        /// default_permissions still apply.
        public var allowOther: Bool

        public init(readOnly: Bool, fsName: String, allowOther: Bool = false) {
            self.readOnly = readOnly
            self.fsName = fsName
            self.allowOther = allowOther
        }
    }

    /// When the mount last served a request (`binder mount --idle`).
    public let activity: RequestActivity

    private let handle: OpaquePointer
    private let context: Unmanaged<FileSystemContext>
    private let view: BinderView
    private let mountpoint: String
    private var mounted = false

    public init(view: BinderView, mountpoint: String, options: Options, logger: Logger) throws(FUSEError) {
        self.view = view
        self.mountpoint = mountpoint
        let activity = RequestActivity()
        self.activity = activity
        var ops = fuse_operations()
        Self.installOperations(into: &ops)
        let context = Unmanaged.passRetained(FileSystemContext(view: view, logger: logger, readOnly: options.readOnly,
                                                                     activity: activity))
        var args = binder_fuse_args_empty()
        defer { fuse_opt_free_args(&args) }
        // No auto_unmount: were the daemon to die, its mount must keep answering ENOTCONN until
        // `binder unmount` or the next `binder mount` clears it, never become the empty folder
        // beneath, which would take the next write as plaintext.
        var mountOptions = ["fsname=" + Self.escapeOption(options.fsName), "subtype=binder",
                            "default_permissions", "noatime"]
        if options.readOnly { mountOptions.append("ro") }
        if options.allowOther { mountOptions.append("allow_other") }
        for arg in ["binder", "-o", mountOptions.joined(separator: ",")] {
            guard fuse_opt_add_arg(&args, arg) == 0 else {
                context.release()
                throw .setup("cannot build FUSE arguments")
            }
        }
        guard let handle = binder_fuse_new(&args, &ops, context.toOpaque()) else {
            context.release()
            throw .setup("fuse_new rejected the options")
        }
        self.handle = handle
        self.context = context
        let fileSystem = context.takeUnretainedValue()
        fileSystem.attach(handle, mountpoint: mountpoint)
        // Commits from elsewhere (sync): the kernel forgets what it cached of what they changed.
        view.setStaleHandler { paths in
            for path in paths { fileSystem.changed("/" + path) }
        }
        // Every commit shown: the names the kernel holds under `.binder` are dropped.
        view.setShownCommitHandler { fileSystem.shownCommitChanged() }
    }

    deinit {
        view.setStaleHandler(nil)
        view.setShownCommitHandler(nil)
        if mounted { fuse_unmount(handle) }
        fuse_destroy(handle)
        context.release()
        view.close()
    }

    /// Mounts at `mountpoint`. After this returns, the kernel queues requests until `run`.
    public func mount() throws(FUSEError) {
        var info = stat()
        guard stat(mountpoint, &info) == 0 else {
            throw .mount("mount point \(mountpoint): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw .mount("mount point \(mountpoint) is not a folder") }
        guard fuse_mount(handle, mountpoint) == 0 else {
            throw .mount("cannot mount at \(mountpoint) (busy, or FUSE unavailable)")
        }
        mounted = true
        guard fuse_set_signal_handlers(fuse_get_session(handle)) == 0 else {
            throw .setup("cannot install signal handlers")
        }
    }

    /// Serves requests until unmounted or SIGINT/SIGTERM/SIGHUP; then unmounts. Returns 0 on a
    /// clean exit (a signal asking to stop is one), else a negative errno.
    public func run() -> Int32 {
        var result = binder_fuse_loop_mt(handle)
        // libfuse's signal handler leaves the signal number as the loop's result.
        if result == SIGINT || result == SIGTERM || result == SIGHUP { result = 0 }
        fuse_remove_signal_handlers(fuse_get_session(handle))
        if mounted {
            fuse_unmount(handle)
            mounted = false
        }
        view.close()
        return result
    }

    /// Commas and backslashes in a -o value must be escaped for libfuse's option parser.
    static func escapeOption(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: ",", with: "\\,")
    }

    /// The operations table. Built in this library (not in `main.swift`, whose top level is
    /// MainActor-isolated: a closure from there would trap on libfuse's threads).
    static func installOperations(into ops: inout fuse_operations) {
        ops.`init` = { connection, config in
            // The kernel keeps each link's target (`.binder`'s views are links, 100,000 in a
            // timeline): a second `ls -l` reads them without a readlink round trip each. What
            // `.binder` shows changes with the commit shown, and each change invalidates every
            // name there the kernel was given (`shownCommitChanged`), its cached target with it;
            // elsewhere a link's target never changes under one inode (a new link is a new one).
            if let connection { _ = binder_fuse_want_cache_symlinks(connection) }
            if let config {
                // Names and attributes change only through this mount (which invalidates what it
                // changes): let the kernel cache them.
                config.pointee.entry_timeout = 60
                config.pointee.attr_timeout = 60
                config.pointee.negative_timeout = 5
                config.pointee.use_ino = 0
            }
            return fuse_get_context()!.pointee.private_data
        }
        ReadOperations.install(into: &ops)
        FolderOperations.install(into: &ops)
        WriteOperations.install(into: &ops)
        NameOperations.install(into: &ops)
        AttributeOperations.install(into: &ops)
    }
}
