internal import CGit2
import Glibc

/// One committed version of a file: the commit that made it and the blob it holds.
public struct PathVersion: Sendable, Hashable {
    public let commit: ObjectID
    /// The committer's time (seconds since the epoch): when the version was saved.
    public let seconds: Int64
    public let blob: ObjectID
}

/// A file a commit removed that the tip no longer has, with its last content.
public struct DeletedFile: Sendable, Hashable {
    public let path: String
    /// The content it had just before it was removed.
    public let lastBlob: ObjectID
    /// The commit that removed it, and when.
    public let deletedIn: ObjectID
    public let seconds: Int64
}

/// What a walk over history found removed: each path some commit reachable from `tip`
/// removed, with its newest removal (newest first, as the walk met them), and the deleted
/// files, those of them that `tip` does not hold (not as a file, not as a folder). A path
/// whose newest removal moved its ciphertext elsewhere in the same commit (a rename) is in
/// neither.
/// `GitHistory.removals(from:extending:)` extends it to a later tip.
public struct Removals: Sendable {
    public let tip: ObjectID
    let newest: [DeletedFile]
    public let deleted: [DeletedFile]
}

/// The trees a walk over history read for the last two commits, by id: a commit's trees are
/// compared with its parent's, and in a line of commits that parent's are compared with its
/// own parent's next, so each tree is read once, not twice. (libgit2 keeps no tree over 4 KB
/// in its object cache, and a folder of 2,400 records is a 170 KB tree, read and hashed anew
/// each time.) Two commits' worth at most, so memory stays what one comparison needs.
struct RecentTrees {
    private var current: [ObjectID: TreeHandle] = [:]
    private var previous: [ObjectID: TreeHandle] = [:]
    private var currentRaw: [ObjectID: ParsedTree?] = [:]
    private var previousRaw: [ObjectID: ParsedTree?] = [:]

    mutating func tree(_ id: ObjectID, in repository: GitRepository) throws(GitError) -> TreeHandle {
        if let tree = current[id] ?? previous[id] {
            current[id] = tree
            return tree
        }
        let tree = try repository.objects.lookupTreeLocked(id)
        current[id] = tree
        return tree
    }

    /// The tree's bytes with its entries found; nil when they are not a list of entries.
    mutating func parsed(_ id: ObjectID, in repository: GitRepository) throws(GitError) -> ParsedTree? {
        if let tree = currentRaw[id] ?? previousRaw[id] {
            currentRaw[id] = tree
            return tree
        }
        let tree = ParsedTree(try repository.objects.treeContentLocked(id))
        currentRaw[id] = tree
        return tree
    }

    /// The walk moves on: what the commit before last read is let go.
    mutating func nextCommit() {
        previous = current
        current = [:]
        previousRaw = currentRaw
        currentRaw = [:]
    }
}

/// A tree's bytes with the place of each entry (`RawTree.Entry`), so that two versions of a
/// folder are compared without libgit2 parsing either into entry objects.
struct ParsedTree {
    let bytes: [UInt8]
    let entries: [RawTree.Entry]

    /// An entry of the old tree that `differences` reports, by name: a file the new tree lacks
    /// (`new` nil), or a folder and the id of the new tree's folder of its name (if any).
    typealias Difference = (name: [UInt8], isTree: Bool, old: ObjectID, new: ObjectID?)

    /// Nil when `bytes` are not a list of entries (`RawTree.entry`).
    init?(_ bytes: [UInt8]) {
        var entries: [RawTree.Entry] = []
        let whole = bytes.withUnsafeBytes { tree -> Bool in
            var position = 0
            while position < tree.count {
                guard let entry = RawTree.entry(in: tree, at: position) else { return false }
                entries.append(entry)
                position = entry.end
            }
            return true
        }
        guard whole else { return nil }
        self.bytes = bytes
        self.entries = entries
    }

