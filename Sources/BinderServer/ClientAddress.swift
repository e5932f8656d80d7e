import Foundation
import HTTPTypes
import Hummingbird

/// An IPv4 or IPv6 network (`--trusted-proxy 10.0.0.0/8`, `::1/128`; a bare address is one
/// host). IPv4-mapped IPv6 addresses (`::ffff:10.1.2.3`) are taken as the IPv4 address they
/// carry, on both sides, so that a dual-stack socket's peer matches an IPv4 network.
public struct IPNetwork: Sendable, Equatable, CustomStringConvertible {
    /// 4 or 16 bytes, the bits past `prefix` cleared.
    let bytes: [UInt8]
    let prefix: Int

    /// Nil for anything but `ADDRESS` or `ADDRESS/BITS` with BITS within the address's length.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPNetwork.addressBytes(String(parts[0])) else { return nil }
        // A mapped network (::ffff:10.0.0.0/104) counts its prefix in IPv6 bits.
        let written = parts[0].contains(":") ? 128 : 32
        var prefix = address.count * 8
        if parts.count == 2 {
            guard let given = Int(parts[1]), parts[1].allSatisfy(\.isASCII), (0...written).contains(given) else { return nil }
            prefix = given - (written - address.count * 8)
            guard prefix >= 0 else { return nil }
        }
        self.prefix = prefix
        self.bytes = IPNetwork.masked(address, prefix: prefix)
    }

    public var description: String { "\(IPNetwork.text(bytes))/\(prefix)" }

    /// True when the address (as `addressBytes` reads it) is inside this network.
    func contains(_ address: [UInt8]) -> Bool {
        address.count == bytes.count && IPNetwork.masked(address, prefix: prefix) == bytes
    }

    private static func masked(_ address: [UInt8], prefix: Int) -> [UInt8] {
        address.enumerated().map { index, byte in
            let keep = min(8, max(0, prefix - index * 8))
            return keep == 8 ? byte : byte & ~(UInt8(0xff) >> keep)
        }
    }

    /// The address's 4 or 16 bytes (IPv4-mapped IPv6 as its 4); nil when it is not an address.
    @_spi(Fuzzing) public static func addressBytes(_ text: String) -> [UInt8]? {
        guard !text.isEmpty, text.utf8.count <= 64, !text.contains("%") else { return nil }
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        let bytes = withUnsafeBytes(of: &v6) { Array($0) }
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff { return Array(bytes[12...]) }
        return bytes
    }

    /// The canonical text of 4 or 16 bytes (inet_ntop's), so that one client is one key.
    @_spi(Fuzzing) public static func text(_ bytes: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        var copy = bytes
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        guard inet_ntop(family, &copy, &buffer, socklen_t(buffer.count)) != nil else { return "unknown" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Which header a trusted proxy writes the client's address in (`--forwarded-header`). Only
/// that one is read: the other is the client's to write, and would be a forgery.
public enum ForwardedHeader: String, Sendable, CaseIterable {
    /// `X-Forwarded-For: client, proxy1, proxy2` (nginx's `$proxy_add_x_forwarded_for`,
    /// HAProxy's `option forwardfor`).
    case xForwardedFor = "x-forwarded-for"
    /// RFC 7239's `Forwarded: for=client;proto=https, for="[2001:db8::1]:4711"`.
    case forwarded
}

/// Whose word the server takes for a client's address (`--trusted-proxy`): the TCP peer's
/// own address, unless the peer is inside one of `networks`; then the rightmost address of
/// the forwarding header that is not itself inside them. Never the leftmost: every proxy
/// appends the address it was reached from, so only the part written by trusted proxies is
/// true; whatever the client put before it, it wrote itself.
public struct ClientAddressRule: Sendable {
    public var networks: [IPNetwork]
    public var header: ForwardedHeader

    public init(trusting networks: [IPNetwork] = [], header: ForwardedHeader = .xForwardedFor) {
        self.networks = networks
        self.header = header
    }

    /// True when `peer` (an address text) is a trusted proxy.
    public func trusts(_ peer: String) -> Bool {
        guard !networks.isEmpty, let bytes = IPNetwork.addressBytes(peer) else { return false }
        return networks.contains { $0.contains(bytes) }
    }

    /// The client's address (canonical text) for a request from `peer` with `headers`.
    public func client(peer: String, headers: HTTPFields) -> String {
        guard !networks.isEmpty else { return client(peer: peer, headerValues: []) }
        let name = header == .xForwardedFor ? HTTPField.Name("X-Forwarded-For")! : HTTPField.Name("Forwarded")!
        return client(peer: peer, headerValues: headers[values: name])
    }

    /// The same, given the values of `header` in the request (each line as sent, in order).
    @_spi(Fuzzing) public func client(peer: String, headerValues: [String]) -> String {
        guard let peerBytes = IPNetwork.addressBytes(peer) else { return peer }
        var nearest = IPNetwork.text(peerBytes)
        guard networks.contains(where: { $0.contains(peerBytes) }) else { return nearest }
        // Right to left: past trusted proxies, to the first hop that is not one. A hop that is
        // not an address (garbage, `unknown`, an obfuscated name) ends the walk: the request
        // is then counted against the last trusted hop, never against a name the client chose.
        for hop in hops(headerValues).reversed() {
            guard let bytes = IPNetwork.addressBytes(hop) else { return nearest }
            nearest = IPNetwork.text(bytes)
            if !networks.contains(where: { $0.contains(bytes) }) { return nearest }
        }
        return nearest
    }

    /// The header's addresses, left to right, each stripped of brackets and port.
    func hops(_ headerValues: [String]) -> [String] {
        let elements = headerValues.flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }
        let values: [String]
        switch header {
        case .xForwardedFor:
            values = elements.map { String($0) }
        case .forwarded:
            values = elements.map { element in
                let pairs = element.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
                // An element without `for=` says nothing of the client: not an address.
                let value = pairs.first { $0.lowercased().hasPrefix("for=") }.map { String($0.dropFirst(4)) } ?? ""
                return value.hasPrefix("\"") && value.hasSuffix("\"") && value.count >= 2
                    ? String(value.dropFirst().dropLast()) : value
            }
        }
        return values.map { Self.strippingPort($0.trimmingCharacters(in: .whitespaces)) }
    }

    /// `[v6]:port` and `[v6]` -> v6; `v4:port` -> v4; anything else unchanged.
    static func strippingPort(_ hop: String) -> String {
        if hop.hasPrefix("["), let close = hop.firstIndex(of: "]") {
            return String(hop[hop.index(after: hop.startIndex)..<close])
        }
        let colons = hop.filter { $0 == ":" }.count
        if colons == 1, let colon = hop.firstIndex(of: ":") { return String(hop[..<colon]) }
        return hop
    }
}

/// Puts the client's address, as `rule` reads it, in the context before anything counts or
/// logs it (the login rate limits, the challenge's address, the request log).
struct ClientAddressMiddleware: RouterMiddleware {
    typealias Context = ServeContext
    let rule: ClientAddressRule

    func handle(_ request: Request, context: ServeContext, next: (Request, ServeContext) async throws -> Response) async throws -> Response {
        guard !rule.networks.isEmpty else { return try await next(request, context) }
        var context = context
        context.remoteAddress = rule.client(peer: context.remoteAddress, headers: request.headers)
        return try await next(request, context)
    }
}
