import BinderGit
import Foundation
import Glibc

/// What a blob of the old history became in the new one.
struct RotatedBlob: Sendable, Equatable {
    enum Kind: Character, Sendable {
        /// A document or a folder's `.meta.json`: one NIP-44 payload.
        case document = "d"
        /// An attachment sidecar, sealed again under a new data key.
        case sidecar = "s"
        /// Any other file: not under the key, copied as it is (the same id).
        case plain = "p"
    }

    let kind: Kind
    let id: ObjectID
}

/// A key rotation's progress, in a file of the new repository's git directory: object ids
/// only (never plaintext, never a key), one line each, appended once the object it names is
/// made (the commit's new objects are written as one pack, `ObjectBatch`, before its line) and
/// fsynced at every commit. A line is believed only when its new object is in the new repository, and
/// the rotation's verification decrypts every blob the map names: a line lost to a kill costs
/// that blob's work again, and a wrong line fails the verification, never a rotation.
///
///     binder-rotation 1
///     b d <old blob> <new blob>      (d document, s sidecar, p copied as it is)
///     c <old commit> <new commit>
///     v <new tip>                    (verified; the new repository's main points at it)
final class RotationJournal {
    static let fileName = "binder-rotation"
    static let header = "binder-rotation 1\n"

    let path: String
    /// The open file, appended to; closed with this object.
    private let descriptor: Int32
    /// Lines not yet written (blobs of the commit being rewritten), written at `sync()`.
    private var pending: [UInt8] = []

    private(set) var blobs: [ObjectID: RotatedBlob] = [:]
    private(set) var commits: [ObjectID: ObjectID] = [:]
    private(set) var verifiedTip: ObjectID?

    static func path(inGitDirectory directory: String) -> String {
        (directory.hasSuffix("/") ? directory : directory + "/") + fileName
    }

    static func exists(inGitDirectory directory: String) -> Bool {
        FileManager.default.fileExists(atPath: path(inGitDirectory: directory))
    }

    /// Opens the journal of `repository` (made when missing, with its header, the folder
    /// fsynced) and reads what it holds, keeping the lines whose new objects are there.
    init(repository: GitRepository) throws(KeyRotation.Failure) {
        path = Self.path(inGitDirectory: repository.gitDirectory)
        let isNew = !FileManager.default.fileExists(atPath: path)
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .progressFile(path: path, errno: errno) }
        descriptor = fd
        if isNew {
            pending = Array(Self.header.utf8)
            try sync()
            let folder = Glibc.open(repository.gitDirectory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard folder >= 0 else { throw .progressFile(path: repository.gitDirectory, errno: errno) }
            defer { close(folder) }
            guard fsync(folder) == 0 else { throw .progressFile(path: repository.gitDirectory, errno: errno) }
        } else {
            try load(repository)
        }
    }

    deinit { close(descriptor) }

    /// Reads the lines written so far; a last line without its newline (a write cut short) is
    /// left out, and so is any line that does not parse or names an object not in `repository`.
    private func load(_ repository: GitRepository) throws(KeyRotation.Failure) {
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch { throw .progressFile(path: path, errno: EIO) }
        if Self.header.hasPrefix(text) {
            // Killed while the header was written: started again.
            guard ftruncate(descriptor, 0) == 0 else { throw .progressFile(path: path, errno: errno) }
            pending = Array(Self.header.utf8)
            return try sync()
        }
        guard text.hasPrefix(Self.header) else { throw .destinationInUse(path) }
        var lines = text.split(separator: "\n", omittingEmptySubsequences: true).dropFirst()
        if !text.hasSuffix("\n") {
            // A line cut short by a kill: left out, and ended, so that the next line starts clean.
            if !lines.isEmpty { lines.removeLast() }
            pending = [UInt8(ascii: "\n")]
        }
        for line in lines {
            let fields = line.split(separator: " ")
            switch (fields.first.map(String.init) ?? "", fields.count) {
            case ("b", 4):
                guard let kind = fields[1].first.flatMap(RotatedBlob.Kind.init(rawValue:)), fields[1].count == 1,
                      let old = ObjectID(hex: fields[2]), let new = ObjectID(hex: fields[3]),
                      repository.objects.objectExists(new) else { continue }
                blobs[old] = RotatedBlob(kind: kind, id: new)
            case ("c", 3):
                guard let old = ObjectID(hex: fields[1]), let new = ObjectID(hex: fields[2]),
                      repository.objects.objectExists(new) else { continue }
                commits[old] = new
            case ("v", 2):
                verifiedTip = ObjectID(hex: fields[1])
            default:
                continue
            }
        }
    }

    /// Records a blob (written at the next `sync()`, or sooner when many wait).
    func record(blob old: ObjectID, _ rotated: RotatedBlob) throws(KeyRotation.Failure) {
        blobs[old] = rotated
        pending += Array("b \(rotated.kind.rawValue) \(old.hex) \(rotated.id.hex)\n".utf8)
        if pending.count >= 1 << 16 { try sync() }
    }

    /// Records a commit and makes every line so far durable.
    func record(commit old: ObjectID, _ new: ObjectID) throws(KeyRotation.Failure) {
        commits[old] = new
        pending += Array("c \(old.hex) \(new.hex)\n".utf8)
        try sync()
    }

    /// Records that the new history was verified and its branch set at `tip`.
    func recordVerified(_ tip: ObjectID) throws(KeyRotation.Failure) {
        verifiedTip = tip
        pending += Array("v \(tip.hex)\n".utf8)
        try sync()
    }

    /// Writes the pending lines and fsyncs the file.
    func sync() throws(KeyRotation.Failure) {
        var offset = 0
        while offset < pending.count {
            let written = pending.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                throw .progressFile(path: path, errno: errno)
            }
            offset += written
        }
        pending.removeAll(keepingCapacity: true)
        guard fsync(descriptor) == 0 else { throw .progressFile(path: path, errno: errno) }
    }
}