    /// What of `old` `new` lacks or holds otherwise, as `removedLocked` needs it: each file of
    /// `old` with no file of its name in `new`, and each folder of `old` whose id differs
    /// from that of the folder of its name in `new` (nil: none), with its name. Entries the two
    /// hold byte for byte alike at their start and at their end (all but what a save changed)
    /// are skipped by comparing bytes; the rest are walked side by side in git's order. Nil
    /// when the entries in between are not in git's order or have a mode not in git's
    /// spelling: libgit2's entry-by-entry walk judges those.
    static func differences(from old: ParsedTree, to new: ParsedTree) -> [Difference]? {
        old.bytes.withUnsafeBytes { a -> [Difference]? in
            new.bytes.withUnsafeBytes { b -> [Difference]? in
                let x = old.entries, y = new.entries
                func same(_ i: Int, _ j: Int) -> Bool {
                    let e = x[i], f = y[j]
                    let length = e.end - e.mode.lowerBound
                    return length == f.end - f.mode.lowerBound && memcmp(a.baseAddress! + e.mode.lowerBound, b.baseAddress! + f.mode.lowerBound, length) == 0
                }
                let shorter = min(x.count, y.count)
                var first = 0
                while first < shorter && same(first, first) { first += 1 }
                var last = 0
                while last < shorter - first && same(x.count - 1 - last, y.count - 1 - last) { last += 1 }
                let xEnd = x.count - last, yEnd = y.count - last
                // In git's order around and in between (as git and binder write trees): then
                // this answers as the entry-by-entry walk does. Otherwise that walk answers.
                func ordered(_ entries: [RawTree.Entry], _ end: Int, in tree: UnsafeRawBufferPointer) -> Bool {
                    let lower = max(first - 1, 0), upper = min(end, entries.count - 1)
                    return lower >= upper || (lower..<upper).allSatisfy { RawTree.compare(tree, entries[$0], tree, entries[$0 + 1]) < 0 }
                }
                guard ordered(x, xEnd, in: a), ordered(y, yEnd, in: b) else { return nil }
                var found: [Difference] = []
                var j = first
                for i in first..<xEnd {
                    let entry = x[i]
                    guard isCanonical(entry.mode, in: a) else { return nil }
                    var counterpart: RawTree.Entry?
                    while j < yEnd {
                        let candidate = y[j]
                        guard isCanonical(candidate.mode, in: b) else { return nil }
                        let order = RawTree.compare(b, candidate, a, entry)
                        if order < 0 { j += 1; continue }
                        if order == 0 { counterpart = candidate; j += 1 }
                        break
                    }
                    if let counterpart, memcmp(a.baseAddress! + entry.id.lowerBound, b.baseAddress! + counterpart.id.lowerBound, 20) == 0 { continue }
                    guard entry.isTree || counterpart == nil,
                          let id = ObjectID(bytes: UnsafeRawBufferPointer(rebasing: a[entry.id])) else { continue }
                    let newID = counterpart.flatMap { ObjectID(bytes: UnsafeRawBufferPointer(rebasing: b[$0.id])) }
                    found.append((Array(RawTree.name(of: entry, in: a)), entry.isTree, id, newID))
                }
                return found
            }
        }
    }

    /// Whether the mode bytes are one of git's spellings (the only modes binder and git write).
    private static func isCanonical(_ mode: Range<Int>, in tree: UnsafeRawBufferPointer) -> Bool {
        let bytes = UnsafeRawBufferPointer(rebasing: tree[mode])
        switch bytes.count {
        case 5: return bytes.elementsEqual("40000".utf8)
        case 6: return bytes.elementsEqual("100644".utf8) || bytes.elementsEqual("100755".utf8)
            || bytes.elementsEqual("120000".utf8) || bytes.elementsEqual("160000".utf8)
        default: return false
        }
    }
}

/// The history of a branch and of single files in it: first-parent logs, every commit
/// reachable from a tip (merges' other parents too, newest first), the versions of one path,
/// the files removed since, merge bases and ahead/behind counts. `GitRepository.history`.
public struct GitHistory: Sendable {
    /// The repository whose handle this owner uses, under its lock.
    let repository: GitRepository

