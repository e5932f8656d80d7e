import BinderCrypto
import BinderSystem
import Foundation

/// Keys left by `binder key rotate` (unless `--forget-old`), in `key.retired` beside the key
/// file (0600): one `npub ncryptsec` line each, the ncryptsec as it was, under the passphrase
/// it had. They open what was made before the rotation (an old backup of a binder, a copy on
/// another device); `binder key show --retired` lists them, `binder key export --retired NPUB`
/// prints one.
struct RetiredKeys {
    let state: StateDirectory

    struct Entry: Equatable {
        let npub: String
        let ncryptsec: String
    }

    func entries() -> [Entry] {
        guard let text = try? String(contentsOfFile: state.retiredKeysFile, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count == 2, fields[0].hasPrefix("npub1"), fields[1].hasPrefix("ncryptsec1") else { return nil }
            return Entry(npub: String(fields[0]), ncryptsec: String(fields[1]))
        }
    }

    /// Adds a key (nothing when it is there already), the file replaced in one rename.
    func add(npub: String, ncryptsec: String) throws {
        let kept = entries()
        guard !kept.contains(where: { $0.npub == npub }) else { return }
        let text = (kept + [Entry(npub: npub, ncryptsec: ncryptsec)]).map { "\($0.npub) \($0.ncryptsec)\n" }.joined()
        try KeyStore.writePrivateFile(state.retiredKeysFile, contents: text)
        try DurableFolder.sync(state.root)
    }

    /// The retired key `npub` names (an npub, or the start of one).
    func entry(_ npub: String) throws -> Entry {
        let all = entries()
        let matching = all.filter { $0.npub == npub || (npub.count >= 10 && $0.npub.hasPrefix(npub)) }
        guard matching.count == 1 else {
            if all.isEmpty { throw CommandFailure("no retired key (\(state.retiredKeysFile)); 'binder key rotate' keeps one unless --forget-old") }
            throw CommandFailure("no single retired key '\(npub)'; 'binder key show --retired' lists them")
        }
        return matching[0]
    }

    /// A retired key, decrypted with its old passphrase.
    static func open(_ entry: Entry, passphrase: PassphraseSource) throws -> SecretKey {
        let secret = try readPassphrase(passphrase, prompt: "Old passphrase of the retired key: ", allowEmpty: true)
        let key: SecretKey
        do { key = try NIP49.decrypt(entry.ncryptsec, passphrase: secret).key } catch NIP49.Error.wrongPassphrase {
            throw CommandFailure("wrong passphrase for the retired key (it keeps the passphrase it had when it was retired)")
        } catch { throw CommandFailure("the retired key \(entry.npub) is damaged: \(error)") }
        guard key.publicKey.npub == entry.npub else { throw CommandFailure("the retired key \(entry.npub) is damaged") }
        return key
    }
}
