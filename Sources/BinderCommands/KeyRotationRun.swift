import BinderCore
import BinderCrypto
import BinderSync
import BinderSystem
import Foundation
import Glibc

/// The local part of `binder key rotate`, step by step (docs/DESIGN.md, "Key rotation"):
/// every binder copied under the new key beside it and verified; then each swapped in (one
/// `renameat2` exchange: the binder's path holds the old repository or the new, never
/// neither); then what else is sealed to the key (shares' book, login tokens) sealed again;
/// then the old key retired and the key files swapped; the old repositories removed last.
/// Every step can be repeated: a run killed anywhere is finished by the next, which reads
/// which repository stands where off the disk (a rotated copy holds its progress file).
struct KeyRotationRun {
    let state: StateDirectory
    var record: KeyRotationRecord

    private var locator: BinderLocator { BinderLocator(state: state) }

    func binderPath(_ name: String) -> String { locator.path(forName: name) }

    /// Where binder `name`'s other repository is: the new one being built, or (once swapped
    /// in) the old one kept until the end.
    func otherSide(_ name: String) -> String { state.rotationFolder + "/" + name }

    static func gitDirectory(_ path: String) -> String {
        FileManager.default.fileExists(atPath: path + "/.git") ? path + "/.git" : path
    }

    /// Whether the binder's path holds the rotated copy already.
    func isSwapped(_ name: String) -> Bool {
        KeyRotation.isRotationCopy(gitDirectory: Self.gitDirectory(binderPath(name)))
    }

    /// Takes every binder's writer lock (kept for the run): a mounted binder, or one another
    /// command writes, is refused by name before anything changes.
    static func lockAll(_ names: [String], state: StateDirectory) throws -> [WriterLock] {
        var locks: [WriterLock] = []
        for name in names {
            let path = BinderLocator(state: state).path(forName: name)
            guard FileManager.default.fileExists(atPath: path) else { continue }
            do {
                let lock = try WriterLock.acquire(gitDirectory: gitDirectory(path), patience: 2)
                lock.record(WriterLock.Holder(pid: getpid(), command: "key rotate"))
                locks.append(lock)
            } catch .held(let holder) {
                if let mountpoint = holder.mountpoint {
                    throw CommandFailure("binder '\(name)' is mounted at \(mountpoint): run 'binder unmount \(mountpoint)' first; nothing was changed")
                }
                throw CommandFailure("binder '\(name)' is \(holder); wait for it to end, then run 'binder key rotate' again; nothing was changed")
            } catch {
                throw CommandFailure("\(error)")
            }
        }
        return locks
    }

    // MARK: Binders

    /// Rotates binder `name` into its other side (continuing a killed run's copy), carries its
    /// sync settings over, and checks that the new key opens it and the old does not.
    func rotate(_ name: String, oldKey: SecretKey, newKey: SecretKey) throws -> KeyRotation.Report {
        let source: LocalBinder
        do { source = try LocalBinder.open(path: binderPath(name)) } catch {
            throw CommandFailure("cannot open binder '\(name)': \(error)")
        }
        let rotation = RotationKillSwitch.armed(KeyRotation(source: source, oldKey: try BinderKey.conversationKey(owner: oldKey),
                                                            newKey: try BinderKey.conversationKey(owner: newKey), destination: otherSide(name)))
        let report: KeyRotation.Report
        do { report = try rotation.run() } catch {
            #if DEBUG
            if case .interrupted = error { RotationKillSwitch.killSelf() }
            #endif
            throw CommandFailure("binder '\(name)' cannot be rotated: \(error); nothing was swapped ('binder key rotate --abandon' undoes the rotation)")
        }
        let copy: LocalBinder
        do { copy = try LocalBinder.open(path: otherSide(name)) } catch {
            throw CommandFailure("cannot open the rotated copy \(otherSide(name)): \(error)")
        }
        try carrySettings(from: source.repository, to: copy.repository)
        do { try BinderCreator.checkKey(copy.repository, key: BinderKey.conversationKey(owner: newKey)) } catch {
            throw CommandFailure("the rotated copy of '\(name)' does not open with the new key: \(error)")
        }
        return report
    }

    /// Where the binder syncs (kept, so that a later push can go under a new id; marked so
    /// that no sync sends it under the old one) and the dates of its last syncs. Not carried:
    /// the conflicts' list and the server's branch (commit ids of the old history), the
    /// listing index (sealed to the old key; the first mount builds it again).
    private func carrySettings(from old: LocalBinder.Repository, to new: LocalBinder.Repository) throws {
        var sync = SyncRecord.load(old)
        sync.conflicts = []
        if sync != SyncRecord() { sync.save(new) }
        guard let target = SyncTarget.read(old) else { return }
        do {
            try target.write(new)
            // Rotated twice before a sync: the server's copy is still under the first key.
            try SyncTarget.markRotated(new, from: SyncTarget.rotatedFrom(old) ?? record.oldNpub)
        } catch { throw CommandFailure("cannot write the rotated copy's settings: \(error)") }
    }