    /// Commits a walk reads between two drops of its packs' caches (`dropPackCachesLocked`,
    /// on a walker with packs of its own): the caches then stay a few MiB, and the walk keeps
    /// most of what they save it (a tree's delta chain runs through the commits just before).
    static let commitsPerCacheDrop = 512

    /// The first-parent history of `branch`, newest first, at most `limit`
    /// commits; empty when the branch does not exist.
    public func log(branch: String = "main", limit: Int = Int.max) throws(GitError) -> [CommitInfo] {
        try repository.locked { () throws(GitError) in
            try logLocked(from: try repository.refs.tipLocked(branch: branch), limit: limit)
        }
    }

    /// The first-parent history starting at `start` (included), newest first.
    public func log(from start: ObjectID, limit: Int = Int.max) throws(GitError) -> [CommitInfo] {
        try repository.locked { () throws(GitError) in
            try logLocked(from: start, limit: limit)
        }
    }

    /// Every commit reachable from `tip`, newest first (by commit time, parents after children),
    /// at most `limit`.
    public func commits(from tip: ObjectID, limit: Int = Int.max) throws(GitError) -> [CommitInfo] {
        try repository.locked { () throws(GitError) in
            var result: [CommitInfo] = []
            for id in try walkLocked(from: tip) {
                guard result.count < limit else { break }
                result.append(try GitCommits.info(of: try repository.objects.lookupCommitLocked(id), id: id))
            }
            return result
        }
    }

    /// The versions of the file at `path` reachable from `tip`, newest first: each commit whose
    /// blob at `path` differs from the blob of every parent (a merge that took one side's
    /// version adds none; a merge that made a new one does), as `git log -- path` lists them.
    ///
    /// Each commit's blob is found through its folder's tree id, and what a folder tree holds
    /// under the name is remembered by that id: a commit that changed other folders shares the
    /// folder's tree with its parent and costs no read of it. (A walk read the folder's tree, a
    /// 170 KB object in a folder of 2,400 records, for each of 19,000 commits: 1.1–4.7 s for a
    /// record with one version.)
    ///
    /// `earlier` is this answer for an older tip, when known: as with `removals`, if `tip`
    /// descends from it by a line of commits with one parent each, only those are walked.
    public func versions(of path: String, from tip: ObjectID,
                         extending earlier: (tip: ObjectID, versions: [PathVersion])? = nil) throws(GitError) -> [PathVersion] {
        _ = try GitTrees.components(of: path)
        let (folder, name) = PathBytes.split(path)
        let folderComponents = folder.isEmpty ? [] : try GitTrees.components(of: folder)
        return try repository.locked { () throws(GitError) in
            var blobs: [ObjectID: ObjectID?] = [:]
            var inFolder: [ObjectID: ObjectID?] = [:]
            // Folders are read as a listing reads them (`folderLocked`): a crafted entry beside
            // the path does not stop the walk.
            func blob(_ commit: ObjectID) throws(GitError) -> ObjectID? {
                if let known = blobs[commit] { return known }
                let root = ObjectID(git_commit_tree_id(try repository.objects.lookupCommitLocked(commit).pointer))
                var folderTree: ObjectID? = root
                if !folder.isEmpty {
                    folderTree = try repository.trees.entryLocked(folderComponents, inTree: root).flatMap { TreeEntry.Kind(mode: $0.mode) == .tree ? $0.id : nil }
                }
                var found: ObjectID? = nil
                if let folderTree {
                    if let known = inFolder[folderTree] {
                        found = known
                    } else {
                        found = try repository.trees.entryLocked([Substring(name)], inTree: folderTree).flatMap { entry in
                            [.blob, .link].contains(TreeEntry.Kind(mode: entry.mode)) ? entry.id : nil
                        }
                        inFolder[folderTree] = found
                    }
                }
                blobs[commit] = found
                return found
            }
            var line: [ObjectID]? = nil
            if let earlier { line = try lineOfCommitsLocked(from: tip, down: earlier.tip) }
            let commits: [ObjectID]
            if let line { commits = line } else { commits = try walkLocked(from: tip) }
            var versions: [PathVersion] = []
            for (walked, id) in commits.enumerated() {
                if walked > 0 && walked % Self.commitsPerCacheDrop == 0 { repository.dropPackCachesLocked() }
                guard let current = try blob(id) else { continue }
                let commit = try repository.objects.lookupCommitLocked(id)
                let parents = (0..<git_commit_parentcount(commit.pointer)).map { ObjectID(git_commit_parent_id(commit.pointer, $0)) }
                var isNew = true
                for parent in parents where try blob(parent) == current { isNew = false }
                if isNew {
                    versions.append(PathVersion(commit: id, seconds: git_commit_time(commit.pointer), blob: current))
                }
            }
            // The commits before the line are the earlier walk's, and so are their versions.
            if line != nil, let earlier { versions += earlier.versions }
            return versions
        }
    }

