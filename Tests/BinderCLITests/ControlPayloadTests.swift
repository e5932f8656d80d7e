import BinderSystem
import Foundation
import Glibc
import XCTest

/// The control channel's one request with bytes (`import LENGTH`), on a real unix socket in
/// process: the bytes cross whole both ways, a length over the cap is refused unread with a
/// typed refusal, and refusals are told apart by their code (never their words).
final class ControlPayloadTests: XCTestCase {
    var folder: String!

    override func setUpWithError() throws {
        folder = "/tmp/bcp-\(UUID().uuidString.prefix(8))"
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: folder) }

    func server(payload: ControlServer.PayloadHandler?) throws -> ControlServer {
        let server = try ControlServer(path: folder + "/run/mount-1.sock", handler: { "error unknown request (\($0.prefix(20)))" },
                                       payloadHandler: payload)
        server.start()
        return server
    }

    func testTheBytesCrossWholeBothWays() throws {
        let server = try server { request, payload in .ok(Array("\(request)|".utf8) + payload.reversed()) }
        defer { server.stop() }
        var sent = [UInt8](repeating: 0, count: 3 << 20)
        for index in sent.indices { sent[index] = UInt8(truncatingIfNeeded: index &* 31 &+ index >> 9) }
        // A newline and what looks like a line inside the bytes change nothing.
        sent.replaceSubrange(0..<12, with: Array("\nok 5\nerror ".utf8))
        let answer = try ControlClient.exchange(ControlRequest.importRecords, payload: sent, to: server.path)
        XCTAssertEqual(try answer.get(), Array("import \(sent.count)|".utf8) + sent.reversed())
        XCTAssertEqual(try ControlClient.exchange(ControlRequest.importRecords, payload: [], to: server.path).get(), Array("import 0|".utf8))
        // The socket is the owner's alone.
        var info = stat()
        XCTAssertEqual(stat(server.path, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
    }

    func testAHandlersRefusalArrivesWithItsCode() throws {
        let server = try server { _, _ in .refused(ControlRefusal(code: .readOnly, errno: EROFS, message: "the mount is read-only")) }
        defer { server.stop() }
        let answer = try ControlClient.exchange(ControlRequest.importRecords, payload: Array("x".utf8), to: server.path)
        XCTAssertEqual(answer, .failure(ControlRefusal(code: .readOnly, errno: EROFS, message: "the mount is read-only")))
    }

    /// A length over the cap is refused before a byte of it is read, and the handler never runs.
    func testALengthOverTheCapIsRefusedUnread() throws {
        let server = try server { _, _ in
            XCTFail("the handler ran")
            return .ok([])
        }
        defer { server.stop() }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in server.path.utf8.enumerated() { buffer[index] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        XCTAssertEqual(connected, 0)
        let line = Array("import \(ControlPayload.maximumBytes + 1)\n".utf8)
        XCTAssertEqual(line.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }, line.count)
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            answer += buffer[..<n]
        }
        let text = String(decoding: answer, as: UTF8.self)
        XCTAssertTrue(text.hasPrefix("error too-large \(E2BIG) \(ControlPayload.maximumBytes + 1) bytes is more than the 256 MiB"), text)
    }

    /// A payload over the cap is refused by the asker itself, never sent.
    func testAPayloadOverTheCapIsRefusedUnsent() throws {
        let server = try server { _, _ in
            XCTFail("the handler ran")
            return .ok([])
        }
        defer { server.stop() }
        let answer = try ControlClient.exchange(ControlRequest.importRecords, payload: [UInt8](repeating: 0, count: ControlPayload.maximumBytes + 1),
                                                to: server.path)
        XCTAssertEqual(answer, .failure(.tooLarge(bytes: ControlPayload.maximumBytes + 1)))
        guard case .failure(let refusal) = answer else { return }
        XCTAssertEqual(refusal.code, .tooLarge)
        XCTAssertEqual(refusal.errno, E2BIG)
    }

    /// A mount that does not know the request (an older binder) answers an `error` line of
    /// its own words: `other`, never mistaken for one of the codes.
    func testAnAnswerNotInTheFormIsOther() throws {
        let server = try server(payload: nil)
        defer { server.stop() }
        let answer = try ControlClient.exchange(ControlRequest.importRecords, payload: [], to: server.path)
        guard case .failure(let refusal) = answer else { return XCTFail("\(answer)") }
        XCTAssertEqual(refusal.code, .other)
        XCTAssertEqual(refusal.errno, EPROTO)
        XCTAssertTrue(refusal.message.hasPrefix("unknown request"), refusal.message)
    }
}
