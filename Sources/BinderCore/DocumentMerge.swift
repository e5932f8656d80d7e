import BinderFormat
import BinderGit

/// Three-way merge of one record both devices edited, against their common version: each
/// metadata key and each part of the document (body, children, other fields) takes the side
/// that changed it; bodies changed on both sides are merged line by line (`TextMerge`). Edits
/// that overlap (a key, or the same lines, changed differently on each side) do not merge.
/// The rules are rows of `Tests/BinderCoreTests/BinderMergerTests.swift`.
enum DocumentMerge {
    /// The record with both sides' edits; nil when they overlap.
    static func merge(base: MedicalDocument?, local: MedicalDocument, remote: MedicalDocument) -> MedicalDocument? {
        guard let metadata = mergeObject(base?.metadata, local.metadata, remote.metadata, laterWins: ["updated"]),
              let extra = mergeObject(base?.extraFields, local.extraFields, remote.extraFields, laterWins: []),
              let children = pick(base?.children, local.children, remote.children),
              let value = mergeValue(base?.value, local.value, remote.value) else { return nil }
        var merged = MedicalDocument(value: value, metadata: metadata, children: children)
        merged.extraFields = extra
        return merged
    }

    /// The side that changed (either, when both made the same change); nil when both changed
    /// it differently.
    static func pick<T: Equatable>(_ base: T?, _ local: T, _ remote: T) -> T? {
        if local == remote || remote == base { return local }
        if local == base { return remote }
        return nil
    }

    /// `pick` for what a side may have removed (a metadata key): `.some(nil)` is "removed".
    static func pickPresent<T: Equatable>(_ base: T?, _ local: T?, _ remote: T?) -> T?? {
        if local == remote || remote == base { return .some(local) }
        if local == base { return .some(remote) }
        return nil
    }

    /// The body: one side's change, or both merged line by line.
    private static func mergeValue(_ base: String?, _ local: String, _ remote: String) -> String? {
        if let picked = pick(base, local, remote) { return picked }
        return TextMerge.merge(base: base ?? "", ours: local, theirs: remote)
    }

    /// Key by key, in the order the keys first appear (base, then local, then remote). Keys in
    /// `laterWins` (timestamps) take the later time when both sides changed them.
    private static func mergeObject(_ base: JSONObject?, _ local: JSONObject, _ remote: JSONObject,
                                    laterWins: Set<String>) -> JSONObject? {
        var merged = JSONObject()
        var seen = Set<String>()
        for key in (base?.keys ?? []) + local.keys + remote.keys where seen.insert(key).inserted {
            let b = base?[key], l = local[key], r = remote[key]
            let value: JSONValue?
            if let picked = pickPresent(b, l, r) { value = picked } else if laterWins.contains(key) { value = later(l, r) } else { return nil }
            if let value { _ = merged.updateValue(value, forKey: key) }
        }
        return merged
    }

    /// The later of two timestamps (a missing or unreadable one is the earlier).
    private static func later(_ a: JSONValue?, _ b: JSONValue?) -> JSONValue? {
        let ta = a?.stringValue.flatMap(Timestamps.parse), tb = b?.stringValue.flatMap(Timestamps.parse)
        guard let tb else { return a }
        guard let ta else { return b }
        return (ta.seconds, ta.nanoseconds) >= (tb.seconds, tb.nanoseconds) ? a : b
    }
}