    /// Every path some commit reachable from `tip` removed (`Removals`), and the deleted files
    /// among them: those `tip` does not hold, each with the content it had when last removed,
    /// newest removal first.
    ///
    /// `earlier` is this answer for an older tip, when known. If `tip` descends from it by a
    /// line of commits with one parent each (saves), only those commits are walked and the
    /// earlier answer extends theirs: a walk costs the commits since, not the whole history
    /// (19,000 commits took 3.8 s after every save). Otherwise (a merge, a rewritten branch)
    /// the whole history is walked. The answer is the same either way.
    public func removals(from tip: ObjectID, extending earlier: Removals? = nil) throws(GitError) -> Removals {
        try repository.locked { () throws(GitError) in
            var line: [ObjectID]? = nil
            if let earlier { line = try lineOfCommitsLocked(from: tip, down: earlier.tip) }
            let commits: [ObjectID]
            if let line { commits = line } else { commits = try walkLocked(from: tip) }
            var newest: [DeletedFile] = []
            var seen = Set<String>()
            var trees = RecentTrees()
            for (walked, id) in commits.enumerated() {
                if walked > 0 && walked % Self.commitsPerCacheDrop == 0 { repository.dropPackCachesLocked() }
                let commit = try repository.objects.lookupCommitLocked(id)
                let tree = ObjectID(git_commit_tree_id(commit.pointer))
                for index in 0..<git_commit_parentcount(commit.pointer) {
                    let parent = try repository.objects.lookupCommitLocked(ObjectID(git_commit_parent_id(commit.pointer, index)))
                    let parentTree = ObjectID(git_commit_tree_id(parent.pointer))
                    let removed = try removedLocked(from: parentTree, to: tree, trees: &trees)
                    guard !removed.isEmpty else { continue }
                    // A file whose ciphertext the same commit put at another path was moved
                    // there (a rename moves the ciphertext as it is): its newest removal is no
                    // deletion, even once the moved file changes.
                    let moved = Set(try removedLocked(from: tree, to: parentTree, trees: &trees).map(\.1))
                    for (path, blob) in removed where seen.insert(path).inserted && !moved.contains(blob) {
                        newest.append(DeletedFile(path: path, lastBlob: blob, deletedIn: id, seconds: git_commit_time(commit.pointer)))
                    }
                }
                trees.nextCommit()
            }
            // Removed before the line began, and not again since: the earlier walk's newest.
            if line != nil, let earlier {
                for file in earlier.newest where seen.insert(file.path).inserted { newest.append(file) }
            }
            let tipTree = ObjectID(git_commit_tree_id(try repository.objects.lookupCommitLocked(tip).pointer))
            var deleted: [DeletedFile] = []
            for file in newest {
                // (A path a crafted tree made, with an empty name in it, is no path to look up.)
                guard let components = try? GitTrees.components(of: file.path), try repository.trees.entryLocked(components, inTree: tipTree) != nil else {
                    deleted.append(file)
                    continue
                }
            }
            return Removals(tip: tip, newest: newest, deleted: deleted)
        }
    }

