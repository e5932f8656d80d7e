import BinderCore
import BinderCrypto
import BinderSync
import BinderSystem
import Foundation

/// `--json` output: one JSON value on stdout, keys sorted, for scripts (`jq`). Text output and
/// JSON come from the same report values; the JSON shapes are Codable types (`…JSON`), and a
/// field a script may test for is `null` when empty rather than missing (`@Nullable`).
enum JSONOutput {
    static func print(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        do {
            FileHandle.standardOutput.write(try encoder.encode(value) + Data("\n".utf8))
        } catch {
            throw CommandFailure("cannot write JSON: \(error)")
        }
    }

    static func time(_ seconds: Int64?) -> String? {
        seconds.map { ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval($0))) }
    }
}

/// An optional that is written as `null` when absent (Codable leaves the key out otherwise).
@propertyWrapper
struct Nullable<Value: Encodable>: Encodable {
    var wrappedValue: Value?

    init(wrappedValue: Value?) { self.wrappedValue = wrappedValue }

    func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        if let wrappedValue { try container.encode(wrappedValue) } else { try container.encodeNil() }
    }
}

/// What `binder list` shows: the local binders, and the server's (or why they are missing:
/// offline, not logged in, locked). A server that cannot be reached is not a failure: the
/// local binders are listed and the reason is given.
struct ListReport {
    struct Local {
        let name: String
        let path: String
        let lastCommit: Date?
        let target: SyncTarget?
        let pendingCommits: Int
    }

    struct Remote {
        let id: String
        let lastCommit: String?
        let cloned: Bool
    }

    var bindersDirectory: String
    var local: [Local] = []
    var server: String?
    var remote: [Remote]?
    /// Why the server's binders are not listed.
    var serverUnavailable: String?

    static func gatherLocal(_ state: StateDirectory) -> ListReport {
        var report = ListReport(bindersDirectory: state.bindersDirectory)
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: state.bindersDirectory)) ?? []).sorted()
        for name in names {
            let path = state.bindersDirectory + "/" + name
            guard let repository = try? LocalBinder.open(path: path).repository else { continue }
            let target = SyncTarget.read(repository)
            report.local.append(Local(name: name, path: path, lastCommit: BinderHistory(repository).lastCommitTime(),
                                      target: target, pendingCommits: SyncRecord.pendingCommits(repository)))
        }
        return report
    }

    /// Adds the server's listing, or the reason it is missing.
    mutating func addServer(_ serverOptions: ServerOptions, passphrase: PassphraseSource, state: StateDirectory,
                            retry: RetryPolicy) throws {
        let accounts = Accounts(path: state.accountsFile)
        let client = try serverOptions.client(accounts, retry: retry)
        server = client.base
        let key: SecretKey
        do { key = try KeyStore(state: state).secretKey(passphrase: passphrase) } catch {
            serverUnavailable = "not listed: " + ((error as? CommandFailure)?.message ?? "\(error)")
            return
        }
        let session = ServerSession(client: client, key: key, accounts: accounts)
        do {
            let repositories = try session.authorized { (token: String) throws(SyncError) in try client.repositories(token: token) }
            let names = Set(local.map(\.name))
            remote = repositories.map { Remote(id: $0.id, lastCommit: $0.lastCommit, cloned: names.contains($0.id)) }
        } catch {
            serverUnavailable = "server unreachable or refused: \(error)"
        }
    }

    func printText() {
        printOut("Local binders (\(bindersDirectory)):")
        if local.isEmpty { printOut("  none") }
        let iso = ISO8601DateFormatter()
        for binder in local {
            let last = binder.lastCommit.map { iso.string(from: $0) } ?? "no commits"
            let sync = binder.target.map { "\(binder.pendingCommits) to push to \($0.server) as \($0.repoId)" } ?? "local only (never synced)"
            printOut("  \(binder.name)  \(binder.path)  last commit \(last)  \(sync)")
        }
        guard let server else { return }
        printOut("On \(server):")
        if let serverUnavailable { printOut("  (\(serverUnavailable))") }
        guard let remote else { return }
        if remote.isEmpty { printOut("  none") }
        for repository in remote {
            printOut("  \(repository.id)  last commit \(repository.lastCommit ?? "none")\(repository.cloned ? "  (cloned)" : "")")
        }
    }

    struct JSON: Encodable {
        struct LocalBinder: Encodable {
            let name: String
            let path: String
            @Nullable var lastCommit: String?
            @Nullable var server: String?
            @Nullable var repoId: String?
            let pendingCommits: Int
        }
        struct RemoteBinder: Encodable {
            let id: String
            @Nullable var lastCommit: String?
            let cloned: Bool
        }
        struct Server: Encodable {
            let url: String
            /// Why `binders` is null (offline, not logged in, locked).
            @Nullable var error: String?
            @Nullable var binders: [RemoteBinder]?
        }
        let bindersDirectory: String
        let local: [LocalBinder]
        /// Absent with `--local`.
        let server: Server?
    }

    func printJSON() throws {
        let iso = ISO8601DateFormatter()
        try JSONOutput.print(JSON(
            bindersDirectory: bindersDirectory,
            local: local.map { binder in
                JSON.LocalBinder(name: binder.name, path: binder.path, lastCommit: binder.lastCommit.map { iso.string(from: $0) },
                                 server: binder.target?.server, repoId: binder.target?.repoId, pendingCommits: binder.pendingCommits)
            },
            server: server.map { url in
                JSON.Server(url: url, error: serverUnavailable,
                            binders: remote?.map { JSON.RemoteBinder(id: $0.id, lastCommit: $0.lastCommit, cloned: $0.cloned) })
            }))
    }
}

