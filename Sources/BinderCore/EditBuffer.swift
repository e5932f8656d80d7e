import BinderCrypto

/// The bytes of an open file, in secret memory. Starts as a shared, immutable copy of the
/// file's content and takes a private copy on the first change (copy-on-write); grows by
/// doubling. Replaced storage is zeroed when freed (`SecureBytes`).
struct EditBuffer {
    private var storage: SecureBytes
    private var owned: Bool
    private(set) var count: Int

    init(content: SecureBytes) {
        storage = content
        owned = false
        count = content.count
    }

    init() {
        storage = SecureBytes(count: 0)
        owned = true
        count = 0
    }

    func read(offset: Int, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard offset >= 0, offset < count else { return 0 }
        let n = min(buffer.count, count - offset)
        storage.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + offset, byteCount: n) }
        return n
    }

    private mutating func reserve(_ capacity: Int) {
        if owned && storage.count >= capacity { return }
        let grown = SecureBytes(count: owned ? max(capacity, storage.count * 2, 4096) : max(capacity, count))
        let keep = count
        grown.withUnsafeMutableBytes { destination in
            storage.withUnsafeBytes { source in
                if keep > 0 { destination.baseAddress!.copyMemory(from: source.baseAddress!, byteCount: keep) }
            }
        }
        storage = grown
        owned = true
    }

    mutating func write(offset: Int, _ bytes: UnsafeRawBufferPointer) {
        let end = offset + bytes.count
        reserve(max(end, count))
        storage.withUnsafeMutableBytes { destination in
            // Writing past the end leaves a hole of zeros, as a file would.
            if offset > count { secureZero(UnsafeMutableRawBufferPointer(rebasing: destination[count..<offset])) }
            if bytes.count > 0 { (destination.baseAddress! + offset).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count) }
        }
        count = max(count, end)
    }

    mutating func truncate(_ size: Int) {
        if size > count {
            reserve(size)
            storage.withUnsafeMutableBytes { secureZero(UnsafeMutableRawBufferPointer(rebasing: $0[count..<size])) }
        } else if !owned {
            reserve(size)
        }
        count = size
    }

    /// The content as an exact-size secret (for scratch files).
    func snapshot() -> SecureBytes { storage.slice(0..<count) }

    /// The content as an array, for storing (it is encrypted at once and the array dropped).
    func bytes() -> [UInt8] { storage.withUnsafeBytes { Array($0[0..<count]) } }
}
