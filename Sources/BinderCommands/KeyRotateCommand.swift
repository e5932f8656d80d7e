import ArgumentParser
import BinderCore
import BinderCrypto
import BinderSync
import BinderSystem
import Foundation

extension KeyCommand {
    /// `binder key rotate`: a new key for a key that leaked; every local binder re-encrypted to it.
    struct Rotate: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate",
            abstract: "Replace a key that leaked with a new one and re-encrypt every local binder to it.",
            discussion: """
                A new key is generated (its nsec shown once) or, with --import, read from standard input \
                (nsec1…, 64 hex characters or ncryptsec1…; never from the command line). It gets a new passphrase \
                (asked twice on the terminal, or --new-passphrase-file; an imported ncryptsec keeps its own, given \
                the same way). The current key is unlocked as usual (the keyring, the terminal or --passphrase-file).

                Every binder under binders/ is copied, its whole history (every version of every document and \
                attachment), under the new key beside it, checked with the new key, then swapped in. The shares' \
                book and the login tokens are sealed to the new key; the listing index is built again at the next \
                mount. Only when every binder is done does the new key replace the old one; the old key is kept, \
                under its old passphrase, as a retired key ('binder key show --retired', 'binder key export \
                --retired NPUB') that still opens old backups, unless --forget-old. A mounted binder is refused: \
                unmount it first.

                Interrupted at any point (killed, a full disk, the power), every binder stays whole and opens with \
                one of the two keys: until it is finished, commands that open a binder refuse, and running \
                'binder key rotate' again finishes it (asking for both passphrases while the old key is still in \
                place); 'binder key rotate --abandon' undoes it instead, until the new key is in place.

                A binder that syncs is not pushed by the rotation itself: its next 'binder sync' pushes it under a \
                new repository id with the new key's login, then deletes the old copy with the old key's (or the \
                retired key's: --retired-passphrase-file); nothing goes out under the old id. On another device \
                still on the old key, 'binder sync' exits 3 (the copy was deleted by its owner) and keeps its \
                commits: run 'binder key rotate --import' there with the new key, then 'binder sync', which finds \
                the moved binder among the new key's repositories and brings the commits made there onto it. A \
                rotation is refused while a binder's old copy from an earlier one is not deleted yet (sync first).

                What it cannot do: copies made before the rotation stay readable with the old key (backups, \
                exported files, other devices until they rotate, a recovery sheet of the old key, the server's old \
                copy until it is deleted; on limbo.health delete it from the Limbo app if sync could not). Make a \
                new recovery sheet afterwards: 'binder key backup --sheet FILE.pdf'.
                """)

        @OptionGroup var passphrase: PassphraseOptions
        @Option(name: .customLong("new-passphrase-file"),
                help: "Read the new key's passphrase from the first line of FILE instead of the terminal.")
        var newPassphraseFile: String?
        @Flag(name: .customLong("import"), help: "Read the new key from standard input instead of generating one.")
        var importKey = false
        @Flag(name: .customLong("forget-old"), help: "Do not keep the old key as a retired key.")
        var forgetOld = false
        @Flag(help: "Undo a rotation that was interrupted (possible until the new key is in place).")
        var abandon = false
        @Option(name: .customLong("log-n"), help: "scrypt cost (2^N) of the new key's encryption; 16 unless you know better.")
        var logN: UInt8 = NIP49.defaultLogN

        var newPassphrase: PassphraseSource { newPassphraseFile.map { .file($0) } ?? .terminal }

        func run() throws {
            let state = StateDirectory()
            guard logN >= 1 && logN <= NIP49.maximumLogN else { throw CommandFailure.usage("--log-n must be 1 to \(NIP49.maximumLogN)") }
            if let record = try KeyRotationRecord.load(state) {
                if abandon { return try undo(KeyRotationRun(state: state, record: record)) }
                printOut("Finishing the key rotation to \(record.newNpub) that was interrupted.")
                return try finish(KeyRotationRun(state: state, record: record))
            }
            guard !abandon else { throw CommandFailure("no key rotation is in progress") }
            try start(state)
        }

        private func start(_ state: StateDirectory) throws {
            let store = KeyStore(state: state)
            guard store.exists else { throw CommandFailure("no key yet: run 'binder key generate' or 'binder key import'") }
            let oldPublic = try store.publicKey()
            if let left = try? FileManager.default.contentsOfDirectory(atPath: state.rotationFolder), !left.isEmpty {
                throw CommandFailure("\(state.rotationFolder) holds what an earlier rotation left, without its record; move it away first")
            }
            // Git repositories only (bare, or a work tree's .git): no lock file is made in anything else.
            let candidates = ((try? FileManager.default.contentsOfDirectory(atPath: state.bindersDirectory)) ?? [])
                .filter { name in
                    let gitDirectory = KeyRotationRun.gitDirectory(state.bindersDirectory + "/" + name)
                    return !name.hasPrefix(".") && FileManager.default.fileExists(atPath: gitDirectory + "/HEAD")
                }.sorted()
            let locks = try KeyRotationRun.lockAll(candidates, state: state)
            let oldKey = try unlock(store)
            let names = try binders(candidates, state: state, key: oldKey)
            let new = try obtainNewKey()
            guard new.key.publicKey != oldPublic else { throw CommandFailure("the new key is the key you have; nothing was changed") }
            try KeyStore.writePrivateFile(state.rotationNewKeyFile, contents: new.ncryptsec + "\n")
            try DurableFolder.sync(state.root)
            RotationKillSwitch.stepDone()
            let record = KeyRotationRecord(oldNpub: oldPublic.npub, newNpub: new.key.publicKey.npub, binders: names,
                                           forgetOld: forgetOld, phase: .binders)
            try record.save(state)
            RotationKillSwitch.stepDone()
            printOut("Your new public key:  \(record.newNpub)")
            if new.generated {
                printOut("")
                printOut("Your new secret key is shown this once. Write it down and keep it somewhere safe:")
                printOut("anyone with it can read your binders, and without it (or its passphrase) nobody can.")
                printOut("")
                printOut("  " + (try new.key.nsec()).withUnsafeBytes { String(decoding: $0, as: UTF8.self) })
                printOut("")
            }
            try finish(KeyRotationRun(state: state, record: record), keys: (oldKey, new.key), locks: locks)
        }

        /// The binders to rotate: those the old key opens; the others are named and left.
        private func binders(_ candidates: [String], state: StateDirectory, key: SecretKey) throws -> [String] {
            let conversationKey = try BinderKey.conversationKey(owner: key)
            var names: [String] = []
            for name in candidates {
                let path = BinderLocator(state: state).path(forName: name)
                guard let binder = try? LocalBinder.open(path: path) else { continue }
                if SyncTarget.moveStarted(binder.repository) || SyncTarget.oldCopy(binder.repository) != nil {
                    let server = SyncTarget.read(binder.repository)?.server ?? "its server"
                    throw CommandFailure("binder '\(name)' is still moving off the key of an earlier rotation (its copy under that key on "
                                         + "\(server) is not deleted yet, and one binder follows one such copy at a time): run 'binder sync "
                                         + "\(name)' first (with --retired-passphrase-file if it asks), then 'binder key rotate' again; nothing was changed")
                }
                guard (try? binder.repository.refs.branchTip()) ?? nil != nil else {
                    printOut("Skipping '\(name)': it has no commit yet.")
                    continue
                }
                do { try BinderCreator.checkKey(binder.repository, key: conversationKey) } catch {
                    printOut("Skipping '\(name)': \(error); it is left as it is.")
                    continue
                }
                names.append(name)
            }
            return names
        }

        private func unlock(_ store: KeyStore) throws -> SecretKey {
            do { return try store.secretKey(passphrase: passphrase.source, purpose: "Current passphrase of your key: ") } catch PassphraseSource.Error.noTerminal {
                throw CommandFailure("no terminal to ask for the current passphrase; use --passphrase-file FILE")
            }
        }

        /// The new key and its ncryptsec: generated, or imported from standard input.
        private func obtainNewKey() throws -> (key: SecretKey, ncryptsec: String, generated: Bool) {
            guard importKey else {
                let key = try SecretKey.generate()
                return (key, try encrypt(key), true)
            }
            let input = try readStandardInputSecret()
            let text = String(input.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
                .unicodeScalars.filter { !Import.asciiWhitespace.contains($0) })
            guard !text.isEmpty else { throw CommandFailure("nothing on standard input: pipe in the new key (nsec, hex key or ncryptsec)") }
            if text.lowercased().hasPrefix("ncryptsec1") {
                let secret = try ask(newPassphrase, prompt: "Passphrase of the new key's ncryptsec: ", confirm: false)
                do { return (try NIP49.decrypt(text, passphrase: secret).key, text.lowercased(), false) } catch NIP49.Error.wrongPassphrase {
                    throw CommandFailure("wrong passphrase for the new key's ncryptsec; nothing was changed")
                } catch { throw CommandFailure("the new key's ncryptsec is malformed: \(error)") }
            }
            let key: SecretKey
            do {
                if text.lowercased().hasPrefix("nsec1") { key = try SecretKey(nsec: text) }
                else if text.count == 64, Hex.decode(text) != nil { key = try SecretKey(hex: text) }
                else { throw CommandFailure("malformed key: expected nsec1…, 64 hex characters or ncryptsec1…") }
            } catch let error as KeyError { throw CommandFailure("malformed key: \(error)") }
            return (key, try encrypt(key), false)
        }

        private func encrypt(_ key: SecretKey) throws -> String {
            let secret = try ask(newPassphrase, prompt: "New passphrase for your new key: ", confirm: true)
            do { return try NIP49.encrypt(key, passphrase: secret, logN: logN) } catch { throw CommandFailure("cannot encrypt the new key: \(error)") }
        }

        private func ask(_ source: PassphraseSource, prompt: String, confirm: Bool) throws -> SecureBytes {
            do { return try readPassphrase(source, prompt: prompt, confirm: confirm, allowEmpty: !confirm) } catch PassphraseSource.Error.noTerminal {
                throw CommandFailure("no terminal to ask for the new passphrase; use --new-passphrase-file FILE")
            }
        }

        /// Both keys of a rotation under way: the old from where it is, the new from its file.
        private func keys(_ run: KeyRotationRun) throws -> (old: SecretKey, new: SecretKey) {
            let old = try unlock(KeyStore(state: run.state))
            guard let ncryptsec = try? String(contentsOfFile: run.state.rotationNewKeyFile, encoding: .utf8) else {
                throw CommandFailure("cannot read \(run.state.rotationNewKeyFile)")
            }
            let secret = try ask(newPassphrase, prompt: "Passphrase of the new key: ", confirm: false)
            let new: SecretKey
            do { new = try NIP49.decrypt(ncryptsec.trimmingCharacters(in: .whitespacesAndNewlines), passphrase: secret).key } catch NIP49.Error.wrongPassphrase {
                throw CommandFailure("wrong passphrase for the new key (the one given when the rotation began)")
            } catch { throw CommandFailure("\(run.state.rotationNewKeyFile) is damaged: \(error)") }
            guard new.publicKey.npub == run.record.newNpub else { throw CommandFailure("\(run.state.rotationNewKeyFile) is not the rotation's new key") }
            return (old, new)
        }

        /// Every step left, in order (each skipped when done already).
        private func finish(_ run: KeyRotationRun, keys given: (old: SecretKey, new: SecretKey)? = nil,
                            locks held: [WriterLock]? = nil) throws {
            var run = run
            let state = run.state
            if run.record.phase == .binders {
                // Held from the start to the key files' swap (this process's own, when it began the rotation).
                let locks = try held ?? KeyRotationRun.lockAll(run.record.binders, state: state)
                if FileManager.default.fileExists(atPath: state.rotationNewKeyFile) {
                    let (old, new) = try given ?? keys(run)
                    try FileManager.default.createDirectory(atPath: state.rotationFolder, withIntermediateDirectories: true,
                                                            attributes: [.posixPermissions: 0o700])
                    for name in run.record.binders { try run.resumeSwap(name) }
                    for name in run.record.binders where !run.isSwapped(name) {
                        let report = try run.rotate(name, oldKey: old, newKey: new)
                        printOut("Re-encrypted '\(name)': \(report.commits) commits, every version checked with the new key.")
                        RotationKillSwitch.stepDone()
                    }
                    for name in run.record.binders where !run.isSwapped(name) {
                        try run.swapIn(name)
                        RotationKillSwitch.stepDone()
                    }
                    let moved = try run.moveSealed(from: old, to: new)
                    if moved.shares + moved.tokens > 0 {
                        printOut("Sealed to the new key: \(moved.shares) share(s) in the shares' book, \(moved.tokens) login token(s).")
                    }
                }
                try run.swapKeyFiles()
                run.record.phase = .keySwapped
                try run.record.save(state)
                RotationKillSwitch.stepDone()
                withExtendedLifetime(locks) {}
            }
            try run.cleanUp()
            RotationKillSwitch.stepDone()
            report(run)
        }

        private func report(_ run: KeyRotationRun) {
            let state = run.state
            printOut("Your key is now \(run.record.newNpub); \(run.record.binders.count) binder(s) re-encrypted to it.")
            if run.record.forgetOld {
                printOut("The old key was not kept (--forget-old).")
            } else {
                printOut("The old key is kept as a retired key, under its old passphrase, in \(state.retiredKeysFile):")
                printOut("it still opens copies made before (backups, other devices). 'binder key show --retired' lists it.")
            }
            for name in run.record.binders {
                guard let binder = try? LocalBinder.open(path: run.binderPath(name)), let target = SyncTarget.read(binder.repository) else { continue }
                printOut("Not pushed yet: '\(name)' syncs with \(target.server) as \(target.repoId), which still holds the OLD copy, readable")
                printOut("  with the old key. Run 'binder sync \(name)': it pushes the binder under a new id with your new key, then deletes")
                printOut("  the old copy (with the old key's login, or the retired key: --retired-passphrase-file). Nothing goes out under the old id.")
            }
            printOut("Copies made before the rotation (backups, exports, other devices, old recovery sheets) still open with the OLD key.")
            offerRecoverySheet()
        }

        /// On a terminal, the recovery sheet of the new key is offered at once (a file name, or
        /// Enter for not now); elsewhere the command that makes it is printed.
        private func offerRecoverySheet() {
            guard isatty(0) == 1, isatty(1) == 1 else {
                return printOut("Make a new recovery sheet of the new key now: binder key backup --sheet FILE.pdf")
            }
            let option = ContentOption(name: "--sheet", prompt: "A recovery sheet of the new key (a PDF file to write)", given: nil,
                                       whenEmpty: "not now")
            do {
                guard let file = try ContentInput().values([option])[0] else {
                    return printOut("Make it later with: binder key backup --sheet FILE.pdf")
                }
                let backup = try Backup.parse(["--sheet", file])
                try backup.run()
            } catch {
                printErr("binder: the recovery sheet was not written (\((error as? CommandFailure)?.message ?? "\(error)")); make it with: binder key backup --sheet FILE.pdf")
            }
        }

        /// Undoes a rotation whose new key is not in place yet: the old repositories back at
        /// their paths, the book and tokens sealed to the old key again, the copies removed.
        private func undo(_ run: KeyRotationRun) throws {
            let state = run.state
            guard run.record.phase == .binders, FileManager.default.fileExists(atPath: state.rotationNewKeyFile) else {
                throw CommandFailure("the new key is in place already: run 'binder key rotate' to finish the rotation")
            }
            let locks = try KeyRotationRun.lockAll(run.record.binders, state: state)
            let (old, new) = try keys(run)
            for name in run.record.binders {
                try run.resumeSwap(name)
                if run.isSwapped(name) { try run.swapIn(name) }
            }
            _ = try run.moveSealed(from: new, to: old)
            for name in run.record.binders { try? FileManager.default.removeItem(atPath: run.otherSide(name)) }
            try? FileManager.default.removeItem(atPath: state.rotationFolder)
            _ = unlink(state.rotationNewKeyFile)
            try KeyRotationRecord.remove(state)
            withExtendedLifetime(locks) {}
            printOut("The key rotation was undone: your key is still \(run.record.oldNpub), and every binder is as it was.")
        }
    }
}
