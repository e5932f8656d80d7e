import BinderCrypto
import BinderCore
import BinderSync
import BinderSystem
import Foundation

/// The server side of `binder key rotate`, done by the next `binder sync` of each binder that
/// syncs (docs/DESIGN.md, "Key rotation"): the rotated history is pushed under a new id
/// (`SyncTarget.rotatedTarget`, chosen once) by the new key's account, exactly as a new
/// binder's first push creates its repository; then the copy under the old key is deleted by
/// the old key's account (its token set aside in `accounts.json`, else the retired key and its
/// old passphrase). Every step is recorded in the binder's config before the next, so a sync
/// cut anywhere (the network down before or after the push) is continued by the next one;
/// rotated objects never go to the old id (`SyncEngine` refuses that target).
struct RotatedBinderSync {
    let repository: LocalBinder.Repository
    /// The binder's path (as `SyncEngine` opens it).
    let path: String
    let name: String
    let state: StateDirectory
    let accounts: Accounts
    /// The current (new) key.
    let key: SecretKey
    /// The retired key's old passphrase, for a deletion the set-aside token cannot make.
    let retiredPassphrase: PassphraseSource?

    /// Where this sync goes for a binder rotated and not pushed yet; nil for any other binder.
    /// Sets the old identity's token aside first, so that the new key's login keeps it. Before
    /// a move starts, the old copy is looked at: if its owner deleted it (410), another device
    /// moved this binder first, and a second copy is not made (exit 3, as for a binder on the old key).
    /// The caller holds the binder's writer lock.
    func target(configured: SyncTarget, retry: RetryPolicy) throws -> SyncTarget? {
        guard let oldNpub = SyncTarget.rotatedFrom(repository) else { return nil }
        do { try accounts.setAsideRetiredToken(server: configured.server, key: key) } catch {
            throw CommandFailure("cannot prepare \(name)'s move to a new repository id: \(error)")
        }
        if let joined = try joinMovedCopy(configured, retry: retry) { return joined }
        do {
            if !SyncTarget.moveStarted(repository),
               let oldHex = try? PublicKey(npub: oldNpub).hex,
               let token = accounts.retiredToken(server: configured.server, pubkey: oldHex, key: key),
               let client = try? ServerClient(server: configured.server, retry: retry),
               client.isDeletedByOwner(configured.repoId, token: token) {
                throw CommandFailure("\(name)'s copy \(configured.repoId) on \(configured.server) was deleted by its owner: another device "
                                     + "moved it to a new key first, and no repository of your key (\(key.publicKey.npub)) there holds its history. "
                                     + "Nothing was changed and no second copy was made. If that device has not synced since its rotation, "
                                     + "run 'binder sync \(name)' again once it has; if it rotated to another key, bring that one here "
                                     + "('binder key rotate --import'), then sync", exitCode: SyncCommand.movedAwayExitCode)
            }
            return try configured.rotatedTarget(repository, oldNpub: oldNpub)
        } catch let failure as CommandFailure {
            throw failure
        } catch { throw CommandFailure("cannot prepare \(name)'s move to a new repository id: \(error)") }
    }

    /// After a sync to `target` landed: the move recorded as done, then the old copy deleted;
    /// the lines to print.
    func finish(moved target: SyncTarget?, client: ServerClient) throws -> [String] {
        var lines: [String] = []
        if let target, SyncTarget.moveStarted(repository) {
            do { try SyncTarget.finishMove(repository) } catch { throw CommandFailure("cannot record \(name)'s move: \(error)") }
            lines.append("Moved \(name) to \(target.repoId) on \(target.server), under your new key")
        }
        if let old = SyncTarget.oldCopy(repository) { lines.append(deleteOldCopy(old, client: client)) }
        return lines
    }

