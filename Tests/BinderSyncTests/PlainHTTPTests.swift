import Testing
import BinderSync

/// Plain http is allowed to this machine only: by address, never by how a name begins.
@Suite struct PlainHTTPTests {
    @Test(arguments: [
        ("http://127.0.0.1:8080", true), ("http://127.1.2.3", true), ("http://localhost:1", true), ("http://[::1]:9", true),
        ("http://127.attacker.invalid:18431", false), ("http://127.0.0.1.attacker.invalid", false), ("http://1270.0.0.1", false),
        ("http://127.0.0.256", false), ("http://128.0.0.1", false), ("http://attacker.invalid", false), ("https://127.attacker.invalid", true),
    ])
    func plainHTTPOnlyToLoopback(server: String, accepted: Bool) {
        #expect(((try? ServerClient(server: server)) != nil) == accepted, "\(server)")
    }
}
