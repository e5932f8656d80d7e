import ArgumentParser
import BinderCrypto
import BinderSystem
import Foundation

struct KeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "key",
        abstract: "Create, import, show, export or back up your Nostr key, change its passphrase, or rotate it (stored as a NIP-49 ncryptsec).",
        discussion: "A key that leaked is replaced with 'binder key rotate': every local binder is re-encrypted to a new key, and the old one is kept as a retired key ('binder key show --retired') for old backups.",
        subcommands: [Generate.self, Import.self, Show.self, Export.self, Passphrase.self, Backup.self, Rotate.self]
    )

    struct Generate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Generate a new key, protect it with a passphrase, and show the nsec once.")

        @OptionGroup var passphrase: PassphraseOptions
        @Option(name: .customLong("log-n"), help: "scrypt cost (2^N); 16 unless you know better.")
        var logN: UInt8 = NIP49.defaultLogN

        func run() throws {
            let store = KeyStore()
            guard !store.exists else {
                throw CommandFailure("a key already exists at \(store.state.keyFile); move it away first to replace it")
            }
            let key = try SecretKey.generate()
            let secret = try askNewPassphrase(passphrase.source)
            let ncryptsec = try NIP49.encrypt(key, passphrase: secret, logN: logN)
            try store.save(ncryptsec: ncryptsec, publicKey: key.publicKey)
            let nsec = try key.nsec()
            printOut("Your public key:  \(key.publicKey.npub)")
            printOut("")
            printOut("Your secret key is shown this once. Write it down and keep it somewhere safe:")
            printOut("anyone with it can read your binder, and without it (or your passphrase) nobody can.")
            printOut("")
            printOut("  " + nsec.withUnsafeBytes { String(decoding: $0, as: UTF8.self) })
            printOut("")
            printOut("Saved, encrypted with your passphrase, to \(store.state.keyFile)")
        }
    }

    struct Import: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Import a key from standard input: nsec1…, 64 hex characters, or ncryptsec1….",
            discussion: "Spaces and line breaks inside the key are ignored, so an ncryptsec typed off a printed recovery sheet (binder key backup) can be pasted as it is printed; a mistyped character is caught by the key's checksum. At a terminal it asks for the key and does not show it as it is typed or pasted; it ends at a whole key or an empty line.")

        /// Space, tab, line feed, vertical tab, form feed, carriage return.
        static let asciiWhitespace: Set<Unicode.Scalar> = [" ", "\t", "\n", "\u{0B}", "\u{0C}", "\r"]

        @OptionGroup var passphrase: PassphraseOptions
        @Option(name: .customLong("log-n"), help: "scrypt cost (2^N) when encrypting an nsec or hex key.")
        var logN: UInt8 = NIP49.defaultLogN
        @Option(name: .customLong("qr"), help: "Read the key from the QR code in a photo or scan of a recovery sheet, or in the sheet's own PDF (PNG, JPEG, PDF: its first 10 pages), not from standard input.")
        var qr: String?

        func run() throws {
            let store = KeyStore()
            guard !store.exists else {
                throw CommandFailure("a key already exists at \(store.state.keyFile); move it away first to replace it")
            }
            // Spaces and line breaks anywhere are dropped: a key typed off a printed recovery sheet
            // comes in groups and lines (bech32's checksum still catches a mistyped character).
            let text: String
            if let qr {
                text = String(decoding: try KeyQRPicture.read(qr), as: UTF8.self)
            } else {
                let input = try readStandardInputSecret()
                text = String(input.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
                    .unicodeScalars.filter { !Self.asciiWhitespace.contains($0) })
            }
            guard !text.isEmpty else { throw CommandFailure("nothing on standard input: pipe in an nsec, hex key or ncryptsec") }
            if text.lowercased().hasPrefix("ncryptsec1") {
                // Keep the ncryptsec as it is (its passphrase stays the user's); decrypt once to check it.
                let secret = try readPassphrase(passphrase.source, prompt: "Passphrase of this ncryptsec: ", allowEmpty: true)
                let key: SecretKey
                do { key = try NIP49.decrypt(text, passphrase: secret).key } catch NIP49.Error.wrongPassphrase {
                    throw CommandFailure("wrong passphrase for this ncryptsec")
                } catch { throw CommandFailure("\(error)") }
                try store.save(ncryptsec: text.lowercased(), publicKey: key.publicKey)
                printOut("Imported \(key.publicKey.npub)")
                return
            }
            let key: SecretKey
            do {
                if text.lowercased().hasPrefix("nsec1") {
                    key = try SecretKey(nsec: text)
                } else if text.count == 64, Hex.decode(text) != nil {
                    key = try SecretKey(hex: text)
                } else {
                    throw CommandFailure("malformed key: expected nsec1…, 64 hex characters or ncryptsec1…")
                }
            } catch let error as KeyError {
                throw CommandFailure("malformed key: \(error)")
            }
            let secret = try askNewPassphrase(passphrase.source)
            try store.save(ncryptsec: try NIP49.encrypt(key, passphrase: secret, logN: logN), publicKey: key.publicKey)
            printOut("Imported \(key.publicKey.npub)")
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show your public key (npub and hex), or with --retired the keys 'binder key rotate' retired. Works while locked.")

        @Flag(help: "List the retired keys (left by 'binder key rotate'), which still open what was made before.")
        var retired = false

        func run() throws {
            if retired {
                let keys = RetiredKeys(state: StateDirectory()).entries()
                if keys.isEmpty { printOut("No retired keys.") }
                for key in keys { printOut("retired: \(key.npub)") }
                return
            }
            let key = try KeyStore().publicKey()
            printOut("npub: \(key.npub)")
            printOut("hex:  \(key.hex)")
        }
    }

    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print your key as an ncryptsec (default) or, with --nsec --confirm-plaintext, as a bare nsec.",
            discussion: "The ncryptsec goes to standard output, for a password manager or a file; 'binder key backup --sheet FILE.pdf' makes a printable recovery sheet of it instead. Either opens with the passphrase of the day it was made, even after 'binder key passphrase'.")

        @Flag(help: "Print the unencrypted nsec instead of the ncryptsec.")
        var nsec = false
        @Flag(name: .customLong("confirm-plaintext"), help: "Confirm that you want the secret key printed unencrypted.")
        var confirmPlaintext = false
        @Option(help: "Export the retired key NPUB (see 'binder key show --retired'), under its old passphrase.")
        var retired: String?
        @OptionGroup var passphrase: PassphraseOptions

        func run() throws {
            let store = KeyStore()
            let retiredKey = try retired.map { try RetiredKeys(state: store.state).entry($0) }
            guard nsec else {
                printOut(try retiredKey?.ncryptsec ?? store.encryptedKey())
                return
            }
            guard confirmPlaintext else {
                throw CommandFailure.usage("--nsec prints your secret key in the clear; add --confirm-plaintext if you mean it")
            }
            let key = try retiredKey.map { try RetiredKeys.open($0, passphrase: passphrase.source) }
                ?? store.secretKey(passphrase: passphrase.source)
            let text = try key.nsec()
            text.withUnsafeBytes { FileHandle.standardOutput.write(Data($0)) }
            FileHandle.standardOutput.write(Data("\n".utf8))
        }
    }
}

