import BinderCrypto
import BinderSystem
import Foundation
import Glibc

/// The user's key on disk: a NIP-49 `ncryptsec` (0600) next to the public key in clear, under
/// binder's state folder.
struct KeyStore {
    let state: StateDirectory

    init(state: StateDirectory = StateDirectory()) { self.state = state }

    var exists: Bool { FileManager.default.fileExists(atPath: state.keyFile) }

    func publicKey() throws -> PublicKey {
        guard let text = try? String(contentsOfFile: state.publicKeyFile, encoding: .utf8) else {
            if exists { throw CommandFailure("the public key file \(state.publicKeyFile) is missing; run 'binder key show' after 'binder unlock' to restore it") }
            throw CommandFailure("no key yet: run 'binder key generate' or 'binder key import'")
        }
        do { return try PublicKey(npub: text.trimmingCharacters(in: .whitespacesAndNewlines)) } catch {
            throw CommandFailure("the public key file \(state.publicKeyFile) is damaged: \(error)")
        }
    }

    func encryptedKey() throws -> String {
        guard let text = try? String(contentsOfFile: state.keyFile, encoding: .utf8) else {
            throw CommandFailure("no key yet: run 'binder key generate' or 'binder key import'")
        }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Writes both files atomically; the key file is created 0600 before any byte is written.
    func save(ncryptsec: String, publicKey: PublicKey) throws {
        try state.ensureExists()
        try Self.writePrivateFile(state.keyFile, contents: ncryptsec + "\n")
        try Self.writePrivateFile(state.publicKeyFile, contents: publicKey.npub + "\n")
    }

    static func writePrivateFile(_ path: String, contents: String) throws {
        do { try PrivateFile.write(path, contents: contents) } catch { throw CommandFailure(error.description) }
    }

    /// Replaces the key file with `ncryptsec` (the same key under a new passphrase): written
    /// beside it 0600 and fsynced, renamed over it, then the folder fsynced so that the rename
    /// survives a power cut. Until the rename the old file is whole; after it, the new one is.
    func replaceEncryptedKey(_ ncryptsec: String) throws {
        try Self.writePrivateFile(state.keyFile, contents: ncryptsec + "\n")
        let folder = open((state.keyFile as NSString).deletingLastPathComponent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard folder >= 0 else { throw CommandFailure("cannot open the folder of \(state.keyFile): \(String(cString: strerror(errno)))") }
        defer { close(folder) }
        guard fsync(folder) == 0 else { throw CommandFailure("cannot sync the folder of \(state.keyFile): \(String(cString: strerror(errno)))") }
    }

    /// The secret key: from the kernel keyring when unlocked, else by asking for the passphrase.
    func secretKey(passphrase: PassphraseSource, purpose: String = "Passphrase for your binder key: ") throws -> SecretKey {
        let publicKey = try publicKey()
        do {
            if let cached = try KernelKeyring.load(for: publicKey) { return cached }
        } catch {
            printErr("binder: \(error); asking for the passphrase instead")
        }
        do {
            return try unlockWithPassphrase(passphrase, prompt: purpose)
        } catch PassphraseSource.Error.noTerminal {
            throw CommandFailure("the key is locked: run 'binder unlock' first, or pass --passphrase-file FILE")
        }
    }

    func unlockWithPassphrase(_ passphrase: PassphraseSource, prompt: String = "Passphrase for your binder key: ") throws -> SecretKey {
        try decryptStoredKey(passphrase, prompt: prompt, wrongPassphrase: "wrong passphrase").key
    }

    /// The stored key and its NIP-49 key-security byte, decrypted with a passphrase read from
    /// `passphrase`; `wrongPassphrase` is the one line said when it does not open the key.
    func decryptStoredKey(_ passphrase: PassphraseSource, prompt: String,
                          wrongPassphrase: String) throws -> (key: SecretKey, security: NIP49.KeySecurity?) {
        let expected = try publicKey()
        let ncryptsec = try encryptedKey()
        let secret = try readPassphrase(passphrase, prompt: prompt, allowEmpty: true)
        let key: (key: SecretKey, security: NIP49.KeySecurity?)
        do { key = try NIP49.decrypt(ncryptsec, passphrase: secret) } catch NIP49.Error.wrongPassphrase {
            throw CommandFailure(wrongPassphrase)
        } catch {
            throw CommandFailure("the key file \(state.keyFile) is damaged: \(error)")
        }
        guard key.key.publicKey == expected else {
            throw CommandFailure("the key file and the public key file disagree (\(state.keyFile))")
        }
        return key
    }
}

/// Reads a passphrase, turning the source's errors into one-line failures (except a missing
/// terminal, which callers may explain better).
func readPassphrase(_ source: PassphraseSource, prompt: String, confirm: Bool = false, allowEmpty: Bool = false) throws -> SecureBytes {
    do {
        return try source.read(prompt: prompt, confirm: confirm, allowEmpty: allowEmpty)
    } catch .noTerminal {
        throw PassphraseSource.Error.noTerminal
    } catch {
        throw CommandFailure(error.description)
    }
}
