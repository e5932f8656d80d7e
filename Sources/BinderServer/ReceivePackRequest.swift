import BinderCrypto

/// The start of a `git-receive-pack` request body: the ref update commands (pkt-lines up to a
/// flush, optionally push options up to a second flush) and the header of the pack that
/// follows. Read before anything is created, so that a repository comes into existence only
/// for a push that carries objects.
@_spi(Fuzzing)
public struct ReceivePackRequest: Sendable, Equatable {
    public struct Command: Sendable, Equatable {
        public let old: String
        public let new: String
        public let ref: String
    }

    public let commands: [Command]
    /// Objects announced by the pack header; nil when no pack follows the commands.
    public let packObjects: UInt32?
    /// The capabilities the client asked for on its first command (`report-status`, `side-band-64k`, …).
    public var capabilities: [String] = []
    /// Where the pack starts in the body (its end when no pack follows).
    public var packOffset = 0

    /// What push-to-create asks of a request: only branch creations, each with a new object,
    /// and a pack with at least one object.
    public var createsBranchesWithObjects: Bool {
        guard let packObjects, packObjects > 0, !commands.isEmpty else { return false }
        return commands.allSatisfy { command in
            command.old.allSatisfy { $0 == "0" } && !command.new.allSatisfy { $0 == "0" } && command.ref.hasPrefix("refs/heads/")
        }
    }

    /// Parses the prefix `bytes` of a body; nil when it is not a well-formed command list.
    public static func parse(_ bytes: [UInt8]) -> ReceivePackRequest? {
        var reader = PacketReader(bytes: bytes)
        var commands: [Command] = []
        var capabilities: [Substring] = []
        while true {
            guard let packet = reader.next() else { return nil }
            guard case .data(let payload) = packet else { break }
            var line = Substring(decoding: payload, as: UTF8.self)
            if line.hasSuffix("\n") { line = line.dropLast() }
            if line.hasPrefix("shallow ") { continue }
            if commands.isEmpty, let nul = line.firstIndex(of: "\0") {
                capabilities = line[line.index(after: nul)...].split(separator: " ")
                line = line[..<nul]
            }
            let fields = line.split(separator: " ", omittingEmptySubsequences: false)
            guard fields.count == 3, isObjectID(fields[0]), isObjectID(fields[1]), !fields[2].isEmpty else { return nil }
            commands.append(Command(old: String(fields[0]), new: String(fields[1]), ref: String(fields[2])))
        }
        if capabilities.contains("push-options") {
            while true {
                guard let packet = reader.next() else { return nil }
                if case .flush = packet { break }
            }
        }
        let rest = reader.remaining
        var request = ReceivePackRequest(commands: commands, packObjects: nil, capabilities: capabilities.map(String.init),
                                         packOffset: reader.offset)
        guard rest.count >= 12 else { return rest.isEmpty ? request : nil }
        guard Array(rest[rest.startIndex..<rest.startIndex + 4]) == Array("PACK".utf8) else { return nil }
        let version = bigEndian(rest, at: rest.startIndex + 4)
        guard version == 2 || version == 3 else { return nil }
        request = ReceivePackRequest(commands: commands, packObjects: bigEndian(rest, at: rest.startIndex + 8),
                                     capabilities: request.capabilities, packOffset: request.packOffset)
        return request
    }

    private static func isObjectID(_ text: Substring) -> Bool {
        (text.utf8.count == 40 || text.utf8.count == 64) && text.utf8.allSatisfy { Hex.nibble($0) != nil }
    }

    private static func bigEndian(_ bytes: ArraySlice<UInt8>, at index: Int) -> UInt32 {
        (index..<index + 4).reduce(UInt32(0)) { $0 << 8 | UInt32(bytes[$1]) }
    }
}

/// git's pkt-line framing: four hex digits of length (including themselves), `0000` a flush.
struct PacketReader {
    enum Packet { case flush, data(ArraySlice<UInt8>) }

    let bytes: [UInt8]
    private(set) var offset = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    var remaining: ArraySlice<UInt8> { bytes[offset...] }

    /// The next packet; nil at the end of the bytes or for a malformed length.
    mutating func next() -> Packet? {
        guard bytes.count - offset >= 4 else { return nil }
        var length = 0
        for byte in bytes[offset..<offset + 4] {
            guard let digit = Hex.nibble(byte) else { return nil }
            length = length * 16 + Int(digit)
        }
        if length == 0 { offset += 4; return .flush }
        guard length > 4, bytes.count - offset >= length else { return nil }
        defer { offset += length }
        return .data(bytes[offset + 4..<offset + length])
    }
}

extension ReceivePackRequest {
    /// The start of the spooled body `request` when it is a push-to-create (branch creations
    /// with a pack of objects), as every store's `create(byPush:)` asks; else `.notACreatingPush`.
    static func creatingPush(_ request: SpoolFile) throws(StorageError) -> ReceivePackRequest {
        let push: ReceivePackRequest?
        do {
            try request.rewind()
            push = parse(try request.read(upTo: 1 << 20))
        } catch { throw .backend(operation: "cannot read the request", detail: "\(error)") }
        guard let push, push.createsBranchesWithObjects else { throw .notACreatingPush }
        return push
    }
}
