internal import CLinux
import Glibc

/// A program that talks to the terminal (an editor), run as git runs one: in binder's own
/// process group, which is the terminal's foreground group when binder runs in the
/// foreground. Foundation's `Process` puts its child in a group of its own; the terminal then
/// stops it (SIGTTIN, SIGTTOU) as soon as it reads or sets up the terminal, and binder waits
/// for ever. While it runs binder ignores SIGINT and SIGQUIT, so that Ctrl-C goes to the
/// program alone; binder's own signal actions come back when it exits.
public enum TerminalProgram {
    public enum Outcome: Sendable, Equatable {
        case exited(Int32)
        case signalled(Int32)
    }

    public enum Failure: Error, CustomStringConvertible {
        /// It could not be started (ENOENT: no such program) or waited for.
        case cannotRun(program: String, errno: Int32)

        public var description: String {
            switch self {
            case .cannotRun(let program, let code): return "cannot run \(program): \(String(cString: strerror(code)))"
            }
        }
    }

    /// Runs `program` (searched on PATH) with `arguments` and this process's environment, and
    /// waits for it to end.
    public static func run(_ program: String, arguments: [String]) throws(Failure) -> Outcome {
        let all = [program] + arguments
        var pointers: [UnsafeMutablePointer<CChar>?] = all.map { strdup($0) } + [nil]
        defer { for pointer in pointers { free(pointer) } }
        let status = binder_run_in_foreground(program, &pointers, environ)
        guard status >= 0 else { throw .cannotRun(program: program, errno: errno) }
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift cannot call (they are macros).
        if status & 0x7F == 0 { return .exited((status >> 8) & 0xFF) }
        return .signalled(status & 0x7F)
    }
}
