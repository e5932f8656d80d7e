import BinderCrypto
import BinderFormat
import BinderGit
import Foundation
import Logging
import Synchronization
import SystemPackage

/// The commit path: one plan at a time is encrypted, committed compare-and-swap onto the
/// snapshot it was planned against, made durable, and shown. It exists so that every change
/// through the view is exactly one commit, in order; when `main` moved underneath (a sync),
/// the snapshot is reloaded and the change planned again.
final class Committer: Sendable {
    /// What the mount's sync engine hangs on the view (see `BinderView.setSyncHooks`).
    struct Hooks: Sendable {
        var onCommit: (@Sendable (ObjectID) -> Void)?
        var status: (@Sendable () -> String)?
        /// Told the view paths a commit from elsewhere changed (the FUSE bridge drops what the
        /// kernel cached of them).
        var onStale: (@Sendable ([String]) -> Void)?
        /// Told, once it is shown, of every change of the commit shown (this view's commits and
        /// those from elsewhere): `.binder/` is worked out of it. Runs with the write lock held:
        /// it must only signal.
        var onShown: (@Sendable () -> Void)?
    }

    let repository: GitRepository
    let key: NIP44.ConversationKey
    let logger: Logger
    let branch: String
    /// Name and e-mail of the commits; each commit takes the time of its own save.
    let authorName: String
    let authorEmail: String
    let listings: ListingCache
    /// Serialises plan-and-commit, and the adoption of commits from elsewhere. Taken before any
    /// other lock of the view, never inside one.
    let writeLock = Mutex(())
    /// Guards the hooks; read (copied out) before calling them, never held across a call.
    let hooks = Mutex(Hooks())

    /// How often a plan is made again when `main` moved under it before giving up.
    static let attempts = 3

    /// Packing after commits (see `packWhenDue`). Guarded by `packing`.
    struct PackingState {
        /// Commits since the last fold started; at first, the packs the repository holds when
        /// they have piled up (`piledUp`: a save writes one), so that packs left by mounts
        /// that ended before their fold came due are folded too.
        var commits: Int
        /// The next packing must be a full repack (a binder full of loose objects).
        var repackNext: Bool
        var repacking = false
        /// Folds running, and the packs they roll (no two folds take the same pack).
        var folds = 0
        var claimed: Set<String> = []
    }
    let packing: Mutex<PackingState>
    /// Each commit writes a small pack (its blob, the trees on its path, the commit); every
    /// `foldEvery` commits the packs are folded geometrically (`GitPacks.foldPacks`).
    static let foldEvery = 32
    /// Folds at once: a long one rolling the large packs, and one keeping up with the saves.
    static let foldsAtOnce = 2
    /// Packs one fold rolls at most. Packs piled up unfolded (hundreds of short mounts) are
    /// folded in steps, each soon done (a save's pack in a folder of 100,000 records holds a
    /// 7 MB tree), one after the other.
    static let packsPerFold = 64
    /// The nice value of the packing thread (`start`).
    static let packingNiceness: Int32 = 10
    /// Loose objects (estimated) past which the first save repacks everything instead: a binder
    /// imported file by file before saves wrote packs.
    static let looseForRepack = 1_000

    init(repository: GitRepository, key: NIP44.ConversationKey, logger: Logger, branch: String, author: Signature,
         listings: ListingCache) {
        self.repository = repository
        self.key = key
        self.logger = logger
        self.branch = branch
        authorName = author.name
        authorEmail = author.email
        self.listings = listings
        packing = Mutex(PackingState(commits: Self.piledUp(repository.packs.packCount()),
                                     repackNext: Self.estimatedLooseObjects(gitDirectory: repository.gitDirectory) >= Self.looseForRepack))
    }

    /// About how many loose objects the repository holds. (They spread evenly over the 256
    /// `objects/xx` folders; one folder is counted.)
    private static func estimatedLooseObjects(gitDirectory: String) -> Int {
        let sample = (try? FileManager.default.contentsOfDirectory(atPath: gitDirectory + "/objects/00"))?.count ?? 0
        return sample * 256
    }

    /// A packing job started by `packWhenDue`.
    private enum PackJob { case repack, fold }

