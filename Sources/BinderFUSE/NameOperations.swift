import BinderCore
internal import CFuse3
import Glibc

/// unlink, rename, mkdir, rmdir, symlink: records, folders and editors' scratch files.
enum NameOperations {
    /// renameat2 flags (linux/fs.h).
    static let renameNoReplace: UInt32 = 1
    static let renameExchange: UInt32 = 2

    static func install(into ops: inout fuse_operations) {
        ops.unlink = { path in
            let fs = FileSystemContext.current
            guard let path else { return -EINVAL }
            do { try fs.view.remove(String(cString: path)); return 0 } catch { return fs.errno(error) }
        }

        ops.rename = { from, to, flags in
            let fs = FileSystemContext.current
            guard let from, let to else { return -EINVAL }
            guard String(validatingCString: to) != nil else { return -EILSEQ }  // names are UTF-8
            do {
                let source = String(cString: from), target = String(cString: to)
                if flags & NameOperations.renameExchange != 0 {
                    try fs.view.refuseChanges(at: source, target)
                    return -EINVAL
                }
                try fs.view.rename(source, to: target, noReplace: flags & NameOperations.renameNoReplace != 0)
                fs.changed(target)
                return 0
            } catch { return fs.errno(error) }
        }

        ops.mkdir = { path, _ in
            let fs = FileSystemContext.current
            guard let path else { return -EINVAL }
            guard String(validatingCString: path) != nil else { return -EILSEQ }  // names are UTF-8
            do { try fs.view.makeDirectory(String(cString: path)); return 0 } catch { return fs.errno(error) }
        }

        ops.rmdir = { path in
            let fs = FileSystemContext.current
            guard let path else { return -EINVAL }
            do { try fs.view.removeDirectory(String(cString: path)); return 0 } catch { return fs.errno(error) }
        }

        ops.symlink = { target, path in
            let fs = FileSystemContext.current
            guard let target, let path else { return -EINVAL }
            guard String(validatingCString: path) != nil else { return -EILSEQ }  // names are UTF-8
            do { try fs.view.symlink(String(cString: target), at: String(cString: path)); return 0 } catch { return fs.errno(error) }
        }
    }
}
