import BinderCrypto
import BinderGit
import Dispatch
import Foundation
import Glibc
import Logging
import Synchronization

/// The listing index: what the folders' listings were worked out of (`DocumentPart`s: names,
/// sizes, mtimes, children, sidecar lookups, the `.binder/` facts; never a document's body),
/// kept across mounts in `<git dir>/binder/listing-index` so that a cold mount lists and
/// `stat`s without decrypting every record. See docs/FORMAT.md, "The listing index".
///
/// Only ever a shortcut: a part is used only while its blob (and what else it depends on)
/// is unchanged (`DocumentPart.isValid`), reading a file always decrypts its blob, and a file
/// that is missing, of another version, over its limit, not authentic or malformed is
/// ignored whole and written again. Sealed with `LocalSeal` under a key derived from the
/// conversation key; the header (magic and versions) is authenticated with it.
struct ListingIndex: Sendable {
    static let magic = Array("binder-listing-index".utf8)
    /// The layout of the plaintext (`ListingIndexCodec`). 2: a record's `created` is kept as
    /// its day and its time.
    static let formatVersion: UInt16 = 2
    /// How documents are rendered and named (`FrontMatter.render`, `BinderNaming`): a part holds
    /// a rendered size and names, so a change there must bump this (parts of the old rendering
    /// are then not used). `ViewReader.content(of:path:)` also corrects a size that disagrees.
    static let renderVersion: UInt16 = 1
    /// Largest index written or read, sealed (about 200 bytes a record: 300,000 records).
    static let sizeLimit = 64 << 20
    static let sealLabel = "binder listing-index v1"

    let path: String
    private let seal: LocalSeal

    init(gitDirectory: String, key: NIP44.ConversationKey) throws(SecureMemoryError) {
        path = ListingIndexFile.path(gitDirectory: gitDirectory)
        seal = try LocalSeal(conversationKey: key, label: Self.sealLabel)
    }

    static var header: [UInt8] {
        magic + [UInt8(formatVersion >> 8), UInt8(formatVersion & 0xFF), UInt8(renderVersion >> 8), UInt8(renderVersion & 0xFF)]
    }

    /// The parts the file holds; throws why it cannot be used. `eachFolder`: see
    /// `ListingIndexCodec.decode`. The sealed bytes are let go once opened: at 100,000 records
    /// they are 26 MB, and they lived beside the plaintext and the decoded parts, at the
    /// daemon's peak of memory.
    func load(eachFolder: ((String, [String: DocumentPart]) -> Void)? = nil) throws(ListingIndexError) -> ListingIndexCodec.Parts {
        try parts(in: try unseal(try Self.readFile(path)), eachFolder: eachFolder)
    }

    /// The parts in a sealed index file's bytes (the fuzz target's entry too).
    func decode(_ bytes: [UInt8], eachFolder: ((String, [String: DocumentPart]) -> Void)? = nil) throws(ListingIndexError) -> ListingIndexCodec.Parts {
        try parts(in: try unseal(bytes), eachFolder: eachFolder)
    }

    private func parts(in plaintext: SecureBytes, eachFolder: ((String, [String: DocumentPart]) -> Void)?) throws(ListingIndexError) -> ListingIndexCodec.Parts {
        try plaintext.withUnsafeBytes { (plain) throws(ListingIndexError) in try ListingIndexCodec.decode(plain, eachFolder: eachFolder) }
    }

    /// The plaintext of a sealed index file's bytes, once its header and seal are checked.
    private func unseal(_ bytes: [UInt8]) throws(ListingIndexError) -> SecureBytes {
        let header = Self.header
        guard bytes.count <= Self.sizeLimit else { throw .tooLarge(bytes.count) }
        guard bytes.count >= header.count, bytes.starts(with: Self.magic) else { throw .malformed("not a listing index") }
        guard bytes[..<header.count].elementsEqual(header) else { throw .otherVersion }
        let plaintext: SecureBytes
        let opened = bytes[header.count...].withUnsafeBytes { sealed in
            Result { () throws(LocalSeal.Error) in try seal.open(sealed, header: header) }
        }
        switch opened {
        case .success(let bytes): plaintext = bytes
        case .failure(let error): throw .sealed(error.description)
        }
        return plaintext
    }

    /// The sealed file for `parts` (without the folders that would take it over its limit).
    ///
    /// One buffer, the file's size: the plaintext is written after the header and the nonce's
    /// room and sealed where it lies, so no copy of it is left to zero (a plaintext, its seal
    /// and the file joined from them held four copies of a 25 MB index at once).
    func encode(_ parts: ListingIndexCodec.Parts) -> [UInt8] {
        let header = Self.header
        var file = header + [UInt8](repeating: 0, count: LocalSeal.nonceBytes)
        ListingIndexCodec.encode(parts, limit: Self.sizeLimit - 4096, appendingTo: &file, roomAfter: LocalSeal.tagBytes)
        file.append(contentsOf: [UInt8](repeating: 0, count: LocalSeal.tagBytes))
        file.withUnsafeMutableBytes { seal.sealInPlace(UnsafeMutableRawBufferPointer(rebasing: $0[header.count...]), header: header) }
        return file
    }

