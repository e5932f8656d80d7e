import BinderCore
import BinderSystem
import Foundation
import Glibc
import Synchronization

/// The one record of a `binder key rotate` under way (`key-rotation.json` in the state folder,
/// 0600): which key is left for which, and which binders are carried over. Public keys and
/// binder names only, never a secret. While it exists, every command that opens a binder
/// refuses (`BinderLocator`), and the next `binder key rotate` finishes the rotation (or
/// `--abandon` undoes it). Which binder stands where is read off the disk, not off this file
/// (docs/DESIGN.md, "Key rotation"): the record only says what the run is about.
struct KeyRotationRecord: Codable, Equatable {
    enum Phase: String, Codable {
        /// Binders being rotated, verified and swapped in; the old key file still in place.
        case binders
        /// The key files were swapped: only the old binders (kept aside) remain to be removed.
        case keySwapped
    }

    var oldNpub: String
    var newNpub: String
    /// The local binders (names under `binders/`) carried to the new key, in order.
    var binders: [String]
    var forgetOld: Bool
    var phase: Phase

    static func path(_ state: StateDirectory) -> String { state.root + "/key-rotation" + BinderNaming.documentExtension }

    /// The record, nil when no rotation is under way; a damaged record is an error (never
    /// taken for "no rotation": binders may be half swapped).
    static func load(_ state: StateDirectory) throws -> KeyRotationRecord? {
        let path = path(state)
        guard let data = FileManager.default.contents(atPath: path) else {
            if FileManager.default.fileExists(atPath: path) { throw CommandFailure("cannot read \(path)") }
            return nil
        }
        do { return try JSONDecoder().decode(KeyRotationRecord.self, from: data) } catch {
            throw CommandFailure("\(path) is damaged (\(error)); a key rotation was under way: look at \(state.root + "/rotation") before removing it")
        }
    }

    /// Writes the record durably (0600, fsynced, renamed, the folder fsynced).
    func save(_ state: StateDirectory) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let bytes = [UInt8]((try? encoder.encode(self)) ?? Data())
        do { try PrivateFile.write(Self.path(state), bytes: bytes) } catch { throw CommandFailure(error.description) }
        try DurableFolder.sync(state.root)
    }

    static func remove(_ state: StateDirectory) throws {
        guard unlink(path(state)) == 0 || errno == ENOENT else {
            throw CommandFailure("cannot remove \(path(state)): \(String(cString: strerror(errno)))")
        }
        try DurableFolder.sync(state.root)
    }

    /// Refuses while a rotation is under way: its binders may be on either key.
    static func refuseWhileUnderWay(_ state: StateDirectory) throws {
        guard FileManager.default.fileExists(atPath: path(state)) else { return }
        throw CommandFailure("a key rotation is in progress: run 'binder key rotate' to finish it (or 'binder key rotate --abandon' to undo it)")
    }
}

extension StateDirectory {
    /// The new key of a rotation under way, under the new passphrase (0600), until it replaces `keyFile`.
    var rotationNewKeyFile: String { root + "/key.ncryptsec.rotating" }
    /// Retired keys (`binder key rotate`), each under the passphrase it had: `npub ncryptsec` lines, 0600.
    var retiredKeysFile: String { root + "/key.retired" }
    /// Where a rotation builds the new repositories and keeps the old ones until the end.
    var rotationFolder: String { root + "/rotation" }
}

/// fsync of a folder: what makes a rename or an unlink in it survive a power cut.
enum DurableFolder {
    static func sync(_ path: String) throws {
        let folder = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard folder >= 0 else { throw CommandFailure("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(folder) }
        guard fsync(folder) == 0 else { throw CommandFailure("cannot sync \(path): \(String(cString: strerror(errno)))") }
    }
}

/// Tests (debug builds only): `BINDER_TEST_ROTATION_KILL_AFTER=N` makes `binder key rotate`
/// SIGKILL itself once it has made N durable steps, as a power cut or kill -9 would stop it;
/// `BINDER_TEST_ROTATION_ENGINE_STEPS=N` stops the engine (KeyRotation) inside a binder's
/// history after N blobs and commits, the same way; `BINDER_TEST_ROTATION_NO_EXCHANGE=1` swaps
/// with the two renames of a file system without `RENAME_EXCHANGE` (each a step). Release
/// builds compile none of them.
enum RotationKillSwitch {
    #if DEBUG
    /// Steps made by this process (guarded by the mutex).
    private static let steps = Mutex(0)
    private static let killAfter = ProcessInfo.processInfo.environment["BINDER_TEST_ROTATION_KILL_AFTER"].flatMap { Int($0) }
    static let engineSteps = ProcessInfo.processInfo.environment["BINDER_TEST_ROTATION_ENGINE_STEPS"].flatMap { Int($0) }
    static let withoutExchange = ProcessInfo.processInfo.environment["BINDER_TEST_ROTATION_NO_EXCHANGE"] == "1"
    #else
    static let withoutExchange = false
    #endif

    /// The engine, stopped after `BINDER_TEST_ROTATION_ENGINE_STEPS` in debug builds.
    static func armed(_ rotation: KeyRotation) -> KeyRotation {
        #if DEBUG
        var rotation = rotation
        rotation.interrupt(afterSteps: engineSteps)
        #endif
        return rotation
    }

    /// A durable step was made.
    static func stepDone() {
        #if DEBUG
        guard let killAfter else { return }
        let count = steps.withLock { count in
            count += 1
            return count
        }
        if count == killAfter { killSelf() }
        #endif
    }

    static func killSelf() {
        #if DEBUG
        kill(getpid(), SIGKILL)
        #endif
    }
}
