@_spi(Fuzzing) @testable import BinderServer
import Foundation
import Testing

/// The engine's parser of upload-pack request bodies (protocol v0/v1, stateless RPC).
@Suite struct UploadPackRequestTests {
    static let a = String(repeating: "a", count: 40), b = String(repeating: "b", count: 40)

    static func body(_ lines: [String?]) -> [UInt8] {
        lines.flatMap { line in line.map { Array(String(format: "%04x", $0.utf8.count + 4).utf8) + Array($0.utf8) } ?? Array("0000".utf8) }
    }

    @Test func wantsHavesCapabilitiesAndDone() {
        let request = UploadPackRequest.parse(Self.body(["want \(Self.a) multi_ack_detailed side-band-64k ofs-delta\n", "want \(Self.b)\n", nil,
                                                          "have \(Self.b)\n", nil, "have \(Self.a)\n", "done\n"]))
        #expect(request == UploadPackRequest(wants: [Self.a, Self.b], haves: [Self.b, Self.a],
                                            capabilities: ["multi_ack_detailed", "side-band-64k", "ofs-delta"], done: true, asksShallow: false))
    }

    @Test func aRoundWithoutDoneAndAShallowRequest() {
        #expect(UploadPackRequest.parse(Self.body(["want \(Self.a)\n", nil, "have \(Self.b)\n", nil]))?.done == false)
        #expect(UploadPackRequest.parse(Self.body(["want \(Self.a)\n", "deepen 1\n", nil, "done\n"]))?.asksShallow == true)
        #expect(UploadPackRequest.parse(Self.body(["want \(Self.a)\n", "shallow \(Self.b)\n", nil, "done\n"]))?.asksShallow == true)
    }

    @Test(arguments: [["want \(a.uppercased())\n"], ["want zz\n"], ["have \(a)\n"], ["want \(a)\n", nil, "have \(b)\n", "want \(a)\n"],
                      ["wants \(a)\n"], ["want \(a)\n", "deepen-x\n"]])
    func malformedRequestsAreRefused(_ lines: [String?]) {
        #expect(UploadPackRequest.parse(Self.body(lines)) == nil)
    }

    @Test func aTruncatedPacketIsRefused() {
        #expect(UploadPackRequest.parse(Array("0032want".utf8)) == nil)
    }
}