/// What `binder status` shows of one binder.
struct StatusReport {
    let path: String
    let name: String
    let mounts: [String]
    /// The mount log (it may not exist yet: the binder was never mounted).
    let logPath: String
    let hasLog: Bool
    let lastLoggedError: String?
    let target: SyncTarget?
    let record: SyncRecord
    let pendingCommits: Int
    /// Conflict copies still in the binder (`X (conflict …).md`): deleting one resolves it.
    let openConflicts: [String]
    /// What a running mount of the binder says of its own sync; nil when it is not mounted.
    var mount: MountSyncReport?
    /// The npub of the key `binder key rotate` carried this binder from, while it is not pushed.
    var rotatedFrom: String? = nil
    /// The repository id of the copy under the old key still to delete on the server, after a rotated binder moved.
    var oldCopy: String? = nil

    static func gather(_ binder: LocalBinder, state: StateDirectory) -> StatusReport {
        let repository = binder.repository, path = binder.path
        let name = BinderLocator.displayName(path)
        let logPath = state.logPath(name)
        let hasLog = FileManager.default.fileExists(atPath: logPath)
        let target = SyncTarget.read(repository)
        return StatusReport(path: path, name: name, mounts: WriterLock.mountPoints(gitDirectory: binder.gitDirectory),
                            logPath: logPath, hasLog: hasLog,
                            lastLoggedError: hasLog ? StatusCommand.lastError(inLog: logPath) : nil,
                            target: target, record: target == nil ? SyncRecord() : SyncRecord.load(repository),
                            pendingCommits: SyncRecord.pendingCommits(repository),
                            openConflicts: ConflictNames.openConflicts(BinderHistory(repository).tipPaths()),
                            mount: WriterLock.mountControl(gitDirectory: binder.gitDirectory).map { MountSyncReport.ask(control: $0.control, holder: $0.holder) },
                            rotatedFrom: SyncTarget.rotatedFrom(repository), oldCopy: SyncTarget.oldCopy(repository)?.repoId)
    }