    /// Counts a commit; every `foldEvery` commits folds the packs (or, the first time in a
    /// binder full of loose objects, repacks everything), on a thread of its own, through a
    /// second instance of the repository, so that saves go on meanwhile (both remove only what
    /// their durable new pack holds: a kill at any point loses nothing). While a fold rolls the
    /// large packs, a second one may roll the small packs written meanwhile; a fold that came
    /// due while two ran starts when one ends, so packs do not pile up behind a long fold.
    private func packWhenDue() {
        let job = packing.withLock { state -> PackJob? in
            state.commits += 1
            return nextPackJob(&state)
        }
        if let job { start(job) }
    }

    /// `packs` when they are more than folding keeps (their sizes double: a few dozen at most),
    /// to be counted as commits towards the next fold; else 0.
    static func piledUp(_ packs: Int) -> Int { packs >= foldEvery ? packs : 0 }

    /// Starts the packing that is due without waiting for a commit: at mount, when earlier
    /// mounts left `foldEvery` packs or more unfolded (or a binder full of loose objects).
    func packIfDue() {
        if let job = packing.withLock({ nextPackJob(&$0) }) { start(job) }
    }

    /// The packing job due now, if any, marked as running in `state` (`packing`'s, held).
    private func nextPackJob(_ state: inout PackingState) -> PackJob? {
        guard !state.repacking else { return nil }
        if state.repackNext {
            guard state.folds == 0 else { return nil }
            state.repackNext = false
            state.repacking = true
            state.commits = 0
            return .repack
        }
        guard state.commits >= Self.foldEvery, state.folds < Self.foldsAtOnce else { return nil }
        state.commits = 0
        state.folds += 1
        return .fold
    }

