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

    /// A key typed or pasted at the terminal `fd`: read with echo off (a secret key must stay
    /// off the screen and out of the scrollback), after `prompt`, line by line until
    /// `isComplete` says the bytes so far make a whole key, an empty line ends it, or end of
    /// file. A recovery sheet's key may come over several lines; whitespace is kept for the
    /// caller to drop. At most `limit` bytes.
    public static func readTerminalLines(fd: Int32, prompt: String, upTo limit: Int,
                                         isComplete: (UnsafeRawBufferPointer) -> Bool) throws(SecureMemoryError) -> SecureBytes {
        let buffer = try SecureBytes(zeroed: limit)
        var saved = termios()
        let canHide = tcgetattr(fd, &saved) == 0
        if canHide {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            quiet.c_lflag |= tcflag_t(ECHONL)
            _ = tcsetattr(fd, TCSAFLUSH, &quiet)
        }
        defer { if canHide { _ = tcsetattr(fd, TCSAFLUSH, &saved) } }
        _ = prompt.withCString { Glibc.write(2, $0, strlen($0)) }
        var total = 0
        buffer.withUnsafeMutableBytes { b in
            var lineStart = 0
            var byte: UInt8 = 0
            while total < limit {
                let n = Glibc.read(fd, &byte, 1)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                b[total] = byte
                total += 1
                guard byte == 0x0A || byte == 0x0D else { continue }
                let line = UnsafeRawBufferPointer(rebasing: b[lineStart..<(total - 1)])
                if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { break }
                if isComplete(UnsafeRawBufferPointer(rebasing: b[0..<total])) { break }
                lineStart = total
            }
            byte = 0
        }
        return try buffer.copying(0..<total)
    }
}
