import BinderCore
import BinderGit
import Foundation
import Logging

/// Keeps a mounted binder in sync in the background: a pull when the mount starts (the view is
/// served at once, never waiting for the network), a push soon after local commits (a burst
/// becomes one sync), a poll for remote changes every `interval`, and on failure retries after
/// 1 s, 2 s, 4 s … at most 60 s. Arrived commits are shown by the view without a remount.
public final class SyncScheduler: @unchecked Sendable {
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

    private let engine: SyncEngine
    private let view: BinderView
    /// For reading the branch tip (another process, `binder sync`, may move it) and counting
    /// pending commits for `.binder/status`: not the engine's instance, whose lock is held for
    /// whole network transfers, which a `cat` of the status file must not wait for.
    private let repository: GitRepository
    private let options: Options
    private let logger: Logger

    // All below guarded by `condition`.
    private let condition = NSCondition()
    private var stopped = false
    private var firstLocalCommit: Date?
    private var lastLocalCommit: Date?
    private var nextSync = Date()
    private var backoff: TimeInterval = 1
    private var online: Bool?
    private var lastSync: Date?
    private var lastError: String?
    private var conflictsResolved = 0
    private var thread: Thread?

    public init(engine: SyncEngine, view: BinderView, repositoryPath: String, options: Options, logger: Logger) throws {
        self.engine = engine
        self.view = view
        self.repository = try GitRepository.open(path: repositoryPath)
        self.options = options
        self.logger = logger
    }

    public func start() {
        view.setSyncHooks(onCommit: { [weak self] _ in self?.localCommit() }, status: { [weak self] in self?.statusLines() ?? "" })
        let thread = Thread { [self] in self.loop() }
        thread.name = "binder-sync"
        condition.lock(); self.thread = thread; condition.unlock()
        thread.start()
    }

    public func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }

    /// A commit was made through the mount: push it soon.
    func localCommit() {
        condition.lock()
        let now = Date()
        if firstLocalCommit == nil { firstLocalCommit = now }
        lastLocalCommit = now
        condition.broadcast()
        condition.unlock()
    }

    private func loop() {
        while true {
            condition.lock()
            while !stopped {
                let now = Date()
                let due = dueTime()
                if due <= now { break }
                // Wake at least every 2 s to notice a branch moved by another process.
                let wake = min(due, now.addingTimeInterval(2))
                if !condition.wait(until: wake) && wake < due { break }
            }
            if stopped { condition.unlock(); return }
            let syncNow = dueTime() <= Date()
            if syncNow { firstLocalCommit = nil; lastLocalCommit = nil }
            condition.unlock()

            if syncNow { runSync() } else { showLocalTip() }
        }
    }

    /// Lock held. When the next sync should run.
    private func dueTime() -> Date {
        var due = nextSync
        if let first = firstLocalCommit, let last = lastLocalCommit, backoff <= 1 {
            due = min(due, min(last.addingTimeInterval(options.quietPeriod), first.addingTimeInterval(options.maxDelay)))
        }
        return due
    }

    private func runSync() { _ = perform() }

    /// A sync asked for now (`binder sync` while this binder is mounted: the mount is its one
    /// writer, so the command asks it through its control channel). Runs on the caller's thread;
    /// the engine runs one sync at a time, so it never overlaps a scheduled one. Counts like a
    /// scheduled sync in `.binder/status`, and the mount shows what arrived at once.
    public func syncNow() throws(SyncError) -> SyncReport { try perform().get() }

    private func perform() -> Result<SyncReport, SyncError> {
        do {
            let report = try engine.sync()
            condition.lock()
            online = true
            lastSync = Date()
            lastError = nil
            backoff = 1
            conflictsResolved += report.outcome.conflicts.count
            nextSync = Date().addingTimeInterval(options.pollInterval)
            condition.unlock()
            if report.pushedCommits > 0 || report.outcome != .upToDate {
                logger.info("synced", metadata: ["pushed": "\(report.pushedCommits)", "changed": "\(report.outcome.changedPaths.count)",
                                                 "conflicts": "\(report.outcome.conflicts.count)"])
            }
            showLocalTip()
            return .success(report)
        } catch {
            condition.lock()
            // Offline: the server could not be reached; any other error came from the server.
            if case .offline = error { online = false } else { online = true }
            lastError = error.description
            let wait = backoff
            backoff = min(backoff * 2, options.maxBackoff)
            nextSync = Date().addingTimeInterval(wait)
            condition.unlock()
            logger.warning("sync failed; retrying", metadata: ["in_seconds": "\(Int(wait))", "error": "\(error)"])
            return .failure(error)
        }
    }

    /// Shows the branch's tip if it moved from elsewhere (a merge, a pull, `binder sync`).
    private func showLocalTip() {
        guard let tip = try? repository.branchTip(), tip != view.commit else { return }
        do { _ = try view.adoptArrived(commit: tip) } catch {
            logger.error("cannot show the synced commit: \(error)")
        }
    }

    /// `key: value` lines for `.binder/status`.
    func statusLines() -> String {
        condition.lock()
        let online = self.online, lastSync = self.lastSync, lastError = self.lastError
        let conflicts = conflictsResolved, retry = lastError == nil ? nil : nextSync
        condition.unlock()
        let pending = SyncRecord.pendingCommits(repository)
        let iso = ISO8601DateFormatter()
        var lines = "sync: " + (online == nil ? "starting" : online! ? "online" : "offline") + "\n"
        lines += "server: \(engine.session.client.base)\nrepository: \(engine.target.repoId)\n"
        lines += "last_sync: \(lastSync.map { iso.string(from: $0) } ?? "never")\n"
        lines += "pending_commits: \(pending)\n"
        lines += "last_error: \(lastError ?? "none")\n"
        if let retry { lines += "next_retry: \(iso.string(from: retry))\n" }
        lines += "conflicts_resolved: \(conflicts)\n"
        return lines
    }
}
