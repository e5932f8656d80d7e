import CompressNIO
import Foundation
import Hummingbird
import NIOCore

/// Turns the bytes of a request body as they arrive into the body itself: inflates `gzip` and
/// `deflate` (git gzips large fetch requests) through a fixed 64 KiB window, counting
/// **decompressed** bytes, and throws as soon as they pass `limit`. A few KB that would inflate
/// to a gigabyte cost at most `limit` bytes and one window, never more; and once past 1 MiB,
/// a body may not inflate to more than 100 times what was received (git's requests, JSON and
/// packs compress a few times at most), so a bomb is cut after about 1 MiB whatever the limit.
@_spi(Fuzzing)
public final class BodyInflater {
    public enum Failure: Error, Equatable {
        case tooLarge
        case inflatesTooFar
        case unsupportedEncoding
        case corrupt
    }

    private let decompressor: ZlibDecompressor?
    private let limit: Int
    private var window: ByteBuffer
    /// Compressed bytes received so far.
    private var received = 0
    static let ratioFloor = 1 << 20
    static let maximumRatio = 100
    public private(set) var count = 0

    /// `encoding`: the request's `Content-Encoding` (nil or `identity`: none).
    public init(encoding: String?, limit: Int) throws(Failure) {
        self.limit = limit
        window = ByteBufferAllocator().buffer(capacity: 64 << 10)
        let algorithm: ZlibAlgorithm?
        switch encoding?.trimmingCharacters(in: .whitespaces).lowercased() {
        case nil, "", "identity": algorithm = nil
        case "gzip", "x-gzip": algorithm = .gzip
        case "deflate": algorithm = .zlib
        default: throw .unsupportedEncoding
        }
        if let algorithm {
            guard let decompressor = try? ZlibDecompressor(algorithm: algorithm) else { throw .corrupt }
            self.decompressor = decompressor
        } else {
            decompressor = nil
        }
    }

    /// Feeds `bytes` and returns how many body bytes came out (for the fuzz target).
    public func feed(bytes: [UInt8]) throws -> Int {
        var emitted = 0
        try feed(ByteBuffer(bytes: bytes)) { emitted += $0.readableBytes }
        return emitted
    }

    /// Feeds one received chunk; `emit` is given the body's bytes, at most one window at a time.
    public func feed(_ chunk: ByteBuffer, _ emit: (ByteBuffer) throws -> Void) throws {
        guard let decompressor else {
            count += chunk.readableBytes
            guard count <= limit else { throw Failure.tooLarge }
            try emit(chunk)
            return
        }
        var input = chunk
        received += chunk.readableBytes
        while input.readableBytes > 0 {
            window.clear()
            let before = input.readableBytes
            do {
                try decompressor.inflate(from: &input, to: &window)
            } catch let error as CompressNIOError where error == .bufferOverflow || error == .inputBufferOverflow {
                // The window is full, or the input is used up: go on with the next round.
            } catch {
                throw Failure.corrupt
            }
            // No progress: bytes after the end of the compressed stream, which are not a body.
            if window.readableBytes == 0 && input.readableBytes == before { throw Failure.corrupt }
            count += window.readableBytes
            guard count <= limit else { throw Failure.tooLarge }
            guard count <= max(Self.ratioFloor, Self.maximumRatio * received) else { throw Failure.inflatesTooFar }
            if window.readableBytes > 0 { try emit(window) }
        }
    }
}

/// Reading a request's body within a limit: into memory (the JSON endpoints) or into a spool
/// file (git's requests, which go to git's stdin).
enum RequestBodyReader {
    /// The whole body, at most `limit` bytes after decompression.
    static func collect(_ request: Request, limit: Int) async throws -> ByteBuffer {
        var body = ByteBuffer()
        try await read(request, limit: limit) { body.writeImmutableBuffer($0) }
        return body
    }

    /// Writes the body to `file`, at most `limit` bytes after decompression; returns its size.
    @discardableResult
    static func spool(_ request: Request, limit: Int, to file: SpoolFile) async throws -> Int {
        try await read(request, limit: limit) { try file.write($0) }
    }

    @discardableResult
    private static func read(_ request: Request, limit: Int, _ emit: (ByteBuffer) throws -> Void) async throws -> Int {
        let encoding = request.headers[.contentEncoding]
        // A declared length past the limit is refused before a byte is read.
        if encoding == nil, let declared = request.headers[.contentLength].flatMap(Int.init), declared > limit {
            throw ServeFailure(413, "request body too large")
        }
        let inflater: BodyInflater
        do { inflater = try BodyInflater(encoding: encoding, limit: limit) } catch {
            throw ServeFailure(415, "unsupported Content-Encoding")
        }
        do {
            for try await chunk in request.body {
                // Feed big chunks in slices: a slice of 4 KiB inflates to at most ~4 MiB.
                var rest = chunk
                while let slice = rest.readSlice(length: min(rest.readableBytes, 4096)), slice.readableBytes > 0 {
                    try inflater.feed(slice, emit)
                }
            }
        } catch let failure as BodyInflater.Failure {
            switch failure {
            case .tooLarge: throw ServeFailure(413, "request body too large")
            case .inflatesTooFar: throw ServeFailure(413, "compressed request body inflates too far")
            case .unsupportedEncoding: throw ServeFailure(415, "unsupported Content-Encoding")
            case .corrupt: throw ServeFailure(400, "corrupt compressed body")
            }
        }
        return inflater.count
    }
}

/// A temporary file in the server's spool folder, unlinked at once: nothing is left behind
/// whatever happens, and the open descriptor (closed in deinit) is its only owner.
final class SpoolFile: @unchecked Sendable {
    // Used by one request's task at a time.
    let handle: FileHandle

    init(folder: String) throws {
        let path = folder + "/" + UUID().uuidString
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ServeFailure(500, "cannot make a spool file") }
        unlink(path)
        handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
    }

    var size: Int { Int((try? handle.seekToEnd()) ?? 0) }

    func write(_ buffer: ByteBuffer) throws {
        try buffer.withUnsafeReadableBytes { try handle.write(contentsOf: Data($0)) }
    }

    func rewind() throws { try handle.seek(toOffset: 0) }

    /// Up to `count` bytes from the current offset (fewer at the end; none past it).
    func read(upTo count: Int) throws -> [UInt8] { [UInt8](try handle.read(upToCount: count) ?? Data()) }
}
