import BinderCrypto
import Synchronization

/// A file open through the mount: its bytes (an `EditBuffer`) and whether they changed since
/// they were last stored. Guarded by its own lock: libfuse may call on one handle from
/// several threads.
final class OpenFile: Sendable {
    struct Edit {
        var path: String
        var buffer: EditBuffer
        var dirty = false
        /// Whether write or truncate was called on this handle. A shell's `> file` opens
        /// (O_TRUNC), duplicates and closes the descriptor before writing: that first flush must
        /// not store an empty record, so a flush stores only what was written.
        var written = false
        /// The file was unlinked while open: its bytes stay readable, nothing is stored.
        var detached = false
        let writable: Bool
    }

    let edit: Mutex<Edit>

    init(path: String, buffer: EditBuffer, writable: Bool, dirty: Bool = false) {
        edit = Mutex(Edit(path: path, buffer: buffer, dirty: dirty, writable: writable))
    }
}

/// An editor's temporary, swap, backup or lock file: kept in memory, never committed.
struct ScratchFile: Sendable {
    var content: SecureBytes
    var modified: Timestamp
    /// Emacs makes its lock (`.#name`) as a symbolic link.
    var linkTarget: String?
    /// Times set explicitly (rsync sets them on its temporary file before renaming it): they
    /// become the record's `updated` when the file is renamed onto a record.
    var timesSet = false
}

/// Which names are editors' and tools' scratch files (PRODUCT.md, "Writing through the mount").
enum ScratchNames {
    static func isScratch(_ name: String) -> Bool {
        if name.hasPrefix(".") || name.hasPrefix("#") || name.hasSuffix("~") { return true }   // .x.swp .#x #x# x~ .goutputstream-* rsync .x.XXXXXX
        if name == "4913" || name.hasSuffix(".swp") || name.hasSuffix(".swx") || name.hasSuffix(".tmp") { return true }
        // sed -i writes sedXXXXXX beside the file, then renames it over the file.
        if name.count == 9, name.hasPrefix("sed"), name.dropFirst(3).allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) {
            return true
        }
        return false
    }
}
