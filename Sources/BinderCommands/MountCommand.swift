import ArgumentParser
import BinderCore
import BinderCrypto
import BinderFUSE
import BinderGit
import BinderSync
import BinderSystem
import Foundation
import Glibc
import Logging

struct MountCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mount",
        abstract: "Mount a binder as a folder of markdown files and attachments.",
        discussion: "Returns once the mount answers; the daemon logs to binder's state folder (logs/NAME.log).")

    @Argument(help: "A binder's name or the path of its git repository (bare or not).")
    var binder: String
    @Argument(help: "An existing, empty folder to mount on.")
    var mountpoint: String
    @Flag(help: "Stay attached; unmount cleanly on SIGINT or SIGTERM.")
    var foreground = false
    @Flag(name: .customLong("read-only"), help: "Refuse every change through the mount.")
    var readOnly = false
    @Option(name: .customLong("cache-size"), help: "Upper bound of decrypted content kept in memory, e.g. 256M, 1G.")
    var cacheSize: String = "256M"
    @Flag(name: .customLong("no-sync"), help: "Never touch the network (a binder that syncs is otherwise pulled at mount, pushed after each save, and polled).")
    var noSync = false
    @Option(name: .customLong("sync-interval"), help: "Seconds between polls of the server for changes from other devices.")
    var syncInterval: Double = 60
    @Option(name: .customLong("sync-max-backoff"), help: "Longest wait, in seconds, between retries while the server cannot be reached (1 s, 2 s, 4 s … up to this).")
    var syncMaxBackoff: Double = 60
    @OptionGroup var passphrase: PassphraseOptions
    /// Internal: the daemon reads its key from fd 3 and reports readiness on fd 4.
    @Flag(name: .customLong("daemon-child"), help: .hidden)
    var daemonChild = false

    func run() throws {
        guard let cacheBytes = parseSize(cacheSize) else {
            throw CommandFailure("--cache-size: '\(cacheSize)' is not a size like 256M or 1G")
        }
        let state = StateDirectory()
        let mountpoint = URL(fileURLWithPath: self.mountpoint).standardizedFileURL.path
        let (repository, path) = try BinderLocator(state: state).open(binder)
        let name = BinderLocator.displayName(path)
        try state.ensureExists()
        try FileManager.default.createDirectory(atPath: state.logsDirectory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let logPath = state.logsDirectory + "/\(name).log"

        if daemonChild {
            return try runDaemonChild(repository: repository, path: path, name: name, mountpoint: mountpoint, cacheBytes: cacheBytes,
                                      logPath: logPath)
        }
        try checkMountpoint(mountpoint)
        let key = try KeyStore(state: state).secretKey(passphrase: passphrase.source)
        let conversationKey = NIP44.ConversationKey(selfOf: key)
        do { try BinderCreator.checkKey(repository, key: conversationKey) } catch {
            throw CommandFailure("cannot mount \(path): \(error)")
        }
        if foreground {
            let logger = FileLogHandler.logger(label: "binder.mount", path: logPath, echo: true)
            let (mount, view) = try makeMount(repository: repository, key: conversationKey, name: name, mountpoint: mountpoint,
                                              cacheBytes: cacheBytes, logger: logger)
            try mountOrFail(mount, mountpoint: mountpoint)
            logger.info("mounted", metadata: ["binder": "\(path)", "mountpoint": "\(mountpoint)"])
            let sync = startSync(view: view, repository: repository, path: path, key: key, state: state, logger: logger)
            printErr("Mounted \(name) at \(mountpoint). Press Ctrl-C to unmount.")
            let status = mount.run()
            sync?.stop()
            logger.info("unmounted", metadata: ["mountpoint": "\(mountpoint)"])
            if status != 0 { throw CommandFailure("the mount loop ended with an error (\(status))") }
            return
        }
        try spawnDaemon(key: key, logPath: logPath, mountpoint: mountpoint)
        printOut("Mounted \(name) at \(mountpoint)")
        printOut("Unmount with: binder unmount \(mountpoint)   (log: \(logPath))")
    }

    private func checkMountpoint(_ mountpoint: String) throws {
        var info = stat()
        guard stat(mountpoint, &info) == 0 else {
            throw CommandFailure("mount point \(mountpoint) does not exist")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw CommandFailure("mount point \(mountpoint) is not a folder") }
        if MountTable.entry(at: mountpoint) != nil {
            throw CommandFailure("mount point \(mountpoint) is busy: something is already mounted there")
        }
    }

    private func makeMount(repository: GitRepository, key: NIP44.ConversationKey, name: String, mountpoint: String,
                           cacheBytes: Int, logger: Logger) throws -> (FUSEMount, BinderView) {
        do {
            let view = try BinderView(repository: repository, key: key, logger: logger,
                                      options: BinderView.Options(cacheCapacity: cacheBytes, author: commitAuthor()))
            return (try FUSEMount(view: view, mountpoint: mountpoint,
                                  options: FUSEMount.Options(readOnly: readOnly, fsName: "binder:\(name)"), logger: logger), view)
        } catch {
            throw CommandFailure("cannot mount: \(error)")
        }
    }

    private func mountOrFail(_ mount: FUSEMount, mountpoint: String) throws {
        do { try mount.mount() } catch { throw CommandFailure("\(error)") }
    }

    /// The detached daemon: key from fd 3, readiness (or the reason it failed) on fd 4.
    private func runDaemonChild(repository: GitRepository, path: String, name: String, mountpoint: String, cacheBytes: Int,
                                logPath: String) throws {
        let logger = FileLogHandler.logger(label: "binder.mount", path: logPath, echo: false)
        let report = DaemonProcess.report
        guard let raw = DaemonProcess.receiveSecret(count: 32), let key = try? SecretKey(bytes: raw) else {
            report("error: the mount daemon did not receive the key")
            throw CommandFailure("no key on fd 3")
        }
        do {
            let (mount, view) = try makeMount(repository: repository, key: NIP44.ConversationKey(selfOf: key), name: name,
                                              mountpoint: mountpoint, cacheBytes: cacheBytes, logger: logger)
            try mountOrFail(mount, mountpoint: mountpoint)
            logger.info("mounted", metadata: ["mountpoint": "\(mountpoint)", "pid": "\(getpid())"])
            let sync = startSync(view: view, repository: repository, path: path, key: key, state: StateDirectory(), logger: logger)
            report("ready")
            let status = mount.run()
            sync?.stop()
            logger.info("unmounted", metadata: ["mountpoint": "\(mountpoint)", "status": "\(status)"])
        } catch let failure as CommandFailure {
            logger.error("mount failed: \(failure.message)")
            report("error: " + failure.message)
            throw failure
        }
    }

    /// Background sync for a binder that has a server (set by `binder clone` or `binder sync`),
    /// unless `--no-sync` (a read-only mount still follows the other devices). The view is
    /// served meanwhile; the first pull starts now.
    private func startSync(view: BinderView, repository: GitRepository, path: String, key: SecretKey,
                           state: StateDirectory, logger: Logger) -> SyncScheduler? {
        guard !noSync else {
            view.setSyncHooks(onCommit: nil, status: { "sync: off (--no-sync)\n" })
            return nil
        }
        guard let target = SyncTarget.read(repository) else {
            view.setSyncHooks(onCommit: nil, status: { "sync: off (local only: 'binder sync' sets a server)\n" })
            return nil
        }
        do {
            let client = try ServerClient(server: target.server)
            let session = ServerSession(client: client, key: key, accounts: Accounts(path: state.accountsFile))
            let engine = try SyncEngine(repositoryPath: path, key: NIP44.ConversationKey(selfOf: key), session: session,
                                        target: target, author: commitAuthor(), logger: logger)
            let scheduler = try SyncScheduler(engine: engine, view: view, repositoryPath: path,
                                              options: .init(pollInterval: max(1, syncInterval), maxBackoff: max(1, syncMaxBackoff)),
                                              logger: logger)
            scheduler.start()
            logger.info("sync on", metadata: ["server": "\(target.server)", "repository": "\(target.repoId)"])
            return scheduler
        } catch {
            logger.error("sync off: \(error)")
            let reason = "\(error)"
            view.setSyncHooks(onCommit: nil, status: { "sync: off (error: \(reason))\n" })
            return nil
        }
    }

    /// Starts this binary again as a detached daemon (new session, stdio on /dev/null), hands it
    /// the key through a pipe (never argv or the environment), and waits for it to report.
    private func spawnDaemon(key: SecretKey, logPath: String, mountpoint: String) throws {
        var arguments = ["mount", binder, mountpoint, "--daemon-child", "--cache-size", cacheSize,
                         "--sync-interval", "\(syncInterval)", "--sync-max-backoff", "\(syncMaxBackoff)"]
        if readOnly { arguments.append("--read-only") }
        if noSync { arguments.append("--no-sync") }
        let daemon: DaemonProcess
        do {
            daemon = try DaemonProcess.spawnSelf(arguments: arguments, secret: key.withUnsafeBytes { SecureBytes($0) })
        } catch {
            throw CommandFailure("cannot start the mount daemon: \(error)")
        }
        let message = daemon.readStatusLine()
        guard message == "ready" else {
            daemon.wait()
            if message.hasPrefix("error: ") { throw CommandFailure(String(message.dropFirst(7))) }
            throw CommandFailure("the mount daemon stopped before the mount was ready; see \(logPath)")
        }
        // The daemon answers once its loop runs: wait for a first stat so the mount is usable.
        var info = stat()
        _ = stat(mountpoint, &info)
    }
}
struct UnmountCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unmount",
        abstract: "Unmount a binder (also clears a mount whose daemon died).")

    @Argument(help: "The mount point.")
    var mountpoint: String

    func run() throws {
        let path = URL(fileURLWithPath: mountpoint).standardizedFileURL.path
        guard let entry = MountTable.entry(at: path) else { throw CommandFailure("\(path) is not mounted") }
        guard entry.fsType.hasPrefix("fuse") else { throw CommandFailure("\(path) is not a binder mount (\(entry.fsType))") }
        if runTool("fusermount3", ["-u", path]) == 0 || MountTable.entry(at: path) == nil {
            printOut("Unmounted \(path)")
            return
        }
        // A daemon that died leaves a mount that answers ENOTCONN: detach it lazily.
        if runTool("fusermount3", ["-u", "-z", path]) == 0 || umount2(path, Int32(MNT_DETACH)) == 0 {
            printOut("Unmounted \(path) (the mount was stale)")
            return
        }
        throw CommandFailure("cannot unmount \(path): it is in use (close the files and folders open there)")
    }

    private func runTool(_ tool: String, _ arguments: [String]) -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [tool] + arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return -1 }
        process.waitUntilExit()
        return process.terminationStatus
    }
}

/// "256M", "1G", "4096", "512K".
func parseSize(_ text: String) -> Int? {
    let units: [Character: Int] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30]
    var digits = text.uppercased()
    var multiplier = 1
    if digits.hasSuffix("B") { digits.removeLast() }
    if let last = digits.last, let unit = units[last] { multiplier = unit; digits.removeLast() }
    guard let value = Int(digits), value > 0 else { return nil }
    let (total, overflow) = value.multipliedReportingOverflow(by: multiplier)
    return overflow ? nil : total
}