    /// The commits from `tip` down to `ancestor` (not included), newest first, when each has
    /// exactly one parent and the first-parent line reaches `ancestor`; nil otherwise (a
    /// merge, a root, or `ancestor` is not on the line). Empty when `tip` is `ancestor`. Lock held.
    private func lineOfCommitsLocked(from tip: ObjectID, down ancestor: ObjectID) throws(GitError) -> [ObjectID]? {
        var line: [ObjectID] = []
        var next = tip
        while next != ancestor {
            let commit = try repository.objects.lookupCommitLocked(next)
            guard git_commit_parentcount(commit.pointer) == 1 else { return nil }
            line.append(next)
            next = ObjectID(git_commit_parent_id(commit.pointer, 0))
        }
        return line
    }

    /// Commit ids from `tip`, newest first. Lock held.
    private func walkLocked(from tip: ObjectID) throws(GitError) -> [ObjectID] {
        try walkLocked("walk history from \(tip)") { (walk) throws(GitError) in
            var start = tip.oid
            try check(git_revwalk_push(walk, &start), "walk history from \(tip)")
            return true
        } ?? []
    }

    /// Commit ids, newest first (parents after children, then by time), from where `push`
    /// starts the walk (a `git_revwalk *`); nil when it started none. Lock held.
    func walkLocked(_ operation: String, push: (OpaquePointer) throws(GitError) -> Bool) throws(GitError) -> [ObjectID]? {
        var pointer: OpaquePointer?
        try check(git_revwalk_new(&pointer, repository.repo.pointer), operation)
        let walk = RevwalkHandle(pointer!)
        try check(git_revwalk_sorting(walk.pointer, GIT_SORT_TOPOLOGICAL.rawValue | GIT_SORT_TIME.rawValue), operation)
        guard try push(walk.pointer) else { return nil }
        var ids: [ObjectID] = []
        var oid = git_oid()
        while true {
            let rc = git_revwalk_next(&oid, walk.pointer)
            if rc == GIT_ITEROVER.rawValue { break }
            try check(rc, operation)
            ids.append(ObjectID(&oid))
        }
        return ids
    }

    /// Files in tree `old` that tree `new` lacks, with their blob in `old`. Folders with the
    /// same id on both sides are not entered: a commit costs what it changed, not the size of
    /// the tree. The two trees' bytes are compared (`ParsedTree.differences`): what they hold
    /// alike at their start and end is skipped by comparing bytes, and only the entries in
    /// between are compared by name. (Walked entry by entry through libgit2's parsed trees, the
    /// comparisons were most of a cold walk: 5.7 s for 19,000 commits of a folder of 2,400
    /// records.) Trees that are not plain entries in git's order and spelling go through
    /// libgit2 (`removedParsedLocked`). Lock held.
    ///
    /// A folder entry whose object is missing or is not a tree (a crafted tree's) holds no
    /// files: nothing is removed from it, and everything is from a folder that became one.
    private func removedLocked(from old: ObjectID, to new: ObjectID?, prefix: String = "",
                               trees: inout RecentTrees) throws(GitError) -> [(String, ObjectID)] {
        let parsedOld: ParsedTree?
        do { parsedOld = try trees.parsed(old, in: repository) } catch {
            if !repository.objects.isTreeObjectLocked(old) { return [] }
            throw error
        }
        guard let oldTree = parsedOld else { return try removedParsedLocked(from: old, to: new, prefix: prefix, trees: &trees) }
        var newTree = ParsedTree([])
        if let new {
            do { newTree = try trees.parsed(new, in: repository) } catch {
                if repository.objects.isTreeObjectLocked(new) { throw error }
                return try removedLocked(from: old, to: nil, prefix: prefix, trees: &trees)
            }
        }
        guard let newTree, let differences = ParsedTree.differences(from: oldTree, to: newTree) else {
            return try removedParsedLocked(from: old, to: new, prefix: prefix, trees: &trees)
        }
        var removed: [(String, ObjectID)] = []
        for difference in differences {
            let name = prefix + String(decoding: difference.name, as: UTF8.self)
            if difference.isTree {
                removed += try removedLocked(from: difference.old, to: difference.new, prefix: name + "/", trees: &trees)
            } else {
                removed.append((name, difference.old))
            }
        }
        #if DEBUG
        // Debug builds (the tests) hold the byte comparison to libgit2's, wherever libgit2 reads both.
        if let checked = try? removedParsedLocked(from: old, to: new, prefix: prefix, trees: &trees) {
            precondition(checked.map(\.0) == removed.map(\.0) && checked.map(\.1) == removed.map(\.1),
                         "the trees' bytes and libgit2 differ on what \(new.map(\.hex) ?? "nothing") lacks of \(old)")
        }
        #endif
        return removed
    }

