import BinderCore
internal import CFuse3
import Glibc

/// create, write, truncate, flush, fsync: the write side. A file's bytes are stored (one
/// commit, durable before the call returns) at flush/fsync when they changed.
enum WriteOperations {
    static func install(into ops: inout fuse_operations) {
        ops.create = { path, _, info in
            let fs = FileSystemContext.current
            guard let path, let info else { return -EINVAL }
            guard let name = String(validatingCString: path) else { return -EILSEQ }  // names are UTF-8
            do {
                info.pointee.fh = try fs.view.create(name)
                return 0
            } catch { return fs.errno(error) }
        }

        ops.write = { _, buffer, size, offset, info in
            let fs = FileSystemContext.current
            guard let buffer, let info else { return -EINVAL }
            do {
                return Int32(try fs.view.write(handle: info.pointee.fh, offset: Int(offset),
                                               UnsafeRawBufferPointer(start: buffer, count: size)))
            } catch { return fs.errno(error) }
        }

        ops.truncate = { path, size, info in
            let fs = FileSystemContext.current
            guard let path else { return -EINVAL }
            do {
                if let info {
                    try fs.view.truncate(handle: info.pointee.fh, size: Int(size))
                } else {
                    let name = String(cString: path)
                    try fs.view.truncate(name, size: Int(size))
                    fs.changed(name)
                }
                return 0
            } catch { return fs.errno(error) }
        }

        // flush runs at every close(2) of a descriptor: the caller's close reports its result.
        ops.flush = { path, info in
            // Nothing to store on a read-only mount: ENOSYS, and the kernel sends no more FLUSH.
            if FileSystemContext.current.opensWithoutAsking { return -ENOSYS }
            return WriteOperations.store(path, info, syncing: false)
        }

        ops.fsync = { path, _, info in
            WriteOperations.store(path, info, syncing: true)
        }
    }

    /// Stores what was written through the handle. A flush of a handle truncated or created
    /// but not written stores only when it closes the caller's last descriptor of the file
    /// (`CallerDescriptors`); an fsync always does.
    static func store(_ path: UnsafePointer<CChar>?, _ info: UnsafeMutablePointer<fuse_file_info>?, syncing: Bool) -> Int32 {
        let fs = FileSystemContext.current
        guard let info else { return 0 }
        let caller = fuse_get_context()!.pointee.pid
        do {
            let stored = try fs.view.flush(handle: info.pointee.fh, closing: syncing) {
                guard let path else { return true }
                return !CallerDescriptors.holds(fs.mountedPath(String(cString: path)), process: caller)
            }
            if stored, let path {
                fs.changed(String(cString: path))
            }
            return 0
        } catch {
            // What the kernel cached of the refused bytes must not be shown: the stored version is
            // (a new file refused has none: its name goes at release).
            if let path, !fs.view.isNew(String(cString: path)) { fs.changed(String(cString: path)) }
            return fs.errno(error)
        }
    }
}
