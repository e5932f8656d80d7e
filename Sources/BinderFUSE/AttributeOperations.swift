import BinderCore
internal import CFuse3
import Glibc

/// chmod, chown, utimens: what tools do after saving (cp -p, rsync -a, editors).
enum AttributeOperations {
    static func install(into ops: inout fuse_operations) {
        // Modes are fixed (0600 files, 0700 folders); accepting chmod keeps `cp -p` and editors
        // that restore a mode from failing.
        ops.chmod = { path, _, _ in
            let fs = FileSystemContext.current
            guard let path else { return -EINVAL }
            do {
                try fs.view.refuseChanges(at: String(cString: path))  // `.binder/` is read-only, as said
                _ = try fs.view.attributes(String(cString: path))
                return 0
            } catch { return fs.errno(error) }
        }

        // Only to the mounting user (who owns everything): anything else is EPERM.
        ops.chown = { path, uid, gid, _ in
            let fs = FileSystemContext.current
            guard let path else { return -EINVAL }
            let sameUser = (uid == fs.uid || uid == uid_t.max) && (gid == fs.gid || gid == gid_t.max)
            guard sameUser else { return -EPERM }
            do {
                try fs.view.refuseChanges(at: String(cString: path))
                _ = try fs.view.attributes(String(cString: path))
                return 0
            } catch { return fs.errno(error) }
        }

        ops.utimens = { path, times, _ in
            let fs = FileSystemContext.current
            guard let path else { return -EINVAL }
            let name = String(cString: path)
            // Refused before UTIME_OMIT is accepted as a change of nothing.
            do { try fs.view.refuseChanges(at: name) } catch { return fs.errno(error) }
            // times[1] is the modification time; UTIME_NOW / UTIME_OMIT as utimensat(2).
            var modified = timespec()
            if let times {
                modified = times[1]
                if modified.tv_nsec == Int(binder_utime_omit()) { return 0 }
                if modified.tv_nsec == Int(binder_utime_now()) { clock_gettime(CLOCK_REALTIME, &modified) }
            } else {
                clock_gettime(CLOCK_REALTIME, &modified)
            }
            do {
                try fs.view.setModified(name, to: Timestamp(seconds: Int64(modified.tv_sec), nanoseconds: Int32(modified.tv_nsec)))
                fs.changed(name)
                return 0
            } catch { return fs.errno(error) }
        }
    }
}
