internal import CLinux
import Glibc

/// Two paths exchanged in one step (`renameat2(RENAME_EXCHANGE)`): at every instant each path
/// holds one of the two files or folders, never nothing (a key rotation's swap of a binder).
public enum RenameExchange {
    /// Exchanges `first` and `second`; false with `errno` set when it could not (EINVAL or
    /// ENOSYS where the file system or kernel has no exchange).
    public static func exchange(_ first: String, _ second: String) -> Bool {
        binder_rename_exchange(first, second) == 0
    }
}
