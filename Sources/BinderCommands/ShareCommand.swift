import ArgumentParser
import BinderCore
import BinderCrypto
import BinderSync
import BinderSystem
import BinderExport
import Foundation
import Glibc

/// `binder share`: "Share with a doctor" as the Limbo app does it, compatible with the doctor's
/// limbo.health/scan page, but pushing before the session opens and keeping (encrypted) what
/// it needs to revoke. docs/DESIGN.md, "Sharing".
struct ShareCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "share",
        abstract: "Share records with a doctor: a copy under a throwaway key, a scan session, and the QR payload for limbo.health/scan.")

    @Argument(help: "Records or folders to share, as paths in the binder (default: all of it).")
    var paths: [String] = []
    @Option(help: "How long the doctor has: 90s, 30m, 8h, 2d (default: 1h).")
    var expires: String?
    @Option(help: "A binder's name or path (default: the only local binder).")
    var binder: String?
    @Option(help: "A note for yourself on whom it is for (shown by --list; kept encrypted); - reads a line of standard input, left out it is asked on a terminal.")
    var label: String?
    @Flag(help: "Print the share (id, expiry, the exact QR payload) as one JSON object instead of the QR code.")
    var json = false
    @Option(name: .customLong("qr-png"),
            help: "Also make the QR code a PNG: '-' writes it to stdout (for an image viewer), else FILE on a memory file system (tmpfs, e.g. $XDG_RUNTIME_DIR or /dev/shm), removed when the share ends.")
    var qrPNG: String?
    @Flag(help: "List the active shares.")
    var list = false
    @Option(help: "End the share ID: collect the doctor's notes, revoke its token and delete its staging repository.")
    var revoke: String?
    @Flag(help: "Bring the doctor's notes home into the binder (never overwriting): of the share given as the one PATH, else of every share.")
    var collect = false
    @OptionGroup var serverOptions: ServerOptions
    @OptionGroup var passphrase: PassphraseOptions

    func validate() throws {
        if list || revoke != nil || collect {
            guard expires == nil, label == nil, qrPNG == nil, [list, revoke != nil, collect].filter({ $0 }).count == 1,
                  paths.isEmpty || (collect && paths.count == 1) else {
                throw ValidationError("--list, --revoke ID and --collect [ID] go alone (no other share options)")
            }
        }
        if qrPNG == "-" && json { throw ValidationError("--qr-png - writes the image to stdout: it cannot go with --json") }
    }

    /// `--expires` in seconds (nil: the server's default, one hour).
    func lifetime() throws -> Int64? {
        guard let expires else { return nil }
        guard let seconds = parseDuration(expires), seconds > 0, seconds <= 7 * 86_400 else {
            throw CommandFailure.usage("--expires: give a duration from 1s to 7d, like 30m or 2h")
        }
        return Int64(seconds)
    }

    func run() throws {
        let state = StateDirectory()
        try state.ensureExists()
        let key = try KeyStore(state: state).secretKey(passphrase: passphrase.source)
        let book = ShareBook(path: state.sharesFile, key: key)
        let accounts = Accounts(path: state.accountsFile)
        // Shares past their expiry end now, their notes brought home first (the server keeps an
        // expired share's staging copy for its owner to collect).
        let (ended, kept) = book.endExpired(now: Self.now, accounts: accounts) { share in
            let collected = try collectAsWriter(share, book: book, accounts: accounts, state: state)
            if !collected.isEmpty { printOut("\(share.record.id): collected \(collected.count) note(s): " + collected.joined(separator: ", ")) }
        }
        for id in ended { printErr("share \(id) expired and was removed") }
        for (id, reason) in kept { printErr("share \(id) expired; kept until its notes can be collected: \(reason)") }
        if list { return try printList(book) }
        if let revoke { return try end(revoke, book: book, accounts: accounts, state: state) }
        if collect { return try collectNotes(book: book, accounts: accounts, state: state) }
        try share(state: state, key: key, book: book, accounts: accounts)
    }

    static var now: Int64 { Int64(Date().timeIntervalSince1970) }

    private func share(state: StateDirectory, key: SecretKey, book: ShareBook, accounts: Accounts) throws {
        let lifetime = try lifetime()
        let label = try ContentInput().values([ContentOption(name: "--label", prompt: "Label (whom it is for)", given: self.label)])[0]
        // The image file is made (empty, 0600) before anything is shared: a refusal costs nothing.
        var image: QRImageFile?
        if let qrPNG, qrPNG != "-" { image = try QRImageFile.create(qrPNG) }
        var shared = false
        defer { if !shared, let image { unlink(image.path) } }
        let (repository, path) = try BinderLocator(state: state).open(try defaultBinder(binder, state: state))
        let conversationKey = try BinderKey.conversationKey(owner: key)
        do { try BinderCreator.checkKey(repository, key: conversationKey) } catch {
            throw CommandFailure("your key cannot read \(path): \(error)")
        }
        let server = serverOptions.chosen ?? SyncTarget.read(repository)?.server ?? accounts.defaultServer
        let client: ServerClient
        do { client = try ServerClient(server: server) } catch { throw failure(error) }
        let session = ServerSession(client: client, key: key, accounts: accounts)
        let throwaway = try ShareKey.generate()
        let repoId = ServerClient.newStagingID()
        let copy = try pushStagingCopy(of: repository, key: conversationKey, throwaway: throwaway, repoId: repoId,
                                       session: session, state: state)
        let scan: ScanSession
        do { scan = try session.authorized { (token: String) throws(SyncError) in
            try client.openScanSession(token: token, repoId: repoId, lifetime: lifetime)
        } } catch { throw failure(error) }
        let secrets = ShareSecrets(ephemeralPrivkey: try throwaway.hex(),
                                   sessionToken: scan.sessionToken, label: label ?? "", paths: paths,
                                   records: copy.paths.filter(BinderNaming.isDocumentPath).count,
                                   qrPNG: image?.path)
        let record = ShareRecord(id: repoId, server: client.base, binder: path, created: Self.now, expiresAt: scan.expiresAt,
                                 snapshot: copy.snapshot.description, sealed: "")
        try book.add(record, secrets: secrets)
        shared = true
        let payload = ScanPayload.text(privateKeyHex: secrets.ephemeralPrivkey, session: scan, endpoint: client.base)
        try present(payload, secrets: secrets, repoId: repoId, records: secrets.records, files: copy.paths.count, scan: scan, server: client.base,
                    image: image)
    }

    /// The records chosen, copied under the throwaway key into a staging repository and pushed
    /// as `repoId`, before any session opens: the doctor never scans a repository not there
    /// yet. The local copy (ciphertext under the throwaway key only) goes once pushed.
    private func pushStagingCopy(of repository: LocalBinder.Repository, key: NIP44.ConversationKey, throwaway: ShareKey,
                                 repoId: String, session: ServerSession, state: StateDirectory) throws -> StagingCopy.Result {
        let stagingPath = state.root + "/shares/" + repoId + ".git"
        try FileManager.default.createDirectory(atPath: state.root + "/shares", withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: stagingPath) }
        do {
            let staging = try LocalBinder.create(path: stagingPath).repository
            let copy = try StagingCopy.make(from: repository, key: key, selection: paths, staging: staging,
                                            throwaway: throwaway.conversationKey)
            try StagingPush.push(repository: staging, repoId: repoId, session: session)
            return copy
        } catch let error as StagingCopy.Failure {
            throw CommandFailure(error.description)
        } catch let error as SyncError {
            throw failure(error)
        } catch {
            throw CommandFailure("cannot make the staging repository: \(error)")
        }
    }

    /// The share made, as asked: the QR code in the terminal and the payload, the PNG, or JSON.
    private func present(_ payload: String, secrets: ShareSecrets, repoId: String, records: Int, files: Int, scan: ScanSession,
                         server: String, image: QRImageFile?) throws {
        let ending = "Shared \(records) record(s) as \(repoId) until \(Self.iso(scan.expiresAt)); "
            + "the doctor scans the QR code at \(server)/scan. End it with 'binder share --revoke \(repoId)'."
        if let qrPNG {
            let png: [UInt8]
            do {
                png = try QRCodePNG.png(modules: try TerminalQR(payload).modules, scale: 8)
            } catch { throw CommandFailure("cannot draw the QR code (the share \(repoId) is made; end it with 'binder share --revoke \(repoId)'): \(error)") }
            if qrPNG == "-" {
                // The image alone on stdout, for `| display`; the payload is in it.
                FileHandle.standardOutput.write(Data(png))
                return printErr(ending)
            }
            if let image { try image.write(png) }
        }
        if json {
            try JSONOutput.print(ShareReport(id: repoId, server: server, expiresAt: scan.expiresAt, label: secrets.label,
                                             files: files, payload: payload))
        } else {
            // The QR code for the doctor's camera, then the payload itself (the last line, for scripts).
            do { printOut(try TerminalQR(payload).text) } catch { printErr("No QR code drawn here: \(error). The payload below is the share.") }
            printOut(payload)
            printErr(ending + (image.map { " The QR code is also in \($0.path) until then." } ?? ""))
        }
    }

    private func printList(_ book: ShareBook) throws {
        let shares = book.open()
        if json {
            return try JSONOutput.print(shares.map { share in
                ShareListRow(id: share.record.id, server: share.record.server, label: share.secrets?.label ?? "",
                             paths: share.secrets?.paths ?? [], created: share.record.created, expiresAt: share.record.expiresAt)
            })
        }
        guard !shares.isEmpty else { return printOut("No active shares.") }
        for share in shares {
            let what = share.secrets.map { $0.paths.isEmpty ? "whole binder" : $0.paths.joined(separator: ", ") } ?? "?"
            let whom = share.secrets.map { $0.label.isEmpty ? "" : " for \($0.label)" } ?? ""
            printOut("\(share.record.id)  \(what)\(whom)  created \(Self.iso(share.record.created))  expires \(Self.iso(share.record.expiresAt))")
        }
    }

    private func collectNotes(book: ShareBook, accounts: Accounts, state: StateDirectory) throws {
        let shares = book.open().filter { paths.isEmpty || $0.record.id == paths[0] }
        if let id = paths.first, shares.isEmpty { throw CommandFailure("no active share '\(id)' (see 'binder share --list')") }
        for share in shares {
            let collected = try collectAsWriter(share, book: book, accounts: accounts, state: state)
            printOut(collected.isEmpty ? "\(share.record.id): no new notes"
                                       : "\(share.record.id): collected \(collected.count) note(s): " + collected.joined(separator: ", "))
        }
    }

    private func end(_ id: String, book: ShareBook, accounts: Accounts, state: StateDirectory) throws {
        guard let share = book.open().first(where: { $0.record.id == id }) else {
            throw CommandFailure("no active share '\(id)' (see 'binder share --list')")
        }
        // The doctor's notes come home first: the staging repository goes with the revoke.
        let collected = try collectAsWriter(share, book: book, accounts: accounts, state: state)
        if !collected.isEmpty { printOut("Collected \(collected.count) note(s): " + collected.joined(separator: ", ")) }
        do { try book.revoke(share, accounts: accounts) } catch { throw failure(error) }
        printOut("Revoked \(id): the doctor's token no longer works and the staging repository is deleted.")
    }

    /// Collects as the binder's writer: through its mount when it is mounted (the mount holds
    /// the writer lock and the view), else here under the writer lock.
    private func collectAsWriter(_ share: ShareBook.Share, book: ShareBook, accounts: Accounts, state: StateDirectory) throws -> [String] {
        let record = share.record
        let binder: LocalBinder
        do { binder = try LocalBinder.open(path: record.binder) } catch {
            throw CommandFailure("the binder of share \(record.id) is gone (\(record.binder))")
        }
        let name = BinderLocator.displayName(record.binder)
        if let (holder, control) = WriterLock.mountControl(gitDirectory: binder.gitDirectory) {
            let answer: String
            do { answer = try ControlClient.send(ControlRequest.shareCollect + " " + record.id, to: control) } catch {
                throw CommandFailure("cannot bring the doctor's notes into \(name) while it is \(holder): \(error)")
            }
            guard answer.hasPrefix("ok "),
                  let written = try? JSONDecoder().decode([String].self, from: Data(answer.utf8.dropFirst(3))) else {
                let reason = answer.hasPrefix("error ") ? String(answer.dropFirst(6)) : answer
                throw CommandFailure("\(name)'s mount at \(holder.mountpoint ?? "?") could not bring the doctor's notes home: \(reason)")
            }
            return written
        }
        let writerLock: WriterLock
        do { writerLock = try WriterLock.acquire(gitDirectory: binder.gitDirectory) } catch .held(let holder) {
            throw CommandFailure("cannot bring the doctor's notes into \(name) while it is \(holder); try again when it has finished")
        } catch {
            throw CommandFailure("cannot lock \(record.binder): \(error)")
        }
        return try withExtendedLifetime(writerLock) { try book.collect(share, into: binder, accounts: accounts, state: state) }
    }

    static func iso(_ seconds: Int64) -> String {
        ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }
}

