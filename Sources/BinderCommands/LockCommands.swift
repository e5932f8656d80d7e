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
            throw CommandFailure.usage("--timeout: '\(timeout)' is not a duration like 30m, 8h or 2d")
        }
        let store = KeyStore()
        let key: SecretKey
        do { key = try store.unlockWithPassphrase(passphrase.source) } catch PassphraseSource.Error.noTerminal {
            throw CommandFailure(PassphraseSource.Error.noTerminal.description)
        }
        do { try KernelKeyring.store(key, timeoutSeconds: seconds) } catch {
            throw CommandFailure("\(error); commands will ask for the passphrase each time")
        }
        printInfo(seconds == 0 ? "Unlocked until 'binder lock'." : "Unlocked for \(timeout).")
    }
}

struct LockCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lock",
        abstract: "Lock your records: lock (unmount) every running mount and forget the cached key.",
        discussion: """
        Each mount drops all plaintext and the key and unmounts; one with a file open is left \
        mounted and named with the processes holding it (exit status 1). A screen locker can run \
        'binder lock'.
        """)

    @Flag(name: .customLong("keep-mounts"), help: "Only forget the cached key; leave running mounts alone.")
    var keepMounts = false

    func run() throws {
        let state = StateDirectory()
        var failures: [String] = []
        if !keepMounts {
            for mount in RunningMounts.find(state) {
                let answer: String
                do { answer = try ControlClient.send(ControlRequest.lock, to: mount.control) } catch {
                    // A mount that ended while answering has locked.
                    if mount.mountpoint.map({ MountTable.entry(at: $0) == nil }) ?? false {
                        printInfo("Locked \(mount.mountpoint ?? mount.control)")
                    } else {
                        failures.append("\(mount.mountpoint ?? mount.control): \(error)")
                    }
                    continue
                }
                if answer.hasPrefix("ok locked ") {
                    printInfo("Locked \(answer.dropFirst("ok locked ".count))")
                } else {
                    failures.append(answer.hasPrefix("error ") ? String(answer.dropFirst(6)) : answer)
                }
            }
        }
        let store = KeyStore(state: state)
        if let publicKey = try? store.publicKey() {
            do {
                let removed = try KernelKeyring.remove(for: publicKey)
                printInfo(removed ? "Locked." : "Already locked.")
            } catch {
                failures.append("\(error)")
            }
        }
        if !failures.isEmpty { throw CommandFailure(failures.joined(separator: "; ")) }
    }
}

/// The running mounts of this state folder: their control sockets in `run/`.
enum RunningMounts {
    struct Mount {
        let control: String
        let mountpoint: String?
    }

    static func find(_ state: StateDirectory) -> [Mount] {
        ControlServer.removeDeadSockets(runDirectory: state.runDirectory)
        let sockets = ((try? FileManager.default.contentsOfDirectory(atPath: state.runDirectory)) ?? [])
            .filter { $0.hasPrefix("mount-") && $0.hasSuffix(".sock") }.sorted()
        return sockets.map { name in
            let pid = Int32(name.dropFirst("mount-".count).dropLast(".sock".count))
            return Mount(control: state.runDirectory + "/" + name, mountpoint: pid.flatMap(mountpoint(ofDaemon:)))
        }
    }

    /// The mount point in a daemon's command line (`mount BINDER MOUNTPOINT --daemon-child …`).
    private static func mountpoint(ofDaemon pid: Int32) -> String? {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return nil }
        let words = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        guard let index = words.firstIndex(of: "mount"), index + 2 < words.count else { return nil }
        return words[index + 2]
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
