internal import CLinux

/// Process-level protection for anything that holds a secret.
public enum Hardening {
    /// Makes the process non-dumpable (no core files, no ptrace by same-uid processes, no
    /// /proc/PID/mem reads) and sets the core size limit to 0.
    @discardableResult
    public static func makeNonDumpable() -> Bool {
        binder_set_nondumpable() == 0
    }

    public static var isDumpable: Bool { binder_is_dumpable() != 0 }
}
