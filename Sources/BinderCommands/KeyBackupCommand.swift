import ArgumentParser
import BinderExport
import BinderSystem
import Foundation
import Glibc

extension KeyCommand {
    /// `binder key backup --sheet FILE.pdf`: the encrypted key on paper.
    struct Backup: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "backup",
            abstract: "Write a printable recovery sheet of your key (a PDF: the ncryptsec as a QR code and as text).",
            discussion: """
                The sheet is one A4 page: your key encrypted with your passphrase (the ncryptsec), as a QR code \
                made for paper (error correction level H) and as text in short groups, the npub it restores, \
                the date, and instructions. To restore it: 'binder key import --qr PHOTO' with a photo or scan \
                of the page, or type the text into 'binder key import' (spaces and line breaks do not matter).

                'binder key export' prints the same ncryptsec to standard output, for a password manager or a \
                file; 'binder key backup' makes a sheet of paper to keep. Neither opens anything without the \
                passphrase, and both keep the passphrase of the day they were made: after 'binder key passphrase', \
                an older sheet still opens with the OLD passphrase only.

                The file is written readable by you only (0600), only where --sheet points, and never over an \
                existing file unless --force. Print it, keep the paper apart from your passphrase, and delete \
                the file if you do not need it.
                """)

        @Option(name: .customLong("sheet"), help: "Write the recovery sheet to FILE (a PDF, A4).")
        var sheet: String
        @Flag(help: "Replace FILE if it exists.")
        var force = false

        func run() throws {
            let store = KeyStore()
            let ncryptsec = try store.encryptedKey()
            let npub = try store.publicKey().npub
            guard ncryptsec.hasPrefix("ncryptsec1") else { throw CommandFailure("the key file \(store.state.keyFile) is not an ncryptsec") }
            let modules: [[Bool]]
            do { modules = try TerminalQR(ncryptsec, correction: .high).modules } catch {
                throw CommandFailure("cannot draw the QR code: \(error)")
            }
            let day = DateFormatter()
            day.locale = Locale(identifier: "en_US_POSIX")
            day.dateFormat = "yyyy-MM-dd"
            let made = day.string(from: Date())
            let pdf: [UInt8]
            do {
                pdf = try RecoverySheetPDF.render(title: "binder: recovery sheet of your key", ncryptsec: ncryptsec, npub: npub,
                                                  date: "Made on \(made)", instructions: Self.instructions(made: made), qrModules: modules)
            } catch { throw CommandFailure("cannot make the recovery sheet: \(error)") }
            try Self.write(pdf, to: sheet, replacing: force)
            printOut("Recovery sheet of \(npub) written to \(sheet) (readable by you only).")
            printOut("Print it and keep the paper apart from your passphrase; then delete the file if you do not need it.")
            printOut("It opens with your current passphrase; after 'binder key passphrase' it still needs the old one.")
        }

        /// What the sheet says to whoever finds it, the patient years later included.
        static func instructions(made: String) -> [String] {
            ["What this is: the secret key that opens your medical binders (binder, limbo.health), encrypted with your "
                + "passphrase. With this sheet and the passphrase, your binders can be opened on any computer, for as long as you live.",
             "The passphrase is needed to use it: this sheet alone opens nothing. It opens with the passphrase you had on "
                + "\(made); if you changed the passphrase since, it still needs the old one.",
             "Keep it somewhere safe (a safe, a sealed envelope with someone you trust) and separate from the passphrase. "
                + "Never write the passphrase on this sheet: whoever holds both can read your binders.",
             "To restore your key: photograph or scan the QR code and run \"binder key import --qr PHOTO.jpg\", or type the "
                + "text above into \"binder key import\" (spaces and line breaks do not matter; a typo is detected). "
                + "Then enter the passphrase."]
        }

        /// `bytes` to `path`, created 0600 and fsynced: a new file, or with `replacing` the old one
        /// replaced in one rename.
        static func write(_ bytes: [UInt8], to path: String, replacing: Bool) throws {
            if replacing {
                do { try PrivateFile.write(path, bytes: bytes) } catch { throw CommandFailure(error.description) }
                return
            }
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                if errno == EEXIST { throw CommandFailure("\(path) exists; pass --force to replace it") }
                throw CommandFailure("cannot write \(path): \(String(cString: strerror(errno)))")
            }
            var written = 0
            while written < bytes.count {
                let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, $0.count - written) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                written += n
            }
            let why = String(cString: strerror(errno))
            let synced = fsync(fd) == 0
            close(fd)
            guard written == bytes.count, synced else {
                unlink(path)
                throw CommandFailure("cannot write \(path): \(why)")
            }
        }
    }
}
