import ArgumentParser
import BinderCrypto
import BinderSystem
import Foundation

struct UnlockCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unlock",
        abstract: "Cache your secret key in the kernel keyring so later commands need no passphrase.")

    @Option(help: "How long the key stays cached: e.g. 30m, 8h, 2d, 90s (0 = until 'binder lock' or logout).")
    var timeout: String = "8h"
    @OptionGroup var passphrase: PassphraseOptions

    func run() throws {
        guard let seconds = parseDuration(timeout) else {
            throw CommandFailure("--timeout: '\(timeout)' is not a duration like 30m, 8h or 2d")
        }
        let store = KeyStore()
        let key: SecretKey
        do { key = try store.unlockWithPassphrase(passphrase.source) } catch PassphraseSource.Error.noTerminal {
            throw CommandFailure(PassphraseSource.Error.noTerminal.description)
        }
        do { try KernelKeyring.store(key, timeoutSeconds: seconds) } catch {
            throw CommandFailure("\(error); commands will ask for the passphrase each time")
        }
        printOut(seconds == 0 ? "Unlocked until 'binder lock'." : "Unlocked for \(timeout).")
    }
}

struct LockCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lock", abstract: "Forget the cached secret key (revoke it in the kernel keyring).")

    func run() throws {
        let publicKey = try KeyStore().publicKey()
        do {
            let removed = try KernelKeyring.remove(for: publicKey)
            printOut(removed ? "Locked." : "Already locked.")
        } catch {
            throw CommandFailure("\(error)")
        }
    }
}

/// "90s", "30m", "8h", "2d", or plain seconds.
func parseDuration(_ text: String) -> UInt32? {
    let units: [Character: UInt64] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
    var digits = text.trimmingCharacters(in: .whitespaces)
    var multiplier: UInt64 = 1
    if let last = digits.last, let unit = units[last] {
        multiplier = unit
        digits.removeLast()
    }
    guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let value = UInt64(digits) else { return nil }
    let total = value * multiplier
    return total <= UInt64(UInt32.max) ? UInt32(total) : nil
}
