@testable import BinderServer
import BinderTestPostgres
import BinderCrypto
import Foundation
import Logging
import Testing

/// `--token-secret-file`: the operator's secret, the same file for every replica.
@Suite struct TokenSecretFileTests {
    /// (contents, permissions, accepted).
    static let files: [(String, Int, Bool)] = [
        (String(repeating: "ab", count: 32) + "\n", 0o600, true),   // openssl rand -hex 32
        (String(repeating: "x", count: 32), 0o400, true),
        (String(repeating: "x", count: 31) + "\n", 0o600, false),   // too short once the newline goes
        (String(repeating: "x", count: 64), 0o640, false),   // the group may read it
        (String(repeating: "x", count: 64), 0o604, false),
        (String(repeating: "x", count: 5000), 0o600, false),
    ]

    @Test(arguments: files)
    func aSecretFileIsReadOnlyWhenPrivateAndLongEnough(contents: String, permissions: Int, accepted: Bool) throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let file = folder + "/secret"
        #expect(FileManager.default.createFile(atPath: file, contents: Data(contents.utf8), attributes: [.posixPermissions: permissions]))
        if accepted {
            _ = try TokenAuthority.readSecret(fromFile: file)
        } else {
            #expect(throws: TokenSecretFileError.self) { try TokenAuthority.readSecret(fromFile: file) }
        }
        #expect(throws: TokenSecretFileError.unreadable(path: folder + "/none", errno: ENOENT)) {
            try TokenAuthority.readSecret(fromFile: folder + "/none")
        }
        #expect(throws: TokenSecretFileError.notAFile(path: folder)) { try TokenAuthority.readSecret(fromFile: folder) }
    }

    @Test func twoReplicasGivenOneFileAcceptEachOthersTokensAndKeepNoSecretOfTheirOwn() throws {
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let file = folder + "/secret", otherFile = folder + "/other"
        #expect(FileManager.default.createFile(atPath: file, contents: Data(Hex.encode(randomBytes(32)).utf8), attributes: [.posixPermissions: 0o600]))
        #expect(FileManager.default.createFile(atPath: otherFile, contents: Data(Hex.encode(randomBytes(32)).utf8), attributes: [.posixPermissions: 0o600]))
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        func replica(_ name: String, secret: String) throws -> BinderServer {
            try BinderServer(options: .init(repositories: folder + "/" + name, tokenSecretFile: secret), logger: logger)
        }
        let a = try replica("a", secret: file), b = try replica("b", secret: file), c = try replica("c", secret: otherFile)
        let token = try a.routes.environment.tokens.issue(pubkey: String(repeating: "5", count: 64), userType: "patient", now: 1000)
        #expect(try b.routes.environment.tokens.check(token, now: 1001).pubkey == String(repeating: "5", count: 64))
        #expect(throws: TokenAuthority.Rejection.badSignature) { try c.routes.environment.tokens.check(token, now: 1001) }
        // The repositories' folder holds no secret of its own: a copy of it cannot mint tokens.
        #expect(!FileManager.default.fileExists(atPath: folder + "/a/.binder-serve/jwt-secret"))
        // The operator's file is not rotated by the server.
        #expect(throws: ServerError.self) {
            try BinderServer(options: .init(repositories: folder + "/d", rotateSecret: true, tokenSecretFile: file), logger: logger)
        }
    }

    static func folder() throws -> String { try makeTemporaryFolder("token-secret") }
}
