import BinderCore
internal import CFuse3
import Glibc

/// getattr, readdir, open, read, release: the read side of the mount.
enum ReadOperations {
    static func install(into ops: inout fuse_operations) {
        ops.getattr = { path, stat, _ in
            guard let path, let stat else { return -EINVAL }
            return ReadOperations.attributes(String(cString: path), into: stat)
        }

        ops.opendir = { path, info in
            guard let path, let info else { return -EINVAL }
            // Folders change through this mount (the kernel then drops its copy itself) or by
            // sync (which invalidates them): the kernel may keep what readdir returned.
            if !BinderView.isControlPath(String(cString: path)) { binder_fi_set_cache_dir(info) }
            return 0
        }

        ops.readdir = { path, buffer, filler, _, _, _ in
            guard let path, let filler else { return -EINVAL }
            return ReadOperations.readFolder(String(cString: path), into: buffer, filler)
        }

        ops.open = { path, info in
            guard let path, let info else { return -EINVAL }
            return ReadOperations.open(String(cString: path), info)
        }

        ops.read = { _, buffer, size, offset, info in
            let fs = FileSystemContext.current
            guard let buffer, let info else { return -EINVAL }
            do {
                let count = try fs.view.read(handle: info.pointee.fh, offset: Int(offset),
                                             into: UnsafeMutableRawBufferPointer(start: buffer, count: size))
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
        do {
            fs.fill(stat, try fs.view.attributes(path))
            return 0
        } catch {
            fs.logger.debug("getattr failed", metadata: ["path": "\(path)", "error": "\(error)"])
            return fs.errno(error)
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

    /// `.` and `..`, then every entry with its attributes (readdirplus: `ls -l` makes no
    /// getattr calls).
    static func readFolder(_ path: String, into buffer: UnsafeMutableRawPointer?, _ filler: fuse_fill_dir_t) -> Int32 {
        let fs = FileSystemContext.current
        do {
            let entries = try fs.view.list(path)
            var st = stat()
            _ = filler(buffer, ".", nil, 0, fuse_fill_dir_flags(rawValue: 0))
            _ = filler(buffer, "..", nil, 0, fuse_fill_dir_flags(rawValue: 0))
            for entry in entries {
                fs.fill(&st, entry.attributes)
                if filler(buffer, entry.name, &st, 0, binder_fill_dir_plus()) != 0 { break }
            }
            return 0
        } catch { return fs.errno(error) }
    }

    /// Opens for writing (any write access or O_TRUNC) or for reading, and says how the kernel
    /// may cache what it reads.
    static func open(_ name: String, _ info: UnsafeMutablePointer<fuse_file_info>) -> Int32 {
        let fs = FileSystemContext.current
        let access = info.pointee.flags & O_ACCMODE
        do {
            if access != O_RDONLY || info.pointee.flags & O_TRUNC != 0 {
                if fs.refusesChanges(name) { return -EROFS }
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
