import BinderCrypto

/// How a binder is keyed: every document and attachment is NIP-44 encrypted to its owner's own
/// key (the apps' encrypt-to-self). Commands that open a binder with the user's key get its
/// conversation key here rather than each spelling the rule.
public enum BinderKey {
    /// The conversation key of a binder owned by `owner`.
    public static func conversationKey(owner: SecretKey) throws(SecureMemoryError) -> NIP44.ConversationKey {
        try NIP44.ConversationKey(selfOf: owner)
    }
}
