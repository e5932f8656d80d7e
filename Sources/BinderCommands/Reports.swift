import BinderCore
import BinderCrypto
import BinderGit
import BinderSync
import BinderSystem
import Foundation

/// `--json` output: one JSON object on stdout, keys sorted, for scripts (`jq`). Text output
/// and JSON come from the same report values.
enum JSONOutput {
    static func print(_ object: [String: Any]) throws {
        do {
            let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
            FileHandle.standardOutput.write(data + Data("\n".utf8))
        } catch {
            throw CommandFailure("cannot write JSON: \(error)")
        }
    }

    static func time(_ seconds: Int64?) -> Any {
        seconds.map { ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval($0))) } ?? NSNull()
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
            guard let repository = try? GitRepository.open(path: path) else { continue }
            let tip = try? repository.branchTip()
            let target = SyncTarget.read(repository)
            report.local.append(Local(name: name, path: path, lastCommit: tip.flatMap { try? repository.commit($0) }?.committer.time,
                                      target: target, pendingCommits: target == nil ? 0 : SyncRecord.pendingCommits(repository)))
        }
        return report
    }

    /// Adds the server's listing, or the reason it is missing.
    mutating func addServer(_ serverOptions: ServerOptions, passphrase: PassphraseSource, state: StateDirectory) throws {
        let accounts = Accounts(path: state.accountsFile)
        let client = try serverOptions.client(accounts)
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

    func printJSON() throws {
        let iso = ISO8601DateFormatter()
        var object: [String: Any] = [
            "bindersDirectory": bindersDirectory,
            "local": local.map { binder -> [String: Any] in
                ["name": binder.name, "path": binder.path,
                 "lastCommit": binder.lastCommit.map { iso.string(from: $0) } ?? NSNull(),
                 "server": binder.target?.server ?? NSNull(), "repoId": binder.target?.repoId ?? NSNull(),
                 "pendingCommits": binder.pendingCommits]
            },
        ]
        if let server {
            var entry: [String: Any] = ["url": server, "error": serverUnavailable ?? NSNull()]
            entry["binders"] = remote.map { list in
                list.map { ["id": $0.id, "lastCommit": $0.lastCommit ?? NSNull(), "cloned": $0.cloned] as [String: Any] }
            } ?? NSNull()
            object["server"] = entry
        }
        try JSONOutput.print(object)
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

    static func gather(_ repository: GitRepository, path: String, state: StateDirectory) -> StatusReport {
        let name = BinderLocator.displayName(path)
        let logPath = state.logPath(name)
        let hasLog = FileManager.default.fileExists(atPath: logPath)
        let target = SyncTarget.read(repository)
        return StatusReport(path: path, name: name, mounts: MountTable.mounts(ofSource: "binder:" + name),
                            logPath: logPath, hasLog: hasLog,
                            lastLoggedError: hasLog ? StatusCommand.lastError(inLog: logPath) : nil,
                            target: target, record: target == nil ? SyncRecord() : SyncRecord.load(repository),
                            pendingCommits: target == nil ? 0 : SyncRecord.pendingCommits(repository),
                            openConflicts: ConflictNames.openConflicts((try? repository.branchTip().map { try repository.listTree(commit: $0).map(\.path) }) ?? []))
    }

    func printText() {
        let iso = ISO8601DateFormatter()
        func time(_ seconds: Int64?) -> String {
            seconds.map { iso.string(from: Date(timeIntervalSince1970: TimeInterval($0))) } ?? "never"
        }
        printOut("binder: \(path)")
        printOut("mounted: \(mounts.isEmpty ? "no" : mounts.joined(separator: ", "))")
        printOut("log: \(logPath)" + (hasLog ? "" : " (none yet: never mounted here)"))
        if let lastLoggedError { printOut("last logged error: \(lastLoggedError)") }
        guard let target else {
            printOut("sync: local only (never synced; 'binder sync' creates it on the server)")
            return
        }
        printOut("server: \(target.server)")
        printOut("repository: \(target.repoId)")
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

    func printJSON() throws {
        var object: [String: Any] = [
            "binder": path, "name": name, "mounted": mounts,
            "log": logPath, "logExists": hasLog, "lastLoggedError": lastLoggedError ?? NSNull(),
        ]
        if let target {
            object["sync"] = [
                "server": target.server, "repoId": target.repoId,
                "lastSync": JSONOutput.time(record.lastSync), "lastAttempt": JSONOutput.time(record.lastAttempt),
                "pendingCommits": pendingCommits, "lastError": record.lastError ?? NSNull(),
                "conflicts": record.conflicts.map { conflict -> [String: Any] in
                    ["path": conflict.path, "mergedAt": JSONOutput.time(conflict.mergedAt),
                     "kept": conflict.winner == .local ? "local" : "other", "reason": "\(conflict.reason)",
                     "otherCommit": "\(conflict.lostCommit)", "copy": conflict.copy ?? NSNull()]
                },
                "openConflicts": openConflicts,
            ] as [String: Any]
        } else {
            object["sync"] = NSNull()
        }
        try JSONOutput.print(object)
    }
}
