@_spi(Fuzzing) import BinderCore
@_spi(Fuzzing) import BinderGit

/// The listing index (`<git dir>/binder/listing-index`): a file binder reads from the
/// repository's git directory, so its decoder takes any bytes without trapping.
enum IndexTargets {
    /// Input: mode byte, key byte, then a whole index file (mode even) or the plaintext inside
    /// one (mode odd, sealed with a valid tag first); see `ListingIndexFuzzing.run`.
    static func listingIndex(_ bytes: [UInt8]) {
        guard bytes.count >= 2 else { return }
        let key = CryptoTargets.key(bytes[1])
        if let failure = ListingIndexFuzzing.run([bytes[0]] + bytes.dropFirst(2), key: key) { check(false, failure) }
    }

    /// Tree deltas (`TreeDelta`), which a fold makes of the trees in the repository: input
    /// layout in `TreeDeltaFuzzing.run`.
    static func treeDelta(_ bytes: [UInt8]) {
        if let failure = TreeDeltaFuzzing.run(bytes) { check(false, failure) }
    }

    /// A pushed pack's bytes after a first byte choosing the read size (1-256), as binder
    /// serve's git engine scans them before indexing: never more than the limit accepted.
    static func pushedPack(_ bytes: [UInt8]) {
        guard let first = bytes.first else { return }
        _ = try? PackSizeScan.check(Array(bytes.dropFirst()), chunk: Int(first) + 1, limit: 1 << 20)
    }

    /// A pushed tree's bytes, as binder serve's git engine checks them (git's fsck rules): any
    /// bytes get an answer; a tree it accepts has entries that each end in a whole id.
    static func pushedTree(_ bytes: [UInt8]) {
        if TreeEntryRules.problem(in: bytes) == nil {
            check(bytes.isEmpty || bytes.count >= 28, "an accepted tree shorter than one entry")
        }
    }
}
