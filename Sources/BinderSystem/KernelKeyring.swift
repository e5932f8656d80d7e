internal import CLinux
import BinderCrypto
import Glibc

/// The secret key cached in the Linux kernel keyring (`binder unlock`), so later commands and
/// the mount daemon need no passphrase. Keys live in the user keyring under a description that
/// names the public key, so different `BINDER_HOME`s with different keys do not collide.
public enum KernelKeyring {
    public enum Error: Swift.Error, CustomStringConvertible {
        case unavailable(String)
        case failed(String)
        case secretMemory(SecureMemoryError)

        public var description: String {
            switch self {
            case .unavailable(let why): return "the kernel keyring is unavailable (\(why))"
            case .failed(let why): return "kernel keyring: \(why)"
            case .secretMemory(let error): return "kernel keyring: \(error.description)"
            }
        }
    }

    static func description(for publicKey: PublicKey) -> String { "binder:secret-key:\(publicKey.hex)" }

    private static var userKeyring: Int32 { binder_key_spec_user_keyring() }

    private static func errnoText() -> String { String(cString: strerror(errno)) }

    /// Stores `secretKey` with a timeout (seconds; 0 = none). Replaces an earlier entry.
    public static func store(_ secretKey: SecretKey, timeoutSeconds: UInt32) throws(Error) {
        let desc = description(for: secretKey.publicKey)
        let id = secretKey.withUnsafeBytes { raw in
            binder_add_key("user", desc, raw.baseAddress, raw.count, userKeyring)
        }
        guard id >= 0 else {
            let code = errno
            if code == ENOSYS || code == EPERM || code == EACCES { throw .unavailable(errnoText()) }
            throw .failed("add_key: \(errnoText())")
        }
        // Possessor and same-user processes may view, read and search it (a new session keyring
        // may not "possess" the user keyring).
        _ = binder_keyctl_setperm(Int32(id), 0x3f3f_0000)
        if timeoutSeconds > 0 {
            guard binder_keyctl_set_timeout(Int32(id), timeoutSeconds) == 0 else {
                throw .failed("set timeout: \(errnoText())")
            }
        }
    }

    /// The cached key for `publicKey`, or nil when none is cached (never unlocked, expired,
    /// revoked). Throws only when the keyring itself cannot be used.
    public static func load(for publicKey: PublicKey) throws(Error) -> SecretKey? {
        let id = binder_request_key("user", description(for: publicKey), 0)
        guard id >= 0 else {
            switch errno {
            case ENOKEY, EKEYEXPIRED, EKEYREVOKED: return nil
            case ENOSYS: throw .unavailable(errnoText())
            default: throw .unavailable("request_key: \(errnoText())")
            }
        }
        let buffer: SecureBytes
        do throws(SecureMemoryError) { buffer = try SecureBytes(zeroed: 32) } catch { throw .secretMemory(error) }
        let read = buffer.withUnsafeMutableBytes { binder_keyctl_read(Int32(id), $0.baseAddress, $0.count) }
        guard read == 32 else {
            if read < 0, errno == EKEYEXPIRED || errno == EKEYREVOKED { return nil }
            throw .failed("reading the cached key: \(read < 0 ? errnoText() : "unexpected size \(read)")")
        }
        guard let key = try? SecretKey(bytes: buffer), key.publicKey == publicKey else {
            throw .failed("the cached key does not match the stored public key")
        }
        return key
    }

    /// Removes the cached key. Returns whether there was one.
    @discardableResult
    public static func remove(for publicKey: PublicKey) throws(Error) -> Bool {
        let id = binder_request_key("user", description(for: publicKey), 0)
        guard id >= 0 else {
            switch errno {
            case ENOKEY, EKEYEXPIRED, EKEYREVOKED: return false
            default: throw .unavailable(errnoText())
            }
        }
        // Revoking makes the key unreadable at once even for processes that hold its id;
        // unlinking lets the kernel collect it.
        _ = binder_keyctl_revoke(Int32(id))
        _ = binder_keyctl_unlink(Int32(id), userKeyring)
        return true
    }
}
