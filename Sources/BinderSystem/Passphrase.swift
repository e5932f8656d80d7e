import BinderCrypto
import Glibc

/// Where a passphrase comes from: the controlling terminal (no echo) or a file given with
/// `--passphrase-file` for scripts. Never argv or the environment.
public enum PassphraseSource: Sendable {
    case terminal
    case file(String)

    public enum Error: Swift.Error, CustomStringConvertible {
        case noTerminal
        case unreadableFile(String, String)
        case empty
        case mismatch
        case tooLong
        case secretMemory(SecureMemoryError)

        public var description: String {
            switch self {
            case .noTerminal: return "no terminal to ask for the passphrase; use --passphrase-file FILE"
            case .unreadableFile(let path, let why): return "cannot read passphrase file \(path): \(why)"
            case .empty: return "the passphrase is empty"
            case .mismatch: return "the passphrases do not match"
            case .tooLong: return "the passphrase is longer than 1024 bytes"
            case .secretMemory(let error): return error.description
            }
        }
    }

    static let maxLength = 1024

    /// Reads a passphrase. With `confirm`, a terminal asks twice and the answers must match.
    public func read(prompt: String, confirm: Bool = false, allowEmpty: Bool = false) throws(Error) -> SecureBytes {
        let secret: SecureBytes
        switch self {
        case .file(let path):
            secret = try Self.readFile(path)
        case .terminal:
            secret = try Self.readTerminal(prompt: prompt)
            if confirm {
                let again = try Self.readTerminal(prompt: "Repeat the passphrase: ")
                guard secret.constantTimeEquals(again) else { throw .mismatch }
            }
        }
        if secret.count == 0 && !allowEmpty { throw .empty }
        return secret
    }

    /// The file's first line (without its line ending).
    static func readFile(_ path: String) throws(Error) -> SecureBytes {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .unreadableFile(path, String(cString: strerror(errno))) }
        defer { close(fd) }
        let buffer = try secretBuffer(maxLength + 2)
        var total = 0
        let result: Int = buffer.withUnsafeMutableBytes { b in
            while total < b.count {
                let n = Glibc.read(fd, b.baseAddress! + total, b.count - total)
                if n < 0 { if errno == EINTR { continue }; return -1 }
                if n == 0 { break }
                total += n
            }
            return total
        }
        guard result >= 0 else { throw .unreadableFile(path, String(cString: strerror(errno))) }
        var end = 0
        while end < total, buffer[end] != 0x0A, buffer[end] != 0x0D { end += 1 }
        guard end <= maxLength else { throw .tooLong }
        return try secretBuffer(copying: buffer, 0..<end)
    }

    private static func secretBuffer(_ count: Int) throws(Error) -> SecureBytes {
        do throws(SecureMemoryError) { return try SecureBytes(zeroed: count) } catch { throw .secretMemory(error) }
    }

    private static func secretBuffer(copying buffer: SecureBytes, _ range: Range<Int>) throws(Error) -> SecureBytes {
        do throws(SecureMemoryError) { return try buffer.copying(range) } catch { throw .secretMemory(error) }
    }

    /// Prompts on /dev/tty with echo off and reads one line.
    static func readTerminal(prompt: String) throws(Error) -> SecureBytes {
        let fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else { throw .noTerminal }
        defer { close(fd) }
        var saved = termios()
        guard tcgetattr(fd, &saved) == 0 else { throw .noTerminal }
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        quiet.c_lflag |= tcflag_t(ECHONL)
        _ = prompt.withCString { write(fd, $0, strlen($0)) }
        _ = tcsetattr(fd, TCSAFLUSH, &quiet)
        defer { _ = tcsetattr(fd, TCSAFLUSH, &saved) }
        let buffer = try secretBuffer(maxLength + 1)
        var count = 0
        var byte: UInt8 = 0
        while true {
            let n = Glibc.read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 || byte == 0x0A || byte == 0x0D { break }
            guard count < maxLength else { byte = 0; throw .tooLong }
            buffer.withUnsafeMutableBytes { $0[count] = byte }
            count += 1
        }
        byte = 0
        return try secretBuffer(copying: buffer, 0..<count)
    }
}