/// The QR text limbo.health/scan reads: one JSON object, keys in the app's order.
enum ScanPayload {
    static func text(privateKeyHex: String, session: ScanSession, endpoint: String) -> String {
        "{\"action\":\"scan_session\",\"ephemeralPrivkey\":\(quoted(privateKeyHex)),\"sessionToken\":\(quoted(session.sessionToken)),"
            + "\"repoId\":\(quoted(session.repoId)),\"expiresAt\":\(session.expiresAt),\"endpoint\":\(quoted(endpoint))}"
    }

    /// A JSON string (the values are hex, ids and a URL; anything else is escaped all the same).
    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

/// The `--qr-png FILE` image: the QR payload holds the throwaway private key and the scan token,
/// which never touch a disk unencrypted, so the file must be on a memory file system (tmpfs or
/// ramfs). Made new (O_EXCL: never someone else's file, nor a link's target), 0600.
final class QRImageFile {
    let path: String
    /// Open from its creation to the end of the command: what is written is the file made here.
    private let fd: Int32

    private init(path: String, fd: Int32) {
        self.path = path
        self.fd = fd
    }

    deinit { close(fd) }

    static func create(_ given: String) throws -> QRImageFile {
        let path = StateDirectory.absolute(given)
        let folder = (path as NSString).deletingLastPathComponent
        let inMemory: Bool
        do { inMemory = try MemoryFileSystem.holds(folder) } catch { throw CommandFailure("--qr-png: cannot use \(error)") }
        guard inMemory else {
            throw CommandFailure("--qr-png: \(folder) is on a disk, and the QR code holds the share's key; "
                                 + "give a file on a memory file system (\(ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"] ?? "/dev/shm")/qr.png) or '-' for stdout")
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw CommandFailure("--qr-png: cannot create \(path): \(String(cString: strerror(errno)))") }
        return QRImageFile(path: path, fd: fd)
    }

    func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw CommandFailure("--qr-png: cannot write \(path): \(String(cString: strerror(errno)))") }
            offset += n
        }
    }
}