    /// `removedLocked` through libgit2's parsed trees, entry by entry: each tree's entries are
    /// in git's order, so they are walked side by side (one name comparison an entry, no lookup
    /// by name), and a name becomes a Swift string only when its entry was removed or is a
    /// folder to enter. Lock held.
    private func removedParsedLocked(from oldID: ObjectID, to newID: ObjectID?, prefix: String,
                                     trees: inout RecentTrees) throws(GitError) -> [(String, ObjectID)] {
        let old = try trees.tree(oldID, in: repository)
        let new = try newID.map { (id) throws(GitError) in try trees.tree(id, in: repository) }
        var removed: [(String, ObjectID)] = []
        let newCount = new.map { git_tree_entrycount($0.pointer) } ?? 0
        var j = 0
        for index in 0..<git_tree_entrycount(old.pointer) {
            guard let entry = git_tree_entry_byindex(old.pointer, index), let rawName = git_tree_entry_name(entry) else { continue }
            let isTree = git_tree_entry_type(entry) == GIT_OBJECT_TREE
            // The entry of `new` with this name and kind (file or folder), if any.
            var counterpart: OpaquePointer?
            while let new, j < newCount, let candidate = git_tree_entry_byindex(new.pointer, j),
                  let candidateName = git_tree_entry_name(candidate) {
                let order = Self.gitOrder(candidateName, git_tree_entry_type(candidate) == GIT_OBJECT_TREE, rawName, isTree)
                if order < 0 { j += 1; continue }
                if order == 0 { counterpart = candidate; j += 1 }
                break
            }
            if let counterpart, git_oid_equal(git_tree_entry_id(counterpart), git_tree_entry_id(entry)) == 1 { continue }
            let id = ObjectID(git_tree_entry_id(entry))
            let name = String(cString: rawName)
            if isTree {
                let newTree = counterpart.map { ObjectID(git_tree_entry_id($0)) }
                removed += try removedParsedLocked(from: id, to: newTree, prefix: prefix + name + "/", trees: &trees)
            } else if counterpart == nil {
                removed.append((prefix + name, id))
            }
        }
        return removed
    }

    /// Git's order of tree entries (`base_name_compare`): bytewise, a folder's name compared
    /// as if it ended in '/'. Negative when `a` comes first, 0 for the same name and kind.
    static func gitOrder(_ a: UnsafePointer<CChar>, _ aIsTree: Bool, _ b: UnsafePointer<CChar>, _ bIsTree: Bool) -> Int {
        var index = 0
        while true {
            let x = UInt8(bitPattern: a[index]), y = UInt8(bitPattern: b[index])
            if x == 0 || y == 0 || x != y {
                // A name that ended compares as its kind's terminator ('/' for a folder).
                let left = x != 0 ? x : (aIsTree ? UInt8(ascii: "/") : 0)
                let right = y != 0 ? y : (bIsTree ? UInt8(ascii: "/") : 0)
                return Int(left) - Int(right)
            }
            index += 1
        }
    }


