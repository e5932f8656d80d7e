import BinderCore
internal import CFuse3
import Glibc

/// getattr, readdir, open, read, release: the read side of the mount.
enum ReadOperations {
    static func install(into ops: inout fuse_operations) {
        ops.getattr = { path, stat, _ in
            guard let path, let stat else { return -EINVAL }
            // Names are UTF-8: one that is not names nothing here (read with U+FFFD in place of
            // its bad bytes, it would name another file).
            guard let name = String(validatingCString: path) else { return -ENOENT }
            return ReadOperations.attributes(name, into: stat)
        }

        ops.opendir = { path, info in
            guard let path, let info else { return -EINVAL }
            return ReadOperations.openFolder(String(cString: path), info)
        }

        ops.readdir = { _, buffer, filler, offset, info, _ in
            guard let filler, let info else { return -EINVAL }
            return ReadOperations.readFolder(info.pointee.fh, from: offset, into: buffer, filler)
        }

        ops.releasedir = { _, info in
            guard let info else { return 0 }
            FileSystemContext.current.openFolders.close(info.pointee.fh)
            return 0
        }

        ops.open = { path, info in
            guard let path, let info else { return -EINVAL }
            return ReadOperations.open(String(cString: path), info)
        }

        ops.read = { path, buffer, size, offset, info in
            let fs = FileSystemContext.current
            guard let buffer, let info else { return -EINVAL }
            let into = UnsafeMutableRawBufferPointer(start: buffer, count: size)
            do {
                // Handles are numbered from 1: 0 is a file the kernel opened without asking (a
                // read-only mount answers OPEN with ENOSYS), read by its path.
                guard info.pointee.fh == 0 else {
                    return Int32(try fs.view.read(handle: info.pointee.fh, offset: Int(offset), into: into))
                }
                guard let path else { return -EBADF }
                let name = String(cString: path)
                let count = try fs.view.read(path: name, offset: Int(offset), into: into)
                // The kernel keeps these pages until told otherwise: `.binder/status` changes by
                // itself, so what was read of it is dropped once this call has returned.
                if BinderView.isStatusFile(name) { fs.dropCachedControlFile(name) }
                return Int32(count)
            } catch { return fs.errno(error) }
        }

        ops.release = { path, info in
            guard let info else { return 0 }
            let fs = FileSystemContext.current
            // A new file that was never stored (its save refused) is gone: the kernel was told
            // of its name at create and must forget it.
            if fs.view.release(handle: info.pointee.fh), let path { fs.forget(String(cString: path)) }
            return 0
        }

        ops.readlink = { path, buffer, size in
            guard let path, let buffer, size > 0 else { return -EINVAL }
            return ReadOperations.readLink(String(cString: path), into: UnsafeMutableBufferPointer(start: buffer, count: size))
        }
    }

    static func attributes(_ path: String, into stat: UnsafeMutablePointer<stat>) -> Int32 {
        let fs = FileSystemContext.current
        // The kernel keeps the name it looked up, or its absence: under `.binder` both are
        // followed, to be dropped when the commit shown changes (followed before the answer:
        // one worked out of the commit shown before a change is dropped with that change).
        let control = BinderView.isControlPath(path)
        if control { fs.controlNames.lookedUp(path) }
        do {
            fs.fill(stat, try fs.view.attributes(path))
            return 0
        } catch {
            fs.logger.debug("getattr failed", metadata: ["path": "\(path)", "error": "\(error)"])
            let result = fs.errno(error)
            if control && result == -ENOENT { fs.controlNames.missing(path) }
            return result
        }
    }

    /// The link's target, cut to the buffer and NUL-terminated (as readlink(2) via FUSE wants).
    static func readLink(_ path: String, into buffer: UnsafeMutableBufferPointer<CChar>) -> Int32 {
        let fs = FileSystemContext.current
        do {
            let target = Array(try fs.view.readLink(path).utf8.prefix(buffer.count - 1))
            for (index, byte) in target.enumerated() { buffer[index] = CChar(bitPattern: byte) }
            buffer[target.count] = 0
            return 0
        } catch { return fs.errno(error) }
    }