    /// Runs `job` on a thread of its own; when it ends, starts the next one if due.
    private func start(_ job: PackJob) {
        let path = repository.gitDirectory
        Thread.detachNewThread { [self] in
            // Packing is work nobody waits for: on a machine of two cores its thread gives way
            // to the threads answering the kernel, a save among them. (Linux keeps a nice value
            // per thread; 0 names the calling one.)
            _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, Self.packingNiceness)
            // The fold's packs are chosen here, off the save path (a few hundred small reads:
            // pack index headers, the loose objects' folders), and claimed in the same lock.
            let plan = job == .fold ? packing.withLock { state in
                let plan = repository.packs.foldPlan(skipping: state.claimed, maxPacks: Self.packsPerFold)
                state.claimed.formUnion(plan.packs)
                return plan
            } : nil
            var removedPacks: Int?
            do {
                let repository = try GitRepository.open(path: path)
                let result = try plan.map { plan throws(GitError) in try repository.packs.fold(plan) } ?? repository.packs.repack()
                removedPacks = result.packsRemoved
                if result.objects > 0 {
                    logger.info("packed", metadata: ["objects": "\(result.objects)", "loose removed": "\(result.looseRemoved)",
                                                     "packs removed": "\(result.packsRemoved)"])
                }
            } catch {
                logger.warning("packing failed (the objects stay where they are): \(error)")
            }
            // The packs rolled up are removed: the view's instance closes them now.
            self.repository.releaseRemovedPacks()
            // A fold held to `packsPerFold` left packs it would have rolled: the next step
            // starts now. (Not for every fold that leaves many packs: during a fast import
            // that doubled the folds, each rolling a few packs.) One that removed nothing is
            // not repeated until saves call for one.
            let stepsLeft = plan?.packs.count == Self.packsPerFold && (removedPacks ?? 0) > 0
            let next = packing.withLock { state -> PackJob? in
                if let plan {
                    state.folds -= 1
                    state.claimed.subtract(plan.packs)
                    if stepsLeft { state.commits = max(state.commits, Self.foldEvery) }
                } else {
                    state.repacking = false
                }
                // Commits made meanwhile may have made the next fold due already.
                return nextPackJob(&state)
            }
            if let next { start(next) }
        }
    }

    /// Whether no fold or repack is running (for tests, which read the repository with stock
    /// git only once packing is done: a fold removes packs a reader may have listed).
    var isPackingIdle: Bool { packing.withLock { $0.folds == 0 && !$0.repacking } }

    /// Plans against the current snapshot and commits; on a concurrent update, reloads and
    /// plans again. Returns the commit made, or nil when the plan changed nothing.
    @discardableResult
    func commit(_ plan: () throws(WriteError) -> WritePlan) throws(WriteError) -> ObjectID? {
        try writeLock.withLock { _ throws(WriteError) -> ObjectID? in
            for attempt in 1...Self.attempts {
                let planned = try plan()
                if planned.changes.isEmpty { return nil }
                let parent = listings.snapshot.commit
                let (changes, blobs) = try encrypt(planned.changes)
                do {
                    let author = Signature(name: authorName, email: authorEmail, time: Date())
                    let id = try repository.commits.commitChanges(onto: parent, changes: changes, message: planned.message, author: author,
                                                          branch: branch, blobs: blobs)
                    try adopt(commitOnTop: id, changes: changes)
                    let hooks = self.hooks.withLock { $0 }
                    hooks.onShown?()
                    hooks.onCommit?(id)
                    followInWorkTree(changes)
                    packWhenDue()
                    logger.debug("committed", metadata: ["message": "\(planned.message)", "paths": "\(changes.map(\.path))"])
                    return id
                } catch let error as GitError where error.isConcurrentUpdate && attempt < Self.attempts {
                    logger.info("main moved under a write; planning again")
                    do { try adoptArrivedLocked(commit: try repository.refs.branchTip(branch)) } catch {
                        throw WriteError.storage(path: planned.changes.first?.gitPath ?? "", reason: "\(error)", code: Self.code(of: error))
                    }
                } catch let error as WriteError {
                    throw error
                } catch {
                    throw WriteError.storage(path: planned.changes.first?.gitPath ?? "", reason: "\(error)", code: Self.code(of: error))
                }
            }
            return nil
        }
    }

    /// Encrypts what the plan holds in plaintext: the tree changes, and the blobs they name,
    /// which `commitChanges` stores in the commit's pack.
    private func encrypt(_ planned: [PlannedChange]) throws(WriteError) -> ([TreeChange], [[UInt8]]) {
        var changes: [TreeChange] = []
        var blobs: [[UInt8]] = []
        var documents: [(blob: ObjectID, json: [UInt8])] = []
        func blob(_ bytes: [UInt8]) throws(GitError) -> ObjectID {
            blobs.append(bytes)
            return try GitObjects.blobID(of: bytes)
        }
        for change in planned {
            do {
                switch change {
                case .document(let gitPath, let json):
                    let id = try blob(Array(try NIP44.encrypt(json, key: key).utf8))
                    changes.append(.write(path: gitPath, blob: id))
                    documents.append((id, json))
                case .folderMetadata(let gitPath, let json):
                    changes.append(.write(path: gitPath, blob: try blob(Array(try NIP44.encrypt(json, key: key).utf8))))
                case .sidecar(let gitPath, let content):
                    changes.append(.write(path: gitPath, blob: try blob(try Sidecar.encrypt(content, key: key))))
                case .blob(let gitPath, let id):
                    changes.append(.write(path: gitPath, blob: id))
                case .delete(let gitPath):
                    changes.append(.delete(path: gitPath))
                }
            } catch {
                if case NIP44.Error.plaintextSize(let n) = error {
                    throw .tooLarge(path: change.gitPath, bytes: n, limit: WriteLimits.documentMaximum)
                }
                throw .storage(path: change.gitPath, reason: "\(error)", code: Self.code(of: error))
            }
        }
        // The listing's patch and the next save of these records read them from here.
        listings.written.keep(documents)
        return (changes, blobs)
    }

    /// The system's reason for a storage failure: the errno of the failing call where the git
    /// store kept it (a full disk is ENOSPC, not EIO), else EIO.
    static func code(of error: any Error) -> Errno {
        if let error = error as? GitError, let code = error.posixErrno { return Errno(rawValue: code) }
        return .ioError
    }

    /// On a non-bare repository the work tree (ciphertext) and index follow each commit, so
    /// that `git status` stays clean. A failure here loses nothing: the commit is made.
    private func followInWorkTree(_ changes: [TreeChange]) {
        guard !repository.isBare else { return }
        do { try repository.checkout.syncWorkTreeToHead(paths: changes.map(\.path)) } catch {
            logger.warning("work tree not updated: \(error)")
        }
    }

    // MARK: - Showing commits

    /// Shows this view's own commit `id`, made of `changes` on top of the snapshot shown
    /// (`writeLock` held): only the folders it touched are read again.
    private func adopt(commitOnTop id: ObjectID, changes: [TreeChange]) throws {
        if try adoptByPatching(commitOnTop: id, changes: changes) { return }
        let base = listings.snapshot
        guard base.commit != nil else { return listings.adopt(try Snapshot.load(repository, commit: id), changes: changes) }
        let next = try base.advanced(to: id, changes: changes, repository: repository)
        #if DEBUG
        // The incremental snapshot must equal a full read (tests run debug builds).
        let full = try Snapshot.load(repository, commit: id)
        precondition(full.gitFolders == next.gitFolders, "incremental snapshot differs from a full read after \(changes)")
        #endif
        let patches = listings.patches(for: changes, from: base, to: next)
        listings.adopt(next, changes: changes, patches: patches)
        #if DEBUG
        listings.checkPatches(patches)
        #endif
    }

    /// `adopt` for a save: the snapshot shown is patched in place (`Snapshot.patch`), its
    /// folders not copied. False when the changes are not a save's (nothing changed then).
    private func adoptByPatching(commitOnTop id: ObjectID, changes: [TreeChange]) throws -> Bool {
        // The copy of the snapshot read here lives only in this closure, gone before the patch
        // is applied: the one shown is then the only holder of its folders' entries, which
        // are patched where they are.
        let prepared = try { () throws -> (SnapshotPatch, [String: ListingPatch])? in
            let base = listings.snapshot
            guard let patch = try base.patch(to: id, changes: changes, repository: repository) else { return nil }
            return (patch, listings.patches(for: changes, from: base, to: base.atCommit(of: patch)))
        }()
        guard let (patch, patches) = prepared, listings.adopt(applying: patch, changes: changes, patches: patches) else { return false }
        #if DEBUG
        // The patched snapshot must equal a full read (tests run debug builds).
        let full = try Snapshot.load(repository, commit: id)
        precondition(full.gitFolders == listings.snapshot.gitFolders, "patched snapshot differs from a full read after \(changes)")
        listings.checkPatches(patches)
        #endif
        return true
    }

    /// Shows `commit`, which moved the branch from elsewhere (`writeLock` held), and returns
    /// the view paths whose names, attributes or contents changed, their folders included.
    /// Only listings of the git folders that changed are rebuilt; paths the kernel never saw
    /// (folders not listed yet) are not returned.
    @discardableResult
    func adoptArrivedLocked(commit: ObjectID?) throws -> [String] {
        let old = listings.snapshot
        guard old.commit != commit else { return [] }
        let new = try Snapshot.load(repository, commit: commit)
        var changed: [TreeChange] = []
        for folder in Set(old.gitFolders.keys).union(new.gitFolders.keys) {
            let before = old.gitFolders[folder] ?? [], after = new.gitFolders[folder] ?? []
            if before == after { continue }
            let beforeByPath = Dictionary(before.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
            let afterByPath = Dictionary(after.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
            for path in Set(beforeByPath.keys).union(afterByPath.keys) where beforeByPath[path] != afterByPath[path] {
                changed.append(.delete(path: path))
            }
            if old.gitFolders[folder] == nil || new.gitFolders[folder] == nil { changed.append(.delete(path: folder)) }
        }
        let oldListings = listings.builtListings
        listings.adopt(new, changes: changed)
        hooks.withLock { $0 }.onShown?()
        let kept = Set(listings.builtListings.keys)

        var stale: [String] = []
        for (folder, oldListing) in oldListings where !kept.contains(folder) {
            let newNodes = (try? listings.listing(folder))?.nodes
            var folderChanged = newNodes == nil
            for name in Set(oldListing.nodes.keys).union(newNodes?.keys ?? [:].keys) {
                let a = oldListing.nodes[name], b = newNodes?[name]
                if a?.source != b?.source || a?.size != b?.size || a?.modified != b?.modified {
                    stale.append(join(folder, name))
                    folderChanged = true
                }
            }
            if folderChanged { stale.append(folder) }
        }
        logger.info("showing a commit from elsewhere", metadata: ["commit": "\(commit?.hex ?? "none")", "stale_paths": "\(stale.count)"])
        if !stale.isEmpty { hooks.withLock { $0 }.onStale?(stale) }
        return stale
    }
}
