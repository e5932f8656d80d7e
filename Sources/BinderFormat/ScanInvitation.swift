import Foundation

/// The QR payload of "Share with a doctor" (limbo-share-protocol.md §2.6), as a doctor's
/// `binder open-share` reads it: one JSON object
/// `{"action":"scan_session","ephemeralPrivkey":"<64 hex>","sessionToken":"sctk_…","repoId":"scan-…","expiresAt":<unix s>,"endpoint":"https://…"}`.
/// The scan page's checks, and more: every field is of the shape the flow gives it, so nothing
/// odd reaches a URL, a path or git. Bytes from a camera or a file: bounded, never trusted.
public struct ScanInvitation: Sendable {
    /// The throwaway private key, 64 lowercase hex characters (the caller turns it into a key
    /// at once; it is never written, logged or passed on).
    public let privateKeyHex: String
    public let sessionToken: String
    public let repoId: String
    /// Unix seconds.
    public let expiresAt: Int64
    /// The server's base URL (`https://host[:port]`, or `http://` for a loopback test server).
    public let endpoint: String

    /// Longest payload read (the app's is about 300 bytes).
    public static let maximumBytes = 4096

    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        case tooLong(Int)
        case notJSON(JSONParseError)
        case notAnObject
        /// `field` is absent or not of the type the flow gives it.
        case missing(field: String)
        /// `field` is there but not valid (`why` names the rule, never the value).
        case invalid(field: String, why: String)

        public var description: String {
            switch self {
            case .tooLong(let n): return "the payload is \(n) bytes; a scan payload is at most \(ScanInvitation.maximumBytes)"
            case .notJSON(let error): return "the payload is not JSON (\(error))"
            case .notAnObject: return "the payload is not a JSON object"
            case .missing(let field): return "the payload has no \(field)"
            case .invalid(let field, let why): return "the payload's \(field) \(why)"
            }
        }
    }

    public init(parsing bytes: [UInt8]) throws(Failure) {
        guard bytes.count <= Self.maximumBytes else { throw .tooLong(bytes.count) }
        let value: JSONValue
        do { value = try JSONValue.parse(bytes) } catch { throw .notJSON(error) }
        guard let object = value.objectValue else { throw .notAnObject }
        func string(_ field: String) throws(Failure) -> String {
            guard let text = object[field]?.stringValue else { throw .missing(field: field) }
            return text
        }
        guard try string("action") == "scan_session" else { throw .invalid(field: "action", why: "is not scan_session") }
        let key = try string("ephemeralPrivkey")
        guard key.utf8.count == 64, key.utf8.allSatisfy(Self.isHexDigit) else {
            throw .invalid(field: "ephemeralPrivkey", why: "is not 64 hex characters")
        }
        privateKeyHex = key.lowercased()
        sessionToken = try string("sessionToken")
        guard (1...256).contains(sessionToken.utf8.count), sessionToken.utf8.allSatisfy(Self.isTokenByte) else {
            throw .invalid(field: "sessionToken", why: "is not a token (1 to 256 letters, digits, '-' and '_')")
        }
        repoId = try string("repoId")
        guard Self.isRepositoryID(repoId) else {
            throw .invalid(field: "repoId", why: "is not a repository id (1 to 100 letters, digits, '-', '_', '.')")
        }
        guard let number = object["expiresAt"], let seconds = number.intValue else { throw .missing(field: "expiresAt") }
        guard seconds > 0 else { throw .invalid(field: "expiresAt", why: "is not a time") }
        expiresAt = Int64(seconds)
        // The app always sends it; a payload without one means limbo.health, as the scan page assumes.
        let base = object["endpoint"] == nil ? "https://limbo.health" : try string("endpoint")
        guard let endpoint = Self.baseURL(base) else {
            throw .invalid(field: "endpoint", why: "is not an http(s) URL of a server (scheme, host, optional port, no path)")
        }
        self.endpoint = endpoint
    }

    /// Whether the share is over at `now` (the scan page's test: now ≥ expiresAt).
    public func hasExpired(now: Date = Date()) -> Bool { now.timeIntervalSince1970 >= Double(expiresAt) }

    static func isHexDigit(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x61...0x66).contains(byte) || (0x41...0x46).contains(byte)
    }

    static func isTokenByte(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x2D || byte == 0x5F
    }

    /// As the client and `binder serve` hold repository ids (GitRemotes.isValidRepositoryID).
    static func isRepositoryID(_ id: String) -> Bool {
        (1...100).contains(id.utf8.count) && !id.hasPrefix(".") && !id.hasSuffix(".git")
            && id.utf8.allSatisfy { isTokenByte($0) || $0 == 0x2E }
    }

    /// `scheme://host[:port]` with a trailing slash dropped and the scheme in lower case
    /// (`HTTPS://` is a valid spelling; one spelling is kept, so the URLs built from it and
    /// the copy kept for reopening compare equal), or nil.
    static func baseURL(_ text: String) -> String? {
        var text = text
        if text.hasSuffix("/") { text.removeLast() }
        guard text.utf8.count <= 512, let components = URLComponents(string: text),
              let scheme = components.scheme?.lowercased(), scheme == "https" || scheme == "http",
              let host = components.host, !host.isEmpty, components.path.isEmpty, components.query == nil,
              components.fragment == nil, components.user == nil, components.password == nil,
              text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else { return nil }
        return scheme + text.dropFirst(scheme.utf8.count)
    }
}
