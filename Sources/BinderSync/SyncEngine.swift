import BinderCore
import BinderCrypto
import BinderGit
import Foundation
import Logging
import Synchronization

/// What one sync did.
public struct SyncReport: Sendable {
    public var outcome: MergeOutcome = .upToDate
    /// Commits sent to the server.
    public var pushedCommits = 0
    /// True when this sync created the repository on the server (push-to-create).
    public var createdOnServer = false
    /// The local branch's tip afterwards.
    public var tip: ObjectID?
}

/// Fetch, merge, push for one binder: offline-first (commits wait in git until a sync lands
/// them), history never rewritten, concurrent local commits welcome (every ref update is a
/// compare-and-swap; a lost race is merged again).
public final class SyncEngine: Sendable {
    /// Its own repository instance: the network work holds its lock for whole transfers, and
    /// must never block the mount's readers.
    let repository: GitRepository
    let key: NIP44.ConversationKey
    public let session: ServerSession
    public let target: SyncTarget
    let author: Signature
    let logger: Logger
    let progress: (@Sendable (TransferProgress) -> Void)?
    /// How each request of a transfer is retried.
    let retry: RetryPolicy
    /// One sync at a time per engine.
    private let running = Mutex(())

    public init(repositoryPath: String, key: NIP44.ConversationKey, session: ServerSession, target: SyncTarget,
                author: Signature, logger: Logger, progress: (@Sendable (TransferProgress) -> Void)? = nil,
                retry: RetryPolicy = .request) throws {
        repository = try GitRepository.open(path: repositoryPath)
        self.key = key
        self.session = session
        self.target = target
        self.author = author
        self.logger = logger
        self.progress = progress
        self.retry = retry
    }

    var endpointURL: String { session.client.repositoryURL(target.repoId) }

    /// Brings the local branch and the server's together. Records the attempt in the binder's
    /// sync record either way.
    public func sync() throws(SyncError) -> SyncReport {
        let result: Result<SyncReport, SyncError> = running.withLock { _ in
            var record = SyncRecord.load(repository)
            let now = Int64(Date().timeIntervalSince1970)
            record.lastAttempt = now
            do {
                if SyncTarget.rotatedFrom(repository) != nil, SyncTarget.read(repository) == target {
                    // Its history is under a new key now; the server's copy (repoId) is under the old.
                    throw SyncError.configuration("this binder was re-encrypted to a new key ('binder key rotate') and is not pushed under a new repository id yet: nothing was sent to \(target.server); unmount it and run 'binder sync', which moves it")
                }
                let report = try syncRounds()
                // Where it syncs is remembered once the server accepted it.
                if SyncTarget.read(repository) != target {
                    do { try target.write(repository) } catch { throw SyncError.configuration("cannot record the server: \(error)") }
                }
                record.lastSync = now
                record.lastError = nil
                record.conflicts = Array((record.conflicts + report.outcome.conflicts).suffix(SyncRecord.keptConflicts))
                record.save(repository)
                return .success(report)
            } catch {
                let failure = error as? SyncError ?? .configuration("\(error)")
                record.lastError = failure.description
                record.save(repository)
                return .failure(failure)
            }
        }
        return try result.get()
    }

    /// Fetches the server's branch into the tracking ref only (nothing merged): the tip, nil
    /// when the repository is empty or not there. A rotated binder looks at a candidate for
    /// its moved copy this way (`RotatedHistoryJoin`).
    public func fetchOnly() throws(SyncError) -> ObjectID? {
        try running.withLock { _ throws(SyncError) in try fetch(neverSynced: true) }
    }

    /// Forgets what `fetchOnly` fetched (the tracking ref; its objects stay until git's gc).
    public func forgetFetched() throws(SyncError) {
        try git { () throws(GitError) in try repository.refs.removeReference(GitRefs.trackingRef()) }
    }

