import BinderCrypto
import Synchronization

/// A large attachment opened for reading, decrypted when the kernel first reads from it rather
/// than at open, and held by the open file alone (the plaintext cache keeps no large
/// attachment: `PlaintextCache.largestFileKept`). A warm open, whose pages the kernel keeps
/// (`keep_cache`), sends no READ and so decrypts nothing; a reader that reads decrypts once per
/// open, as a cold open always did. The node is the stored version shown when the file was
/// opened: a later save, rename or unlink of the path does not change what this handle reads.
final class DeferredContent: Sendable {
    let node: Node
    let path: String
    /// The plaintext once decrypted (zeroed when the last handle lets go of it). The lock is
    /// held while decrypting: the kernel's read-ahead sends several READs of one handle at once,
    /// and one decryption serves them all.
    private let plaintext = Mutex<SecureBytes?>(nil)

    init(node: Node, path: String) {
        self.node = node
        self.path = path
    }

    /// Copies up to `buffer.count` bytes from `offset` (0 at or past the end), decrypting with
    /// `decrypt` on the first read.
    func read(offset: Int, into buffer: UnsafeMutableRawBufferPointer,
              decrypt: () throws(ViewError) -> SecureBytes) throws(ViewError) -> Int {
        try plaintext.withLock { (held) throws(ViewError) -> Int in
            let content: SecureBytes
            if let held { content = held } else {
                content = try decrypt()
                held = content
            }
            guard offset >= 0, offset < content.count, let destination = buffer.baseAddress else { return 0 }
            let count = min(buffer.count, content.count - offset)
            content.withUnsafeBytes { destination.copyMemory(from: $0.baseAddress! + offset, byteCount: count) }
            return count
        }
    }
}
