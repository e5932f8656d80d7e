import Foundation
import Glibc

/// Git's lock files (`refs/heads/main.lock`, `index.lock`, `HEAD.lock`, `packed-refs.lock`,
/// `config.lock`, …). git and libgit2 create one with O_EXCL, write it, and rename it over the
/// file it replaces; a process killed in between leaves it behind, and every later update of
/// that file fails ("the lock exists"). A lock file no live process has open is stale.
public struct GitLockFile: Sendable, Equatable, CustomStringConvertible {
    /// Relative to the git directory, e.g. `refs/heads/main.lock`.
    public let name: String
    public let path: String
    /// Processes that have it open (a git operation in progress).
    public let holders: [Int32]

    /// What it locks, in words.
    public var what: String {
        let locked = String(name.dropLast(".lock".count))
        switch locked {
        case "index": return "the index's lock"
        case "HEAD": return "HEAD's lock"
        case "packed-refs": return "the packed references' lock"
        case "config": return "the repository config's lock"
        default:
            if locked.hasPrefix("refs/heads/") { return "the lock of branch \(locked.dropFirst("refs/heads/".count))" }
            if locked.hasPrefix("refs/") { return "the lock of reference \(locked)" }
            return "a git lock file"
        }
    }

    public var description: String { "\(name) (\(what))" }
}

public enum GitLockFiles {
    /// Every lock file in `gitDirectory` (top level, `refs/`, `logs/`), with the processes that
    /// have it open. binder's own writer lock is not one of git's.
    public static func find(gitDirectory: String) -> [GitLockFile] {
        let fm = FileManager.default
        var names: [String] = []
        for name in (try? fm.contentsOfDirectory(atPath: gitDirectory)) ?? [] where name.hasSuffix(".lock") && name != WriterLock.fileName {
            names.append(name)
        }
        for folder in ["refs", "logs"] {
            guard let walker = fm.enumerator(atPath: gitDirectory + "/" + folder) else { continue }
            while let relative = walker.nextObject() as? String {
                if relative.hasSuffix(".lock") { names.append(folder + "/" + relative) }
            }
        }
        guard !names.isEmpty else { return [] }
        let openFiles = openFileOwners()
        return names.sorted().compactMap { name in
            let path = gitDirectory + "/" + name
            var info = stat()
            guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
            return GitLockFile(name: name, path: path, holders: openFiles[FileIdentity(info)] ?? [])
        }
    }

    /// The lock files no live process has open. One seen unopened is looked at again a moment
    /// later: git closes a lock file just before renaming it into place, and one caught in that
    /// instant is gone (or open again) at the second look.
    public static func stale(gitDirectory: String) -> [GitLockFile] {
        let first = find(gitDirectory: gitDirectory).filter(\.holders.isEmpty)
        guard !first.isEmpty else { return [] }
        usleep(200_000)
        let second = find(gitDirectory: gitDirectory).filter(\.holders.isEmpty)
        return second.filter { lock in first.contains { $0.name == lock.name } }
    }

    /// Removes stale lock files (the caller holds the binder's writer lock, so no binder
    /// process is about to take them); returns those removed.
    public static func removeStale(gitDirectory: String) -> [GitLockFile] {
        stale(gitDirectory: gitDirectory).filter { unlink($0.path) == 0 }
    }

    struct FileIdentity: Hashable {
        let device: UInt64
        let inode: UInt64
        init(_ info: stat) {
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
        }
    }

    /// Every file open in a process this user may look at (`/proc/PID/fd/*`), by device and inode.
    static func openFileOwners() -> [FileIdentity: [Int32]] {
        var owners: [FileIdentity: [Int32]] = [:]
        let fm = FileManager.default
        for entry in (try? fm.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(entry) else { continue }
            let folder = "/proc/\(pid)/fd"
            for fd in (try? fm.contentsOfDirectory(atPath: folder)) ?? [] {
                var info = stat()
                guard stat(folder + "/" + fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
                owners[FileIdentity(info), default: []].append(pid)
            }
        }
        return owners
    }
}

/// The temporary files a pack is written under before it is renamed into place
/// (`objects/pack/tmp_pack_*` and `tmp_idx_*` from binder's own pack writer, `pack_git2_*` from
/// libgit2's). A save, fold or repack killed mid-write (an unmount while a fold of the large
/// packs runs, kill -9) leaves them behind: nothing refers to them and nothing removes them,
/// and a fold's can be as large as the repository.
public enum GitTemporaryPacks {
    static let prefixes = ["tmp_pack_", "tmp_idx_", "tmp_rev_", "pack_git2_"]

    /// Removes those no live process has open (the caller holds the binder's writer lock, so
    /// no binder process is writing one); returns the names removed and their bytes.
    public static func removeStale(gitDirectory: String) -> (names: [String], bytes: Int64) {
        let folder = gitDirectory + "/objects/pack"
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [])
            .filter { name in prefixes.contains { name.hasPrefix($0) } }.sorted()
        guard !names.isEmpty else { return ([], 0) }
        let openFiles = GitLockFiles.openFileOwners()
        var removed: [String] = [], bytes: Int64 = 0
        for name in names {
            var info = stat()
            let path = folder + "/" + name
            guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG,
                  openFiles[GitLockFiles.FileIdentity(info)] == nil, unlink(path) == 0 else { continue }
            removed.append(name)
            bytes += Int64(info.st_size)
        }
        return (removed, bytes)
    }
}

/// Entries of a repository that would block whoever opens them: a FIFO, a socket or a device
/// (itself, or where a link leads). libgit2 opens a ref, a pack index or a loose object before
/// it looks at what it opened, and opening a FIFO waits for a writer that never comes: a
/// mount whose every request waited behind it. Nothing git writes is one of these, so a
/// repository holding one was tampered with: every command that opens a binder refuses it
/// with the paths (`BinderLocator.open`). (`hooks/` is skipped: binder never runs or reads a
/// hook.)
public enum BlockingGitFiles {
    /// Up to `limit` such paths, relative to `gitDirectory`, sorted.
    public static func find(gitDirectory: String, limit: Int = 10) -> [String] {
        guard let walk = FileManager.default.enumerator(atPath: gitDirectory) else { return [] }
        var found: [String] = []
        while let relative = walk.nextObject() as? String {
            if relative == "hooks" { walk.skipDescendants(); continue }
            let path = gitDirectory + "/" + relative
            var info = stat()
            guard lstat(path, &info) == 0 else { continue }
            if info.st_mode & S_IFMT == S_IFLNK, stat(path, &info) != 0 { continue }
            switch info.st_mode & S_IFMT {
            case S_IFREG, S_IFDIR, S_IFLNK: continue
            default: found.append(relative)
            }
            if found.count >= limit { break }
        }
        return found.sorted()
    }
}