    private func syncRounds() throws(SyncError) -> SyncReport {
        var report = SyncReport()
        var changed: [String] = []
        // Never fetched nor pushed, with commits of its own: push first. limbo.health creates
        // the repository on the push's advertisement and answers 403 to a fetch of an id that
        // does not exist yet; a push refused as not a fast-forward means another device made it
        // first (fetch and merge below).
        // A binder moving to another server counts as never synced there.
        let tracking = try git { () throws(GitError) in try repository.refs.reference(GitRefs.trackingRef()) }
        let neverSynced = SyncTarget.read(repository) != target || tracking == nil
        if neverSynced, let local = try git({ () throws(GitError) in try repository.refs.branchTip() }) {
            let commits = try git { () throws(GitError) in try repository.history.aheadBehind(local: local, upstream: nil).ahead }
            switch try push(neverSynced: true) {
            case .updated:
                report.pushedCommits = commits
                report.createdOnServer = true
                report.tip = local
                logger.info("pushed a binder never synced", metadata: ["commits": "\(commits)"])
                return report
            case .rejected(let why):
                logger.info("first push refused, fetching", metadata: ["reason": "\(why)"])
            }
        }
        // A refusal with the server's branch where it was is no race: the server refused the
        // commits themselves (a hook, a quota, a check), and saying "synced" would hide it.
        var refused: (why: String, remoteTip: ObjectID?)?
        for _ in 0..<4 {
            let remoteTip = try fetch(neverSynced: neverSynced)
            if let refused, refused.remoteTip == remoteTip { throw .rejected(refused.why) }
            let outcome = try mergeRetrying(remote: remoteTip)
            changed += outcome.changedPaths
            if case .upToDate = outcome {} else { report.outcome = Self.combine(report.outcome, outcome) }
            let local = try git { () throws(GitError) in try repository.refs.branchTip() }
            report.tip = local
            let ahead = try git { () throws(GitError) in try repository.history.aheadBehind(local: local, upstream: remoteTip).ahead }
            if ahead == 0 { break }
            switch try push(neverSynced: false) {
            case .updated:
                report.pushedCommits += ahead
                if remoteTip == nil { report.createdOnServer = true }
                logger.info("pushed", metadata: ["commits": "\(ahead)"])
                return finish(report, changed: changed)
            case .rejected(let why):
                // Someone pushed meanwhile: fetch and merge again.
                logger.info("push refused, merging again", metadata: ["reason": "\(why)"])
                refused = (why, remoteTip)
                continue
            }
        }
        if let refused { throw .rejected(refused.why) }
        return finish(report, changed: changed)
    }

    private func finish(_ report: SyncReport, changed: [String]) -> SyncReport {
        if !repository.isBare && !changed.isEmpty {
            // Pathspecs are matched one by one: past a few hundred, a full checkout is cheaper.
            let paths = Set(changed)
            do { try repository.checkout.syncWorkTreeToHead(paths: paths.count > 256 ? nil : Array(paths)) } catch {
                logger.warning("work tree not updated: \(error)")
            }
        }
        return report
    }

    private static func combine(_ a: MergeOutcome, _ b: MergeOutcome) -> MergeOutcome {
        switch (a, b) {
        case (.upToDate, _): return b
        case (_, .upToDate): return a
        case (.merged(_, let p1, let c1), .merged(let c, let p2, let c2)): return .merged(commit: c, changedPaths: p1 + p2, conflicts: c1 + c2)
        case (.merged(_, let p1, let c1), .fastForward(let to, let p2)): return .merged(commit: to, changedPaths: p1 + p2, conflicts: c1)
        case (.fastForward(_, let p1), .merged(let c, let p2, let c2)): return .merged(commit: c, changedPaths: p1 + p2, conflicts: c2)
        case (.fastForward(_, let p1), .fastForward(let to, let p2)): return .fastForward(to: to, changedPaths: p1 + p2)
        }
    }

    /// Merges, re-reading the local tip when a local commit lands during the merge (at most
    /// five tries in a row, without waiting: the other writer is this machine's).
    private func mergeRetrying(remote: ObjectID?) throws(SyncError) -> MergeOutcome {
        guard let remote else { return .upToDate }
        return try Self.mergeRetrying(repository: repository, key: key, remote: remote, author: author)
    }