    /// Puts the rotated copy of `name` at the binder's path and the old repository at its
    /// other side, in one exchange where the file system has it (else two renames).
    func swapIn(_ name: String) throws {
        let path = binderPath(name), other = otherSide(name)
        if RotationKillSwitch.withoutExchange || !RenameExchange.exchange(path, other) {
            guard RotationKillSwitch.withoutExchange || errno == EINVAL || errno == ENOSYS else {
                throw CommandFailure("cannot swap \(path) and \(other): \(String(cString: strerror(errno)))")
            }
            // Without an exchange: old aside, new in, old to the other side; a kill between
            // two renames leaves the path empty or the other side missing, which `resumeSwap`
            // finishes (the old repository is whole at `.old`, the new at one of its places).
            let failure = { CommandFailure("cannot swap \(path) and \(other): \(String(cString: strerror(errno)))") }
            guard rename(path, other + ".old") == 0 else { throw failure() }
            try DurableFolder.sync(state.rotationFolder)
            RotationKillSwitch.stepDone()
            guard rename(other, path) == 0 else { throw failure() }
            try DurableFolder.sync(state.bindersDirectory)
            RotationKillSwitch.stepDone()
            guard rename(other + ".old", other) == 0 else { throw failure() }
        }
        try DurableFolder.sync(state.bindersDirectory)
        try DurableFolder.sync(state.rotationFolder)
    }

    /// The renames of a swap without exchange that a kill cut short.
    func resumeSwap(_ name: String) throws {
        let path = binderPath(name), other = otherSide(name), aside = other + ".old"
        let fm = FileManager.default
        guard fm.fileExists(atPath: aside) else { return }
        if !fm.fileExists(atPath: path) { guard rename(other, path) == 0 else { throw CommandFailure("cannot rename \(other)") } }
        if !fm.fileExists(atPath: other) { guard rename(aside, other) == 0 else { throw CommandFailure("cannot rename \(aside)") } }
        try DurableFolder.sync(state.bindersDirectory)
        try DurableFolder.sync(state.rotationFolder)
    }

    // MARK: What else is sealed to the key

    /// The shares' book and the login tokens, sealed again from `from` to `to` (each entry
    /// that opens with `from`; the rest as they are, so that a repeat changes nothing).
    func moveSealed(from: SecretKey, to: SecretKey) throws -> (shares: Int, tokens: Int) {
        let shares = try ShareBook(path: state.sharesFile, key: from).reseal(to: to)
        RotationKillSwitch.stepDone()
        let tokens: Int
        do { tokens = try Accounts(path: state.accountsFile).reseal(from: from, to: to) } catch {
            throw CommandFailure("\(error)")
        }
        RotationKillSwitch.stepDone()
        return (shares, tokens)
    }

    // MARK: The key files

    /// The old key into the retired keys (unless `--forget-old`), the new key file over the
    /// old, the public key file after it. Each part is skipped when done already.
    func swapKeyFiles() throws {
        let fm = FileManager.default
        if fm.fileExists(atPath: state.rotationNewKeyFile) {
            if !record.forgetOld {
                let ncryptsec = try KeyStore(state: state).encryptedKey()
                try RetiredKeys(state: state).add(npub: record.oldNpub, ncryptsec: ncryptsec)
                RotationKillSwitch.stepDone()
            }
            guard rename(state.rotationNewKeyFile, state.keyFile) == 0 else {
                throw CommandFailure("cannot move the new key into \(state.keyFile): \(String(cString: strerror(errno)))")
            }
            try DurableFolder.sync(state.root)
            RotationKillSwitch.stepDone()
        }
        try KeyStore.writePrivateFile(state.publicKeyFile, contents: record.newNpub + "\n")
        try DurableFolder.sync(state.root)
        RotationKillSwitch.stepDone()
    }

    /// After the key files: the old repositories and the copies' progress files removed, the
    /// old key dropped from the keyring, the record last.
    func cleanUp() throws {
        for name in record.binders {
            let other = otherSide(name)
            if FileManager.default.fileExists(atPath: other) {
                do { try FileManager.default.removeItem(atPath: other) } catch {
                    throw CommandFailure("cannot remove the old repository \(other): \(error)")
                }
                RotationKillSwitch.stepDone()
            }
            do { try KeyRotation.removeProgress(gitDirectory: Self.gitDirectory(binderPath(name))) } catch {
                throw CommandFailure("\(error)")
            }
        }
        try? FileManager.default.removeItem(atPath: state.rotationFolder)
        if let old = try? PublicKey(npub: record.oldNpub) { _ = try? KernelKeyring.remove(for: old) }
        try KeyRotationRecord.remove(state)
    }
}