/// A new passphrase: asked twice on a terminal, refused if empty.
func askNewPassphrase(_ source: PassphraseSource) throws -> SecureBytes {
    do {
        return try readPassphrase(source, prompt: "New passphrase for your key: ", confirm: true)
    } catch PassphraseSource.Error.noTerminal {
        throw CommandFailure(PassphraseSource.Error.noTerminal.description)
    }
}

/// A key being imported, from standard input into secret memory.
func readStandardInputSecret(limit: Int = 4096) throws(SecureMemoryError) -> SecureBytes {
    // Piped: read to its end. Typed or pasted at a terminal: prompted, never echoed (an nsec on
    // screen stays in the scrollback), and ended by a whole key or an empty line, not Ctrl-D.
    guard isatty(0) == 1 else { return try SecretInput.read(fd: 0, upTo: limit) }
    return try SecretInput.readTerminalLines(
        fd: 0, prompt: "Your key (nsec1…, 64 hex characters or ncryptsec1…), not shown as you type or paste it; then Enter:\n",
        upTo: limit, isComplete: KeyText.isWhole)
}

/// What a typed key looks like once whitespace is dropped.
enum KeyText {
    /// bech32 lengths of an nsec (32 bytes) and a NIP-49 ncryptsec (91 bytes), with their
    /// prefixes and checksums; a hex key is 64 characters.
    static let nsecLength = 63, ncryptsecLength = 162, hexLength = 64

    /// True when `bytes`, whitespace dropped, are long enough to be a whole key of the kind
    /// their prefix says (whether it is valid is the decoder's to say).
    static func isWhole(_ bytes: UnsafeRawBufferPointer) -> Bool {
        // Counted in place: the key's bytes are not copied out of secret memory.
        let ncryptsec = Array("ncryptsec1".utf8), nsec = Array("nsec1".utf8)
        var count = 0
        var isNcryptsec = true, isNsec = true
        for byte in bytes where !(byte == 0x20 || (0x09...0x0D).contains(byte)) {
            let lower = byte | 0x20
            if count < ncryptsec.count, lower != ncryptsec[count] { isNcryptsec = false }
            if count < nsec.count, lower != nsec[count] { isNsec = false }
            count += 1
        }
        if isNcryptsec, count >= ncryptsec.count { return count >= ncryptsecLength }
        if isNsec, count >= nsec.count { return count >= nsecLength }
        return count >= hexLength
    }
}

