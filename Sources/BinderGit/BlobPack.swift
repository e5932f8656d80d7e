internal import CGit2
import Glibc

/// Many new blobs written as one pack while they are made (`binder import`), where
/// `GitObjects.writeBlob` writes one loose object each: a file, libgit2's zlib at its default
/// level (on ciphertext, which does not compress) and an fsync per blob (4,828 fsyncs for a
/// folder of 2,000 files: docs/BENCHMARKS.md, "A folder of 10,000 files imported").
///
/// Each blob is appended to a temporary pack as it comes (`PackStream`: one 256 KB buffer,
/// deflated only where that gains, as the save path's packs are: `PackWriter`), so the
/// ciphertext is never held whole. `install` ends the pack, writes its index and puts both in
/// place, durable (three fsyncs), before the caller's commit names any of its blobs: a kill
/// before the branch moves leaves at most a pack nothing refers to. Dropped without
/// `install`, the temporary file is removed.
///
/// The pack's header counts its objects, and git reads it front to back, so the number of
/// blobs is given at the start (`GitObjects.blobPack(objects:)`); `install` refuses a pack
/// that got another number. Blobs are not looked up first: an import's blobs are fresh
/// ciphertext (random nonces), never already stored.
///
/// The file is this instance's own until `install`, so appending runs outside the
/// repository's lock (a mount's reads go on meanwhile); installing and telling libgit2 of the
/// pack take it. One thread at a time uses an instance.
public final class BlobPack {
    private let repository: GitRepository
    private let directory: String
    private let expected: Int
    private var fd: Int32
    private let temporaryPath: String
    private var stream: PackStream
    private var entries: [PackWriter.IndexedObject] = []
    /// Installed or discarded: the descriptor is closed and the file is no longer ours.
    private var done = false

    init(repository: GitRepository, objects: Int) throws(GitError) {
        guard objects > 0 else {
            throw GitError.failed(operation: "start a pack", code: .invalid, message: "a pack of \(objects) objects")
        }
        self.repository = repository
        directory = repository.gitDirectory + "/objects/pack"
        expected = objects
        (fd, temporaryPath) = try PackWriter.makeTemporary(in: directory, prefix: "tmp_pack_")
        stream = PackStream(fd: fd)
        do {
            try stream.append(PackWriter.header(objects: objects))
        } catch {
            discard()
            throw error
        }
    }

    deinit { discard() }

    /// Appends blob `bytes`; returns its id. On failure (one more than announced too) the pack
    /// is discarded.
    public func add(_ bytes: [UInt8]) throws(GitError) -> ObjectID {
        guard !done, entries.count < expected else {
            let closed = done
            discard()
            throw GitError.failed(operation: "add a blob to the pack", code: .invalid,
                                  message: closed ? "the pack is closed" : "more than the \(expected) blobs announced")
        }
        do {
            let id = try GitObjects.blobID(of: bytes)
            let offset = stream.written
            stream.beginEntry()
            try stream.appendEntryHeader(type: PackObject.Kind.blob.rawValue, size: bytes.count)
            try stream.appendStream(bytes, of: .ciphertext)
            entries.append((id, offset, stream.endEntry()))
            return id
        } catch {
            discard()
            throw error
        }
    }

    /// Ends the pack (its checksum), fsyncs it, writes its index, renames both into
    /// `objects/pack` and fsyncs the folder (`PackWriter.install`); then the repository reads
    /// its blobs. On failure nothing is left but the repository as it was.
    public func install() throws(GitError) {
        guard !done, entries.count == expected else {
            let count = entries.count
            discard()
            throw GitError.failed(operation: "install the pack", code: .invalid,
                                  message: "\(count) blobs written of the \(expected) announced")
        }
        let checksum: [UInt8]
        do throws(GitError) {
            checksum = try stream.finish()
            // Packs and indexes are read-only, as git makes them.
            guard fchmod(fd, 0o444) == 0, fsync(fd) == 0 else { throw PackWriter.failure("write '\(temporaryPath)'") }
        } catch {
            discard()
            throw error
        }
        done = true
        guard close(fd) == 0 else {
            let error = PackWriter.failure("write '\(temporaryPath)'")
            unlink(temporaryPath)
            throw error
        }
        let index = PackWriter.index(of: entries, packChecksum: checksum)
        try repository.locked { () throws(GitError) in
            _ = try PackWriter.install(packTemporary: temporaryPath, index: index, checksum: checksum, in: directory)
            // Both databases find the new pack without waiting for a lookup to miss.
            _ = git_odb_refresh(repository.odb.pointer)
            if let staging = repository.commitStaging { _ = git_odb_refresh(staging.odb.pointer) }
        }
    }

    /// Closes and removes the temporary pack (nothing refers to it).
    private func discard() {
        guard !done else { return }
        done = true
        close(fd)
        unlink(temporaryPath)
    }
}

extension GitObjects {
    /// A pack for exactly `objects` new blobs, written as they are added (`BlobPack`).
    public func blobPack(objects: Int) throws(GitError) -> BlobPack {
        try BlobPack(repository: repository, objects: objects)
    }
}
