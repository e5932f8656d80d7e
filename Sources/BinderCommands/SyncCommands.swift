import ArgumentParser
import BinderCore
import BinderSync
import BinderSystem
import Foundation
import Glibc
import Logging
import Synchronization

/// Options shared by the commands that talk to a server.
struct ServerOptions: ParsableArguments {
    @Option(help: "The server, e.g. https://limbo.health (default: BINDER_SERVER, else the one 'binder login' used last).")
    var server: String?

    /// `--server`, else `BINDER_SERVER`, else the last login's, else limbo.health.
    var chosen: String? { server ?? ProcessInfo.processInfo.environment["BINDER_SERVER"].flatMap { $0.isEmpty ? nil : $0 } }

    func client(_ accounts: Accounts, retry: RetryPolicy = .request) throws -> ServerClient {
        do { return try ServerClient(server: chosen ?? accounts.defaultServer, retry: retry) } catch { throw CommandFailure(error.description) }
    }
}

func failure(_ error: SyncError) -> CommandFailure { CommandFailure(error.description) }

/// `--deadline` of the commands a person waits for (`login`, `clone`, `sync`): how long a
/// server may make no progress before the command gives up, its retries included; each retry
/// is said on stderr (a terminal) with its reason. A transfer that keeps moving is never cut by it.
struct DeadlineOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Give up when the server makes no progress for SECONDS, retries included (default 60); a transfer that keeps moving is not cut, and a server's Retry-After is waited for when it fits.",
                               valueName: "SECONDS"))
    var deadline: Double = RetryPolicy.defaultCommandDeadline

    func validate() throws {
        guard deadline.isFinite, deadline > 0, deadline <= 86_400 else { throw ValidationError("--deadline takes seconds, from more than 0 to 86400") }
    }

    /// The retry policy: the standard tries, within the deadline, each retry told on stderr
    /// when it is a terminal (a person is waiting; a script gets the one line of the outcome).
    var policy: RetryPolicy {
        let deadline = self.deadline
        guard isatty(2) == 1 else { return .command(deadline: deadline, onRetry: nil) }
        return .command(deadline: deadline, onRetry: { error, wait in
            printErr("binder: \(error); retrying in \(Self.seconds(wait)) (gives up after \(Self.seconds(deadline)) without progress: --deadline)")
        })
    }

    /// A failure; one that waiting might have cured (no answer, or a server that asked to wait)
    /// says the command gave up, and how to wait longer.
    func failure(_ error: SyncError) -> CommandFailure {
        guard error.isNetworkFailure || error.retryAfter != nil else { return CommandFailure(error.description) }
        return CommandFailure("\(error) (gave up; a longer --deadline than \(Self.seconds(deadline)) waits more)")
    }

    static func seconds(_ value: TimeInterval) -> String {
        value >= 10 || value == value.rounded() ? "\(Int(value.rounded())) s" : String(format: "%.1f s", value)
    }
}

struct LoginCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Log in to a server with your Nostr key (signs a kind-22242 challenge); the token is kept encrypted.")

    @OptionGroup var serverOptions: ServerOptions
    @OptionGroup var deadline: DeadlineOptions
    @OptionGroup var passphrase: PassphraseOptions

    func run() throws {
        let state = StateDirectory()
        try state.ensureExists()
        let accounts = Accounts(path: state.accountsFile)
        let client = try serverOptions.client(accounts, retry: deadline.policy)
        let key = try KeyStore(state: state).secretKey(passphrase: passphrase.source)
        do {
            let token = try client.login(secretKey: key)
            try accounts.store(token: token, server: client.base, key: key, makeDefault: true)
        } catch { throw deadline.failure(error) }
        printOut("Logged in to \(client.base) as \(key.publicKey.npub)")
    }
}