    /// `mergeRetrying` for any repository whose branch `main` may move under the merge (a
    /// mounted view's commits): also the doctor's side of a share (`ScanAccess.pushMerging`).
    static func mergeRetrying(repository: GitRepository, key: NIP44.ConversationKey, remote: ObjectID,
                              author: Signature) throws(SyncError) -> MergeOutcome {
        try RetryPolicy(base: 0, maximum: 0, attempts: 5).run { () throws(SyncError) -> MergeOutcome in
            let local: ObjectID?
            do { local = try repository.refs.branchTip() } catch { throw .configuration("\(error)") }
            do {
                return try BinderMerger.merge(repository: repository, key: key, local: local, remote: remote, author: author,
                                              now: Int64(Date().timeIntervalSince1970))
            } catch let error as GitError where error.isConcurrentUpdate {
                throw .rejected("the local branch moved during the merge")
            } catch let error as MergeError {
                throw .configuration(error.description)
            } catch {
                throw .configuration("merge failed: \(error)")
            }
        }
    }

    // MARK: - Transport

    /// The server's tip after fetching; nil when the repository is not there (yet). For a
    /// binder never synced, 403 and 404 both mean that (limbo.health answers 403 to a fetch
    /// of an id nobody created); once synced, they are errors.
    private func fetch(neverSynced: Bool) throws(SyncError) -> ObjectID? {
        do {
            return try transfer { (repository, endpoint) throws(GitError) in try repository.remotes.fetch(endpoint, progress: progress) }
        } catch .forbidden(let why) where neverSynced {
            logger.info("nothing to fetch yet", metadata: ["answer": "403 \(why)"])
            return nil
        } catch .server(404, _) where neverSynced {
            return nil
        } catch .forbidden(let why) {
            throw .forbidden("the server refuses \(target.repoId) to this account (\(why))")
        } catch .server(404, _) {
            throw .server(status: 404, message: "the server no longer has \(target.repoId)")
        }
    }

    private func push(neverSynced: Bool) throws(SyncError) -> PushOutcome {
        do {
            return try transfer { (repository, endpoint) throws(GitError) in try repository.remotes.push(endpoint, progress: progress) }
        } catch .forbidden(let why) {
            throw .forbidden("this repository id belongs to someone else on the server (\(why))"
                             + (neverSynced ? "; choose another with --repo-id" : ""))
        }
    }

    /// One fetch or push with a token, over binder's own HTTP client: each request retried
    /// with backoff on its own (the transfer goes on where it failed), an expired or revoked
    /// token renewed once.
    private func transfer<T>(_ body: (GitRepository, RemoteEndpoint) throws(GitError) -> T) throws(SyncError) -> T {
        try session.authorized { (token: String) throws(SyncError) -> T in
            let carrier = GitCarrier(repositoryURL: endpointURL, token: token, retry: retry, logger: logger,
                                     spoolDirectory: repository.gitDirectory)
            do throws(GitError) {
                return try body(repository, RemoteEndpoint(url: endpointURL, carrier: carrier))
            } catch {
                throw carrier.failure ?? Self.classify(error, lastAnswer: carrier.lastAnswer)
            }
        }
    }

    /// A transfer that failed in libgit2 itself (not in a request): every request was
    /// answered, so this is no network failure. A local write that failed (its errno) is
    /// `.storage`; anything else is the server's answer that libgit2 could not read (a
    /// protocol error, a bad pack, git's own `ERR` line), quoted.
    static func classify(_ error: GitError, lastAnswer: String?) -> SyncError {
        let words = error.description.replacingOccurrences(of: "git: ", with: "")
        if let code = error.posixErrno { return .storage(words, errno: code) }
        return .garbled(words + (lastAnswer.map { "; the server sent \($0)" } ?? ""))
    }

    private func git<T>(_ body: () throws(GitError) -> T) throws(SyncError) -> T {
        do { return try body() } catch { throw .configuration("\(error)") }
    }
}
