import ArgumentParser
import BinderCore
import BinderCrypto
import BinderFUSE
import BinderImport
import BinderSync
import BinderSystem
import Foundation
import Glibc
import Logging

struct MountCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mount",
        abstract: "Mount a binder as a folder of markdown files and attachments.",
        discussion: """
        Returns once the mount answers; the daemon logs to NAME.log in $XDG_STATE_HOME/binder (BINDER_HOME/logs with BINDER_HOME). \
        A binder has one writer: while it is mounted, a second mount is refused and 'binder sync' \
        goes through the mount. A mount whose daemon died is cleared by the next mount. \
        With --idle (or -o idle=, or 'idle = 15m' in the settings file), the mount locks itself after \
        that long without a file access: it drops all plaintext and the key and unmounts ('binder lock' \
        does the same at once). The same -o options work with 'mount -t fuse.binder' and in /etc/fstab.
        """)

    @Argument(help: "A binder's name or the path of its git repository (bare or not).")
    var binder: String
    @Argument(help: "An existing, empty folder to mount on.")
    var mountpoint: String
    @Flag(help: "Stay attached; unmount cleanly on SIGINT, SIGTERM or SIGHUP.")
    var foreground = false
    @Flag(name: .customLong("read-only"), help: "Refuse every change through the mount.")
    var readOnly = false
    @Option(name: .customShort("o"), help: "Mount options, comma-separated: ro, rw, nonempty, allow_other, idle=DURATION, passphrase_file=PATH (see 'man binder').")
    var options: [String] = []
    @Option(help: "Lock after this long without a file access (drop plaintext and key, unmount), e.g. 15m, 1h; 0 = never. Default: the settings file's 'idle', else never.")
    var idle: String?
    @Flag(help: "Desktop notifications (notify-send) for refused saves, failed syncs and conflicts. Default: the settings file's 'notify'.")
    var notify = false
    @Flag(name: .customLong("install-unit"),
          help: "Do not mount now: write a systemd user unit that mounts BINDER on MOUNTPOINT at login (after 'binder unlock') and unmounts at logout.")
    var installUnit = false
    @Flag(help: "Mount even a repository that does not look like a binder, or on a folder that is not empty.")
    var force = false
    @Option(name: .customLong("cache-size"), help: "Upper bound of decrypted content kept in memory, e.g. 256M, 1G.")
    var cacheSize: String = "256M"
    @Option(name: .customLong("max-attachment-size"),
            help: "Largest attachment a save may write, e.g. 256M (records are held to 65,535 bytes by the format); a write past it fails with EFBIG.")
    var maxAttachmentSize: String = "256M"
    @Flag(name: .customLong("no-sync"), help: "Never touch the network (a binder that syncs is otherwise pulled at mount, pushed after each save, and polled).")
    var noSync = false
    @Option(name: .customLong("sync-interval"), help: "Seconds between polls of the server for changes from other devices.")
    var syncInterval: Double = 60
    @Option(name: .customLong("sync-max-backoff"), help: "Longest wait, in seconds, between retries while the server cannot be reached (1 s, 2 s, 4 s … up to this).")
    var syncMaxBackoff: Double = 60
    @Option(name: .customLong("views"), help: "hidden (default): MOUNT/.binder (timeline, tags, history, deleted, status) is not listed by readdir, so backups skip it; visible: it is listed.")
    var views: ViewsVisibility = .hidden
    @OptionGroup var passphrase: PassphraseOptions
    /// Internal: the daemon reads its key from fd 3 and reports readiness on fd 4.
    @Flag(name: .customLong("daemon-child"), help: .hidden)
    var daemonChild = false
    /// Internal: the descriptor on which the daemon inherits the binder's writer lock.
    @Option(name: .customLong("writer-lock-fd"), help: .hidden)
    var writerLockFD: Int32?

    /// The `-o` options (validated in `validate`).
    private var mountOptions: MountOptions { (try? MountOptions(parsing: options)) ?? MountOptions() }

    private var isReadOnly: Bool { readOnly || mountOptions.readOnly }

    /// Seconds without a file access before the mount locks itself (nil: never): `--idle`, else
    /// `-o idle=`, else the settings file.
    private var idleSeconds: UInt32? {
        let chosen = idle.flatMap(parseDuration) ?? mountOptions.idleSeconds ?? Settings.load(StateDirectory()).idleSeconds
        return chosen == 0 ? nil : chosen
    }

    private var notifies: Bool { notify || Settings.load(StateDirectory()).notify }

    /// `--passphrase-file`, else `-o passphrase_file=`, else the terminal.
    private var passphraseSource: PassphraseSource {
        (passphrase.passphraseFile ?? mountOptions.passphraseFile).map { .file($0) } ?? .terminal
    }

    func validate() throws {
        do { _ = try MountOptions(parsing: options) } catch { throw ValidationError(error.description) }
        if let idle, parseDuration(idle) == nil { throw ValidationError("--idle: '\(idle)' is not a duration like 15m, 1h or 90s") }
    }

    func run() throws {
        guard let cacheBytes = parseSize(cacheSize) else {
            throw CommandFailure.usage("--cache-size: '\(cacheSize)' is not a size like 256M or 1G")
        }
        guard parseSize(maxAttachmentSize) != nil else {
            throw CommandFailure.usage("--max-attachment-size: '\(maxAttachmentSize)' is not a size like 256M or 1G")
        }
        if installUnit {
            let unit = try UserUnit(binder: binder, mountpoint: mountpoint, options: unitArguments).install()
            printInfo("Wrote \(unit.path)")
            printInfo("Enable it with: systemctl --user daemon-reload && systemctl --user enable --now \(unit.name)")
            return
        }
        let state = StateDirectory()
        let mountpoint = URL(fileURLWithPath: self.mountpoint).standardizedFileURL.path
        let local = try BinderLocator(state: state).binder(binder)
        let name = BinderLocator.displayName(local.path)
        try state.ensureExists()
        try FileManager.default.createDirectory(atPath: state.logsDirectory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let logPath = state.logPath(name)

        if daemonChild {
            return try runDaemonChild(local, name: name, mountpoint: mountpoint, cacheBytes: cacheBytes,
                                      logPath: logPath)
        }
        let writerLock = try prepareToMount(local, name: name, mountpoint: mountpoint, logPath: logPath)
        let (key, conversationKey) = try unlock(local, state: state)
        if foreground {
            return try runForeground(local, name: name, mountpoint: mountpoint, key: key,
                                     conversationKey: conversationKey, cacheBytes: cacheBytes, state: state, logPath: logPath,
                                     writerLock: writerLock)
        }
        let progress = ProgressLine()
        let firstMount = FirstMountListing.isDue(gitDirectory: local.gitDirectory, line: progress)
        try spawnDaemon(key: key, logPath: logPath, mountpoint: mountpoint, writerLock: writerLock)
        printInfo("Mounted \(name) at \(mountpoint)" + (idleSeconds.map { " (locks after \(formatDuration($0)) idle)" } ?? ""))
        printInfo("Unmount with: binder unmount \(mountpoint)   (log: \(logPath))")
        if firstMount { FirstMountListing(mountpoint: mountpoint, line: progress).run() }
    }

    /// Checks that the mountpoint and the repository may be mounted, and takes the binder's
    /// writer lock (removing git locks a dead process left).
    private func prepareToMount(_ local: LocalBinder, name: String, mountpoint: String,
                                logPath: String) throws -> WriterLock? {
        try prepareMountpoint(mountpoint)
        if !force {
            do { try BinderCreator.checkLooksLikeBinder(local.repository) } catch let error as BinderCreator.NotABinder {
                throw notABinder(local.path, error)
            } catch { throw CommandFailure("cannot mount \(local.path): \(error)") }
        }
        let writerLock = try takeWriterLock(local, name: name)
        if !force && !mountOptions.nonempty { try checkEmpty(mountpoint) }
        // Named as the holder at once; the daemon adds its own pid and control socket when ready.
        writerLock?.record(WriterLock.Holder(pid: getpid(), command: "mount", mountpoint: mountpoint))
        if writerLock != nil {
            // The writer lock is held: no binder process is in the middle of a git update, so a
            // git lock file nobody has open was left by a process that died.
            let logger = FileLogHandler.logger(label: "binder.mount", path: logPath, echo: false)
            for lock in GitLockFiles.removeStale(gitDirectory: local.gitDirectory) {
                logger.warning("removed a stale git lock", metadata: ["file": "\(lock.name)"])
                printOut("Removed a stale git lock left by a process that stopped: \(lock)")
            }
            // Likewise a pack nobody is writing that never reached its name (a fold cut off by
            // an unmount or a kill): nothing else would ever remove it.
            let temporary = GitTemporaryPacks.removeStale(gitDirectory: local.gitDirectory)
            if !temporary.names.isEmpty {
                logger.info("removed unfinished pack files", metadata: ["files": "\(temporary.names.count)", "bytes": "\(temporary.bytes)"])
            }
            // A loose object cut short would hang libgit2 (RepositoryCare): out of its sight first.
            for object in RepositoryCare.moveDamagedObjectsAside(gitDirectory: local.gitDirectory) {
                logger.warning("a damaged git object was moved aside (files that need it read as errors)", metadata: ["object": "\(object)"])
                printOut("Moved aside a damaged git object, objects/\(object) (kept in binder/damaged-objects; files that need it cannot be read)")
            }
        }
        return writerLock
    }

    /// The user's key, and the binder's conversation key, checked against the binder.
    private func unlock(_ local: LocalBinder, state: StateDirectory) throws -> (SecretKey, NIP44.ConversationKey) {
        if case .file(let file) = passphraseSource {
            printDetail("key: from the kernel keyring if unlocked, else with the passphrase in \(file)")
        }
        let key = try KeyStore(state: state).secretKey(passphrase: passphraseSource)
        let conversationKey = try BinderKey.conversationKey(owner: key)
        do { try BinderCreator.checkIsBinder(local.repository, key: conversationKey) } catch let error as BinderCreator.NotABinder {
            if !force { throw notABinder(local.path, error) }
        } catch {
            throw CommandFailure("cannot mount \(local.path): \(error)")
        }
        return (key, conversationKey)
    }

    /// `--foreground`: mounts in this process and serves until unmounted.
    private func runForeground(_ local: LocalBinder, name: String, mountpoint: String, key: SecretKey,
                               conversationKey: NIP44.ConversationKey, cacheBytes: Int, state: StateDirectory, logPath: String,
                               writerLock: WriterLock?) throws {
        let logger = FileLogHandler.logger(label: "binder.mount", path: logPath, echo: true, notify: notifyTitle(name))
        let (mount, view) = try makeMount(repository: local.repository, key: conversationKey, name: name, mountpoint: mountpoint,
                                          cacheBytes: cacheBytes, logger: logger)
        try mountOrFail(mount, mountpoint: mountpoint)
        logger.info("mounted", metadata: ["binder": "\(local.path)", "mountpoint": "\(mountpoint)"])
        let status = serve(mount, view: view, binder: local, mountpoint: mountpoint, key: key,
                           state: state, writerLock: writerLock, logger: logger) {
            if !Verbosity.isQuiet { printErr("Mounted \(name) at \(mountpoint). Press Ctrl-C to unmount.") }
        }
        if status != 0 { throw CommandFailure("the mount loop ended with an error (\(status))") }
    }

    /// The options a systemd unit's `binder mount --foreground` repeats.
    private var unitArguments: [String] {
        var arguments: [String] = []
        if readOnly { arguments.append("--read-only") }
        for option in options { arguments += ["-o", option] }
        if let idle { arguments += ["--idle", idle] }
        if notify { arguments.append("--notify") }
        if noSync { arguments.append("--no-sync") }
        if force { arguments.append("--force") }
        if cacheSize != "256M" { arguments += ["--cache-size", cacheSize] }
        if let file = passphrase.passphraseFile { arguments += ["--passphrase-file", StateDirectory.absolute(file)] }
        return arguments
    }

    /// The binder named in desktop notifications (`--notify`), nil when off.
    private func notifyTitle(_ name: String) -> String? { notifies ? name : nil }

    private func notABinder(_ path: String, _ error: BinderCreator.NotABinder) -> CommandFailure {
        CommandFailure("\(path) is not a binder: \(error); pass --force to mount it anyway")
    }

    /// The mount point exists and is a folder with nothing mounted on it. A binder mount whose
    /// daemon died (it answers ENOTCONN, and takes no writes) is cleared here.
    private func prepareMountpoint(_ mountpoint: String) throws {
        if let entry = MountTable.entry(at: mountpoint), MountTable.isDisconnected(mountpoint) {
            guard entry.fsType.hasPrefix("fuse"), entry.source.hasPrefix("binder:") else {
                throw CommandFailure("mount point \(mountpoint) is a stopped mount of \(entry.source) (\(entry.fsType)); unmount it first")
            }
            guard detachMount(mountpoint) else {
                throw CommandFailure("the previous mount at \(mountpoint) had stopped (its daemon died) and cannot be cleared; try 'binder unmount \(mountpoint)'")
            }
            printOut("The previous mount at \(mountpoint) had stopped (its daemon died); cleared it")
        }
        var info = stat()
        guard stat(mountpoint, &info) == 0 else {
            let code = errno
            throw CommandFailure(code == ENOENT ? "mount point \(mountpoint) does not exist"
                                 : "mount point \(mountpoint): \(String(cString: strerror(code)))")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw CommandFailure("mount point \(mountpoint) is not a folder") }
        if MountTable.entry(at: mountpoint) != nil {
            throw CommandFailure("mount point \(mountpoint) is busy: something is already mounted there")
        }
    }

    /// What is in a folder mounted on is hidden until the unmount: refuse unless asked for.
    private func checkEmpty(_ mountpoint: String) throws {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: mountpoint)) ?? []
        guard entries.isEmpty else {
            throw CommandFailure("mount point \(mountpoint) is not empty (\(entries.count) item\(entries.count == 1 ? "" : "s")): "
                                 + "mount on an empty folder, or pass -o nonempty to hide what is there while mounted")
        }
    }

    /// The binder's writer lock, or the refusal naming who holds it. A read-only mount of a
    /// binder on a read-only disk (nothing can write it) goes without.
    private func takeWriterLock(_ local: LocalBinder, name: String) throws -> WriterLock? {
        do {
            return try WriterLock.acquire(gitDirectory: local.gitDirectory)
        } catch .held(let holder) {
            throw CommandFailure("\(name) is already \(holder): a binder has one writer at a time"
                                 + (holder.mountpoint == nil ? "; try again when it has finished" : "; unmount it first"))
        } catch .system(_, let code) where isReadOnly && code == EROFS {
            return nil
        } catch {
            throw CommandFailure("cannot mount \(local.path): \(error)")
        }
    }

    private func makeMount(repository: LocalBinder.Repository, key: NIP44.ConversationKey, name: String, mountpoint: String,
                           cacheBytes: Int, logger: Logger) throws -> (FUSEMount, BinderView) {
        // Before the view loads its listing index: memory stays that of the folders shown.
        if !Allocator.tuneForDaemon() { logger.warning("the allocator kept its defaults (mallopt refused)") }
        do {
            let view = try BinderView(repository: repository, key: key, logger: logger,
                                      options: BinderView.Options(cacheCapacity: cacheBytes, author: commitAuthor(),
                                                                  limits: WriteLimits(attachmentBytes: parseSize(maxAttachmentSize) ?? WriteLimits.defaultAttachmentBytes),
                                                                  viewsVisible: views == .visible, readOnly: isReadOnly))
            return (try FUSEMount(view: view, mountpoint: mountpoint,
                                  options: FUSEMount.Options(readOnly: isReadOnly, fsName: "binder:\(name)",
                                                             allowOther: mountOptions.allowOther), logger: logger), view)
        } catch {
            throw CommandFailure("cannot mount: \(error)")
        }
    }

    private func mountOrFail(_ mount: FUSEMount, mountpoint: String) throws {
        do { try mount.mount() } catch { throw CommandFailure("\(error)") }
    }

    /// The detached daemon: key from fd 3, readiness (or the reason it failed) on fd 4, the
    /// writer lock its launcher took on `--writer-lock-fd`.
    private func runDaemonChild(_ local: LocalBinder, name: String, mountpoint: String, cacheBytes: Int,
                                logPath: String) throws {
        let logger = FileLogHandler.logger(label: "binder.mount", path: logPath, echo: false, notify: notifyTitle(name))
        let report = DaemonProcess.report
        let received: SecureBytes?
        do { received = try DaemonProcess.receiveSecret(count: 32) } catch {
            report(.failed(reason: "\(error)"))
            throw CommandFailure("\(error)")
        }
        guard let raw = received, let key = try? SecretKey(bytes: raw) else {
            report(.failed(reason: "the mount daemon did not receive the key"))
            throw CommandFailure("no key on fd 3")
        }
        do {
            var writerLock: WriterLock?
            if let writerLockFD {
                do { writerLock = try WriterLock.inherited(fd: writerLockFD, gitDirectory: local.gitDirectory) } catch {
                    throw CommandFailure("the mount daemon did not get the binder's writer lock: \(error)")
                }
            }
            let (mount, view) = try makeMount(repository: local.repository, key: BinderKey.conversationKey(owner: key), name: name,
                                              mountpoint: mountpoint, cacheBytes: cacheBytes, logger: logger)
            try mountOrFail(mount, mountpoint: mountpoint)
            logger.info("mounted", metadata: ["mountpoint": "\(mountpoint)", "pid": "\(getpid())"])
            _ = serve(mount, view: view, binder: local, mountpoint: mountpoint, key: key,
                      state: StateDirectory(), writerLock: writerLock, logger: logger) { report(.ready) }
        } catch let failure as CommandFailure {
            logger.error("mount failed: \(failure.message)")
            report(.failed(reason: failure.message))
            throw failure
        }
    }

    /// Serves a mounted binder until it is unmounted: its shares' notes, background sync, the
    /// idle locker and the control socket around the FUSE loop (the same for `--foreground` and
    /// the daemon; `ready` says so to whoever waits). Returns the loop's status.
    private func serve(_ mount: FUSEMount, view: BinderView, binder local: LocalBinder, mountpoint: String,
                       key: SecretKey, state: StateDirectory, writerLock: WriterLock?, logger: Logger,
                       ready: () -> Void) -> Int32 {
        let shares = MountShares(key: key, binderPath: local.path, view: view, state: state,
                                 interval: max(1, syncInterval), logger: logger)
        let sync = startSync(view: view, binder: local, key: key, shares: shares, state: state, logger: logger)
        let locker = MountLocker(activity: mount.activity, mountpoint: mountpoint, idleSeconds: idleSeconds, logger: logger)
        let imports = (try? BinderKey.conversationKey(owner: key)).map { conversationKey in
            MountImports(view: view, importer: { BinderImporter(repository: local.repository, key: conversationKey, author: commitAuthor()) },
                         readOnly: isReadOnly, logger: logger)
        }
        let control = startControl(sync: sync, shares: shares, locker: locker, imports: imports, state: state, logger: logger)
        writerLock?.record(WriterLock.Holder(pid: getpid(), command: "mount", mountpoint: mountpoint, control: control?.path))
        ready()
        // What starting the mount ran stops counting in its memory (see `CodePages`).
        CodePages.releaseStartupCode()
        if !isReadOnly { view.packIfDue() }
        locker.start()
        let status = mount.run()
        locker.stop()
        control?.stop()
        if let scheduler = sync.scheduler { Task { await scheduler.stop() } }
        logger.info("unmounted", metadata: ["mountpoint": "\(mountpoint)", "status": "\(status)"])
        return status
    }

    /// A mount's background sync: the scheduler when on, else why it is off.
    struct MountSync {
        var scheduler: SyncScheduler?
        var offReason: String
    }

    /// Background sync, unless `--no-sync` (a read-only mount still follows the other
    /// devices): at once for a binder that has a server (set by `binder clone` or `binder
    /// sync`), else from the moment `binder sync` names one through the control channel. The
    /// view is served meanwhile; the first pull starts now. Each pass first brings home the
    /// doctor's notes of the binder's active shares (`MountShares`).
    private func startSync(view: BinderView, binder local: LocalBinder, key: SecretKey, shares: MountShares,
                           state: StateDirectory, logger: Logger) -> MountSync {
        func off(_ reason: String) -> MountSync {
            view.setSyncHooks(onCommit: nil, status: { "sync: off (\(reason))\n" })
            return MountSync(scheduler: nil, offReason: reason)
        }
        guard !noSync else { return off("--no-sync") }
        let author = commitAuthor(), accounts = Accounts(path: state.accountsFile)
        do {
            let scheduler = try SyncScheduler(
                view: view, repositoryPath: local.path,
                options: .init(pollInterval: max(1, syncInterval), maxBackoff: max(1, syncMaxBackoff)), logger: logger,
                beforePass: { shares.pass() },
                makeEngine: { target in
                    let session = ServerSession(client: try ServerClient(server: target.server), key: key, accounts: accounts)
                    return try SyncEngine(repositoryPath: local.path, key: BinderKey.conversationKey(owner: key), session: session,
                                          target: target, author: author, logger: logger)
                })
            Task { await scheduler.start() }
            return MountSync(scheduler: scheduler, offReason: "")
        } catch {
            logger.error("sync off: \(error)")
            return off("error: \(error)")
        }
    }

    /// The mount's control channel (`run/mount-PID.sock`): `binder sync` while mounted asks the
    /// mount, the binder's one writer, to sync (`sync [SERVER [REPO_ID]]`), `binder status`
    /// asks for its sync state (`status`), `binder lock` asks it to lock. Without it (a path too
    /// long for a socket, say) such a `binder sync` is refused with the mount point named.
    /// `binder share --collect/--revoke` asks it to bring a share's notes home (`share-collect ID`).
    /// `binder import` hands it what it read (`import LENGTH` and the bytes: `MountImports`).
    private func startControl(sync: MountSync, shares: MountShares, locker: MountLocker, imports: MountImports?, state: StateDirectory,
                              logger: Logger) -> ControlServer? {
        ControlServer.removeDeadSockets(runDirectory: state.runDirectory)
        let scheduler = sync.scheduler, offReason = sync.offReason
        let handler: ControlServer.Handler = { request in
            let words = request.split(separator: " ").map(String.init)
            switch (words.first ?? "", words.count) {
            case (ControlRequest.shareCollect, 2):
                // Network and git work: off the cooperative threads.
                return await withCheckedContinuation { (continuation: CheckedContinuation<String, Never>) in
                    DispatchQueue.global().async { continuation.resume(returning: shares.collect(id: words[1])) }
                }
            case (ControlRequest.lock, 1):
                return locker.lock(reason: "binder lock")
            case (ControlRequest.status, 1):
                guard let scheduler else { return "ok " + ControlStatus.off(offReason).encoded }
                return "ok " + ControlStatus.on(scheduler.state()).encoded
            case (ControlRequest.sync, 1...3):
                guard let scheduler else {
                    return "error sync is off for this mount (\(offReason)): unmount it and sync, or mount it with sync on"
                }
                switch await scheduler.syncNow(server: words.count > 1 ? words[1] : nil, repoId: words.count > 2 ? words[2] : nil) {
                case .success(let report):
                    guard let target = await scheduler.target else { return "error no server" }
                    return "ok " + syncSummary(report, target: target)
                case .failure(.gone(let why)):
                    // Typed, so that 'binder sync' can say what to do (and exit 3) without reading the text.
                    return ControlRefusal(code: .moved, errno: ESTALE, message: "the server's copy was deleted by its owner: \(why)").line
                case .failure(let error):
                    return "error \(error)"
                }
            default:
                return "error unknown request (this mount answers: sync, status, lock, share-collect, import)"
            }
        }
        do {
            let server = try ControlServer(path: ControlServer.path(runDirectory: state.runDirectory), handler: handler,
                                           payloadHandler: imports?.payloadHandler)
            server.start()
            return server
        } catch {
            logger.warning("no control channel: \(error)")
            return nil
        }
    }

    /// Starts this binary again as a detached daemon (new session, stdio on /dev/null), hands it
    /// the key through a pipe (never argv or the environment) and the writer lock as an open
    /// descriptor, and waits for it to report.
    private func spawnDaemon(key: SecretKey, logPath: String, mountpoint: String, writerLock: WriterLock?) throws {
        var arguments = ["mount", binder, mountpoint, "--daemon-child", "--cache-size", cacheSize, "--max-attachment-size", maxAttachmentSize,
                         "--sync-interval", "\(syncInterval)", "--sync-max-backoff", "\(syncMaxBackoff)"]
        if isReadOnly { arguments.append("--read-only") }
        if noSync { arguments.append("--no-sync") }
        if mountOptions.allowOther { arguments += ["-o", "allow_other"] }
        arguments += ["--idle", "\(idleSeconds ?? 0)s"]
        if notifies { arguments.append("--notify") }
        if Verbosity.isVerbose { arguments.append("--verbose") }
        arguments += ["--views", views.rawValue]
        if writerLock != nil { arguments += ["--writer-lock-fd", "\(DaemonProcess.inheritedDescriptor)"] }
        let secret: SecureBytes
        do { secret = try key.withUnsafeBytes { try SecureBytes(copying: $0) } } catch { throw CommandFailure("\(error)") }
        let daemon = try DaemonLauncher.start("the mount daemon", arguments: arguments, secret: secret, inherited: writerLock?.fd,
                                              mountpoint: mountpoint, logPath: logPath)
        printDetail("mount daemon: pid \(daemon.pid), log \(logPath)")
    }
}

