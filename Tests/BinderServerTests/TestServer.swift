@testable import BinderServer
import BinderCrypto
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore

/// A `binder serve` on a fresh folder, driven in-process through Hummingbird's test client
/// (`.router`: no socket; `.live`: on loopback, port 0). Its repositories are made the way a
/// push makes them (staged, filled by git, published).
struct TestServer: Sendable {
    let folder: String
    let server: BinderServer

    init(faultRate: Double = 0, publicURL: String? = nil, limits: ServeLimits = ServeLimits()) throws {
        folder = NSTemporaryDirectory() + "binder-server-tests-" + UUID().uuidString
        server = try BinderServer(options: .init(repositories: folder, port: 0, publicURL: publicURL, faultRate: faultRate,
                                                 limits: limits),
                                  logger: Logger(label: "binder-serve-test") { _ in SwiftLogNoOpLogHandler() })
    }

    var storage: ServerStorage { server.routes.environment.storage }
    var folderRepositories: FolderRepositories { storage.repositories as! FolderRepositories }

    func test<Value: Sendable>(_ setup: TestingSetup = .router,
                               _ body: @Sendable (any TestClientProtocol) async throws -> Value) async throws -> Value {
        defer { try? FileManager.default.removeItem(atPath: folder) }
        return try await server.application { _ in }.test(setup, body)
    }

    /// Makes repository `id` owned by `owner` with `commits` commits on main, as push-to-create
    /// does (staged, filled, published); returns main's tips, oldest first. The commits are
    /// made with git's plumbing through the store's own `GitBackend` (an empty tree each).
    @discardableResult
    func makeRepository(_ id: String, owner: String, commits: Int = 1) async throws -> [String] {
        let store = folderRepositories.store
        let staging = try store.stage(id, owner: owner)
        let tree = try await git(["mktree"], in: staging)
        var tips: [String] = []
        for n in 0..<commits {
            let parent = tips.last.map { ["-p", $0] } ?? []
            tips.append(try await git(["-c", "user.name=Test", "-c", "user.email=test@example.invalid", "commit-tree", tree]
                                      + parent + ["-m", "note \(n)"], in: staging))
        }
        try await git(["update-ref", "refs/heads/main", tips[tips.count - 1]], in: staging)
        guard store.publish(staging, as: id) else { throw GitCommandFailure(message: "cannot publish \(id)") }
        return tips
    }

    /// `git ARGUMENTS` on the bare repository at `path`: its stdout, trimmed.
    @discardableResult
    private func git(_ arguments: [String], in path: String) async throws -> String {
        let output = try await folderRepositories.git.command(arguments, repository: path)
        guard output.status == 0 else { throw GitCommandFailure(message: "git \(arguments.joined(separator: " ")): \(output.errors)") }
        return String(decoding: try output.stdout.read(upTo: 4096), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

struct GitCommandFailure: Error {
    let message: String
}

/// The login as a client makes it: a challenge, a signed kind-22242 event, a token.
enum Login {
    static func challenge(_ client: any TestClientProtocol) async throws -> String {
        let response = try await client.execute(uri: "/api/auth/nostr/challenge", method: .post, body: ByteBuffer(string: "{}"))
        return try JSONBody.object(response.body)["challenge"] as? String ?? ""
    }

    /// The verify request's body for `event` answering `challenge`.
    static func verifyBody(_ event: NostrEvent, challenge: String) throws -> ByteBuffer {
        let signed: [String: Any] = ["id": event.id, "pubkey": event.pubkey, "created_at": event.createdAt, "kind": event.kind,
                                     "tags": event.tags, "content": event.content, "sig": event.sig]
        let body: [String: Any] = ["signedEvent": signed, "challenge": challenge, "userType": "patient"]
        return ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body))
    }

    static func verify(_ client: any TestClientProtocol, _ event: NostrEvent, challenge: String) async throws -> TestResponse {
        try await client.execute(uri: "/api/auth/nostr/verify", method: .post, body: try verifyBody(event, challenge: challenge))
    }

    /// A token for `key`.
    static func token(_ client: any TestClientProtocol, key: SecretKey) async throws -> String {
        let challenge = try await challenge(client)
        let event = NostrEvent.authentication(challenge: challenge, secretKey: key, createdAt: Int64(Date().timeIntervalSince1970))
        let response = try await verify(client, event, challenge: challenge)
        return try JSONBody.object(response.body)["token"] as? String ?? ""
    }
}

enum JSONBody {
    static func object(_ body: ByteBuffer) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any] ?? [:]
    }

    static func array(_ body: ByteBuffer) throws -> [[String: Any]] {
        try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [[String: Any]] ?? []
    }

    static func text(_ body: ByteBuffer) -> String { String(decoding: body.readableBytesView, as: UTF8.self) }
}

extension HTTPFields {
    static func bearer(_ token: String) -> HTTPFields { [.authorization: "Bearer " + token] }
}