    func printText() {
        let iso = ISO8601DateFormatter()
        func time(_ seconds: Int64?) -> String {
            seconds.map { iso.string(from: Date(timeIntervalSince1970: TimeInterval($0))) } ?? "never"
        }
        printOut("binder: \(path)")
        let shownMounts = mounts.map { mount in
            MountTable.isDisconnected(mount) ? "\(mount) (its daemon has stopped: 'binder unmount \(mount)' clears it)" : mount
        }
        printOut("mounted: \(mounts.isEmpty ? "no" : shownMounts.joined(separator: ", "))")
        printOut("log: \(logPath)" + (hasLog ? "" : " (none yet: never mounted here)"))
        if let lastLoggedError { printOut("last logged error: \(lastLoggedError)") }
        guard let target else {
            printOut("sync: local only (never synced; 'binder sync' creates it on the server)")
            return
        }
        printOut("server: \(target.server)")
        printOut("repository: \(target.repoId)")
        if rotatedFrom != nil {
            printOut("key rotation: re-encrypted to your new key ('binder key rotate') and not pushed yet; the server's copy is the old one, under the old key: 'binder sync' pushes it under a new id, then deletes the old copy")
        }
        if let oldCopy {
            printOut("old copy: \(oldCopy) (under the old key) is still on the server: 'binder sync' deletes it (--retired-passphrase-file if the old login expired)")
        }
        printOut("last sync: \(time(record.lastSync))")
        printOut("last attempt: \(time(record.lastAttempt))")
        printOut("pending commits: \(pendingCommits)")
        printOut("last error: \(record.lastError ?? "none")")
        printOut("conflicts resolved: \(record.conflicts.count)")
        for conflict in record.conflicts.suffix(20) {
            printOut("  \(time(conflict.mergedAt))  \(conflict.path): kept the \(conflict.winner == .local ? "local" : "other device's") version (\(conflict.reason)); the other is in commit \(conflict.lostCommit)"
                     + (conflict.copy.map { " and in \($0)" } ?? ""))
        }
        printOut("open conflicts: \(openConflicts.count)\(openConflicts.isEmpty ? "" : " (delete a copy once its changes are where they belong)")")
        for copy in openConflicts { printOut("  \(copy)") }
    }

    /// The text, then what a running mount says of its sync (it syncs in the background).
    func printTextWithMount() {
        printText()
        if let mount { printOut(mount.lines) }
    }

    struct JSON: Encodable {
        struct Conflict: Encodable {
            let path: String
            @Nullable var mergedAt: String?
            /// "local" or "other": whose version stayed in place.
            let kept: String
            let reason: String
            let otherCommit: String
            /// The visible conflict copy, when one was made.
            @Nullable var copy: String?
        }
        struct Sync: Encodable {
            let server: String
            let repoId: String
            @Nullable var lastSync: String?
            @Nullable var lastAttempt: String?
            let pendingCommits: Int
            @Nullable var lastError: String?
            let conflicts: [Conflict]
            let openConflicts: [String]
        }
        let binder: String
        let name: String
        let mounted: [String]
        let log: String
        let logExists: Bool
        @Nullable var lastLoggedError: String?
        /// Null for a binder that was never synced.
        @Nullable var sync: Sync?
        /// Null when the binder is not mounted.
        @Nullable var mount: MountSyncReport.JSON?
    }

    func printJSON() throws {
        try JSONOutput.print(JSON(
            binder: path, name: name, mounted: mounts, log: logPath, logExists: hasLog, lastLoggedError: lastLoggedError,
            sync: target.map { target in
                JSON.Sync(server: target.server, repoId: target.repoId,
                          lastSync: JSONOutput.time(record.lastSync), lastAttempt: JSONOutput.time(record.lastAttempt),
                          pendingCommits: pendingCommits, lastError: record.lastError,
                          conflicts: record.conflicts.map { conflict in
                              JSON.Conflict(path: conflict.path, mergedAt: JSONOutput.time(conflict.mergedAt),
                                            kept: conflict.winner == .local ? "local" : "other", reason: "\(conflict.reason)",
                                            otherCommit: "\(conflict.lostCommit)", copy: conflict.copy)
                          },
                          openConflicts: openConflicts)
            },
            mount: mount?.json))
    }
}

