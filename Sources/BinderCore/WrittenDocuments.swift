import BinderCrypto
import BinderGit
import Synchronization

/// The plaintext JSON of the documents the view's last commit wrote, by the id of the blob
/// that holds it encrypted, in secret memory. A save reads its record's document twice more:
/// to patch the folder's listing just after the commit, and to plan the editor's next save of
/// it (the stored metadata, `created` and the children are kept from it). Both find it here
/// instead of reading the blob from git and decrypting it again (a third of an editor's save
/// at 10,000 records: docs/BENCHMARKS.md, "Issue 46: saves").
///
/// Keyed by the ciphertext's blob id, an entry can never be stale: that blob decrypts to these
/// bytes whatever commit names it. Only the last commit's documents are kept (a few at most),
/// and none when secret memory is short: a miss only means reading the blob, as before.
final class WrittenDocuments: Sendable {
    /// At most this many documents of one commit are kept (a save writes one; an attachment
    /// saved under a record, or a rename, two or three).
    static let mostKept = 4

    /// Guards the entries; never held across a read, a parse or another lock.
    private let entries = Mutex<[ObjectID: SecureBytes]>([:])

    /// Keeps `documents` (blob id and the JSON encrypted into it) in place of those of the
    /// commit before. The caller zeroes its own copies.
    func keep(_ documents: [(blob: ObjectID, json: [UInt8])]) {
        var kept: [ObjectID: SecureBytes] = [:]
        for (blob, json) in documents.prefix(Self.mostKept) {
            guard let bytes = try? SecureBytes(copying: json) else { break }
            kept[blob] = bytes
        }
        entries.withLock { $0 = kept }
    }

    /// The JSON that blob `id` holds encrypted, when the last commit wrote it.
    func json(of id: ObjectID) -> SecureBytes? {
        entries.withLock { $0[id] }
    }
}
