import BinderCore
import BinderFormat
import BinderGit
import Dispatch
import Foundation
import Logging
import Synchronization

/// What a mount's background sync is doing, for `.binder/status` and `binder status` (asked
/// over the mount's control channel).
public struct SyncState: Sendable, Codable, Equatable {
    /// `starting`, `synced`, `pending` (commits wait or a sync runs), `offline` (the server
    /// could not be reached), `error` (it answered, but not yes), `not configured`.
    public var phase: String = "starting"
    public var server: String?
    public var repoId: String?
    public var lastSync: Date?
    public var lastError: String?
    public var nextRetry: Date?
    public var conflictsResolved = 0
    public var pendingCommits = 0

    public init() {}

    /// `key: value` lines, as `.binder/status` shows them.
    public var lines: String {
        // `Timestamps`, not `ISO8601DateFormatter`, which would load ICU into the mount daemon.
        var lines = "sync: \(phase)\n"
        if let server, let repoId { lines += "server: \(server)\nrepository: \(repoId)\n" }
        lines += "last_sync: \(lastSync.map(Timestamps.string(from:)) ?? "never")\n"
        lines += "pending_commits: \(pendingCommits)\n"
        lines += "last_error: \(lastError ?? "none")\n"
        if let nextRetry { lines += "next_retry: \(Timestamps.string(from: nextRetry))\n" }
        lines += "conflicts_resolved: \(conflictsResolved)\n"
        return lines
    }
}