/// What a running mount says of its own sync (`binder status`), asked over its control
/// channel: the same state `.binder/status` shows (phase, server, last sync, pending commits,
/// last error, next retry).
struct MountSyncReport {
    let pid: Int32?
    let mountpoint: String?
    /// The mount's answer; nil when it gave none (`failure` says why).
    let status: ControlStatus?
    let failure: String?

    static func ask(control: String, holder: WriterLock.Holder) -> MountSyncReport {
        func failed(_ why: String) -> MountSyncReport {
            MountSyncReport(pid: holder.pid, mountpoint: holder.mountpoint, status: nil, failure: why)
        }
        let answer: String
        do { answer = try ControlClient.send(ControlRequest.status, to: control) } catch { return failed("not answering (\(error))") }
        guard answer.hasPrefix("ok "), let status = try? ControlStatus(decoding: String(answer.dropFirst(3))) else {
            return failed(answer.hasPrefix("error ") ? String(answer.dropFirst(6)) : "no answer")
        }
        return MountSyncReport(pid: holder.pid, mountpoint: holder.mountpoint, status: status, failure: nil)
    }

    /// `mount sync (pid N): synced`, then `mount …` lines.
    var lines: String {
        let prefix = "mount sync (pid \(pid.map(String.init) ?? "?"))"
        guard let status else { return "\(prefix): \(failure ?? "no answer")" }
        guard let state = status.state else { return "\(prefix): off (\(status.offReason ?? "off"))" }
        let iso = ISO8601DateFormatter()
        var lines = ["\(prefix): \(state.phase)"]
        if let server = state.server, let repoId = state.repoId { lines.append("mount syncs with: \(server) as \(repoId)") }
        lines.append("mount last sync: \(state.lastSync.map { iso.string(from: $0) } ?? "never")")
        lines.append("mount pending commits: \(state.pendingCommits)")
        lines.append("mount last error: \(state.lastError ?? "none")")
        if let retry = state.nextRetry { lines.append("mount next retry: \(iso.string(from: retry))") }
        return lines.joined(separator: "\n")
    }

    struct JSON: Encodable {
        @Nullable var pid: Int32?
        @Nullable var mountpoint: String?
        /// Why the mount gave no answer (its state is then unknown: the fields below are null).
        @Nullable var error: String?
        /// `starting`, `synced`, `pending`, `offline`, `error`, `not configured`, or `off`
        /// (`--no-sync`: `offReason` says why).
        @Nullable var sync: String?
        @Nullable var offReason: String?
        @Nullable var server: String?
        @Nullable var repoId: String?
        @Nullable var lastSync: String?
        @Nullable var pendingCommits: Int?
        @Nullable var lastError: String?
        @Nullable var nextRetry: String?
        @Nullable var conflictsResolved: Int?
    }

    var json: JSON {
        let state = status?.state
        let iso = ISO8601DateFormatter()
        return JSON(pid: pid, mountpoint: mountpoint, error: failure,
                    sync: status.map { $0.state?.phase ?? "off" }, offReason: status?.offReason,
                    server: state?.server, repoId: state?.repoId, lastSync: state?.lastSync.map { iso.string(from: $0) },
                    pendingCommits: state?.pendingCommits, lastError: state?.lastError,
                    nextRetry: state?.nextRetry.map { iso.string(from: $0) }, conflictsResolved: state?.conflictsResolved)
    }
}

/// `binder share --json`: the share just made (the payload is the QR code's exact text).
struct ShareReport: Encodable {
    let id: String
    let server: String
    let expiresAt: Int64
    let label: String
    let files: Int
    let payload: String
}

/// A row of `binder share --list --json`.
struct ShareListRow: Encodable {
    let id: String
    let server: String
    let label: String
    let paths: [String]
    let created: Int64
    let expiresAt: Int64
}