    /// Writes the index atomically: a temporary file, fsync, rename, fsync of the folder.
    func save(_ parts: ListingIndexCodec.Parts) throws(ListingIndexError) {
        let bytes = encode(parts)
        let folder = ViewPath.split(path).parent
        if mkdir(folder, 0o700) != 0 && errno != EEXIST { throw .unreadable("mkdir: \(String(cString: strerror(errno)))") }
        let temporary = path + ".tmp-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .unreadable("create: \(String(cString: strerror(errno)))") }
        var ok = bytes.withUnsafeBytes { buffer in
            var done = 0
            while done < buffer.count {
                let n = write(fd, buffer.baseAddress! + done, buffer.count - done)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return false }
                done += n
            }
            return true
        }
        ok = ok && fsync(fd) == 0
        close(fd)
        guard ok, rename(temporary, path) == 0 else {
            let why = String(cString: strerror(errno))
            unlink(temporary)
            throw .unreadable("write: \(why)")
        }
        let dir = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 {
            fsync(dir)
            close(dir)
        }
    }

    private static func readFile(_ path: String) throws(ListingIndexError) -> [UInt8] {
        do { return try RegularFile.read(path, limit: sizeLimit) } catch {
            switch error {
            case .missing: throw .missing
            case .unreadable(let reason): throw .unreadable(reason)
            case .tooLarge(let size): throw .tooLarge(size)
            }
        }
    }
}

/// Where a binder keeps its listing index; its absence means the next mount is the first
/// (every listing is built from the records: `binder mount` shows that with a progress line).
public enum ListingIndexFile {
    public static func path(gitDirectory: String) -> String {
        join(gitDirectory.hasSuffix("/") ? String(gitDirectory.dropLast()) : gitDirectory, "binder/listing-index")
    }
}

/// Loads the listing index on a thread of its own, from the moment the view is made: reading,
/// opening and decoding it (about 1.5 µs a record) then overlaps the mount's own start instead
/// of delaying it (mount until first `ls`, docs/BENCHMARKS.md). `ListingCache` asks it for a
/// folder's parts before building that folder's listing, so no listing is ever built without
/// them. Folders are handed out as they are decoded, in the file's (sorted) order: a listing
/// waits for its own folder, not for the decoding of a large folder after it (100,000 records
/// in one folder: 140 ms).
final class ListingIndexLoad: @unchecked Sendable {
    /// Guards `decoded`, `lastDecoded` and `result`; signalled as folders are decoded.
    private let condition = NSCondition()
    /// Folders decoded so far. Guarded by `condition`.
    private var decoded: ListingIndexCodec.Parts = [:]
    /// The last folder decoded: one that sorts before it and was not decoded is not in the
    /// file. Guarded by `condition`.
    private var lastDecoded: String?
    /// The parts loaded ([:] when the file cannot be used); nil until the load is done.
    /// Guarded by `condition`.
    private var result: ListingIndexCodec.Parts?

    init(index: ListingIndex, logger: Logger) {
        DispatchQueue.global(qos: .userInitiated).async { [self] in
            let parts: ListingIndexCodec.Parts
            do throws(ListingIndexError) {
                parts = try index.load { folder, folderParts in
                    self.condition.lock()
                    self.decoded[folder] = folderParts
                    self.lastDecoded = folder
                    self.condition.broadcast()
                    self.condition.unlock()
                }
            } catch {
                if error != .missing { logger.notice("listing index not used: \(error)") }
                parts = [:]
            }
            condition.lock()
            result = parts
            decoded = [:]
            condition.broadcast()
            condition.unlock()
        }
    }

    /// Whether the load is over (`parts` does not wait).
    var isFinished: Bool {
        condition.lock()
        defer { condition.unlock() }
        return result != nil
    }

    /// The parts the index holds, once loaded (waits until then).
    var parts: ListingIndexCodec.Parts {
        condition.lock()
        defer { condition.unlock() }
        while result == nil { condition.wait() }
        return result ?? [:]
    }

    /// The parts of git folder `folder`, as soon as they are decoded; nil when the file has
    /// none for it. Waits for that folder only. (Parts handed out before the file turns out
    /// malformed further on are still sound: the file is authenticated before any of it is
    /// decoded, and a part is only ever used while its blob is unchanged.)
    func parts(of folder: String) -> [String: DocumentPart]? {
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let result { return result[folder] }
            if let found = decoded[folder] { return found }
            if let lastDecoded, folder < lastDecoded { return nil }  // the file's order: sorted
            condition.wait()
        }
    }
}

