internal import CGit2
import Foundation

/// The work tree of a non-bare repository, kept matching HEAD after commits (bare
/// repositories, which binder makes, have none). `GitRepository.checkout`.
public struct GitCheckout: Sendable {
    /// The repository whose handle this owner uses, under its lock.
    let repository: GitRepository

    /// For a non-bare repository: makes the index and the work tree match
    /// HEAD (a forced checkout: tracked files are rewritten or removed,
    /// untracked files are left alone), so that `git status` stays clean after
    /// `GitCommits.commitChanges`. No-op for a bare repository or an unborn HEAD.
    /// `paths` limits the checkout to what a commit changed (pathspecs: a folder covers what is
    /// under it); nil checks out everything.
    ///
    /// A symbolic link in the work tree where HEAD has a file or folder is removed first (see
    /// `removeLinksInTheWay`): nothing in a repository can make the checkout write or delete
    /// outside the work tree. libgit2 itself refuses paths with `..` or `.git` components.
    public func syncWorkTreeToHead(paths: [String]? = nil) throws(GitError) {
        guard !repository.isBare, let workTree = repository.workTree else { return }
        if let head = try headCommit() {
            try removeLinksInTheWay(workTree: workTree, commit: head, paths: paths)
        }
        try repository.locked { () throws(GitError) in
            var options = git_checkout_options()
            try check(git_checkout_options_init(&options, UInt32(GIT_CHECKOUT_OPTIONS_VERSION)),
                      "init checkout options")
            options.checkout_strategy = GIT_CHECKOUT_FORCE.rawValue
            var cStrings: [UnsafeMutablePointer<CChar>?] = (paths ?? []).map { strdup($0) }
            defer { cStrings.forEach { free($0) } }
            let rc = cStrings.withUnsafeMutableBufferPointer { buffer -> Int32 in
                if paths != nil {
                    options.paths = git_strarray(strings: buffer.baseAddress, count: buffer.count)
                }
                return git_checkout_head(repository.repo.pointer, &options)
            }
            if rc == GIT_EUNBORNBRANCH.rawValue { return }
            try check(rc, "check out HEAD into '\(workTree)'")
        }
    }

    /// The commit HEAD points at; nil when HEAD is unborn.
    private func headCommit() throws(GitError) -> ObjectID? {
        try repository.locked { () throws(GitError) -> ObjectID? in
            var oid = git_oid()
            let rc = git_reference_name_to_id(&oid, repository.repo.pointer, "HEAD")
            if rc == GIT_ENOTFOUND.rawValue || rc == GIT_EUNBORNBRANCH.rawValue { return nil }
            try check(rc, "resolve HEAD")
            return ObjectID(&oid)
        }
    }

    /// A checkout writes and deletes through the work tree as it finds it: a symbolic link
    /// where `commit` has a file or a folder (left by an earlier tree that had a link there,
    /// checked out by binder or by stock git) would lead it outside the work tree: writing
    /// `link` writes the file it points at, deleting `link/x.json` deletes a file in the folder
    /// it points at. Such links are removed first, the link itself and never what it points
    /// at, as git does. The paths to be checked out, their folders and what is below them (all
    /// of `commit` for nil) are looked at, shallow first; a path with an unsafe component
    /// (`..`, `.git`) is left alone (the checkout refuses it).
    private func removeLinksInTheWay(workTree: String, commit: ObjectID, paths: [String]?) throws(GitError) {
        var checked = Set<String>()
        func add(_ entry: TreeEntry) {
            if entry.kind == .tree || entry.kind == .blob { checked.insert(entry.path) }
        }
        if let paths {
            for path in paths {
                checked.formUnion(GitTrees.ancestors(of: path))
                guard let entry = (try? repository.trees.entry(at: path, commit: commit)) ?? nil else { continue }
                add(entry)
                if entry.kind == .tree, let below = (try? repository.trees.listFolder(commit: commit, path: path, recursive: true)) ?? nil {
                    below.forEach(add)
                }
            }
        } else {
            try repository.trees.listTree(commit: commit).forEach(add)
        }
        for path in checked.sorted(by: { $0.utf8.count < $1.utf8.count }) {
            guard let parts = try? GitTrees.components(of: path),
                  !parts.contains(where: { $0.lowercased() == ".git" }) else { continue }
            let full = workTree + "/" + path
            var info = stat()
            guard lstat(full, &info) == 0, info.st_mode & S_IFMT == S_IFLNK else { continue }
            // A link that stays would be written through: then no checkout at all.
            if unlink(full) != 0 {
                let code = errno
                guard code == ENOENT else {
                    throw .failed(operation: "remove the symbolic link '\(path)' before checking out",
                                  code: .other(-code), message: String(cString: strerror(code)))
                }
            }
        }
    }
}
