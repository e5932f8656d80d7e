import Foundation

/// A NIP-01 event: canonical serialisation, id, and BIP-340 signature.
public struct NostrEvent: Sendable, Equatable {
    public var pubkey: String
    public var createdAt: Int64
    public var kind: Int
    public var tags: [[String]]
    public var content: String
    public var id: String
    public var sig: String

    public enum Error: Swift.Error, Equatable, CustomStringConvertible {
        case badID, badSignature, badPubkey
        /// Not the JSON of an event (`{"id":…,"pubkey":…,"created_at":…,…}`).
        case malformed

        public var description: String {
            switch self {
            case .malformed: return "not a JSON event with id, pubkey, created_at, kind, tags, content and sig"
            case .badID: return "event id does not match its content"
            case .badSignature: return "event signature does not verify"
            case .badPubkey: return "event pubkey is not a valid x-only public key"
            }
        }
    }

    /// An unsigned event (id and sig empty) for `pubkey`.
    public init(pubkey: String, createdAt: Int64, kind: Int, tags: [[String]], content: String, id: String = "", sig: String = "") {
        self.pubkey = pubkey
        self.createdAt = createdAt
        self.kind = kind
        self.tags = tags
        self.content = content
        self.id = id
        self.sig = sig
    }

    /// `[0,<pubkey>,<created_at>,<kind>,<tags>,<content>]` with NIP-01's escaping: `"` `\`
    /// and control characters escaped (\b \f \n \r \t, others as \u00xx), `/` and all
    /// non-ASCII characters verbatim.
    public var canonicalSerialization: String {
        var out = "[0,\"\(pubkey)\",\(createdAt),\(kind),["
        for (i, tag) in tags.enumerated() {
            if i > 0 { out += "," }
            out += "["
            for (j, item) in tag.enumerated() {
                if j > 0 { out += "," }
                NostrEvent.appendJSONString(item, to: &out)
            }
            out += "]"
        }
        out += "],"
        NostrEvent.appendJSONString(content, to: &out)
        out += "]"
        return out
    }

    static func appendJSONString(_ s: String, to out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            case _ where scalar.value < 0x20:
                let hex = Hex.encode([UInt8(scalar.value)])
                out += "\\u00" + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }

    public var computedID: String { Hex.encode(sha256(Array(canonicalSerialization.utf8))) }

    /// Sets pubkey, id and sig from `secretKey`.
    public mutating func sign(with secretKey: SecretKey) {
        pubkey = secretKey.publicKey.hex
        let idBytes = sha256(Array(canonicalSerialization.utf8))
        id = Hex.encode(idBytes)
        sig = Hex.encode(secretKey.schnorrSign(idBytes))
    }

    /// Checks the id against the content and the signature against the pubkey.
    public func verify() throws(NostrEvent.Error) {
        guard let key = try? PublicKey(hex: pubkey) else { throw .badPubkey }
        let idBytes = sha256(Array(canonicalSerialization.utf8))
        guard Hex.encode(idBytes) == id.lowercased() else { throw .badID }
        guard let signature = Hex.decode(sig), key.verifySchnorr(signature: signature, message32: idBytes) else {
            throw .badSignature
        }
    }

    /// Reads the JSON object `json` gives (what a client sends to log in); nothing is verified.
    public init(json: some Collection<UInt8>) throws(NostrEvent.Error) {
        do { self = try JSONDecoder().decode(NostrEvent.self, from: Data(json)) } catch { throw .malformed }
    }

    /// Whether `created_at` is within `allowedSkew` seconds of `now`, for any `created_at` a
    /// client may send (no overflow at the ends of Int64).
    public func isFresh(now: Int64, allowedSkew: Int64) -> Bool {
        let (difference, overflow) = createdAt.subtractingReportingOverflow(now)
        return !overflow && difference.magnitude <= allowedSkew.magnitude
    }

    /// The event as the JSON object servers expect (`{"id":…,"pubkey":…,…}`).
    public var json: String {
        // id, pubkey and sig are hex in any event worth sending, but an event read from a
        // client may hold anything: escaped like every other string.
        var out = "{\"id\":"
        NostrEvent.appendJSONString(id, to: &out)
        out += ",\"pubkey\":"
        NostrEvent.appendJSONString(pubkey, to: &out)
        out += ",\"created_at\":\(createdAt),\"kind\":\(kind),\"tags\":["
        for (i, tag) in tags.enumerated() {
            if i > 0 { out += "," }
            out += "[" + tag.map { var s = ""; NostrEvent.appendJSONString($0, to: &s); return s }.joined(separator: ",") + "]"
        }
        out += "],\"content\":"
        NostrEvent.appendJSONString(content, to: &out)
        out += ",\"sig\":"
        NostrEvent.appendJSONString(sig, to: &out)
        out += "}"
        return out
    }

    /// A NIP-42/22242 authentication event answering `challenge`.
    /// `relay`: the server the event is for (NIP-42's tag), when known. A server that checks it
    /// refuses the event when another server hands it on: a hostile server can then no longer
    /// log in elsewhere as whoever logged in to it.
    public static func authentication(challenge: String, secretKey: SecretKey, createdAt: Int64, relay: String? = nil) -> NostrEvent {
        var event = NostrEvent(pubkey: secretKey.publicKey.hex, createdAt: createdAt, kind: 22242,
                               tags: relay.map { [["relay", $0], ["challenge", challenge]] } ?? [["challenge", challenge]], content: challenge)
        event.sign(with: secretKey)
        return event
    }
}

extension NostrEvent: Decodable {
    private enum CodingKeys: String, CodingKey {
        case id, pubkey, createdAt = "created_at", kind, tags, content, sig
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(pubkey: try c.decode(String.self, forKey: .pubkey), createdAt: try c.decode(Int64.self, forKey: .createdAt),
                  kind: try c.decode(Int.self, forKey: .kind), tags: try c.decode([[String]].self, forKey: .tags),
                  content: try c.decode(String.self, forKey: .content), id: try c.decode(String.self, forKey: .id),
                  sig: try c.decode(String.self, forKey: .sig))
    }
}