struct ListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List local binders (last commit, commits waiting to be pushed) and your binders on the server.")

    @OptionGroup var serverOptions: ServerOptions
    @Flag(help: "Only the local binders; no network.")
    var local = false
    @OptionGroup var passphrase: PassphraseOptions

    @Flag(help: "Print one JSON object (local binders; the server's, or why they are missing).")
    var json = false

    @OptionGroup var deadline: DeadlineOptions

    /// Offline, or without a login, the local binders are still listed (exit 0) and the
    /// reason the server's are missing is said (ListReport, Reports.swift), after at most
    /// `--deadline` without an answer.
    func run() throws {
        let state = StateDirectory()
        var report = ListReport.gatherLocal(state)
        if !local { try report.addServer(serverOptions, passphrase: passphrase.source, state: state, retry: deadline.policy) }
        if json { try report.printJSON() } else { report.printText() }
    }
}

/// Prints transfer progress on stderr (a terminal only, unless forced): one line updated in
/// place on a terminal, plain lines otherwise (ProgressLine).
final class ProgressPrinter: Sendable {
    private let line = ProgressLine()
    private let started = Date()
    /// Guards that the finished line is shown once.
    private let finished = Mutex(false)
    let enabled: Bool

    init(force: Bool = false) { enabled = force || isatty(2) == 1 }

    func report(_ progress: SyncEngine.Progress) {
        guard enabled else { return }
        let done = progress.totalObjects > 0 && progress.receivedObjects == progress.totalObjects
        let text = (progress.pushing ? "Sending " : "Receiving ")
            + ProgressLine.transfer(objects: progress.receivedObjects, of: progress.totalObjects, bytes: progress.bytes,
                                    elapsed: Date().timeIntervalSince(started))
        guard done else { return line.update(text) }
        if finished.withLock({ finished in defer { finished = true }; return !finished }) { line.finish(text) }
    }

    var callback: (@Sendable (SyncEngine.Progress) -> Void)? {
        guard enabled else { return nil }
        return { @Sendable [self] progress in self.report(progress) }
    }
}

struct CloneCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "clone",
        abstract: "Clone one of your binders from the server (by repository id, or from the web app's QR payload).")

    @Argument(help: "The repository id on the server (see 'binder list').")
    var repoId: String?
    @Option(help: "The local name (default: the repository id).")
    var name: String?
    @Option(help: "Read the web app's QR payload (JSON) from FILE, or '-' for stdin, instead of REPO_ID.")
    var qr: String?
    @Flag(help: "Show transfer progress even when stderr is not a terminal.")
    var progress = false
    @OptionGroup var serverOptions: ServerOptions
    @OptionGroup var deadline: DeadlineOptions
    @OptionGroup var passphrase: PassphraseOptions

    func validate() throws {
        guard (repoId == nil) != (qr == nil) else { throw ValidationError("give either REPO_ID or --qr FILE") }
        if let repoId, !SyncTarget.isValidRepoID(repoId) { throw ValidationError("'\(repoId)' is not a repository id") }
        if let name, !BinderLocator.isSafeName(name) { throw ValidationError("'\(name)' is not a usable binder name") }
    }

    func run() throws {
        let state = StateDirectory()
        // A clone made now would not be rotated (it is not in the rotation's record).
        try KeyRotationRecord.refuseWhileUnderWay(state)
        try state.ensureExists()
        let accounts = Accounts(path: state.accountsFile)
        let key = try KeyStore(state: state).secretKey(passphrase: passphrase.source)
        let session: ServerSession
        let target: SyncTarget
        if let qr {
            let bytes: [UInt8]
            if qr == "-" { bytes = [UInt8](FileHandle.standardInput.readDataToEndOfFile()) }
            else if let data = FileManager.default.contents(atPath: qr) { bytes = [UInt8](data) }
            else { throw CommandFailure("cannot read \(qr)") }
            do {
                let payload = try ClonePayload(json: bytes)
                let (server, id) = try payload.split()
                let client = try ServerClient(server: server, retry: deadline.policy)
                guard SyncTarget.isValidRepoID(id) else { throw SyncError.configuration("the QR payload names a bad repository id") }
                // The QR's token serves this clone only and is never stored; if it has expired,
                // the user's own key logs in instead.
                session = ServerSession(client: client, token: payload.token, key: key)
                target = SyncTarget(server: client.base, repoId: id)
            } catch let error as SyncError { throw deadline.failure(error) }
        } else {
            let client = try serverOptions.client(accounts, retry: deadline.policy)
            session = ServerSession(client: client, key: key, accounts: accounts)
            target = SyncTarget(server: client.base, repoId: repoId!)
        }
        let localName = name ?? target.repoId
        guard BinderLocator.isSafeName(localName) else {
            throw CommandFailure("'\(localName)' is not a usable local name; choose one with --name")
        }
        let path = BinderLocator(state: state).path(forName: localName)
        guard !FileManager.default.fileExists(atPath: path) else {
            throw CommandFailure("a binder named '\(localName)' already exists at \(path); choose another with --name")
        }
        try FileManager.default.createDirectory(atPath: state.bindersDirectory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        do {
            // Bare, as `binder create` makes them: one layout for every binder (a clone made
            // before, with a work tree, is read and synced all the same).
            let repository = try LocalBinder.create(path: path).repository
            try target.write(repository)
            let engine = try SyncEngine(repositoryPath: path, key: BinderKey.conversationKey(owner: key), session: session,
                                        target: target, author: commitAuthor(), logger: quietLogger("binder.clone"),
                                        progress: ProgressPrinter(force: progress).callback, retry: deadline.policy)
            let report = try engine.sync()
            guard report.tip != nil else { throw CommandFailure("the server has no repository '\(target.repoId)' (or it is empty)") }
            do { try BinderCreator.checkKey(repository, key: BinderKey.conversationKey(owner: key)) } catch {
                throw CommandFailure("cloned, but your key cannot read this binder: \(error)")
            }
        } catch {
            try? FileManager.default.removeItem(atPath: path)
            if let error = error as? CommandFailure { throw error }
            if let error = error as? SyncError { throw deadline.failure(error) }
            throw CommandFailure("cannot clone: \(error)")
        }
        printOut("Cloned \(target.repoId) from \(target.server) into \(path)")
    }
}

