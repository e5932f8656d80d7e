import ArgumentParser
import BinderCore
import BinderCrypto
import BinderExport
import BinderFormat
import BinderFUSE
import BinderSync
import BinderSystem
import Foundation
import Glibc
import Logging
import Synchronization

/// `binder open-share`: the doctor's side of "Share with a doctor", from the command line.
/// The QR payload (its JSON, or a picture of the QR code) gives the staging repository, the
/// scan token and the throwaway key; the repository is fetched with the token alone into the
/// doctor's state folder and mounted under the throwaway key. What the share held is
/// read-only; new `.md` notes are committed (encrypted to the throwaway key, author
/// `Doctor <scan@limbo.health>`, message `Doctor note added DAY`) and pushed with the token, as
/// the scan page pushes its note. docs/DESIGN.md, "A doctor's side".
struct OpenShareCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "open-share",
        abstract: "Open a share a patient made for you (a doctor): its records read-only in a folder, where new .md notes go back to the patient.",
        discussion: """
        --qr takes the QR payload as JSON text, or a PNG or JPEG picture of the QR code (a \
        screenshot or a photo), from a file or stdin (-). The records are fetched with the \
        share's token only (no account or key of yours) into opened/REPO_ID.git in binder's state \
        folder and mounted on MOUNTPOINT (default: a new folder REPO_ID here). The shared records \
        cannot be changed (EROFS); a new .md file (in any folder, or in X.children/ as a note on \
        the record X) is pushed to the patient at once (merged with notes others pushed \
        meanwhile, which then show here too), and stays yours to edit until the unmount. \
        'binder unmount MOUNTPOINT' ends it and deletes the fetched copy (--keep keeps it); a \
        copy holding notes that could not be pushed is kept, and opening the share again \
        pushes them.
        """)

    @Option(help: "The share's QR payload: a file of its JSON text or a PNG/JPEG picture of the QR code; - reads stdin.")
    var qr: String?
    @Argument(help: "An empty folder to mount on (default: a new folder named after the share, here).")
    var mountpoint: String?
    @Flag(help: "Keep the fetched copy (ciphertext) in the state folder after the unmount.")
    var keep = false
    @Flag(help: "Stay attached; unmount cleanly on SIGINT or SIGTERM.")
    var foreground = false
    /// Internal: the daemon reads the payload from fd 3 and reports readiness on fd 4.
    @Flag(name: .customLong("daemon-child"), help: .hidden)
    var daemonChild = false
    /// Internal: the launcher made the mount point; the daemon removes it after the unmount.
    @Flag(name: .customLong("made-mountpoint"), help: .hidden)
    var madeMountpoint = false

    /// Largest input read from --qr (a photo of a QR code is a few MiB).
    static let maximumInputBytes = 64 << 20
    /// Largest picture decoded: 50 megapixels (a phone's full-resolution photo).
    static let maximumPixels = 50_000_000
    /// The payload handed to the daemon on fd 3, padded with spaces to this size.
    static let handoverBytes = ScanInvitation.maximumBytes

    static func iso(_ seconds: Int64) -> String {
        ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }

    func validate() throws {
        if !daemonChild && qr == nil { throw ValidationError("give the share with --qr FILE (its JSON or a picture of its QR code), or --qr - for stdin") }
    }

    func run() throws {
        let state = StateDirectory()
        try state.ensureExists()
        try FileManager.default.createDirectory(atPath: state.logsDirectory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        if daemonChild { return try runDaemonChild(state: state) }
        let invitation = try Self.invitation(from: try readInput())
        let (mountpoint, made) = try prepareMountpoint(default: invitation.repoId)
        do {
            if foreground {
                if !Verbosity.isQuiet { printErr("Opening \(invitation.repoId) at \(mountpoint). Press Ctrl-C to close it.") }
                let session = OpenedShare(invitation: invitation, mountpoint: mountpoint, keep: keep, state: state, echo: true)
                try session.serve(ready: {})
                if made { _ = rmdir(mountpoint) }
                return
            }
            try spawnDaemon(invitation, mountpoint: mountpoint, made: made, state: state)
        } catch {
            if made { _ = rmdir(mountpoint) }
            throw error
        }
        printInfo("Opened \(invitation.repoId) at \(mountpoint): the shared records are read-only; a new .md note there goes back to the patient.")
        printInfo("The share ends \(OpenShareCommand.iso(invitation.expiresAt)). Close it with: binder unmount \(mountpoint)   (log: \(state.logPath(invitation.repoId)))")
    }

    /// The bytes of --qr (a file, or stdin for -), bounded.
    private func readInput() throws -> [UInt8] {
        guard let qr else { throw CommandFailure.usage("--qr FILE|- is required") }
        let handle: FileHandle
        if qr == "-" { handle = FileHandle.standardInput } else {
            guard let file = FileHandle(forReadingAtPath: qr) else { throw CommandFailure("cannot read \(qr)") }
            handle = file
        }
        var bytes: [UInt8] = []
        while bytes.count <= Self.maximumInputBytes {
            let chunk = handle.readData(ofLength: 1 << 20)
            if chunk.isEmpty { break }
            bytes += chunk
        }
        guard bytes.count <= Self.maximumInputBytes else {
            throw CommandFailure("\(qr == "-" ? "stdin" : qr) is over \(Self.maximumInputBytes >> 20) MiB: not a scan payload or a picture of one")
        }
        return bytes
    }

    /// The invitation in `input`: a picture's QR code (PNG or JPEG), else JSON text. One clear
    /// line for anything else.
    static func invitation(from input: [UInt8]) throws -> ScanInvitation {
        var text = input
        if input.starts(with: [0x89, 0x50, 0x4E, 0x47]) || input.starts(with: [0xFF, 0xD8, 0xFF]) {
            do {
                let image = try GrayImage.decode(input, maximumPixels: maximumPixels)
                text = try QRImageReader.read(image, maximumBytes: ScanInvitation.maximumBytes)
            } catch let error as GrayImage.Failure {
                throw CommandFailure("cannot read the picture: \(error)")
            } catch let error as QRImageReader.Failure {
                throw CommandFailure("cannot read the picture: \(error)")
            }
        }
        while let last = text.last, last == 0x0A || last == 0x0D || last == 0x20 || last == 0x09 { text.removeLast() }
        let invitation: ScanInvitation
        do { invitation = try ScanInvitation(parsing: text) } catch {
            throw CommandFailure("not a share's QR payload: \(error)")
        }
        defer { secureZero(&text) }
        guard !invitation.hasExpired() else {
            throw CommandFailure("the share ended at \(OpenShareCommand.iso(invitation.expiresAt)); ask the patient for a new one")
        }
        return invitation
    }

    /// The mount point (absolute), made when it was not given (and whether it was made here).
    private func prepareMountpoint(default name: String) throws -> (String, Bool) {
        let path = URL(fileURLWithPath: mountpoint ?? name).standardizedFileURL.path
        var made = false
        if mountpoint == nil && !FileManager.default.fileExists(atPath: path) {
            do { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700]) } catch {
                throw CommandFailure("cannot make the mount point \(path): \(error.localizedDescription)")
            }
            made = true
        }
        var info = stat()
        guard stat(path, &info) == 0 else { throw CommandFailure("mount point \(path) does not exist") }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw CommandFailure("mount point \(path) is not a folder") }
        if MountTable.entry(at: path) != nil { throw CommandFailure("mount point \(path) is busy: something is already mounted there") }
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        guard entries.isEmpty else { throw CommandFailure("mount point \(path) is not empty: open the share on an empty folder") }
        return (path, made)
    }

    /// Starts this binary again as the daemon, hands it the payload on fd 3 (never argv or the
    /// environment), and waits for its report.
    private func spawnDaemon(_ invitation: ScanInvitation, mountpoint: String, made: Bool, state: StateDirectory) throws {
        var arguments = ["open-share", "--daemon-child", mountpoint]
        if keep { arguments.append("--keep") }
        if made { arguments.append("--made-mountpoint") }
        if Verbosity.isVerbose { arguments.append("--verbose") }
        _ = try DaemonLauncher.start("the share's daemon", arguments: arguments, secret: try Self.handover(invitation),
                                     mountpoint: mountpoint, logPath: state.logPath(invitation.repoId))
    }

    /// The invitation as JSON, padded with spaces to `handoverBytes`, in secret memory.
    static func handover(_ invitation: ScanInvitation) throws -> SecureBytes {
        var json = JSONValue.object(["action": "scan_session", "ephemeralPrivkey": .string(invitation.privateKeyHex),
                                     "sessionToken": .string(invitation.sessionToken), "repoId": .string(invitation.repoId),
                                     "expiresAt": JSONValue(invitation.expiresAt), "endpoint": .string(invitation.endpoint)]).serializedBytes()
        defer { secureZero(&json) }
        guard json.count <= handoverBytes else { throw CommandFailure("the payload is too long") }
        json += [UInt8](repeating: 0x20, count: handoverBytes - json.count)
        return try SecureBytes(copying: json)
    }

    private func runDaemonChild(state: StateDirectory) throws {
        let report = DaemonProcess.report
        guard let secret = try DaemonProcess.receiveSecret(count: Self.handoverBytes), let mountpoint else {
            report(.failed(reason: "the share's daemon did not receive the payload"))
            throw CommandFailure("no payload on fd 3")
        }
        var bytes = secret.copyBytes()
        defer { secureZero(&bytes) }
        let invitation: ScanInvitation
        do { invitation = try Self.invitation(from: bytes) } catch let failure as CommandFailure {
            report(.failed(reason: failure.message))
            throw failure
        }
        let session = OpenedShare(invitation: invitation, mountpoint: mountpoint, keep: keep, state: state, echo: false)
        do {
            try session.serve(ready: { report(.ready) })
        } catch let failure as CommandFailure {
            report(.failed(reason: failure.message))
            throw failure
        }
        if madeMountpoint { _ = rmdir(mountpoint) }
    }
}

