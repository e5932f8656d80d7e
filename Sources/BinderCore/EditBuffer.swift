import BinderCrypto

/// The bytes of an open file, in secret memory, kept in pages of 64 KiB: a page is allocated
/// when something is written into it, so memory follows what was written, not the file's size
/// (a write far past the end leaves a hole that reads as zeros and costs nothing). Starts as a
/// shared, immutable copy of the file's content (`base`); a page is copied on its first change.
/// Replaced pages are zeroed when freed (`SecureBytes`). Running out of secret memory throws
/// `SecureMemoryError` (the caller answers ENOMEM) and leaves the buffer as it was.
struct EditBuffer {
    static let pageSize = 64 << 10

    /// The content the file was opened with, shared with the cache and other readers.
    private var base: SecureBytes
    /// How much of `base` is still the file's (a truncate shortens it; past it, zeros).
    private var baseCount: Int
    /// Pages changed since opening, by page number; each is `pageSize` bytes.
    private var pages: [Int: SecureBytes] = [:]
    private(set) var count: Int

    init(content: SecureBytes) {
        base = content
        baseCount = content.count
        count = content.count
    }

    init() throws(SecureMemoryError) {
        base = try SecureBytes(zeroed: 0)
        baseCount = 0
        count = 0
    }

    /// Bytes of secret memory the buffer holds of its own (not counting the shared content).
    var allocatedBytes: Int { pages.count * Self.pageSize }

    /// Copies up to `buffer.count` bytes from `offset`; returns how many (0 at or past the end).
    func read(offset: Int, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard offset >= 0, offset < count, let destination = buffer.baseAddress else { return 0 }
        let n = min(buffer.count, count - offset)
        var done = 0
        while done < n {
            let position = offset + done
            let page = position / Self.pageSize, within = position % Self.pageSize
            let length = min(n - done, Self.pageSize - within)
            let target = UnsafeMutableRawBufferPointer(start: destination + done, count: length)
            if let stored = pages[page] {
                stored.withUnsafeBytes { target.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[within..<within + length])) }
            } else {
                copyBase(from: position, into: target)
            }
            done += length
        }
        return n
    }

    /// `base` from `position` into `target`, zeros where `base` ends.
    private func copyBase(from position: Int, into target: UnsafeMutableRawBufferPointer) {
        let available = max(0, min(target.count, baseCount - position))
        if available > 0 {
            base.withUnsafeBytes { target.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[position..<position + available])) }
        }
        if available < target.count { secureZero(UnsafeMutableRawBufferPointer(rebasing: target[available...])) }
    }

    /// The page `page`, made private (copied from the content, or zeros) on first change.
    private mutating func ownPage(_ page: Int) throws(SecureMemoryError) -> SecureBytes {
        if let stored = pages[page] { return stored }
        let fresh = try SecureBytes(zeroed: Self.pageSize)
        fresh.withUnsafeMutableBytes { copyBase(from: page * Self.pageSize, into: $0) }
        pages[page] = fresh
        return fresh
    }

    /// Writes `bytes` at `offset` (the caller has checked the limits). Writing past the end
    /// leaves a hole of zeros, as a file would. Every page the write touches is made private
    /// before any byte is copied, so a lack of secret memory changes nothing.
    mutating func write(offset: Int, _ bytes: UnsafeRawBufferPointer) throws(SecureMemoryError) {
        guard offset >= 0, let source = bytes.baseAddress else { return }
        var added: [Int] = []
        for page in stride(from: offset / Self.pageSize, to: (offset + bytes.count + Self.pageSize - 1) / Self.pageSize, by: 1)
        where pages[page] == nil {
            do { _ = try ownPage(page) } catch {
                for page in added { pages.removeValue(forKey: page) }
                throw error
            }
            added.append(page)
        }
        var done = 0
        while done < bytes.count {
            let position = offset + done
            let page = position / Self.pageSize, within = position % Self.pageSize
            let length = min(bytes.count - done, Self.pageSize - within)
            pages[page]?.withUnsafeMutableBytes { (memory: UnsafeMutableRawBufferPointer) in
                (memory.baseAddress! + within).copyMemory(from: source + done, byteCount: length)
            }
            done += length
        }
        count = max(count, offset + bytes.count)
    }

    /// Sets the size: shorter drops what is past it (zeroed), longer reads as zeros.
    mutating func truncate(_ size: Int) {
        guard size >= 0 else { return }
        if size < count {
            let lastPage = size / Self.pageSize, within = size % Self.pageSize
            for page in pages.keys where page > lastPage || (page == lastPage && within == 0) { pages.removeValue(forKey: page) }
            if within > 0, let stored = pages[lastPage] {
                stored.withUnsafeMutableBytes { secureZero(UnsafeMutableRawBufferPointer(rebasing: $0[within...])) }
            }
            baseCount = min(baseCount, size)
        }
        count = size
    }

    /// The content as one exact-size secret (for scratch files and for storing).
    func snapshot() throws(SecureMemoryError) -> SecureBytes {
        if pages.isEmpty && baseCount == count && base.count == count { return base }
        let out = try SecureBytes(zeroed: count)
        out.withUnsafeMutableBytes { _ = read(offset: 0, into: $0) }
        return out
    }
}
