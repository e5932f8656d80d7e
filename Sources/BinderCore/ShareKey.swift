import BinderCrypto

/// A share's throwaway key: made by `binder share`, carried in the QR payload as 64 hex
/// characters (`ephemeralPrivkey`), and what the share's staging copy is encrypted to (the
/// encrypt-to-self of this key). The patient's own key never leaves their machine.
public struct ShareKey: Sendable {
    /// Why a payload's key is refused.
    public struct Invalid: Error, CustomStringConvertible {
        public var description: String { "the payload's key is not a valid secp256k1 key" }
    }

    /// The staging copy's conversation key.
    public let conversationKey: NIP44.ConversationKey
    private let secretKey: SecretKey

    private init(_ secretKey: SecretKey) throws(SecureMemoryError) {
        self.secretKey = secretKey
        conversationKey = try NIP44.ConversationKey(selfOf: secretKey)
    }

    /// A new random key, for a new share.
    public static func generate() throws(SecureMemoryError) -> ShareKey { try ShareKey(try SecretKey.generate()) }

    /// The key a payload (or the share book) carries as hex.
    public init(hex: String) throws {
        let secretKey: SecretKey
        do { secretKey = try SecretKey(hex: hex) } catch { throw Invalid() }
        try self.init(secretKey)
    }

    /// The 64 hex characters the payload carries.
    public func hex() throws(SecureMemoryError) -> String {
        String(decoding: try secretKey.hexSecret().copyBytes(), as: UTF8.self)
    }
}
