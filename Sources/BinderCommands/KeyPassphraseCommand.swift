import ArgumentParser
import BinderCrypto
import BinderSystem

extension KeyCommand {
    /// `binder key passphrase`: the same key under a new passphrase.
    struct Passphrase: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "passphrase",
            abstract: "Change the passphrase that protects your key (the key itself, and your npub, stay the same).",
            discussion: """
                Asks for the current passphrase, then the new one twice, on the terminal (nothing is echoed); \
                scripts give them with --passphrase-file (current) and --new-passphrase-file (new). The key file \
                is replaced in one step: a wrong current passphrase, or an interruption, leaves the old one whole. \
                A key unlocked with 'binder unlock' stays unlocked.

                Copies made before keep the OLD passphrase: an ncryptsec printed by 'binder key export' or a \
                recovery sheet printed by 'binder key backup' still opens with the old passphrase, not the new \
                one. Destroy them, or make new ones ('binder key backup --sheet FILE.pdf') after the change.
                """)

        @OptionGroup var passphrase: PassphraseOptions
        @Option(name: .customLong("new-passphrase-file"),
                help: "Read the new passphrase from the first line of FILE instead of the terminal.")
        var newPassphraseFile: String?
        @Option(name: .customLong("log-n"), help: "scrypt cost (2^N) of the new encryption; 16 unless you know better.")
        var logN: UInt8 = NIP49.defaultLogN

        func run() throws {
            let store = KeyStore()
            guard store.exists else { throw CommandFailure("no key yet: run 'binder key generate' or 'binder key import'") }
            guard logN >= 1 && logN <= NIP49.maximumLogN else {
                throw CommandFailure.usage("--log-n must be 1 to \(NIP49.maximumLogN)")
            }
            let current: (key: SecretKey, security: NIP49.KeySecurity?)
            do {
                current = try store.decryptStoredKey(passphrase.source, prompt: "Current passphrase of your key: ",
                                                     wrongPassphrase: "wrong passphrase: the key and its passphrase are unchanged")
            } catch PassphraseSource.Error.noTerminal {
                throw CommandFailure("no terminal to ask for the passphrases; use --passphrase-file FILE and --new-passphrase-file FILE")
            }
            let secret: SecureBytes
            do {
                secret = try readPassphrase(newPassphraseFile.map { .file($0) } ?? .terminal,
                                            prompt: "New passphrase for your key: ", confirm: true)
            } catch PassphraseSource.Error.noTerminal {
                throw CommandFailure("no terminal to ask for the new passphrase; use --new-passphrase-file FILE")
            }
            let ncryptsec: String
            do {
                ncryptsec = try NIP49.encrypt(current.key, passphrase: secret, logN: logN,
                                              keySecurity: current.security ?? .unknown)
            } catch { throw CommandFailure("cannot encrypt the key: \(error)") }
            try store.replaceEncryptedKey(ncryptsec)
            printOut("Passphrase changed for \(current.key.publicKey.npub) (the key is the same).")
            printOut("Copies made before (an exported ncryptsec, a recovery sheet) still open with the OLD passphrase:")
            printOut("destroy them, or make a new sheet with 'binder key backup --sheet FILE.pdf'.")
        }
    }
}
