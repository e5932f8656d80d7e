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
    /// One sync at a time per engine.
    private let running = Mutex(())

    public init(repositoryPath: String, key: NIP44.ConversationKey, session: ServerSession, target: SyncTarget,
                author: Signature, logger: Logger, progress: (@Sendable (TransferProgress) -> Void)? = nil) throws {
        repository = try GitRepository.open(path: repositoryPath)
        self.key = key
        self.session = session
        self.target = target
        self.author = author
        self.logger = logger
        self.progress = progress
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
                let report = try syncRounds()
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

    private func syncRounds() throws(SyncError) -> SyncReport {
        var report = SyncReport()
        var changed: [String] = []
        for _ in 0..<4 {
            let remoteTip = try fetch()
            let outcome = try mergeRetrying(remote: remoteTip)
            changed += outcome.changedPaths
            if case .upToDate = outcome {} else { report.outcome = Self.combine(report.outcome, outcome) }
            let local = try git { () throws(GitError) in try repository.branchTip() }
            report.tip = local
            let ahead = try git { () throws(GitError) in try repository.aheadBehind(local: local, upstream: remoteTip).ahead }
            if ahead == 0 { break }
            switch try push() {
            case .updated:
                report.pushedCommits += ahead
                if remoteTip == nil { report.createdOnServer = true }
                logger.info("pushed", metadata: ["commits": "\(ahead)"])
                return finish(report, changed: changed)
            case .rejected(let why):
                // Someone pushed meanwhile: fetch and merge again.
                logger.info("push refused, merging again", metadata: ["reason": "\(why)"])
                continue
            }
        }
        return finish(report, changed: changed)
    }

    private func finish(_ report: SyncReport, changed: [String]) -> SyncReport {
        if !repository.isBare && !changed.isEmpty {
            // Pathspecs are matched one by one: past a few hundred, a full checkout is cheaper.
            let paths = Set(changed)
            do { try repository.syncWorkTreeToHead(paths: paths.count > 256 ? nil : Array(paths)) } catch {
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

    /// Merges, re-reading the local tip when a local commit lands during the merge.
    private func mergeRetrying(remote: ObjectID?) throws(SyncError) -> MergeOutcome {
        guard let remote else { return .upToDate }
        for attempt in 0..<5 {
            let local = try git { () throws(GitError) in try repository.branchTip() }
            do {
                return try BinderMerger.merge(repository: repository, key: key, local: local, remote: remote, author: author,
                                              now: Int64(Date().timeIntervalSince1970))
            } catch let error as GitError where error.isConcurrentUpdate && attempt < 4 {
                continue
            } catch let error as MergeError {
                throw .configuration(error.description)
            } catch {
                throw .configuration("merge failed: \(error)")
            }
        }
        throw .configuration("merge failed: the local branch kept moving")
    }

    // MARK: - Transport

    /// The server's tip after fetching; nil when the repository does not exist there yet.
    private func fetch() throws(SyncError) -> ObjectID? {
        do {
            return try session.authorized { (token: String) throws(SyncError) -> ObjectID? in
                let endpoint = RemoteEndpoint(url: endpointURL, headers: ["Authorization: Bearer " + token])
                do {
                    return try repository.fetch(endpoint, progress: progress)
                } catch let error as GitError {
                    throw Self.classify(error)
                } catch {
                    throw .offline("\(error)")
                }
            }
        } catch let error {
            if case .server(404, _) = error { return nil }
            throw error
        }
    }

    private func push() throws(SyncError) -> PushOutcome {
        try session.authorized { (token: String) throws(SyncError) -> PushOutcome in
            let endpoint = RemoteEndpoint(url: endpointURL, headers: ["Authorization: Bearer " + token])
            do {
                return try repository.push(endpoint, progress: progress)
            } catch let error as GitError {
                throw Self.classify(error)
            } catch {
                throw .offline("\(error)")
            }
        }
    }

    /// libgit2 reports HTTP failures in words ("unexpected http status code: 404"); map them to
    /// what sync does next. Only the status phrase is matched: the URL in the message may hold
    /// any digits (a port).
    static func classify(_ error: GitError) -> SyncError {
        let message = error.description
        let lowered = message.lowercased()
        func status(_ code: Int) -> Bool { lowered.contains("status code: \(code)") }
        if error.code == .certificate {
            return .configuration("cannot verify the server's certificate: \(message.replacingOccurrences(of: "git: ", with: ""))")
        }
        if error.code == .authentication || status(401) { return .unauthorized("token refused") }
        if status(403) { return .forbidden("this repository id belongs to someone else on the server") }
        if status(404) { return .server(status: 404, message: "no such repository") }
        return .offline(message.replacingOccurrences(of: "git: ", with: ""))
    }

    private func git<T>(_ body: () throws(GitError) -> T) throws(SyncError) -> T {
        do { return try body() } catch { throw .configuration("\(error)") }
    }
}
