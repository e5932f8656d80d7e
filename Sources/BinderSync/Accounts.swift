import BinderCrypto
import BinderSystem
import Foundation
import Synchronization

/// The servers this user logged in to, and their tokens, in `accounts.json` (0600) under
/// binder's state folder. Each token is NIP-44-encrypted to the user's own key: at rest it is
/// as safe as the binders, and only a process holding the unlocked key can use it.
public struct Accounts: Sendable {
    public let path: String

    public init(path: String) { self.path = path }

    struct Entry: Codable {
        var pubkey: String
        /// The JWT, NIP-44-encrypted to self.
        var token: String
        var loggedInAt: Int64
    }

    struct File: Codable {
        var defaultServer: String?
        var servers: [String: Entry] = [:]
        /// Per server, the token of a key `binder key rotate` retired (sealed to the current
        /// key), set aside until the old copy of a binder is deleted with it.
        var retired: [String: Entry]? = nil
    }

    private func load() -> File {
        guard let data = FileManager.default.contents(atPath: path),
              let file = try? JSONDecoder().decode(File.self, from: data) else { return File() }
        return file
    }

    private func save(_ file: File) throws(SyncError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        guard let data = try? encoder.encode(file) else { throw .configuration("cannot encode \(path)") }
        do { try PrivateFile.write(path, bytes: [UInt8](data)) } catch { throw .configuration(error.description) }
    }

    /// The server `binder login` used last; limbo.health before any login.
    public var defaultServer: String { load().defaultServer ?? ServerClient.defaultServer }

    public var servers: [String] { load().servers.keys.sorted() }

    /// The stored token for `server`, decrypted; nil if none or it was stored for another key.
    public func token(server: String, key: SecretKey) -> String? {
        guard let entry = load().servers[server], entry.pubkey == key.publicKey.hex,
              let plain = try? NIP44.decrypt(payload: entry.token, key: NIP44.ConversationKey(selfOf: key)) else { return nil }
        return String(decoding: plain.copyBytes(), as: UTF8.self)
    }

    public func store(token: String, server: String, key: SecretKey, makeDefault: Bool) throws(SyncError) {
        var file = load()
        let bytes = Array(token.utf8)
        let encrypted: String
        do {
            let conversationKey = try NIP44.ConversationKey(selfOf: key)
            encrypted = try bytes.withUnsafeBytes { (b) throws(NIP44.Error) in try NIP44.encrypt(b, key: conversationKey) }
        } catch { throw .configuration("cannot encrypt the token: \(error)") }
        file.servers[server] = Entry(pubkey: key.publicKey.hex, token: encrypted, loggedInAt: Int64(Date().timeIntervalSince1970))
        if makeDefault { file.defaultServer = server }
        try save(file)
    }

    /// A rotated binder's first sync: the token `server` issued to another identity (a
    /// retired key's; sealed to `key` by `reseal`) is set aside before `key` logs in there,
    /// so that the old copy can still be deleted with it.
    public func setAsideRetiredToken(server: String, key: SecretKey) throws(SyncError) {
        var file = load()
        guard let entry = file.servers[server], entry.pubkey != key.publicKey.hex,
              let conversationKey = try? NIP44.ConversationKey(selfOf: key),
              (try? NIP44.decrypt(payload: entry.token, key: conversationKey)) != nil else { return }
        file.retired = (file.retired ?? [:]).merging([server: entry]) { _, new in new }
        file.servers[server] = nil
        try save(file)
    }

    /// The set-aside token `server` issued to `pubkey` (hex), decrypted with `key`.
    public func retiredToken(server: String, pubkey: String, key: SecretKey) -> String? {
        guard let entry = load().retired?[server], entry.pubkey == pubkey,
              let plain = try? NIP44.decrypt(payload: entry.token, key: NIP44.ConversationKey(selfOf: key)) else { return nil }
        return String(decoding: plain.copyBytes(), as: UTF8.self)
    }

    public func dropRetiredToken(server: String) throws(SyncError) {
        var file = load()
        guard file.retired?[server] != nil else { return }
        file.retired?[server] = nil
        try save(file)
    }

    /// `binder key rotate`: every token sealed to `old` sealed again to `new`, so that nothing
    /// here stays under the old key. Each still names the identity it was issued to (`old`'s
    /// pubkey): `token(server:key:)` does not hand it out for `new`, whose first call to a
    /// server logs in afresh. Tokens already moved (opening with `new`) are left; the count moved.
    @discardableResult
    public func reseal(from old: SecretKey, to new: SecretKey) throws(SyncError) -> Int {
        guard FileManager.default.fileExists(atPath: path) else { return 0 }
        var file = load()
        var moved = 0
        // The set-aside tokens too: a second rotation before the first one's old copy was deleted.
        var retired = file.retired ?? [:]
        moved += try Self.reseal(&file.servers, from: old, to: new)
        moved += try Self.reseal(&retired, from: old, to: new)
        if file.retired != nil { file.retired = retired }
        if moved > 0 { try save(file) }
        return moved
    }

    private static func reseal(_ entries: inout [String: Entry], from old: SecretKey, to new: SecretKey) throws(SyncError) -> Int {
        var moved = 0
        for (server, entry) in entries {
            guard let oldKey = try? NIP44.ConversationKey(selfOf: old),
                  let plain = try? NIP44.decrypt(payload: entry.token, key: oldKey) else { continue }
            do {
                let newKey = try NIP44.ConversationKey(selfOf: new)
                let sealed = try plain.withUnsafeBytes { (b) throws(NIP44.Error) in try NIP44.encrypt(b, key: newKey) }
                entries[server]?.token = sealed
                moved += 1
            } catch { throw .configuration("cannot encrypt the token of \(server): \(error)") }
        }
        return moved
    }
}

/// A logged-in conversation with one server: the token in memory, renewed by signing a new
/// challenge with the unlocked key when the server answers 401 (once per call).
public final class ServerSession: Sendable {
    public let client: ServerClient
    private let key: SecretKey?
    private let accounts: Accounts?
    /// Guards the current token.
    private let token: Mutex<String?>

    /// A session that logs in (and renews) with `key`, keeping the token in `accounts`.
    public init(client: ServerClient, key: SecretKey, accounts: Accounts?) {
        self.client = client
        self.key = key
        self.accounts = accounts
        token = Mutex(accounts?.token(server: client.base, key: key))
    }

    /// A session on a token handed over (a QR code's): used as is, never stored; if it is
    /// refused and `key` is given, a login with the key takes over (not stored either).
    public init(client: ServerClient, token: String, key: SecretKey?) {
        self.client = client
        self.key = key
        accounts = nil
        self.token = Mutex(token)
    }

    /// The current token, logging in first if there is none.
    public func currentToken() throws(SyncError) -> String {
        if let token = token.withLock({ $0 }) { return token }
        return try renew()
    }

    /// Signs a fresh challenge and keeps the new token.
    @discardableResult
    public func renew() throws(SyncError) -> String {
        guard let key else { throw .unauthorized("the token was refused and no key is at hand to log in again") }
        let fresh = try client.login(secretKey: key)
        token.withLock { $0 = fresh }
        try accounts?.store(token: fresh, server: client.base, key: key, makeDefault: false)
        return fresh
    }

    /// Runs `body` with a token; on `.unauthorized` logs in again once and retries.
    public func authorized<T>(_ body: (String) throws(SyncError) -> T) throws(SyncError) -> T {
        let first = try currentToken()
        do {
            return try body(first)
        } catch .unauthorized {
            return try body(try renew())
        }
    }
}
