import Foundation
import Glibc

/// Options whose value is health data (a patient's name and date of birth, a record's title,
/// a share's label). A command line is readable by every local user (`/proc/PID/cmdline`,
/// `ps`), so such a value is better given as `-` (read from standard input: one line for each
/// option given as `-`, in the order the command lists them) or left out to be asked for on
/// a terminal. A literal value still works, with a warning on stderr. What is read stays in
/// memory: it is never written to disk, the environment or a log.
///
///     printf '%s\n%s\n' "$NAME" "$DOB" | binder create health --patient-name - --dob -
struct ContentOption {
    /// `--patient-name`, as the user types it.
    let name: String
    /// What a terminal is asked: "Patient's name".
    let prompt: String
    /// The option's value on the command line: nil when left out, `-` for standard input.
    let given: String?
    /// What an empty answer means, for the prompt: "leave it out", "Visit".
    var whenEmpty = "leave it out"
}

/// Reads the values of `ContentOption`s: from the command line (warned), from standard input
/// (`-`), or asked on the terminal.
struct ContentInput {
    /// Longest value read for one option (a record is at most 65,535 bytes anyway).
    static let lineLimit = 65_536

    enum Failure: Error, CustomStringConvertible {
        /// Standard input ended before the line of `option`.
        case missingLine(option: String)
        /// A line longer than `lineLimit`.
        case tooLong(option: String)

        var description: String {
            switch self {
            case .missingLine(let option):
                return "\(option) -: standard input ended before its line (give one line for each option given as -, in the order of 'binder help')"
            case .tooLong(let option):
                return "\(option) -: the line is longer than \(ContentInput.lineLimit) bytes"
            }
        }
    }

    /// Standard input, read a line at a time.
    let input = LineReader(fd: 0)
    let stdinIsTerminal = isatty(0) == 1

    /// The values of `options`, in order: nil where left out (and not answered) on purpose.
    /// Left out without a terminal, an option stays unset (each has a default).
    func values(_ options: [ContentOption]) throws -> [String?] {
        var values: [String?] = []
        for option in options {
            switch option.given {
            case nil:
                values.append(stdinIsTerminal ? Self.nonEmpty(try ask("\(option.prompt) (Enter: \(option.whenEmpty)): ", option)) : nil)
            case "-":
                if stdinIsTerminal {
                    values.append(Self.nonEmpty(try ask("\(option.prompt): ", option)))
                } else {
                    guard let line = try line(for: option) else {
                        throw CommandFailure.usage(Failure.missingLine(option: option.name).description)
                    }
                    values.append(Self.nonEmpty(line))
                }
            case let literal?:
                Self.hideFromCommandLine(option.name)
                printErr("binder: warning: \(option.name) on the command line could be read by every user of this computer "
                     + "(ps, /proc/PID/cmdline) until binder started; give \(option.name) - to read it from standard input, or leave it out to be asked")
                values.append(literal)
            }
        }
        return values
    }

    /// Overwrites the value of `option` (`--opt VALUE` or `--opt=VALUE`) in this process's own
    /// argument area, which `/proc/PID/cmdline` and `ps` show, so that it is not readable for
    /// the rest of the run (it was, from the start until now: hence the warning).
    static func hideFromCommandLine(_ option: String) {
        let argv = CommandLine.unsafeArgv
        var index = 1
        while index < Int(CommandLine.argc) {
            defer { index += 1 }
            guard let argument = argv[index] else { continue }
            let text = String(cString: argument)
            if text == "--" { return }
            if text == option, index + 1 < Int(CommandLine.argc), let value = argv[index + 1] {
                memset(value, 0x2A, strlen(value))
            } else if text.hasPrefix(option + "=") {
                let start = argument + option.utf8.count + 1
                memset(start, 0x2A, strlen(start))
            }
        }
    }

    /// Asks on the terminal (the answer is echoed: a name is not a secret, but a passer-by's
    /// eyes are not `ps`).
    private func ask(_ prompt: String, _ option: ContentOption) throws -> String? {
        FileHandle.standardError.write(Data(prompt.utf8))
        return try line(for: option)
    }

    private func line(for option: ContentOption) throws -> String? {
        do { return try input.line(limit: Self.lineLimit) } catch {
            throw CommandFailure.usage(Failure.tooLong(option: option.name).description)
        }
    }

    private static func nonEmpty(_ text: String?) -> String? {
        guard let text, !text.isEmpty else { return nil }
        return text
    }
}

/// Lines of a descriptor, read a byte at a time: nothing past the line is consumed, so a
/// terminal's next answer (or a passphrase read after it) is left where it was.
final class LineReader {
    let fd: Int32

    init(fd: Int32) { self.fd = fd }

    struct TooLong: Error {}

    /// The next line without its `\n` (or `\r\n`); nil at end of input with nothing read.
    func line(limit: Int) throws(TooLong) -> String? {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let n = read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
            if byte == 0x0A { break }
            guard bytes.count < limit else { throw TooLong() }
            bytes.append(byte)
        }
        if bytes.last == 0x0D { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }
}