    /// Lists the folder for the handle's whole life (a listing changed meanwhile is seen by the
    /// next opendir, as with any file system).
    static func openFolder(_ path: String, _ info: UnsafeMutablePointer<fuse_file_info>) -> Int32 {
        let fs = FileSystemContext.current
        do {
            let entries = try fs.view.list(path)
            info.pointee.fh = fs.openFolders.open(entries)
            // No folder asks the kernel to keep its listing (`cache_readdir`). libfuse 3.14's
            // path API does not pass that flag on (3.16 does: libfuse#822), and a kernel that
            // keeps listings fills its copy from whichever handle reads first: one opened
            // before a change and read after it would leave the old listing cached.
            if BinderView.isControlPath(path) {
                // readdirplus gives the kernel each name with its attributes.
                fs.controlNames.listed(path, names: entries.map(\.name))
            }
            return 0
        } catch { return fs.errno(error) }
    }

    /// `.` and `..`, then every entry with its attributes (readdirplus: `ls -l` makes no
    /// getattr calls), from entry `offset` on until the kernel's buffer is full. Each entry
    /// carries the offset of the one after it.
    static func readFolder(_ handle: UInt64, from offset: off_t, into buffer: UnsafeMutableRawPointer?,
                           _ filler: fuse_fill_dir_t) -> Int32 {
        let fs = FileSystemContext.current
        guard let entries = fs.openFolders.entries(handle) else { return -EBADF }
        guard offset >= 0 else { return -EINVAL }
        var st = stat()
        var position = Int(offset)
        while position < entries.count + 2 {
            let next = off_t(position + 1)
            let full: Int32
            switch position {
            case 0: full = filler(buffer, ".", nil, next, fuse_fill_dir_flags(rawValue: 0))
            case 1: full = filler(buffer, "..", nil, next, fuse_fill_dir_flags(rawValue: 0))
            default:
                let entry = entries[position - 2]
                fs.fill(&st, entry.attributes)
                full = filler(buffer, entry.name, &st, next, binder_fill_dir_plus())
            }
            if full != 0 { break }
            position += 1
        }
        return 0
    }

    /// Opens for writing (any write access or O_TRUNC) or for reading, and says how the kernel
    /// may cache what it reads.
    static func open(_ name: String, _ info: UnsafeMutablePointer<fuse_file_info>) -> Int32 {
        let fs = FileSystemContext.current
        // A read-only mount stores nothing, so it needs to hear of neither open nor close:
        // ENOSYS makes the kernel open every file itself from now on, keep its pages (it is
        // told when a file changes: `FileSystemContext.changed`) and send no RELEASE, and the
        // FLUSH that follows is answered ENOSYS too (`WriteOperations`). About a plain
        // folder's speed for warm reads (docs/BENCHMARKS.md).
        if fs.opensWithoutAsking { return -ENOSYS }
        let access = info.pointee.flags & O_ACCMODE
        do {
            if access != O_RDONLY || info.pointee.flags & O_TRUNC != 0 {
                info.pointee.fh = try fs.view.openForWriting(name, truncate: info.pointee.flags & O_TRUNC != 0,
                                                             append: info.pointee.flags & O_APPEND != 0)
                return 0
            }
            info.pointee.fh = try fs.view.open(name)
            if BinderView.isControlPath(name) {
                // `status` changes without any write (sync, cache use), and a view's name may
                // stand for other bytes after a commit: never from the kernel's page cache,
                // read to the end whatever size was cached.
                binder_fi_set_direct_io(info, 1)
                return 0
            }
            if fs.view.takeSizeCorrection(name) {
                // The size the kernel was given (from a listing index of an older rendering)
                // was wrong: this handle reads to the end whatever size is cached, and the
                // kernel drops the cached attributes and pages once this call returns.
                binder_fi_set_direct_io(info, 1)
                fs.changed(name)
                return 0
            }
            // What has not changed since it was last opened: the kernel may keep its pages.
            binder_fi_set_keep_cache(info, fs.takeChanged(name) ? 0 : 1)
            // A read-only handle has nothing to flush: close() needs no round trip.
            binder_fi_set_noflush(info, 1)
            return 0
        } catch { return fs.errno(error) }
    }
}
