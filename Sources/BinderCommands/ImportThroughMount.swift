import BinderCore
import BinderImport
import BinderSystem
import Foundation
import Glibc
import Logging

/// `binder import` on a mounted binder: the sources, read and understood here, go to the
/// mount (the binder's one writer, which holds the key) in one control request, from memory to
/// memory; the mount plans them against its own tip and stores them as one commit in line
/// with its saves. Nothing here needs the key, and no plaintext touches the disk.
struct ImportThroughMount {
    /// The mount's control socket and where it is mounted, as the binder's lock file names them.
    let control: String
    let mountpoint: String

    /// The mount holding the binder at `gitDirectory` (mounted at `mountpoint`, as its lock says).
    init(gitDirectory: String, mountpoint: String) throws {
        guard let found = WriterLock.mountControl(gitDirectory: gitDirectory), let control = found.holder.control else {
            throw CommandFailure("the binder is mounted at \(mountpoint) but its mount does not answer yet (starting or stopping): "
                                 + "try again in a moment (nothing was imported)")
        }
        self.control = control
        self.mountpoint = found.holder.mountpoint ?? mountpoint
    }

    /// What the mount stored (or, for a dry run, would store), or the failure for people.
    func run(_ request: ImportRequest) throws -> ImportOutcome {
        let payload: [UInt8]
        do { payload = try request.encoded() } catch {
            throw CommandFailure("cannot hand the import to the mount: \(error) (nothing was imported)")
        }
        let answer: Result<[UInt8], ControlRefusal>
        do { answer = try ControlClient.exchange(ControlRequest.importRecords, payload: payload, to: control) } catch {
            throw CommandFailure("the binder is mounted at \(mountpoint): \(error) (nothing was imported)")
        }
        switch answer {
        case .success(let bytes):
            do { return try ImportOutcome(decoding: bytes) } catch {
                throw CommandFailure("the mount at \(mountpoint) answered what this binder cannot read: \(error)")
            }
        case .failure(let refusal):
            throw Self.failure(refusal, mountpoint: mountpoint)
        }
    }

    /// Told apart by the refusal's code, never its words.
    static func failure(_ refusal: ControlRefusal, mountpoint: String) -> CommandFailure {
        switch refusal.code {
        case .readOnly:
            return CommandFailure("the binder is mounted read-only at \(mountpoint): nothing can be stored through it; "
                                  + "unmount it ('binder unmount \(mountpoint)') and import, or mount it read-write (nothing was imported)")
        case .tooLarge:
            return CommandFailure("this import is too large to go through the mount: \(refusal.message) (nothing was imported)")
        case .other:
            return CommandFailure("the mount at \(mountpoint) cannot import (\(refusal.message)): unmount it and import, "
                                  + "or remount it with this version of binder (nothing was imported)")
        case .differentPatient, .malformed, .unreadable, .storage, .moved:
            return CommandFailure("\(refusal.message) (nothing was imported)")
        }
    }
}

/// The mount's side of `binder import`: a request (`ControlRequest.importRecords`) decoded,
/// planned and stored through the view, so that the new records show at once and no save is lost.
struct MountImports: Sendable {
    let view: BinderView
    /// An importer over the view's own repository handle, with the mount's key, made for each
    /// import: its author signature carries the time of its commit.
    let importer: @Sendable () -> BinderImporter
    let readOnly: Bool
    let logger: Logger

    /// The control channel's handler of `import` requests: decrypting the binder and
    /// committing run off the cooperative threads.
    var payloadHandler: ControlServer.PayloadHandler {
        let imports = self
        return { @Sendable (_: String, payload: [UInt8]) async -> ControlPayload.Answer in
            await withCheckedContinuation { (continuation: CheckedContinuation<ControlPayload.Answer, Never>) in
                DispatchQueue.global().async { continuation.resume(returning: imports.answer(payload)) }
            }
        }
    }

    /// The answer to one request: the outcome, or a refusal with its code.
    func answer(_ payload: [UInt8]) -> ControlPayload.Answer {
        do {
            let request = try ImportRequest(decoding: payload)
            // A dry run stores nothing: a read-only mount answers it too.
            if readOnly && !request.dryRun {
                return .refused(ControlRefusal(code: .readOnly, errno: EROFS, message: "the mount is read-only"))
            }
            let outcome = try WriterImport.run(request, importer: importer()) { store in try view.commitBeside(store) }
            // Counts only: the records' names say what the patient has.
            logger.info(request.dryRun ? "import planned (dry run)" : "import stored",
                        metadata: ["records": "\(outcome.plan.created.count)", "updated": "\(outcome.plan.updated.count)",
                                   "commit": "\(outcome.commit ?? "none")"])
            return .ok(try outcome.encoded())
        } catch let failure as WriterImport.Failure {
            logger.warning("import refused", metadata: ["reason": "\(Self.code(failure).rawValue)"])
            return .refused(ControlRefusal(code: Self.code(failure), errno: Self.errno(failure), message: failure.description))
        } catch {
            return .refused(ControlRefusal(code: .storage, errno: EIO, message: "\(error)"))
        }
    }

    static func code(_ failure: WriterImport.Failure) -> ControlRefusal.Code {
        switch failure {
        case .malformedRequest: return .malformed
        case .differentPatient: return .differentPatient
        case .unreadable: return .unreadable
        case .storage: return .storage
        }
    }

    static func errno(_ failure: WriterImport.Failure) -> Int32 {
        switch failure {
        case .malformedRequest: return EINVAL
        case .differentPatient: return EPERM
        case .unreadable, .storage: return EIO
        }
    }
}

extension ImportOutcome {
    /// The commit it made, as the summary names it.
    var commitID: LocalBinder.CommitID? { commit.flatMap { LocalBinder.CommitID(hex: $0) } }
}
