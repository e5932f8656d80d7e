import ArgumentParser
import BinderCore
import BinderCrypto
import BinderGit
import BinderSync
import BinderSystem
import Foundation

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
    @Option(help: "A note for yourself on whom it is for (shown by --list; kept encrypted).")
    var label: String?
    @Flag(help: "Print the share (id, expiry, the exact QR payload) as one JSON object instead of the QR code.")
    var json = false
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
            guard expires == nil, label == nil, [list, revoke != nil, collect].filter({ $0 }).count == 1,
                  paths.isEmpty || (collect && paths.count == 1) else {
                throw ValidationError("--list, --revoke ID and --collect [ID] go alone (no other share options)")
            }
        }
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
        let book = ShareBook(path: state.root + "/shares.json", key: key)
        let accounts = Accounts(path: state.accountsFile)
        // Shares past their expiry end now: the server has ended them; what is kept here goes.
        for ended in book.endExpired(now: Self.now, accounts: accounts) { printErr("share \(ended) expired and was removed") }
        if list { return try printList(book) }
        if let revoke { return try end(revoke, book: book, accounts: accounts, state: state) }
        if collect { return try collectNotes(book: book, accounts: accounts, state: state) }
        try share(state: state, key: key, book: book, accounts: accounts)
    }

    static var now: Int64 { Int64(Date().timeIntervalSince1970) }

    private func share(state: StateDirectory, key: SecretKey, book: ShareBook, accounts: Accounts) throws {
        let lifetime = try lifetime()
        let (repository, path) = try BinderLocator(state: state).open(try defaultBinder(binder, state: state))
        let conversationKey = try NIP44.ConversationKey(selfOf: key)
        do { try BinderCreator.checkKey(repository, key: conversationKey) } catch {
            throw CommandFailure("your key cannot read \(path): \(error)")
        }
        let server = serverOptions.chosen ?? SyncTarget.read(repository)?.server ?? accounts.defaultServer
        let client: ServerClient
        do { client = try ServerClient(server: server) } catch { throw failure(error) }
        let session = ServerSession(client: client, key: key, accounts: accounts)
        let throwaway = try SecretKey.generate()
        let repoId = ServerClient.newStagingID()
        // The staging copy holds only ciphertext under the throwaway key; it goes once pushed.
        let stagingPath = state.root + "/shares/" + repoId + ".git"
        try FileManager.default.createDirectory(atPath: state.root + "/shares", withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: stagingPath) }
        let copy: StagingCopy.Result
        do {
            let staging = try GitRepository.create(path: stagingPath, bare: true)
            copy = try StagingCopy.make(from: repository, key: conversationKey, selection: paths, staging: staging,
                                        throwaway: NIP44.ConversationKey(selfOf: throwaway))
            // Push first, then open the session: the doctor never scans a repository not there yet.
            try StagingPush.push(repository: staging, repoId: repoId, session: session)
        } catch let error as StagingCopy.Failure {
            throw CommandFailure(error.description)
        } catch let error as SyncError {
            throw failure(error)
        } catch {
            throw CommandFailure("cannot make the staging repository: \(error)")
        }
        let scan: ScanSession
        do { scan = try session.authorized { (token: String) throws(SyncError) in
            try client.openScanSession(token: token, repoId: repoId, lifetime: lifetime)
        } } catch { throw failure(error) }
        let secrets = ShareSecrets(ephemeralPrivkey: String(decoding: try throwaway.hexSecret().copyBytes(), as: UTF8.self),
                                   sessionToken: scan.sessionToken, label: label ?? "", paths: paths,
                                   records: copy.paths.filter { $0.hasSuffix(".json") && !$0.hasSuffix(".meta.json") }.count)
        let record = ShareRecord(id: repoId, server: client.base, binder: path, created: Self.now, expiresAt: scan.expiresAt,
                                 snapshot: copy.snapshot.description, sealed: "")
        try book.add(record, secrets: secrets)
        let payload = ScanPayload.text(privateKeyHex: secrets.ephemeralPrivkey, session: scan, endpoint: client.base)
        if json {
            let object: [String: Any] = ["id": repoId, "server": client.base, "expiresAt": scan.expiresAt, "label": label ?? "",
                                         "files": copy.paths.count, "payload": payload]
            let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
            printOut(String(decoding: data, as: UTF8.self))
        } else {
            // The QR code for the doctor's camera, then the payload itself (the last line, for scripts).
            if let qr = TerminalQR(payload) { printOut(qr.text) }
            printOut(payload)
            printErr("Shared \(secrets.records) record(s) as \(repoId) until \(Self.iso(scan.expiresAt)); "
                     + "the doctor scans the payload above at \(client.base)/scan. End it with 'binder share --revoke \(repoId)'.")
        }
    }

    private func printList(_ book: ShareBook) throws {
        let shares = book.open()
        if json {
            let rows: [[String: Any]] = shares.map { share in
                ["id": share.record.id, "server": share.record.server, "label": share.secrets?.label ?? "",
                 "paths": share.secrets?.paths ?? [], "created": share.record.created, "expiresAt": share.record.expiresAt]
            }
            let data = try JSONSerialization.data(withJSONObject: rows, options: [.sortedKeys, .withoutEscapingSlashes])
            return printOut(String(decoding: data, as: UTF8.self))
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
            let collected = try book.collect(share, accounts: accounts, state: state)
            printOut(collected.isEmpty ? "\(share.record.id): no new notes"
                                       : "\(share.record.id): collected \(collected.count) note(s): " + collected.joined(separator: ", "))
        }
    }

    private func end(_ id: String, book: ShareBook, accounts: Accounts, state: StateDirectory) throws {
        guard let share = book.open().first(where: { $0.record.id == id }) else {
            throw CommandFailure("no active share '\(id)' (see 'binder share --list')")
        }
        // The doctor's notes come home first: the staging repository goes with the revoke.
        let collected = try book.collect(share, accounts: accounts, state: state)
        if !collected.isEmpty { printOut("Collected \(collected.count) note(s): " + collected.joined(separator: ", ")) }
        do { try book.revoke(share, accounts: accounts) } catch { throw failure(error) }
        printOut("Revoked \(id): the doctor's token no longer works and the staging repository is deleted.")
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

/// What `binder share` keeps of a share, in `shares.json` (0600): in the clear only what
/// `--list` and expiry need without secrets; the throwaway key, the scan token, the label and
/// the paths NIP-44-encrypted to the user's own key (as the login tokens in accounts.json).
struct ShareRecord: Codable {
    let id: String
    let server: String
    let binder: String
    let created: Int64
    let expiresAt: Int64
    /// The "Shared medical records" commit: the doctor's additions come after it.
    let snapshot: String
    var sealed: String
    /// The staging repository's tip at the last `--collect` (what was brought home already).
    var collected: String?
}

struct ShareSecrets: Codable {
    let ephemeralPrivkey: String
    let sessionToken: String
    let label: String
    let paths: [String]
    let records: Int
}

struct ShareBook {
    let path: String
    let key: SecretKey

    struct Share {
        let record: ShareRecord
        /// nil when sealed to another key (a key imported since).
        let secrets: ShareSecrets?
    }

    private func load() -> [ShareRecord] {
        guard let data = FileManager.default.contents(atPath: path),
              let records = try? JSONDecoder().decode([ShareRecord].self, from: data) else { return [] }
        return records
    }

    private func save(_ records: [ShareRecord]) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        do { try PrivateFile.write(path, bytes: [UInt8](try encoder.encode(records))) } catch {
            throw CommandFailure("cannot write \(path): \(error)")
        }
    }

    func add(_ record: ShareRecord, secrets: ShareSecrets) throws {
        var record = record
        do {
            record.sealed = try NIP44.encrypt([UInt8](try JSONEncoder().encode(secrets)), key: NIP44.ConversationKey(selfOf: key))
        } catch { throw CommandFailure("cannot encrypt the share's keys: \(error)") }
        try save(load().filter { $0.id != record.id } + [record])
    }

    func open() -> [Share] {
        load().map { record in
            let plain = try? NIP44.decrypt(payload: record.sealed, key: NIP44.ConversationKey(selfOf: key))
            return Share(record: record, secrets: plain.flatMap { try? JSONDecoder().decode(ShareSecrets.self, from: Data($0.copyBytes())) })
        }
    }

    /// Brings the doctor's new notes into the share's binder (StagingCopy, DoctorNotes): the
    /// paths written. The binder must not be held by a mount or another command.
    func collect(_ share: Share, accounts: Accounts, state: StateDirectory) throws -> [String] {
        guard let secrets = share.secrets else { throw CommandFailure("share \(share.record.id) was made with another key") }
        let record = share.record
        let binder: GitRepository
        do { binder = try GitRepository.open(path: record.binder) } catch {
            throw CommandFailure("the binder of share \(record.id) is gone (\(record.binder))")
        }
        let writerLock: WriterLock
        do { writerLock = try WriterLock.acquire(gitDirectory: binder.gitDirectory) } catch .held(let holder) {
            throw CommandFailure("cannot bring the doctor's notes into \(BinderLocator.displayName(record.binder)) while it is \(holder); unmount it first")
        } catch {
            throw CommandFailure("cannot lock \(record.binder): \(error)")
        }
        defer { withExtendedLifetime(writerLock) {} }
        let stagingPath = state.root + "/shares/" + record.id + "-collect-\(UUID().uuidString).git"
        defer { try? FileManager.default.removeItem(atPath: stagingPath) }
        do {
            let client = try ServerClient(server: record.server)
            let session = ServerSession(client: client, key: key, accounts: accounts)
            let staging = try GitRepository.create(path: stagingPath, bare: true)
            let tip: ObjectID?
            do { tip = try StagingPush.fetch(into: staging, repoId: record.id, session: session) } catch {
                if let error = error as? SyncError, Self.isGone(error) { return [] }   // removed (expired): nothing left to collect
                throw error
            }
            guard let tip, let since = ObjectID(hex: record.collected ?? record.snapshot), tip != since else { return [] }
            let throwaway = try SecretKey(hex: secrets.ephemeralPrivkey)
            let written = try DoctorNotes.collect(from: staging, since: since, tip: tip, throwaway: NIP44.ConversationKey(selfOf: throwaway),
                                                  into: binder, key: NIP44.ConversationKey(selfOf: key), author: commitAuthor())
            var updated = record
            updated.collected = tip.hex
            try save(load().map { $0.id == record.id ? updated : $0 })
            return written
        } catch let error as SyncError {
            throw failure(error)
        } catch let error as StagingCopy.Failure {
            throw CommandFailure(error.description)
        } catch let error as CommandFailure {
            throw error
        } catch {
            throw CommandFailure("cannot collect the notes of \(record.id): \(error)")
        }
    }

    /// The server no longer has the staging repository (it refuses an id nobody owns).
    static func isGone(_ error: SyncError) -> Bool {
        switch error {
        case .forbidden: return true
        case .server(let status, _): return status == 404
        default: return false
        }
    }

    /// Revokes the session on its server (which deletes the staging repository) and forgets the
    /// share, its throwaway key with it. A session the server no longer knows counts as ended.
    func revoke(_ share: Share, accounts: Accounts) throws(SyncError) {
        if let secrets = share.secrets {
            let client = try ServerClient(server: share.record.server)
            let session = ServerSession(client: client, key: key, accounts: accounts)
            try session.authorized { (token: String) throws(SyncError) in
                _ = try client.revokeScanSession(token: token, sessionToken: secrets.sessionToken)
            }
        }
        do { try save(load().filter { $0.id != share.record.id }) } catch {
            throw .configuration("cannot update \(path): \(error)")
        }
    }

    /// Ends every share past its expiry (revoking it on the server when it can be reached; it
    /// is over there anyway): their ids.
    func endExpired(now: Int64, accounts: Accounts) -> [String] {
        var ended: [String] = []
        for share in open() where share.record.expiresAt <= now {
            try? revoke(share, accounts: accounts)
            if !load().contains(where: { $0.id == share.record.id }) { ended.append(share.record.id) }
        }
        return ended
    }
}
