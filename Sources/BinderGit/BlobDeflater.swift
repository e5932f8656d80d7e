import Synchronization
internal import CBinderZlib

/// A zlib deflate stream for blobs, kept between saves (`withDeflater`). Setting a stream up
/// allocates about 270 KB and zeroes it, which took 60 of the 90 µs `compress2` spent on a
/// 4.6 KB document. A blob is ciphertext: NIP-44's base64 for a document, an attachment's
/// bytes. Matching strings (LZ77) finds nothing in either, so the stream codes Huffman only
/// (`Z_HUFFMAN_ONLY`): base64 still loses its quarter (6 bits a character), three times faster
/// than zlib's fastest level on 100 KB, and a reused stream deflates 4.6 KB in 25 µs
/// (docs/BENCHMARKS.md).
final class BlobDeflater: @unchecked Sendable {
    // One thread at a time uses a deflater: taken from `idle`, given back after. The stream is
    // allocated once, at a fixed address (zlib's state points back at it).
    private let stream: UnsafeMutablePointer<z_stream>

    private init?() {
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        guard binder_deflate_init_huffman(stream) == Z_OK else {
            stream.deallocate()
            return nil
        }
    }

    deinit {
        deflateEnd(stream)
        stream.deallocate()
    }

    /// Deflaters not in use. Saves deflate one blob at a time (under the repository's lock),
    /// so one is nearly always enough; a second is kept for another instance writing meanwhile.
    private static let idle = Mutex<[BlobDeflater]>([])

    /// Runs `body` with a deflater of its own; nil if none could be made (out of memory: the
    /// caller stores the blob instead).
    static func withDeflater<Result>(_ body: (BlobDeflater) -> Result) -> Result? {
        guard let deflater = idle.withLock({ $0.popLast() }) ?? BlobDeflater() else { return nil }
        defer { idle.withLock { if $0.count < 2 { $0.append(deflater) } } }
        return body(deflater)
    }

    /// `content` as a zlib stream if that takes at most `limit` bytes, else nil (the output
    /// stops there: nothing more is coded once it cannot gain).
    func deflated(_ content: UnsafeRawBufferPointer, limit: Int) -> [UInt8]? {
        guard limit > 0, content.count <= Int(UInt32.max), deflateReset(stream) == Z_OK else { return nil }
        var out = [UInt8](repeating: 0, count: limit)
        let rc = out.withUnsafeMutableBufferPointer { out -> Int32 in
            // zlib's `next_in` is not const; it only reads.
            stream.pointee.next_in = UnsafeMutablePointer(mutating: content.baseAddress?.assumingMemoryBound(to: UInt8.self))
            stream.pointee.avail_in = UInt32(content.count)
            stream.pointee.next_out = out.baseAddress
            stream.pointee.avail_out = UInt32(out.count)
            defer {
                stream.pointee.next_in = nil
                stream.pointee.next_out = nil
            }
            return deflate(stream, Z_FINISH)
        }
        // Z_STREAM_END: the whole stream fitted. Anything else (the output full) means no gain.
        guard rc == Z_STREAM_END else { return nil }
        out.removeLast(limit - Int(stream.pointee.total_out))
        return out
    }
}
