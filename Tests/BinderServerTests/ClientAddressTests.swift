@_spi(Fuzzing) @testable import BinderServer
import Foundation
import Hummingbird
import Testing

/// `--trusted-proxy`: whose word is taken for the client's address (`ClientAddressRule`).
/// Only a trusted peer's header is read, and from it the rightmost address that is not a
/// trusted proxy: what the client wrote itself (the left) never decides.
@Suite struct ClientAddressTests {
    struct Row: CustomStringConvertible {
        let peer: String
        let header: ForwardedHeader
        let values: [String]
        let trusted: [String]
        let client: String
        let why: String
        var description: String { why }
    }

    static let rows: [Row] = [
        // No trusted proxy: the socket's peer, whatever the headers say.
        Row(peer: "203.0.113.9", header: .xForwardedFor, values: ["198.51.100.1"], trusted: [], client: "203.0.113.9",
            why: "no --trusted-proxy: headers ignored"),
        Row(peer: "203.0.113.9", header: .xForwardedFor, values: ["198.51.100.1"], trusted: ["10.0.0.0/8"], client: "203.0.113.9",
            why: "a forged header from an untrusted peer is ignored"),
        Row(peer: "::ffff:203.0.113.9", header: .xForwardedFor, values: [], trusted: [], client: "203.0.113.9",
            why: "an IPv4-mapped peer is its IPv4 address"),
        // A trusted peer: the rightmost untrusted hop.
        Row(peer: "127.0.0.1", header: .xForwardedFor, values: ["198.51.100.7"], trusted: ["127.0.0.1"], client: "198.51.100.7",
            why: "one proxy: the address it appended"),
        Row(peer: "127.0.0.1", header: .xForwardedFor, values: ["1.2.3.4, 198.51.100.7"], trusted: ["127.0.0.0/8"],
            client: "198.51.100.7", why: "the leftmost, written by the client, is not taken"),
        Row(peer: "127.0.0.1", header: .xForwardedFor, values: ["1.2.3.4", "198.51.100.7"], trusted: ["127.0.0.0/8"],
            client: "198.51.100.7", why: "header lines are one list, in order"),
        Row(peer: "10.0.0.2", header: .xForwardedFor, values: ["198.51.100.7, 10.0.0.9"], trusted: ["10.0.0.0/8"],
            client: "198.51.100.7", why: "two trusted proxies: past both"),
        Row(peer: "10.0.0.2", header: .xForwardedFor, values: ["10.0.0.5, 10.0.0.9"], trusted: ["10.0.0.0/8"],
            client: "10.0.0.5", why: "every hop trusted: the leftmost of them"),
        Row(peer: "127.0.0.1", header: .xForwardedFor, values: [], trusted: ["127.0.0.1/32"], client: "127.0.0.1",
            why: "a trusted peer without the header: the peer"),
        Row(peer: "127.0.0.1", header: .xForwardedFor, values: ["evil, 10.0.0.9"], trusted: ["127.0.0.1", "10.0.0.0/8"],
            client: "10.0.0.9", why: "garbage ends the walk at the last trusted hop"),
        Row(peer: "127.0.0.1", header: .xForwardedFor, values: ["198.51.100.7, unknown"], trusted: ["127.0.0.1"],
            client: "127.0.0.1", why: "a hop that is no address is never the client"),
        Row(peer: "127.0.0.1", header: .xForwardedFor, values: ["198.51.100.7:5123"], trusted: ["127.0.0.1"],
            client: "198.51.100.7", why: "an IPv4 hop's port is dropped"),
        Row(peer: "127.0.0.1", header: .xForwardedFor, values: ["2001:DB8::1"], trusted: ["127.0.0.1"],
            client: "2001:db8::1", why: "an IPv6 hop, canonical"),
        Row(peer: "127.0.0.1", header: .xForwardedFor, values: ["[2001:db8::1]:443"], trusted: ["127.0.0.1"],
            client: "2001:db8::1", why: "a bracketed IPv6 hop with a port"),
        Row(peer: "::1", header: .xForwardedFor, values: ["198.51.100.7, fd00::5"], trusted: ["::1/128", "fd00::/8"],
            client: "198.51.100.7", why: "IPv6 proxies"),
        Row(peer: "::ffff:10.1.2.3", header: .xForwardedFor, values: ["198.51.100.7"], trusted: ["10.0.0.0/8"],
            client: "198.51.100.7", why: "an IPv4-mapped peer matches an IPv4 network"),
        Row(peer: "10.1.2.3", header: .xForwardedFor, values: ["198.51.100.7"], trusted: ["::ffff:10.0.0.0/104"],
            client: "198.51.100.7", why: "an IPv4-mapped network matches an IPv4 peer"),
        Row(peer: "11.0.0.1", header: .xForwardedFor, values: ["198.51.100.7"], trusted: ["10.0.0.0/8"],
            client: "11.0.0.1", why: "just outside the network"),
        // RFC 7239's Forwarded.
        Row(peer: "127.0.0.1", header: .forwarded, values: [#"for=1.2.3.4, for=198.51.100.7;proto=https"#],
            trusted: ["127.0.0.1"], client: "198.51.100.7", why: "Forwarded: the rightmost for="),
        Row(peer: "127.0.0.1", header: .forwarded, values: [#"for="[2001:db8:cafe::17]:4711""#], trusted: ["127.0.0.1"],
            client: "2001:db8:cafe::17", why: "Forwarded: a quoted IPv6 node with a port"),
        Row(peer: "127.0.0.1", header: .forwarded, values: ["for=198.51.100.7, for=_hidden"], trusted: ["127.0.0.1"],
            client: "127.0.0.1", why: "Forwarded: an obfuscated node is never the client"),
        Row(peer: "127.0.0.1", header: .forwarded, values: ["proto=https;by=10.0.0.1"], trusted: ["127.0.0.1"],
            client: "127.0.0.1", why: "Forwarded without for="),
        // The header not chosen is the client's to write: ignored.
        Row(peer: "127.0.0.1", header: .forwarded, values: [], trusted: ["127.0.0.1"], client: "127.0.0.1",
            why: "X-Forwarded-For is not read when Forwarded is the header"),
    ]

    @Test(arguments: rows) func theClientIsTheRightmostUntrustedHop(_ row: Row) throws {
        let networks = try row.trusted.map { try #require(IPNetwork($0), "\($0)") }
        let rule = ClientAddressRule(trusting: networks, header: row.header)
        #expect(rule.client(peer: row.peer, headerValues: row.values) == row.client, "\(row.why)")
    }

    @Test func theRuleReadsOnlyItsOwnHeader() {
        let rule = ClientAddressRule(trusting: [IPNetwork("127.0.0.1")!], header: .forwarded)
        let headers: HTTPFields = [.init("X-Forwarded-For")!: "198.51.100.1", .init("Forwarded")!: "for=198.51.100.2"]
        #expect(rule.client(peer: "127.0.0.1", headers: headers) == "198.51.100.2")
        let xff = ClientAddressRule(trusting: [IPNetwork("127.0.0.1")!], header: .xForwardedFor)
        #expect(xff.client(peer: "127.0.0.1", headers: headers) == "198.51.100.1")
    }

    @Test(arguments: ["10.0.0.0/8", "127.0.0.1", "::1/128", "fd00::/8", "0.0.0.0/0", "::/0", "::ffff:10.0.0.0/104"])
    func networksParse(_ text: String) {
        #expect(IPNetwork(text) != nil)
    }

    @Test(arguments: ["", "10.0.0.0/33", "::1/129", "10.0.0.0/-1", "10.0.0.0/", "host.example", "10.0.0.0/8/8",
                      "fe80::1%eth0", "10.0.0.0/ 8", "::ffff:10.0.0.0/95"])
    func badNetworksAreRefused(_ text: String) {
        #expect(IPNetwork(text) == nil)
    }

    @Test func aNetworkIgnoresTheBitsPastItsPrefix() {
        let network = IPNetwork("10.1.2.3/8")!
        #expect(network.description == "10.0.0.0/8")
        #expect(network.contains(IPNetwork.addressBytes("10.255.0.1")!))
        #expect(!network.contains(IPNetwork.addressBytes("11.0.0.1")!))
        #expect(!network.contains(IPNetwork.addressBytes("::1")!))
    }
}
