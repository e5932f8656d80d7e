import BinderCore
import BinderCrypto
import BinderSync
import BinderSystem
import Foundation
import Glibc
import Logging
import Synchronization

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
    /// The `--qr-png` file (on a memory file system), removed when the share ends.
    var qrPNG: String?
}

struct ShareBook: Sendable {
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

    /// Changes the book under an exclusive `flock` of `shares.json.lock`: a mount and the
    /// user's commands change it side by side (the file itself is replaced atomically).
    private func update(_ change: (inout [ShareRecord]) -> Void) throws {
        let lockFD = Glibc.open(path + ".lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard lockFD >= 0 else { throw CommandFailure("cannot lock \(path): \(String(cString: strerror(errno)))") }
        defer { close(lockFD) }
        while flock(lockFD, LOCK_EX) != 0 && errno == EINTR {}
        var records = load()
        change(&records)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        do { try PrivateFile.write(path, bytes: [UInt8](try encoder.encode(records))) } catch {
            throw CommandFailure("cannot write \(path): \(error)")
        }
    }

    func add(_ record: ShareRecord, secrets: ShareSecrets) throws {
        var record = record
        do { record.sealed = try SealedToSelf.seal(secrets, key: key) } catch {
            throw CommandFailure("cannot encrypt the share's keys: \(error)")
        }
        try update { records in records = records.filter { $0.id != record.id } + [record] }
    }

    /// `binder key rotate`: the book's secrets sealed again to `newKey` (those opening with
    /// this book's key; others are left as they are). The count moved.
    @discardableResult
    func reseal(to newKey: SecretKey) throws -> Int {
        guard FileManager.default.fileExists(atPath: path) else { return 0 }
        var moved = 0, failure: String?
        try update { records in
            for index in records.indices {
                guard let secrets = SealedToSelf.open(ShareSecrets.self, from: records[index].sealed, key: key) else { continue }
                do { records[index].sealed = try SealedToSelf.seal(secrets, key: newKey) } catch {
                    failure = "\(error)"
                    return
                }
                moved += 1
            }
        }
        if let failure { throw CommandFailure("cannot encrypt the shares' keys: \(failure)") }
        return moved
    }

    func open() -> [Share] {
        load().map { Share(record: $0, secrets: SealedToSelf.open(ShareSecrets.self, from: $0.sealed, key: key)) }
    }

    /// Brings the doctor's new notes into `binder`, the share's binder (StagingCopy,
    /// DoctorNotes): the paths written. The caller is the binder's writer (holds its writer
    /// lock, or is its mount); the commit is a compare-and-swap on `main` all the same.
    func collect(_ share: Share, into binder: LocalBinder, accounts: Accounts, state: StateDirectory) throws -> [String] {
        guard let secrets = share.secrets else { throw CommandFailure("share \(share.record.id) was made with another key") }
        let record = share.record
        // Kept between collections (only ciphertext under the throwaway key): each fetch brings
        // only what the doctor added, not the whole share again. Removed when the share ends.
        let stagingPath = notesRepository(record.id)
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
            let client = try ServerClient(server: record.server)
            let session = ServerSession(client: client, key: key, accounts: accounts)
            let staging: LocalBinder.Repository
            if let kept = try? LocalBinder.open(path: stagingPath) { staging = kept.repository } else {
                try? FileManager.default.removeItem(atPath: stagingPath)
                staging = try LocalBinder.create(path: stagingPath).repository
            }
            let tip: LocalBinder.CommitID?
            do { tip = try StagingPush.fetch(into: staging, repoId: record.id, session: session) } catch {
                if Self.isGone(error) { return [] }   // removed (expired): nothing left to collect
                throw error
            }
            guard let tip, let since = LocalBinder.CommitID(hex: record.collected ?? record.snapshot), tip != since else { return [] }
            let throwaway = try ShareKey(hex: secrets.ephemeralPrivkey)
            let written = try DoctorNotes.collect(from: staging, since: since, tip: tip, throwaway: throwaway.conversationKey,
                                                  into: binder.repository, key: BinderKey.conversationKey(owner: key), author: commitAuthor())
            try update { records in
                for index in records.indices where records[index].id == record.id { records[index].collected = tip.hex }
            }
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

    /// `shares/` beside the book: staging repositories (ciphertext under throwaway keys only).
    var folder: String { (path as NSString).deletingLastPathComponent + "/shares" }

    /// The local copy of a share's staging repository that collections fetch into.
    func notesRepository(_ id: String) -> String { folder + "/" + id + "-notes.git" }

    /// The server no longer has the staging repository (it refuses an id nobody owns).
    static func isGone(_ error: SyncError) -> Bool {
        switch error {
        case .forbidden: return true
        case .server(let status, _): return status == 404
        default: return false
        }
    }

    /// Revokes the session on its server (which deletes the staging repository) and forgets the
    /// share, its throwaway key and its `--qr-png` file with it. A session the server no longer
    /// knows counts as ended.
    func revoke(_ share: Share, accounts: Accounts) throws(SyncError) {
        if let secrets = share.secrets {
            let client = try ServerClient(server: share.record.server)
            let session = ServerSession(client: client, key: key, accounts: accounts)
            try session.authorized { (token: String) throws(SyncError) in
                _ = try client.revokeScanSession(token: token, sessionToken: secrets.sessionToken, stagingRepoId: share.record.id)
            }
            if let image = secrets.qrPNG { unlink(image) }
        }
        try? FileManager.default.removeItem(atPath: notesRepository(share.record.id))
        do { try update { records in records.removeAll { $0.id == share.record.id } } } catch {
            throw .configuration("cannot update \(path): \(error)")
        }
    }

    /// Ends every share past its expiry (of `binder` only, when given): the doctor's notes come
    /// home first (`collect`), then the share is revoked on its server, which deletes the
    /// staging copy. A share whose notes cannot be collected now (its server away, its binder
    /// busy) is kept, and tried again next time: a note that reached the server is never
    /// dropped unread. The ids ended, and those kept with why.
    func endExpired(now: Int64, accounts: Accounts, binder: String? = nil,
                    collect: (Share) throws -> Void) -> (ended: [String], kept: [(id: String, reason: String)]) {
        var ended: [String] = [], kept: [(id: String, reason: String)] = []
        for share in open() where share.record.expiresAt <= now && (binder == nil || Self.sameBinder(share.record.binder, binder!)) {
            if share.secrets != nil {
                do { try collect(share) } catch {
                    kept.append((share.record.id, "\(error)"))
                    continue
                }
            }
            try? revoke(share, accounts: accounts)
            if !load().contains(where: { $0.id == share.record.id }) { ended.append(share.record.id) }
        }
        return (ended, kept)
    }

    static func sameBinder(_ a: String, _ b: String) -> Bool {
        URL(fileURLWithPath: a).resolvingSymlinksInPath().standardizedFileURL.path
            == URL(fileURLWithPath: b).resolvingSymlinksInPath().standardizedFileURL.path
    }
}

/// A mount's side of sharing (issue 17): the mount is its binder's one writer and holds the
/// user's key, so it brings the doctor's notes of the binder's active shares home itself on
/// each sync pass (and ends the expired ones), and does it at once when `binder share
/// --collect` or `--revoke` asks over the control channel. The notes are committed onto `main`
/// (a compare-and-swap, as a sync's merge) and the view shows them at once; the same sync
/// pass pushes them. One collection at a time (`running`).
final class MountShares: Sendable {
    let book: ShareBook
    let binderPath: String
    let view: BinderView
    let accounts: Accounts
    let state: StateDirectory
    let logger: Logger
    /// At most one pass in this long (a sync pass follows every burst of saves).
    let interval: TimeInterval
    /// Held for a whole pass or asked collection: they must not fetch and commit side by side.
    /// Holds when the last pass started.
    private let running = Mutex(Date.distantPast)

    init(key: SecretKey, binderPath: String, view: BinderView, state: StateDirectory, interval: TimeInterval, logger: Logger) {
        self.interval = interval
        book = ShareBook(path: state.sharesFile, key: key)
        self.binderPath = binderPath
        self.view = view
        accounts = Accounts(path: state.accountsFile)
        self.state = state
        self.logger = logger
    }

    /// Before each sync pass (at most once an `interval`): expired shares of this binder end, the others' notes come home.
    /// Failures are logged, never thrown: a share's server being away must not stop the sync.
    func pass() {
        running.withLock { last in
            guard Date().timeIntervalSince(last) >= interval else { return }
            last = Date()
            let (ended, kept) = book.endExpired(now: ShareCommand.now, accounts: accounts, binder: binderPath) { share in
                let written = try collectLocked(share)
                if !written.isEmpty { logger.info("brought a doctor's notes home", metadata: ["share": "\(share.record.id)", "notes": "\(written.count)"]) }
            }
            if !ended.isEmpty { logger.info("shares ended at their expiry", metadata: ["count": "\(ended.count)"]) }
            for (id, reason) in kept {
                logger.warning("an expired share is kept until its notes can be collected", metadata: ["share": "\(id)", "error": "\(reason)"])
            }
            for share in book.open() where ShareBook.sameBinder(share.record.binder, binderPath) && share.record.expiresAt > ShareCommand.now {
                do {
                    let written = try collectLocked(share)
                    if !written.isEmpty { logger.info("brought a doctor's notes home", metadata: ["share": "\(share.record.id)", "notes": "\(written.count)"]) }
                } catch {
                    logger.warning("cannot collect a share's notes", metadata: ["share": "\(share.record.id)", "error": "\(error)"])
                }
            }
        }
    }

    /// The answer to `share-collect ID`: `ok` and the paths written as a JSON array, or `error …`.
    func collect(id: String) -> String {
        running.withLock { _ -> String in
            guard let share = book.open().first(where: { $0.record.id == id && ShareBook.sameBinder($0.record.binder, binderPath) }) else {
                return "error no active share '\(id)' of this binder"
            }
            do {
                let written = try collectLocked(share)
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.withoutEscapingSlashes]
                let data = try encoder.encode(written)
                return "ok " + String(decoding: data, as: UTF8.self)
            } catch let failure as CommandFailure {
                return "error " + failure.message
            } catch {
                return "error \(error)"
            }
        }
    }

    private func collectLocked(_ share: ShareBook.Share) throws -> [String] {
        let binder: LocalBinder
        do { binder = try LocalBinder.open(path: binderPath) } catch { throw CommandFailure("cannot open \(binderPath): \(error)") }
        let written = try book.collect(share, into: binder, accounts: accounts, state: state)
        if !written.isEmpty { _ = try view.adoptBranchTip() }
        return written
    }
}

extension StateDirectory {
    /// The share book (`ShareBook`).
    var sharesFile: String { root + "/shares.json" }
}
