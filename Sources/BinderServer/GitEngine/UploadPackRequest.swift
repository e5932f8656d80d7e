import BinderCrypto

/// A `git-upload-pack` request body of protocol v0/v1 as the stateless RPC of Smart HTTP sends
/// it: `want` lines (capabilities after the first), then shallow/deepen lines we refuse, a
/// flush, `have` lines (each round's flush between them), and `done` when the client is ready
/// for the pack. Parsed whole from a bounded body: nothing of it reaches libgit2 unchecked.
@_spi(Fuzzing)
public struct UploadPackRequest: Sendable, Equatable {
    public var wants: [String] = []
    public var haves: [String] = []
    public var capabilities: [String] = []
    /// True once the client said `done`: the answer carries the pack.
    public var done = false
    /// True when it asked for a shallow or filtered history (`shallow`, `deepen*`, `filter`),
    /// which the engine refuses.
    public var asksShallow = false

    /// The request in `bytes`; nil when it is not a well-formed one (a line we do not know, a
    /// bad id, a truncated packet).
    public static func parse(_ bytes: [UInt8]) -> UploadPackRequest? {
        var reader = PacketReader(bytes: bytes)
        var request = UploadPackRequest()
        while reader.offset < bytes.count {
            guard let packet = reader.next() else { return nil }
            guard case .data(let payload) = packet else { continue }
            var line = Substring(decoding: payload, as: UTF8.self)
            if line.hasSuffix("\n") { line = line.dropLast() }
            if line == "done" {
                request.done = true
                break
            }
            let parts = line.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
            let keyword = parts[0]
            let argument = parts.count > 1 ? parts[1] : ""
            switch keyword {
            case "want":
                let fields = argument.split(separator: " ")
                guard let id = fields.first, isObjectID(id), request.haves.isEmpty else { return nil }
                if request.wants.isEmpty { request.capabilities = fields.dropFirst().map(String.init) }
                request.wants.append(String(id))
            case "have":
                guard isObjectID(argument), !request.wants.isEmpty else { return nil }
                request.haves.append(String(argument))
            case "shallow", "deepen", "deepen-since", "deepen-not", "filter":
                request.asksShallow = true
            default:
                return nil
            }
        }
        return request
    }

    private static func isObjectID(_ text: Substring) -> Bool {
        text.utf8.count == 40 && text.utf8.allSatisfy { Hex.nibble($0) != nil && !(UInt8(ascii: "A")...UInt8(ascii: "F")).contains($0) }
    }
}