    /// Another device may have moved this binder first (its key rotated there; this device took
    /// the new key with `binder key rotate --import`): the new key's repositories on the server
    /// are fetched one by one, and the one whose history this binder's pairs with is joined
    /// (`RotatedHistoryJoin`: the commits made here carried on top of it), then synced with as
    /// usual. Nil when none pairs, or the server cannot be asked (the move goes on as before).
    private func joinMovedCopy(_ configured: SyncTarget, retry: RetryPolicy) throws -> SyncTarget? {
        guard let client = try? ServerClient(server: configured.server, retry: retry) else { return nil }
        let session = ServerSession(client: client, key: key, accounts: accounts)
        guard let listed = try? session.authorized({ (token) throws(SyncError) in try client.repositories(token: token) }) else { return nil }
        // Not candidates: this binder's own ids, and those other binders here sync with, unless
        // their first commit is this binder's (a clone of the moved copy made here by hand):
        // each would be downloaded for nothing.
        let local = localRepositories(server: client.base)
        let own = Set([configured.repoId] + (SyncTarget.movingTo(repository).map { [$0] } ?? []))
        let taken = own.union(local.filter { !RotatedHistoryJoin.mayJoin(repository, $0.value) }.keys)
        let candidates = listed.filter { !taken.contains($0.id) }
        guard !candidates.isEmpty else { return nil }
        // The candidates are fetched into the tracking ref and the history joined under the
        // binder's writer lock, which `binder sync` holds already (`target`'s caller).
        let conversationKey = try BinderKey.conversationKey(owner: key)
        for candidate in candidates {
            let target = SyncTarget(server: client.base, repoId: candidate.id)
            let engine: SyncEngine
            do {
                engine = try SyncEngine(repositoryPath: path, key: conversationKey, session: session, target: target,
                                        author: commitAuthor(), logger: quietLogger("binder.sync"), retry: retry)
            } catch { throw CommandFailure("cannot open \(path): \(error)") }
            // A candidate that cannot be looked at may be this binder: no copy of its own is made then.
            let fetched = Result { () throws(SyncError) in try engine.fetchOnly() }
            if case .failure(let error) = fetched {
                throw CommandFailure("cannot look at \(candidate.id) on \(client.base), which may be \(name) moved by another device "
                                     + "(\(error)); nothing was changed: run 'binder sync \(name)' again")
            }
            guard case .success(let tip) = fetched, let movedTip = tip else { continue }
            guard let local = try repository.refs.branchTip() else { return nil }
            let outcome: RotatedHistoryJoin.Outcome
            do { outcome = try RotatedHistoryJoin.join(repository: repository, key: conversationKey, local: local, moved: movedTip) } catch .unrelated {
                try? engine.forgetFetched()
                continue
            } catch {
                try? engine.forgetFetched()
                throw CommandFailure("\(name) cannot be brought onto its moved copy \(candidate.id): \(error); nothing was changed")
            }
            do { try target.recordJoined(repository) } catch { throw CommandFailure("cannot record where \(name) syncs: \(error)") }
            printOut("Found \(name)'s copy that another device moved to the new key: \(candidate.id) on \(client.base); "
                     + (outcome.carried == 0 ? "it holds everything made here." : "\(outcome.carried) commit(s) made here are carried onto it."))
            return target
        }
        return nil
    }

    /// The local binders that sync with `server`, by repository id.
    private func localRepositories(server: String) -> [String: LocalBinder.Repository] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: state.bindersDirectory)) ?? []
        var repositories: [String: LocalBinder.Repository] = [:]
        for name in names {
            guard let binder = try? LocalBinder.open(path: BinderLocator(state: state).path(forName: name)),
                  let target = SyncTarget.read(binder.repository), target.server == server else { continue }
            repositories[target.repoId] = binder.repository
        }
        return repositories
    }

    /// Deletes the copy under the old key; says what happened, and what the patient must do
    /// when it could not be done (the next sync tries again while it is recorded).
    private func deleteOldCopy(_ old: (repoId: String, npub: String), client: ServerClient) -> String {
        let server = client.base
        let manual = "delete it yourself: on limbo.health from the Limbo app (log in with your old key), on a binder serve with "
            + "'binder sync \(name) --retired-passphrase-file FILE' (the retired key's old passphrase) or by its operator"
        let oldHex = (try? PublicKey(npub: old.npub))?.hex ?? ""
        var token = accounts.retiredToken(server: server, pubkey: oldHex, key: key)
        for _ in 0..<2 {
            if token == nil {
                switch retiredLogin(old.npub, client: client) {
                case .success(let fresh): token = fresh
                case .failure(let why): return "The old copy \(old.repoId) (old key) is still on \(server): \(why.message); \(manual)"
                }
            }
            guard let current = token else { break }
            do {
                let outcome = try client.deleteRepository(old.repoId, token: current)
                do { try SyncTarget.forgetOldCopy(repository) } catch { return "Deleted the old copy \(old.repoId), but cannot record it: \(error)" }
                try? accounts.dropRetiredToken(server: server)
                return outcome == .deleted ? "Deleted the old copy \(old.repoId) (old key) from \(server)"
                    : "The old copy \(old.repoId) (old key) is no longer on \(server)"
            } catch .unauthorized {
                token = nil   // the set-aside token expired: the retired key logs in
            } catch {
                if error.isNetworkFailure || error.isTransient {
                    return "The old copy \(old.repoId) (old key) is still on \(server) (\(error)): the next 'binder sync \(name)' deletes it"
                }
                return "The old copy \(old.repoId) (old key) is still on \(server): \(error); \(manual)"
            }
        }
        return "The old copy \(old.repoId) (old key) is still on \(server): no login of the old key is at hand; \(manual)"
    }

    /// A token for the retired key `npub`: its passphrase from `retiredPassphrase`, else asked on
    /// a terminal; a failure says why (no retired key, no passphrase, a wrong one, offline).
    private func retiredLogin(_ npub: String, client: ServerClient) -> Result<String, CommandFailure> {
        guard let entry = RetiredKeys(state: state).entries().first(where: { $0.npub == npub }) else {
            return .failure(CommandFailure("the old key is not kept here (rotated with --forget-old)"))
        }
        guard let source = retiredPassphrase ?? (isatty(STDIN_FILENO) == 1 ? .terminal : nil) else {
            return .failure(CommandFailure("the old key's login expired and its passphrase was not given"))
        }
        do {
            let oldKey = try RetiredKeys.open(entry, passphrase: source)
            return .success(try client.login(secretKey: oldKey))
        } catch let failure as CommandFailure {
            return .failure(failure)
        } catch {
            return .failure(CommandFailure("the old key cannot log in: \(error)"))
        }
    }
}