/// Detaches the mount at `path` lazily (a mount whose daemon died answers ENOTCONN until then).
func detachMount(_ path: String) -> Bool {
    runQuietly("fusermount3", ["-u", "-z", path]) == 0 || umount2(path, Int32(MNT_DETACH)) == 0 || MountTable.entry(at: path) == nil
}

/// Runs a tool found on PATH with its output discarded; its exit status (-1 if it cannot run).
/// It never talks to the terminal: `Process` starts it in a process group of its own, where a
/// read of the terminal would stop it, so its input is /dev/null too.
func runQuietly(_ tool: String, _ arguments: [String]) -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = [tool] + arguments
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    do { try process.run() } catch { return -1 }
    process.waitUntilExit()
    return process.terminationStatus
}

struct UnmountCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unmount",
        abstract: "Unmount a binder (also clears a mount whose daemon died).",
        discussion: """
        A mount in use (a file open there, a shell in one of its folders) is not unmounted: the \
        processes holding it are named. --lazy detaches it at once instead; the daemon finishes, \
        committing what is saved, when the last of them lets go.
        """)

    @Argument(help: "The mount point.")
    var mountpoint: String
    @Flag(help: "Detach the mount now even if it is in use; it goes away when the last file there is closed.")
    var lazy = false

    func run() throws {
        let path = URL(fileURLWithPath: mountpoint).standardizedFileURL.path
        guard let entry = MountTable.entry(at: path) else { throw CommandFailure("\(path) is not mounted") }
        guard entry.fsType.hasPrefix("fuse") else { throw CommandFailure("\(path) is not a binder mount (\(entry.fsType))") }
        // A daemon that died leaves a mount that answers ENOTCONN until it is detached.
        let stopped = MountTable.isDisconnected(path)
        if !stopped, !lazy, unmountNormally(path) {
            printInfo("Unmounted \(path)")
            return
        }
        if !stopped && !lazy {
            let holders = MountHolders.find(under: path)
            throw CommandFailure("cannot unmount \(path): it is in use"
                                 + (holders.isEmpty ? "" : " by " + MountHolders.describe(holders))
                                 + "; close the files and folders open there, or 'binder unmount --lazy \(path)'")
        }
        if detachMount(path) {
            printInfo("Unmounted \(path)" + (stopped ? " (its daemon had stopped)" : " (detached: it goes away when the last file there is closed)"))
            return
        }
        throw CommandFailure("cannot unmount \(path): \(String(cString: strerror(errno)))")
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

/// `--views`: whether `readdir` of the mount root lists `.binder`.
enum ViewsVisibility: String, ExpressibleByArgument, CaseIterable {
    case hidden, visible
}
