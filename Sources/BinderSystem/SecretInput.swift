import BinderCrypto
import Glibc

/// Reading secrets from a descriptor straight into secret memory.
public enum SecretInput {
    /// Reads until end of file or `limit` bytes, retrying interrupted reads.
    public static func read(fd: Int32, upTo limit: Int) throws(SecureMemoryError) -> SecureBytes {
        let buffer = try SecureBytes(zeroed: limit)
        var total = 0
        buffer.withUnsafeMutableBytes { b in
            while total < limit {
                let n = Glibc.read(fd, b.baseAddress! + total, limit - total)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                total += n
            }
        }
        return try buffer.copying(0..<total)
    }
}