/// One opened share: the fetched copy, the mount, the pushes; gone at the unmount.
struct OpenedShare {
    let invitation: ScanInvitation
    let mountpoint: String
    let keep: Bool
    let state: StateDirectory
    let echo: Bool

    static let author = SharedCopy.doctorAuthor

    /// `opened/REPO_ID.git` in the state folder: ciphertext under the throwaway key only.
    var clonePath: String { state.root + "/opened/" + invitation.repoId + ".git" }

    /// The scan page's commit message for a note of today (UTC).
    static func commitMessage(now: Date = Date()) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        return "Doctor note added " + formatter.string(from: now)
    }

    /// Fetches (or reopens a copy kept with notes that never reached the patient), mounts,
    /// calls `ready`, serves until the unmount, then pushes what is left and removes the copy,
    /// unless `keep` or some note is still unpushed (then the copy stays, and says so).
    func serve(ready: () -> Void) throws {
        let logger = FileLogHandler.logger(label: "binder.open-share", path: state.logPath(invitation.repoId), echo: echo)
        let clonePath = clonePath
        let reopened = FileManager.default.fileExists(atPath: clonePath)
        if reopened {
            let unpushed = Self.unpushedNotes(clonePath)
            guard MountTable.mounts(ofSource: "binder:\(invitation.repoId)").isEmpty, unpushed > 0 else {
                throw CommandFailure("\(invitation.repoId) is open already, or was kept with --keep (\(clonePath)): unmount it, or remove that folder")
            }
            logger.info("reopening a kept copy", metadata: ["copy": "\(clonePath)", "unpushed_notes": "\(unpushed)"])
        }
        do {
            try FileManager.default.createDirectory(atPath: state.root + "/opened", withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch { throw CommandFailure("cannot make \(state.root)/opened: \(error.localizedDescription)") }
        // A kept copy holds notes that reached nobody: never removed before they are pushed.
        var removeClone = !reopened
        defer { if removeClone { try? FileManager.default.removeItem(atPath: clonePath) } }
        let key: NIP44.ConversationKey
        do { key = try ShareKey(hex: invitation.privateKeyHex).conversationKey } catch let invalid as ShareKey.Invalid {
            throw CommandFailure(invalid.description)
        }
        let (access, copy) = try fetchCopy(reopened: reopened, key: key, logger: logger)
        do { try copy.checkKey() } catch {
            throw CommandFailure("the payload's key does not open the share \(invitation.repoId) (\(error))")
        }
        logger.info("fetched", metadata: ["share": "\(invitation.repoId)"])
        let mount: FUSEMount
        let pusher: NotePusher
        do {
            var options = BinderView.Options(author: Self.author)
            options.mode = .onlyNewRecords(commitMessage: { Self.commitMessage() })
            let view = try BinderView(repository: copy.repository, key: key, logger: logger, options: options)
            pusher = NotePusher(access: access, view: view, copy: copy, expiresAt: invitation.expiresAt, logger: logger)
            view.setSyncHooks(onCommit: { _ in pusher.schedule() }, status: { pusher.statusLines() })
            mount = try FUSEMount(view: view, mountpoint: mountpoint,
                                  options: FUSEMount.Options(readOnly: false, fsName: "binder:\(invitation.repoId)"), logger: logger)
            try mount.mount()
        } catch {
            throw CommandFailure("cannot mount the share: \(error)")
        }
        logger.info("mounted", metadata: ["share": "\(invitation.repoId)", "mountpoint": "\(mountpoint)"])
        ready()
        if reopened { pusher.schedule() }
        let status = mount.run()
        pusher.finish()
        logger.info("unmounted", metadata: ["mountpoint": "\(mountpoint)", "status": "\(status)"])
        let unpushed = Self.unpushedNotes(clonePath)
        removeClone = !keep && unpushed == 0
        if unpushed > 0 {
            // Nothing silently lost: the copy stays, and a new open-share of the same payload
            // reopens it and pushes again.
            let words = "\(unpushed) note(s) never reached the patient (\(pusher.lastFailure ?? "not pushed")); they are kept in \(clonePath): "
                + "open the share again to send them, or read them there with the share's key"
            logger.error("\(words)")
            if echo { printErr(words) }
        }
        if !removeClone { logger.info("kept", metadata: ["copy": "\(clonePath)"]) }
    }

    /// The staging repository fetched with the scan token into a new copy, or into the kept
    /// copy being reopened (the share must still be there; its notes are merged and pushed
    /// once mounted).
    private func fetchCopy(reopened: Bool, key: NIP44.ConversationKey, logger: Logger) throws -> (ScanAccess, SharedCopy) {
        do {
            let access = try ScanAccess(endpoint: invitation.endpoint, repoId: invitation.repoId, sessionToken: invitation.sessionToken,
                                        logger: logger)
            if reopened {
                let copy = try SharedCopy.open(path: clonePath, key: key)
                _ = try access.fetch(copy.repository)
                return (access, copy)
            }
            let copy = try SharedCopy.create(path: clonePath, key: key)
            guard try access.clone(into: copy.repository) != nil else {
                throw CommandFailure("the share \(invitation.repoId) is empty on the server (the patient's upload has not finished?)")
            }
            return (access, copy)
        } catch let error as SyncError {
            throw CommandFailure("cannot fetch the share \(invitation.repoId): \(error)")
        } catch let failure as CommandFailure {
            throw failure
        } catch {
            throw CommandFailure("cannot fetch the share \(invitation.repoId): \(error)")
        }
    }

    /// The notes the doctor's commits in the copy at `clonePath` changed that the staging
    /// repository has not got: what would be lost with the copy.
    static func unpushedNotes(_ clonePath: String) -> Int { SharedCopy.unpushedNotes(at: clonePath) }
}

/// Pushes the doctor's commits with the scan token, one push at a time on a queue of its own
/// (a commit only signals: it runs inside a FUSE callback). Each push first fetches the staging
/// tip and, when it moved on (the scan page or another doctor pushed a note), merges the
/// doctor's commits onto it (`ScanAccess.pushMerging`); the view then shows the merge (the
/// other side's notes). What happened is kept for `.binder/status` and the log.
final class NotePusher: Sendable {
    private struct State {
        var queued = false
        var pushes = 0
        var lastFailure: String?
    }

    /// A few tries: a push still refused (a note landed between the fetch and the push) is
    /// fetched, merged and pushed again; a failure that outlasts these is in `.binder/status`,
    /// and the copy is kept at the unmount.
    static let retry = RetryPolicy.standard(attempts: 3)

    private let access: ScanAccess
    private let view: BinderView
    /// The fetched copy: its path, and the share's key the pushes merge with.
    private let copy: SharedCopy
    private let expiresAt: Int64
    private let logger: Logger
    private let queue = DispatchQueue(label: "binder.open-share.push")
    /// Guards the counters and the last failure; never held across a push.
    private let state = Mutex(State())

    init(access: ScanAccess, view: BinderView, copy: SharedCopy, expiresAt: Int64, logger: Logger) {
        self.access = access
        self.view = view
        self.copy = copy
        self.expiresAt = expiresAt
        self.logger = logger
    }

    var lastFailure: String? { state.withLock { $0.lastFailure } }

    /// A push soon (one queued at most: it pushes whatever `main` is by then).
    func schedule() {
        let already = state.withLock { state -> Bool in
            defer { state.queued = true }
            return state.queued
        }
        if !already { queue.async { self.push() } }
    }

    private func push() {
        state.withLock { $0.queued = false }
        do {
            // A handle of its own: the mount's readers never wait on the network.
            let merged = try access.pushMerging(try copy.reopened(), key: copy.key, author: OpenedShare.author, retry: Self.retry)
            state.withLock { $0.pushes += 1; $0.lastFailure = nil }
            logger.info("pushed the doctor's note", metadata: ["share": "\(access.repoId)", "merged": "\(merged)"])
        } catch {
            state.withLock { $0.lastFailure = "\(error)" }
            logger.error("the doctor's note was not pushed: \(error)")
        }
        // A merge (even one whose push then failed) moved `main`: the view shows it.
        do { try view.adoptBranchTip() } catch {
            logger.error("cannot show the shared repository's new notes: \(error)")
        }
    }

    /// Waits for the queued push.
    func finish() {
        queue.sync {}
    }

    func statusLines() -> String {
        let (pushes, failure, queued) = state.withLock { ($0.pushes, $0.lastFailure, $0.queued) }
        var lines = "share: \(access.repoId) (opened with binder open-share; ends \(OpenShareCommand.iso(expiresAt)))\n"
        if let failure {
            lines += "push: failed: \(failure); the note stays in the copy (\(copy.path)), kept at the unmount\n"
        } else if queued {
            lines += "push: pending\n"
        } else {
            lines += "push: ok (\(pushes) push\(pushes == 1 ? "" : "es") of notes)\n"
        }
        return lines
    }
}