/// Writes the listing index off the FUSE request path: `ListingCache` marks it changed when a
/// build produced new parts; one write follows a quiet second (later changes join it), on a
/// queue of its own, and `flush` writes what is pending at once (at unmount).
final class ListingIndexWriter: Sendable {
    private struct State {
        var pending = false
        var scheduled = false
        /// After `finish`: the owner's parts are gone, and nothing more is written.
        var finished = false
        /// How long the last write took, in nanoseconds.
        var lastWriteNanoseconds: UInt64 = 0
    }

    let index: ListingIndex
    private let logger: Logger
    /// The parts to write, asked for when the write runs (not when it was scheduled); nil once
    /// the owner is gone. Set once by the owner after its init; guarded by its own lock.
    private let parts = Mutex<(@Sendable () -> ListingIndexCodec.Parts?)?>(nil)
    private let queue = DispatchQueue(label: "binder.listing-index")
    /// Guards whether a write is pending and whether one is scheduled.
    private let state = Mutex(State())
    static let delay = DispatchTimeInterval.seconds(1)
    /// A write waits at least this many times as long as the last one took: the whole index
    /// is written each time, and for a folder of 100,000 records (a third of a second to encode,
    /// seal and write) once a second took a core from the saves it followed. The index is a
    /// cache (rebuilt when stale), so a later write loses nothing.
    static let delayPerWriteTime: UInt64 = 20

    /// The wait before a write: `delay`, or longer after a long write.
    static func wait(afterWriteOf nanoseconds: UInt64) -> DispatchTimeInterval {
        let (scaled, overflow) = nanoseconds.multipliedReportingOverflow(by: delayPerWriteTime)
        return .nanoseconds(Int(clamping: max(1_000_000_000, overflow ? UInt64.max : scaled)))
    }

    init(index: ListingIndex, logger: Logger) {
        self.index = index
        self.logger = logger
    }

    func provide(_ parts: @escaping @Sendable () -> ListingIndexCodec.Parts?) { self.parts.withLock { $0 = parts } }

    /// Notes that the parts changed; a write follows.
    func changed() {
        let (schedule, last) = state.withLock { state in
            state.pending = true
            defer { state.scheduled = true }
            return (!state.scheduled, state.lastWriteNanoseconds)
        }
        guard schedule else { return }
        queue.asyncAfter(deadline: .now() + Self.wait(afterWriteOf: last)) { [self] in
            state.withLock { $0.scheduled = false }
            writePending()
        }
    }

    /// Writes now what is pending (after a write under way), then no more: the owner is
    /// about to drop its parts (unmount).
    func finish() {
        queue.sync {
            writePending()
            state.withLock { $0.finished = true }
        }
    }

    private func writePending() {
        guard state.withLock({ state in defer { state.pending = false }; return state.pending && !state.finished }),
              let provider = parts.withLock({ $0 }), let parts = provider() else { return }
        let start = DispatchTime.now().uptimeNanoseconds
        do throws(ListingIndexError) { try index.save(parts) } catch {
            logger.warning("listing index not written: \(error)")
        }
        let took = DispatchTime.now().uptimeNanoseconds &- start
        state.withLock { $0.lastWriteNanoseconds = took }
    }
}

/// The fuzz target's entry (`binder-fuzz listing-index`): the decoder of a file that comes
/// from the repository's git directory.
@_spi(Fuzzing)
public enum ListingIndexFuzzing {
    /// Input: mode byte, then 0: a whole index file, decoded under `key` (the header, size and
    /// tag checks); 1: the plaintext inside, sealed with a valid tag first (the codec behind the
    /// tag). Whatever decodes must encode and decode again to the same bytes. Returns what
    /// went wrong, nil if nothing did.
    public static func run(_ bytes: [UInt8], key: NIP44.ConversationKey) -> String? {
        guard let mode = bytes.first else { return nil }
        guard let index = try? ListingIndex(gitDirectory: "/nonexistent", key: key),
              let seal = try? LocalSeal(conversationKey: key, label: ListingIndex.sealLabel) else { return "out of secret memory" }
        let data = Array(bytes.dropFirst())
        let file = mode % 2 == 0 ? data : ListingIndex.header + data.withUnsafeBytes { seal.seal($0, header: ListingIndex.header) }
        guard let parts = try? index.decode(file) else { return nil }
        let again = ListingIndexCodec.encode(parts, limit: ListingIndex.sizeLimit)
        guard let reparsed = try? ListingIndexCodec.decode(again) else {
            return "an index that decoded does not decode after encoding again"
        }
        guard ListingIndexCodec.encode(reparsed, limit: ListingIndex.sizeLimit) == again else {
            return "encoding a decoded index is not stable"
        }
        return nil
    }
}