struct SyncCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Fetch, merge and push a binder (the first sync of a local binder creates it on the server).")

    @Argument(help: "A binder's name or path (default: the only local binder).")
    var binder: String?
    @Option(name: .customLong("repo-id"), help: "For a binder never synced: its repository id on the server (default: a new binder-<milliseconds>-<random> id).")
    var repoId: String?
    @Flag(help: "Show transfer progress even when stderr is not a terminal.")
    var progress = false
    @OptionGroup var serverOptions: ServerOptions
    @OptionGroup var deadline: DeadlineOptions
    @OptionGroup var passphrase: PassphraseOptions
    @Option(name: .customLong("retired-passphrase-file"),
            help: ArgumentHelp("After 'binder key rotate': the retired key's old passphrase, from the first line of FILE, to delete the binder's old copy on the server when its old login has expired (else asked on a terminal).", valueName: "FILE"))
    var retiredPassphraseFile: String?

    func run() throws {
        let state = StateDirectory()
        let local = try BinderLocator(state: state).binder(try defaultBinder(binder, state: state))
        let repository = local.repository, path = local.path
        let accounts = Accounts(path: state.accountsFile)
        // The server: the one this binder syncs with, unless --server/BINDER_SERVER names another
        // (a move); a binder never synced takes the default and --repo-id, else a new id that
        // cannot collide with anyone's (the server creates repositories on a first push).
        let configured = SyncTarget.read(repository)
        if let configured, let repoId, repoId != configured.repoId {
            throw CommandFailure("this binder already syncs as '\(configured.repoId)'")
        }
        var target = configured
        if configured == nil || serverOptions.chosen != nil {
            let base = try serverOptions.client(accounts).base
            if base != configured?.server {
                let id = repoId ?? configured?.repoId ?? SyncTarget.newRepoID()
                guard SyncTarget.isValidRepoID(id) else { throw CommandFailure("'\(id)' is not a usable repository id; choose one with --repo-id") }
                // Servers treat scan-* as a share's staging copy, which they delete when it ends.
                guard !id.hasPrefix("scan-") else {
                    throw CommandFailure("'\(id)': ids starting with 'scan-' are a share's staging copies, which the server deletes; choose another with --repo-id")
                }
                target = SyncTarget(server: base, repoId: id)
            }
        }
        // One writer per binder: a mounted binder is synced by its mount, which holds the key
        // (the command asks it; no passphrase is asked here); otherwise this command holds the
        // writer lock while it syncs.
        let writerLock: WriterLock
        do { writerLock = try WriterLock.acquire(gitDirectory: local.gitDirectory) } catch .held(let holder) {
            // A binder `binder key rotate` re-encrypted moves to a new id, which only this command does.
            if configured != nil, SyncTarget.rotatedFrom(repository) != nil {
                throw CommandFailure("cannot move \(BinderLocator.displayName(path)) to its new key's repository while it is \(holder): unmount it first")
            }
            return try syncThroughMount(holder, path: path, configured: configured, chosen: target!)
        } catch {
            throw CommandFailure("cannot sync \(path): \(error)")
        }
        writerLock.record(WriterLock.Holder(pid: getpid(), command: "sync"))
        defer { withExtendedLifetime(writerLock) {} }
        let key = try KeyStore(state: state).secretKey(passphrase: passphrase.source)
        let conversationKey = try BinderKey.conversationKey(owner: key)
        do { try BinderCreator.checkKey(repository, key: conversationKey) } catch {
            throw CommandFailure("your key cannot read \(path): \(error)")
        }
        // A binder `binder key rotate` re-encrypted moves to a new id on its server.
        let rotation = RotatedBinderSync(repository: repository, path: path, name: BinderLocator.displayName(path), state: state, accounts: accounts,
                                         key: key, retiredPassphrase: retiredPassphraseFile.map { .file($0) })
        let moved = try configured.flatMap { try rotation.target(configured: $0, retry: deadline.policy) }
        let chosen = moved ?? target!
        let client: ServerClient
        do { client = try ServerClient(server: chosen.server, retry: deadline.policy) } catch { throw failure(error) }
        let session = ServerSession(client: client, key: key, accounts: accounts)
        let report: SyncReport
        do {
            let engine = try SyncEngine(repositoryPath: path, key: conversationKey, session: session, target: chosen,
                                        author: commitAuthor(), logger: quietLogger("binder.sync"),
                                        progress: ProgressPrinter(force: progress).callback, retry: deadline.policy)
            // The target is remembered by the engine once the server accepted it.
            report = try engine.sync()
        } catch .gone(let why) as SyncError {
            throw Self.movedAway(BinderLocator.displayName(path), chosen, why)
        } catch let error as SyncError {
            throw deadline.failure(error)
        }
        printOut("Synced \(BinderLocator.displayName(path)): " + syncSummary(report, target: chosen))
        for line in try rotation.finish(moved: moved, client: client) { printOut(line) }
    }

    /// Exit code of a sync whose repository its owner deleted on the server (binder serve's 410).
    static let movedAwayExitCode: Int32 = 3

    /// The server answered that its owner deleted this binder's repository: another device
    /// rotated the key (and moved the binder), or deleted it. Nothing here is touched.
    static func movedAway(_ name: String, _ target: SyncTarget, _ why: String) -> CommandFailure {
        CommandFailure("\(name)'s copy \(target.repoId) on \(target.server) was deleted by its owner (\(why)): this binder was moved to a new key "
                       + "on another device (binder key rotate), or deleted there. Nothing here was changed; your unsynced commits stay in "
                       + "\(name). Bring the new key here with 'binder key rotate --import' (its nsec on standard input: this binder, "
                       + "unsynced commits included, is re-encrypted to it and the old key kept as retired), then 'binder sync \(name)' finds "
                       + "the moved copy among the new key's repositories and brings your commits onto it", exitCode: movedAwayExitCode)
    }

    /// The binder is held by another process: a mount is asked to sync through its control
    /// channel; anything else (a mount that cannot, another `binder sync`) is a refusal naming it.
    private func syncThroughMount(_ holder: WriterLock.Holder, path: String, configured: SyncTarget?, chosen: SyncTarget) throws {
        let name = BinderLocator.displayName(path)
        guard let mountpoint = holder.mountpoint else {
            throw CommandFailure("cannot sync \(name) now: it is \(holder); try again when it has finished")
        }
        guard configured == nil || configured == chosen else {
            throw CommandFailure("cannot change where \(name) syncs while it is \(holder): unmount it first")
        }
        guard let control = holder.control else {
            throw CommandFailure("cannot sync \(name) while it is \(holder): that mount takes no requests; unmount it first")
        }
        // A binder with no server yet: the mount is told where (and the id, if one was chosen;
        // else the mount picks one, once), and starts syncing there.
        let request = configured != nil ? ControlRequest.sync : "\(ControlRequest.sync) \(chosen.server)" + (repoId.map { " " + $0 } ?? "")
        let answer: String
        do { answer = try ControlClient.send(request, to: control) } catch {
            throw CommandFailure("cannot sync \(name) while it is \(holder): \(error); unmount it first")
        }
        if answer.hasPrefix("ok ") {
            printOut("Synced \(name): \(answer.dropFirst(3)) (by its mount at \(mountpoint))")
            return
        }
        let refusal = ControlRefusal(answer: answer)
        if refusal.code == .moved {
            throw CommandFailure("\(name)'s copy on \(chosen.server) was deleted by its owner: this binder was moved to a new key on another "
                                 + "device (binder key rotate), or deleted there. Nothing here was changed; your unsynced commits stay in \(name). "
                                 + "Unmount it ('binder unmount \(mountpoint)'), bring the new key here with 'binder key rotate --import', "
                                 + "then 'binder sync \(name)' brings your commits onto the moved copy", exitCode: Self.movedAwayExitCode)
        }
        let reason = answer.hasPrefix("error ") ? String(answer.dropFirst(6)) : answer
        throw CommandFailure("cannot sync \(name) while it is \(holder): \(reason)")
    }
}

