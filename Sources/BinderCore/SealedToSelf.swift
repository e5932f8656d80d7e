import BinderCrypto
import Foundation

/// A small value a command keeps on disk encrypted to the user's own key (NIP-44 to self), as
/// the login tokens in accounts.json are: the share book's throwaway keys, scan tokens, labels
/// and paths (`binder share`).
public enum SealedToSelf {
    /// `value` as JSON, encrypted to `key`'s own conversation key.
    public static func seal<Value: Encodable>(_ value: Value, key: SecretKey) throws -> String {
        try NIP44.encrypt([UInt8](try JSONEncoder().encode(value)), key: NIP44.ConversationKey(selfOf: key))
    }

    /// The value `sealed` holds; nil when it was sealed to another key or is not one.
    public static func open<Value: Decodable>(_ type: Value.Type, from sealed: String, key: SecretKey) -> Value? {
        guard let conversationKey = try? NIP44.ConversationKey(selfOf: key),
              let plain = try? NIP44.decrypt(payload: sealed, key: conversationKey) else { return nil }
        return try? JSONDecoder().decode(type, from: Data(plain.copyBytes()))
    }
}