/// Keeps a mounted binder in sync in the background: a pull when the mount starts (the view is
/// served at once, never waiting for the network), a push soon after local commits (a burst
/// becomes one sync), a poll for remote changes every `pollInterval`, and on failure retries
/// on the `RetryPolicy` schedule (1 s doubling to `maxBackoff`). Arrived commits are shown by
/// the view without a remount. A binder with no server yet waits until `binder sync` (through
/// the control channel) names one. A server that answers 429 or 503 with `Retry-After` is
/// left alone that long (at most a minute; `RetryPolicy.delay(after:failures:)`), and
/// `.binder/status` says so (`last_error: … (it asked to wait N s)`, `next_retry`).
///
/// The FUSE side never waits on it: the commit hook only signals, and `.binder/status` reads a
/// snapshot. The network work runs on a queue of its own (libgit2 blocks), never on the actor.
public actor SyncScheduler {
    public struct Options: Sendable {
        /// Seconds between polls of the server while nothing happens locally.
        public var pollInterval: TimeInterval
        /// A local commit is pushed after this much quiet (a burst of saves becomes one push)…
        public var quietPeriod: TimeInterval
        /// …or at most this long after the first commit of the burst.
        public var maxDelay: TimeInterval
        public var maxBackoff: TimeInterval

        public init(pollInterval: TimeInterval = 60, quietPeriod: TimeInterval = 0.5, maxDelay: TimeInterval = 5,
                    maxBackoff: TimeInterval = 60) {
            self.pollInterval = pollInterval
            self.quietPeriod = quietPeriod
            self.maxDelay = maxDelay
            self.maxBackoff = maxBackoff
        }
    }

    /// Builds the engine for a server and repository id (at start, or when `binder sync` sets them).
    public typealias EngineFactory = @Sendable (SyncTarget) throws -> SyncEngine

    private let makeEngine: EngineFactory
    private let view: BinderView
    /// For reading the branch tip and the config (another process may change them) and
    /// counting pending commits for `.binder/status`: not the engine's instance, whose lock is
    /// held for whole network transfers, which a `cat` of the status file must not wait for.
    private let repository: GitRepository
    private let options: Options
    private let retry: RetryPolicy
    private let logger: Logger
    /// The engine's blocking calls, one at a time, in order.
    private let queue = DispatchQueue(label: "binder-sync")

    /// Read by `.binder/status` on FUSE threads; written by the actor.
    private let snapshot = Mutex(SyncState())

    private var engine: SyncEngine?
    private var stopped = false
    private var firstLocalCommit: Date?
    private var lastLocalCommit: Date?
    private var nextSync = Date()
    private var failures = 0
    /// A sync is running (the loop's or `syncNow`'s): the loop starts none meanwhile, so that
    /// a pass queued behind a failed one does not run before the wait that failure set
    /// (a server's `Retry-After`).
    private var syncing = false
    /// The loop's sleep, resumed early by a signal (a commit, stop).
    private var wake: CheckedContinuation<Void, Never>?
    private var sleepGeneration = 0
    private var loop: Task<Void, Never>?
    /// The mount's own work on each pass, run on `queue` before the sync (the doctor's notes of
    /// its active shares: what it commits is pushed by the same pass); every poll interval
    /// while no server is configured.
    private let beforePass: (@Sendable () -> Void)?
    private var nextSidePass = Date()

    public init(view: BinderView, repositoryPath: String, options: Options, logger: Logger,
                beforePass: (@Sendable () -> Void)? = nil, makeEngine: @escaping EngineFactory) throws {
        self.beforePass = beforePass
        self.view = view
        repository = try GitRepository.open(path: repositoryPath)
        self.options = options
        let standard = RetryPolicy.standard(attempts: nil)
        retry = RetryPolicy(base: standard.base, maximum: min(standard.maximum, max(options.maxBackoff, standard.base)), attempts: nil)
        self.logger = logger
        self.makeEngine = makeEngine
    }

    /// Hooks the view and starts the loop.
    public func start() {
        if engine == nil {
            if let target = SyncTarget.read(repository) { configure(target) } else {
                snapshot.withLock { $0.phase = "not configured" }
            }
        }
        view.setSyncHooks(onCommit: { [weak self] _ in
            // With the view's write lock held: only signal.
            guard let self else { return }
            Task { await self.localCommit() }
        }, status: { [weak self] in self?.statusLines() ?? "" })
        loop = Task { await self.run() }
    }

    public func stop() {
        stopped = true
        resumeSleep()
        loop?.cancel()
    }

    /// The current state, with the pending count read now.
    public nonisolated func state() -> SyncState {
        var state = snapshot.withLock { $0 }
        state.pendingCommits = SyncRecord.pendingCommits(repository)
        if state.phase == "synced" && state.pendingCommits > 0 { state.phase = "pending" }
        return state
    }

    /// `key: value` lines for `.binder/status` (a FUSE read: never waits for the network).
    nonisolated func statusLines() -> String { state().lines }

    /// Where this mount syncs; nil before `binder sync` named a server.
    public var target: SyncTarget? { engine?.target }

    /// A commit was made through the mount: push it soon.
    func localCommit() {
        let now = Date()
        if firstLocalCommit == nil { firstLocalCommit = now }
        lastLocalCommit = now
        snapshot.withLock { if $0.phase == "synced" { $0.phase = "pending" } }
        resumeSleep()
    }

    /// A sync asked for now (`binder sync` while this binder is mounted: the mount is its one
    /// writer, so the command asks it through its control channel). For a binder with no
    /// server yet, `server` names one, and `repoId` the id (else a new one is made, once: a
    /// second request while the first push has not landed goes on with the same id). Counts
    /// like a scheduled sync in `.binder/status`, and the mount shows what arrived at once.
    public func syncNow(server: String?, repoId: String?) async -> Result<SyncReport, SyncError> {
        if let server {
            if let repoId, !SyncTarget.isValidRepoID(repoId) { return .failure(.configuration("'\(repoId)' is not a repository id")) }
            if let current = engine?.target {
                guard current.server == server, repoId == nil || repoId == current.repoId else {
                    return .failure(.configuration("this mount syncs with \(current.server) as \(current.repoId); unmount it to change that"))
                }
            } else {
                configure(SyncTarget(server: server, repoId: repoId ?? SyncTarget.newRepoID()))
                guard engine != nil else { return .failure(.configuration(snapshot.withLock { $0.lastError } ?? "cannot set up syncing")) }
            }
        }
        if engine == nil, let configured = SyncTarget.read(repository) { configure(configured) }
        guard engine != nil else { return .failure(.configuration("this binder has no server yet: 'binder sync' names one")) }
        return await perform()
    }

    // MARK: - The loop

    private func configure(_ target: SyncTarget) {
        do {
            engine = try makeEngine(target)
            snapshot.withLock { $0.server = target.server; $0.repoId = target.repoId; $0.phase = "starting"; $0.lastError = nil }
            nextSync = Date()
            logger.info("sync on", metadata: ["server": "\(target.server)", "repository": "\(target.repoId)"])
        } catch {
            snapshot.withLock { $0.phase = "error"; $0.lastError = "cannot set up syncing: \(error)" }
            logger.error("sync off: \(error)")
        }
    }

    private func run() async {
        while !stopped {
            let due = dueTime()
            if due > Date() {
                // Wake at least every 2 s to notice a branch moved by another process, or a
                // server set in the binder's config.
                await sleep(until: min(due, Date().addingTimeInterval(2)))
                if stopped { return }
            }
            if engine == nil, let target = SyncTarget.read(repository) { configure(target) }
            // A binder with no server has nothing arriving: its one writer is this mount.
            guard engine != nil else {
                await sidePassIfDue()
                continue
            }
            if syncing {
                // Woken when it ends (`perform`), then the wait it set is honoured.
                await sleep(until: Date().addingTimeInterval(2))
                continue
            }
            if dueTime() <= Date() {
                firstLocalCommit = nil
                lastLocalCommit = nil
                _ = await perform()
            } else {
                showLocalTip()
            }
        }
    }

    /// When the next sync should run (far away while nothing is configured).
    private func dueTime() -> Date {
        guard engine != nil else { return .distantFuture }
        var due = nextSync
        if let first = firstLocalCommit, let last = lastLocalCommit, failures == 0 {
            due = min(due, min(last.addingTimeInterval(options.quietPeriod), first.addingTimeInterval(options.maxDelay)))
        }
        return due
    }

    private func sleep(until date: Date) async {
        sleepGeneration += 1
        let generation = sleepGeneration
        let seconds = max(0, date.timeIntervalSinceNow)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            wake = continuation
            Task { [weak self] in
                try? await Task.sleep(nanoseconds: UInt64(seconds * 1_000_000_000))
                await self?.timerFired(generation)
            }
        }
    }

    private func timerFired(_ generation: Int) {
        if generation == sleepGeneration { resumeSleep() }
    }

    private func resumeSleep() {
        wake?.resume()
        wake = nil
    }

    /// `beforePass` alone, for a binder with no server (its sync passes never run).
    private func sidePassIfDue() async {
        guard let beforePass, nextSidePass <= Date() else { return }
        nextSidePass = Date().addingTimeInterval(options.pollInterval)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                beforePass()
                continuation.resume()
            }
        }
        showLocalTip()
    }

    private func perform() async -> Result<SyncReport, SyncError> {
        guard let engine else { return .failure(.configuration("no server")) }
        syncing = true
        defer {
            syncing = false
            resumeSleep()
        }
        let beforePass = self.beforePass
        let result: Result<SyncReport, SyncError> = await withCheckedContinuation { continuation in
            queue.async {
                beforePass?()
                continuation.resume(returning: Result { () throws(SyncError) -> SyncReport in try engine.sync() })
            }
        }
        switch result {
        case .success(let report):
            failures = 0
            nextSync = Date().addingTimeInterval(options.pollInterval)
            snapshot.withLock {
                $0.phase = "synced"
                $0.lastSync = Date()
                $0.lastError = nil
                $0.nextRetry = nil
                $0.conflictsResolved += report.outcome.conflicts.count
            }
            if report.pushedCommits > 0 || report.outcome != .upToDate {
                logger.info("synced", metadata: ["pushed": "\(report.pushedCommits)", "changed": "\(report.outcome.changedPaths.count)",
                                                 "conflicts": "\(report.outcome.conflicts.count)"])
            }
            showLocalTip()
        case .failure(let error):
            failures += 1
            let wait = retry.delay(after: error, failures: failures)
            nextSync = Date().addingTimeInterval(wait)
            snapshot.withLock {
                // Offline: the server could not be reached; any other error came from the server.
                $0.phase = error.isNetworkFailure ? "offline" : "error"
                $0.lastError = error.description
                $0.nextRetry = nextSync
            }
            logger.warning(error.retryAfter == nil ? "sync failed; retrying" : "sync failed; the server asked to wait, retrying",
                           metadata: ["in_seconds": "\(wait)", "error": "\(error)"])
        }
        return result
    }

    /// Shows the branch's tip if it moved from elsewhere (a merge, a pull, `binder sync`). The
    /// cheap check runs first; the view re-reads the tip under its write lock.
    private func showLocalTip() {
        guard let tip = try? repository.refs.branchTip(), tip != view.commit else { return }
        do { _ = try view.adoptBranchTip() } catch {
            logger.error("cannot show the synced commit: \(error)")
        }
    }
}

/// A mount's answer to `status` on its control channel: one line of JSON.
public struct ControlStatus: Sendable, Codable, Equatable {
    /// Why sync is off for this mount (`--no-sync`, an error), nil when on.
    public var offReason: String?
    public var state: SyncState?

    public static func on(_ state: SyncState) -> ControlStatus { ControlStatus(offReason: nil, state: state) }
    public static func off(_ reason: String) -> ControlStatus { ControlStatus(offReason: reason, state: nil) }

    public var encoded: String {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    public init(offReason: String?, state: SyncState?) {
        self.offReason = offReason
        self.state = state
    }

    public init(decoding line: String) throws(SyncError) {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        do { self = try decoder.decode(ControlStatus.self, from: Data(line.utf8)) } catch {
            throw .configuration("the mount's status answer is not understood")
        }
    }
}
