internal import CBinderZlib
import Foundation

/// Why a pushed pack is refused before libgit2's indexer reads it.
public enum PackScanRefusal: Error, Equatable, CustomStringConvertible {
    /// An object (or a delta's result) would be `size` bytes, past `limit`.
    case objectTooLarge(size: Int, limit: Int)
    /// Not a pack: a bad header, an entry that does not parse, a zlib stream that does not end.
    case corrupt(String)

    public var description: String {
        switch self {
        case .objectTooLarge(let size, let limit): return "an object of \(size) bytes, past the limit of \(limit)"
        case .corrupt(let what): return "not a pack: \(what)"
        }
    }
}

/// A pass over a pushed pack before libgit2 indexes it, reading each entry's header and
/// inflating its data through a small window (memory bounded whatever the pack holds), to
/// refuse an object whose size, or a delta whose result's size, passes a limit. libgit2's
/// indexer holds each object whole while it checks it (`verify`) and each delta's base and
/// result while it resolves them: a pack of a megabyte can declare a blob of zeros of many
/// gigabytes, or a delta copying a base a thousand times.
public struct PackSizeScan {
    /// The next bytes of the pack, at most the count asked; empty at its end.
    private let read: (Int) throws -> Data
    private let limit: Int
    private var buffer: [UInt8] = []
    private var position = 0
    private var atEnd = false

    /// Scans the pack `file` holds from its current offset; leaves the offset anywhere.
    public static func check(_ file: FileHandle, limit: Int) throws(PackScanRefusal) {
        var scan = PackSizeScan(read: { try file.read(upToCount: $0) ?? Data() }, limit: limit)
        try scan.run()
    }

    /// The same over `bytes` in memory, handed out `chunk` bytes at a time (the fuzz target's
    /// way in: entries cut anywhere between reads).
    public static func check(_ bytes: [UInt8], chunk: Int, limit: Int) throws(PackScanRefusal) {
        var offset = 0
        var scan = PackSizeScan(read: { count in
            let end = min(bytes.count, offset + min(count, max(1, chunk)))
            defer { offset = end }
            return Data(bytes[offset..<end])
        }, limit: limit)
        try scan.run()
    }

    private init(read: @escaping (Int) throws -> Data, limit: Int) {
        self.read = read
        self.limit = limit
    }

    private mutating func run() throws(PackScanRefusal) {
        let header = try bytes(12)
        guard header[0..<4].elementsEqual("PACK".utf8), header[4...7] == [0, 0, 0, 2] || header[4...7] == [0, 0, 0, 3] else {
            throw .corrupt("no pack header")
        }
        let count = header[8..<12].reduce(0) { $0 << 8 | Int($1) }
        for _ in 0..<count {
            var byte = try next()
            let type = (byte >> 4) & 7
            var size = Int(byte & 0x0f)
            var shift = 4
            while byte & 0x80 != 0 {
                byte = try next()
                // Seven bits at a time up to bit 62: a size is never negative.
                guard shift < 57 else { throw .corrupt("an entry's size does not end") }
                size |= Int(byte & 0x7f) << shift
                shift += 7
            }
            switch type {
            case 1, 2, 3, 4:
                guard size <= limit else { throw .objectTooLarge(size: size, limit: limit) }
                try inflate(deltaHeader: false)
            case 6:
                // The base's offset: a varint of its own.
                repeat { byte = try next() } while byte & 0x80 != 0
                try inflate(deltaHeader: true)
            case 7:
                _ = try bytes(20)
                try inflate(deltaHeader: true)
            default:
                throw .corrupt("an entry of type \(type)")
            }
        }
    }

    /// Inflates one entry's zlib stream to its end, through a 64 KiB window; for a delta, reads
    /// the sizes at its start (the base's, then the result's) and checks the result's.
    private mutating func inflate(deltaHeader: Bool) throws(PackScanRefusal) {
        var stream = z_stream()
        guard binder_inflate_init(&stream) == Z_OK else { throw .corrupt("zlib cannot start") }
        defer { inflateEnd(&stream) }
        var window = [UInt8](repeating: 0, count: 64 << 10)
        var head: [UInt8] = []
        while true {
            if position == buffer.count { try refill() }
            let available = buffer.count - position
            let (status, consumed, produced) = buffer.withUnsafeMutableBufferPointer { input in
                window.withUnsafeMutableBufferPointer { output in
                    stream.next_in = input.baseAddress! + position
                    stream.avail_in = UInt32(available)
                    stream.next_out = output.baseAddress
                    stream.avail_out = UInt32(output.count)
                    let status = CBinderZlib.inflate(&stream, Z_NO_FLUSH)
                    return (status, available - Int(stream.avail_in), output.count - Int(stream.avail_out))
                }
            }
            position += consumed
            if deltaHeader, head.count < 20 { head += window.prefix(min(produced, 20 - head.count)) }
            if status == Z_STREAM_END { break }
            guard status == Z_OK || (status == Z_BUF_ERROR && consumed == 0 && produced == 0 && position == buffer.count) else {
                throw .corrupt("an entry's data does not inflate")
            }
            if status == Z_BUF_ERROR && atEnd { throw .corrupt("the pack ends inside an entry") }
        }
        guard deltaHeader else { return }
        var offset = 0
        for _ in 0..<2 {
            var size = 0, shift = 0
            while true {
                guard offset < head.count, shift < 57 else { throw .corrupt("a delta's header does not parse") }
                let byte = head[offset]
                offset += 1
                size |= Int(byte & 0x7f) << shift
                shift += 7
                if byte & 0x80 == 0 { break }
            }
            guard size <= limit else { throw .objectTooLarge(size: size, limit: limit) }
        }
    }

    private mutating func next() throws(PackScanRefusal) -> UInt8 {
        if position == buffer.count { try refill() }
        defer { position += 1 }
        return buffer[position]
    }

    private mutating func bytes(_ count: Int) throws(PackScanRefusal) -> [UInt8] {
        var taken: [UInt8] = []
        for _ in 0..<count { taken.append(try next()) }
        return taken
    }

    /// Reads the next chunk; throws at the end of the file (a pack never ends where one is needed).
    private mutating func refill() throws(PackScanRefusal) {
        buffer.removeFirst(position)
        position = 0
        let chunk: Data
        do { chunk = try read(ServedRepository.chunkSize) } catch { throw .corrupt("cannot read: \(error)") }
        if chunk.isEmpty {
            atEnd = true
            throw .corrupt("the pack ends inside an entry")
        }
        buffer += chunk
    }
}
