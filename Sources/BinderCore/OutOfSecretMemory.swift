import BinderCrypto

// Secret memory (the `SecretArena`) can run out: the mount then answers the one operation
// that needed it with ENOMEM, as the kernel would, instead of stopping (docs/DESIGN.md,
// BinderCrypto), through the typed errors' `storage` case.

/// The `SecureMemoryError` behind `error` (a decryption that could not get secret memory for
/// its plaintext), or nil when `error` is about something else.
func exhaustedSecretMemory(_ error: any Error) -> SecureMemoryError? {
    switch error {
    case let error as SecureMemoryError: return error
    case NIP44.Error.secretMemory(let error): return error
    case Sidecar.Error.secretMemory(let error): return error
    case BinderReader.Error.decrypt(.secretMemory(let error)): return error
    default: return nil
    }
}

extension WriteError {
    /// `make()`, or ENOMEM for `path` when secret memory is exhausted.
    static func needingSecretMemory<T>(_ path: String, _ make: () throws(SecureMemoryError) -> T) throws(WriteError) -> T {
        do { return try make() } catch { throw .storage(path: path, reason: error.description, code: .noMemory) }
    }

    /// A read of what is stored failed while changing `path`: the store's own errno (ENOMEM
    /// when secret memory ran out, ENOSPC…) when it has one, EIO for data that cannot be read.
    static func reading(_ path: String, _ error: ViewError) -> WriteError {
        if case .storage(_, let reason, let code) = error { return .storage(path: path, reason: reason, code: code) }
        return .corrupt(path: path, reason: "\(error)")
    }
}

extension ViewError {
    /// `make()`, or ENOMEM for `path` when secret memory is exhausted.
    static func needingSecretMemory<T>(_ path: String, _ make: () throws(SecureMemoryError) -> T) throws(ViewError) -> T {
        do { return try make() } catch { throw .storage(path: path, reason: error.description, code: .noMemory) }
    }
}
