import Dispatch
import Foundation

/// git's pkt-line framing for what the server writes (the engine's answers, and the preamble
/// of spawned git's advertisement): a line is four hex digits of length (themselves included)
/// and the bytes; `0000` is a flush.
enum PacketLine {
    static let flush = Array("0000".utf8)
    /// The largest packet git reads (65520 bytes, header included).
    static let maximumLength = 65520

    static func line(_ text: String) -> [UInt8] { frame(Array(text.utf8)) }

    static func frame(_ payload: [UInt8]) -> [UInt8] {
        Array(String(format: "%04x", payload.count + 4).utf8) + payload
    }
}

/// An answer being written into a spool file (never whole in memory): pkt-lines as they are,
/// and data on a side-band channel (1: data, 2: progress and messages, 3: a fatal error) in
/// packets of at most `packetLength` when the client asked for side-band, else raw.
final class AnswerWriter {
    let file: SpoolFile
    /// `side-band-64k`: 65520; `side-band`: 1000; nil: no side-band.
    let packetLength: Int?
    /// Band-1 bytes not yet written, less than one packet's worth.
    private var pending: [UInt8] = []

    init(file: SpoolFile, capabilities: [String]) {
        self.file = file
        if capabilities.contains("side-band-64k") {
            packetLength = PacketLine.maximumLength
        } else if capabilities.contains("side-band") {
            packetLength = 1000
        } else {
            packetLength = nil
        }
    }

    func write(_ bytes: [UInt8]) throws {
        try file.handle.write(contentsOf: bytes)
    }

    func line(_ text: String) throws { try write(PacketLine.line(text)) }

    func flush() throws { try write(PacketLine.flush) }

    /// Bytes on band 1 (raw without side-band), gathered into full packets: each packet
    /// written from `bytes` as they are (one copy, into the write's buffer), only a packet's
    /// remainder kept in `pending`.
    func data(_ bytes: UnsafeRawBufferPointer) throws {
        guard let packetLength else { return try file.handle.write(contentsOf: Data(bytes)) }
        let payload = packetLength - 5
        var rest = bytes[...]
        if !pending.isEmpty {
            let taken = min(payload - pending.count, rest.count)
            pending.append(contentsOf: rest.prefix(taken))
            rest = rest.dropFirst(taken)
            guard pending.count == payload else { return }
            try pending.withUnsafeBytes { try packet($0) }
            pending.removeAll(keepingCapacity: true)
        }
        while rest.count >= payload {
            try packet(UnsafeRawBufferPointer(rebasing: rest.prefix(payload)))
            rest = rest.dropFirst(payload)
        }
        pending.append(contentsOf: rest)
    }

    /// One band-1 packet of `payload`.
    private func packet(_ payload: UnsafeRawBufferPointer) throws {
        var framed = Data(capacity: payload.count + 5)
        framed.append(contentsOf: Array(String(format: "%04x", payload.count + 5).utf8) + [1])
        framed.append(contentsOf: payload)
        try file.handle.write(contentsOf: framed)
    }

    /// What `data` still holds, sent.
    func finishData() throws {
        guard packetLength != nil, !pending.isEmpty else { return }
        try pending.withUnsafeBytes { try packet($0) }
        pending = []
    }

    /// A message on band 2 (shown by git as `remote: …`) or band 3 (a fatal error); dropped
    /// without side-band, where the client has no place for it.
    func message(_ text: String, band: UInt8 = 2) throws {
        guard let packetLength else { return }
        let bytes = Array(text.utf8.prefix(packetLength - 5))
        try write(PacketLine.frame([band] + bytes))
    }

    /// The answer, rewound, to be streamed.
    func response() throws -> PackResponse {
        let file = self.file
        let size = file.size
        try file.rewind()
        return PackResponse(length: size) { count in try file.read(upTo: count) }
    }
}

/// libgit2 work of the engine, off the event loops: on Dispatch's threads, at most `slots`
/// at once (the server's git process slots: spawning git or running libgit2, the same bound).
struct BlockingWork: Sendable {
    let slots: ProcessSlots

    func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        await slots.acquire()
        defer { slots.release() }
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
        }
    }
}