    /// The best common ancestor of two commits; nil when their histories are unrelated.
    public func mergeBase(_ one: ObjectID, _ two: ObjectID) throws(GitError) -> ObjectID? {
        try repository.locked { () throws(GitError) in
            var out = git_oid()
            var a = one.oid, b = two.oid
            let rc = git_merge_base(&out, repository.repo.pointer, &a, &b)
            if rc == GIT_ENOTFOUND.rawValue { return nil }
            try check(rc, "find the merge base of \(one) and \(two)")
            return ObjectID(&out)
        }
    }

    /// How many commits `local` has that `upstream` lacks, and the reverse. A nil side counts
    /// as an empty history. Asked at every read of a mount's status: the last answer is kept,
    /// and a local branch that only moved forward is counted from where it was (see
    /// `CommitCount`), so that a status read costs the commits made since, not the history.
    public func aheadBehind(local: ObjectID?, upstream: ObjectID?) throws(GitError) -> (ahead: Int, behind: Int) {
        try repository.locked { () throws(GitError) in
            if let last = repository.lastCount, last.local == local, last.upstream == upstream { return (last.ahead, last.behind) }
            let counted: (ahead: Int, behind: Int)
            switch (local, upstream) {
            case (nil, nil): counted = (0, 0)
            case (let local?, nil): counted = (try countCommitsLocked(from: local, since: repository.lastCount), 0)
            case (nil, let upstream?): counted = (0, try countReachableLocked(from: upstream, hiding: nil))
            case (let local?, let upstream?):
                var ahead = 0, behind = 0
                var a = local.oid, b = upstream.oid
                try check(git_graph_ahead_behind(&ahead, &behind, repository.repo.pointer, &a, &b), "count commits ahead/behind")
                counted = (ahead, behind)
            }
            repository.lastCount = CommitCount(local: local, upstream: upstream, ahead: counted.ahead, behind: counted.behind)
            return counted
        }
    }

    /// The commits reachable from `tip`: those reachable from the tip counted last, plus the
    /// new ones, when that tip is an ancestor of this one (the branch moved forward); all of
    /// them otherwise. Lock held.
    private func countCommitsLocked(from tip: ObjectID, since last: CommitCount?) throws(GitError) -> Int {
        if let last, last.upstream == nil, let before = last.local {
            var a = tip.oid, b = before.oid
            if git_graph_descendant_of(repository.repo.pointer, &a, &b) == 1 {
                return last.ahead + (try countReachableLocked(from: tip, hiding: before))
            }
        }
        return try countReachableLocked(from: tip, hiding: nil)
    }

    /// How many commits are reachable from `tip` and not from `hidden`, walked in no order and
    /// never read whole (libgit2 parses only their parents). Lock held.
    private func countReachableLocked(from tip: ObjectID, hiding hidden: ObjectID?) throws(GitError) -> Int {
        let operation = "count the commits of \(tip)"
        var pointer: OpaquePointer?
        try check(git_revwalk_new(&pointer, repository.repo.pointer), operation)
        let walk = RevwalkHandle(pointer!)
        var start = tip.oid
        try check(git_revwalk_push(walk.pointer, &start), operation)
        if let hidden {
            var hide = hidden.oid
            try check(git_revwalk_hide(walk.pointer, &hide), operation)
        }
        var count = 0
        var oid = git_oid()
        while true {
            let rc = git_revwalk_next(&oid, walk.pointer)
            if rc == GIT_ITEROVER.rawValue { return count }
            try check(rc, operation)
            count += 1
        }
    }

    private func logLocked(from start: ObjectID?, limit: Int) throws(GitError) -> [CommitInfo] {
        var result: [CommitInfo] = []
        var next = start
        while let id = next, result.count < limit {
            let info = try GitCommits.info(of: try repository.objects.lookupCommitLocked(id), id: id)
            result.append(info)
            next = info.parents.first
        }
        return result
    }
}

/// An answer of `GitHistory.aheadBehind`, kept for the next question.
struct CommitCount {
    let local: ObjectID?
    let upstream: ObjectID?
    let ahead: Int
    let behind: Int
}