/// What a sync did, in one line ("pushed 2 commit(s)", "up to date").
func syncSummary(_ report: SyncReport, target: SyncTarget) -> String {
    var summary: [String] = []
    if report.createdOnServer { summary.append("created \(target.repoId) on \(target.server)") }
    switch report.outcome {
    case .upToDate: break
    case .fastForward(_, let paths): summary.append("received \(paths.count) changed file(s)")
    case .merged(_, let paths, let conflicts):
        summary.append("merged \(paths.count) changed file(s)")
        if !conflicts.isEmpty { summary.append("\(conflicts.count) conflict(s) resolved (see 'binder status')") }
    }
    if report.pushedCommits > 0 { summary.append("pushed \(report.pushedCommits) commit(s)") }
    return summary.isEmpty ? "up to date" : summary.joined(separator: "; ")
}

struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show a binder's sync state: server, last sync, commits waiting to be pushed, last error, conflicts resolved.")

    @Argument(help: "A binder's name or path (default: the only local binder).")
    var binder: String?
    @Flag(help: "Print one JSON object.")
    var json = false

    func run() throws {
        let state = StateDirectory()
        let report = StatusReport.gather(try BinderLocator(state: state).binder(try defaultBinder(binder, state: state)), state: state)
        if json { try report.printJSON() } else { report.printTextWithMount() }
    }
}

extension StatusCommand {
    /// The last `error`-level line of the mount daemon's log (its last 64 KB).
    static func lastError(inLog path: String) -> String? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        let size = (try? handle.seekToEnd()) ?? 0
        try? handle.seek(toOffset: size > 65_536 ? size - 65_536 : 0)
        let text = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
        return text.split(separator: "\n").last { $0.split(separator: " ").dropFirst().first == "error" }.map(String.init)
    }
}

/// `BINDER` when given, else the only local binder.
func defaultBinder(_ argument: String?, state: StateDirectory) throws -> String {
    if let argument { return argument }
    let names = ((try? FileManager.default.contentsOfDirectory(atPath: state.bindersDirectory)) ?? []).filter { !$0.hasPrefix(".") }
    guard names.count == 1 else {
        // Several: the argument is missing (a usage error); none: nothing to act on.
        if names.isEmpty { throw CommandFailure("no local binders yet") }
        throw CommandFailure.usage("several binders: name one (\(names.sorted().joined(separator: ", ")))")
    }
    return names[0]
}

/// Commands report in their own words; the engine's log lines are for the mount's log file.
func quietLogger(_ label: String) -> Logger {
    var logger = Logger(label: label)
    logger.logLevel = .error
    return logger
}
