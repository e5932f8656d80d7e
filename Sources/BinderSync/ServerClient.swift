import BinderCrypto
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One repository on the server, as `GET /api/mgit/user/repositories` lists it.
public struct RemoteRepository: Sendable, Equatable {
    public let id: String
    public let name: String
    public let lastCommit: String?
}

/// The web app's QR payload: `{"action":"mgit_clone","clone_url","jwt_token","repo_name"}`.
public struct ClonePayload: Sendable {
    public let cloneURL: String
    public let token: String
    public let repoName: String

    public init(json: [UInt8]) throws(SyncError) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json)) as? [String: Any] else {
            throw .configuration("the QR payload is not a JSON object")
        }
        guard object["action"] as? String == "mgit_clone" else {
            throw .configuration("the QR payload's action is not \"mgit_clone\"")
        }
        guard let url = object["clone_url"] as? String, !url.isEmpty else { throw .configuration("the QR payload has no clone_url") }
        guard let token = object["jwt_token"] as? String, !token.isEmpty else { throw .configuration("the QR payload has no jwt_token") }
        cloneURL = url
        self.token = token
        repoName = (object["repo_name"] as? String) ?? ""
    }

    /// The server's base URL and the repository id, from `<base>/api/mgit/repos/<id>`.
    public func split() throws(SyncError) -> (server: String, repoId: String) {
        guard let range = cloneURL.range(of: "/api/mgit/repos/", options: .backwards) else {
            throw .configuration("the QR payload's clone_url is not an mgit repository URL")
        }
        var id = String(cloneURL[range.upperBound...])
        while id.hasSuffix("/") { id.removeLast() }
        if id.hasSuffix(".git") { id.removeLast(4) }
        guard !id.isEmpty, !id.contains("/") else { throw .configuration("the QR payload's clone_url names no repository") }
        return (String(cloneURL[..<range.lowerBound]), id)
    }
}

/// The server's REST endpoints (login and listings), over HTTPS with certificate checks (plain
/// HTTP only to this machine's loopback). Synchronous: callers are the command line and the
/// mount's sync thread.
public struct ServerClient: Sendable {
    /// The normalised base URL, e.g. `https://limbo.health`.
    public let base: String
    public static let defaultServer = "https://limbo.health"
    let timeout: TimeInterval

    public init(server: String, timeout: TimeInterval = 30) throws(SyncError) {
        var base = server.trimmingCharacters(in: .whitespaces)
        while base.hasSuffix("/") { base.removeLast() }
        guard let url = URL(string: base), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty,
              url.query == nil, url.user == nil else {
            throw .configuration("'\(server)' is not a server URL like https://limbo.health")
        }
        if scheme == "http" {
            guard Self.isLoopback(host) else {
                throw .configuration("refusing plain http to \(host): tokens and binders travel only over https (http is allowed to this machine only)")
            }
        } else if scheme != "https" {
            throw .configuration("'\(server)': only https (or http to this machine) is supported")
        }
        self.base = base
        self.timeout = timeout
    }

    static func isLoopback(_ host: String) -> Bool {
        let h = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        return h == "localhost" || h == "::1" || h.hasPrefix("127.")
    }

    /// Smart HTTP URL of a repository.
    public func repositoryURL(_ repoId: String) -> String { base + "/api/mgit/repos/" + repoId }

    /// Signs a fresh challenge with `secretKey` (kind 22242) and returns the JWT.
    public func login(secretKey: SecretKey) throws(SyncError) -> String {
        let challengeObject = try call("POST", "/api/auth/nostr/challenge", body: [:], token: nil)
        guard let object = challengeObject as? [String: Any], let challenge = object["challenge"] as? String, !challenge.isEmpty else {
            throw .server(status: 200, message: "no challenge in the answer")
        }
        let event = NostrEvent.authentication(challenge: challenge, secretKey: secretKey,
                                              createdAt: Int64(Date().timeIntervalSince1970))
        let signed: [String: Any] = ["id": event.id, "pubkey": event.pubkey, "created_at": event.createdAt,
                                     "kind": event.kind, "tags": event.tags, "content": event.content, "sig": event.sig]
        let answer = try call("POST", "/api/auth/nostr/verify",
                              body: ["signedEvent": signed, "challenge": challenge, "userType": "patient"], token: nil)
        guard let verified = answer as? [String: Any], let token = verified["token"] as? String, !token.isEmpty else {
            throw .server(status: 200, message: "no token in the answer")
        }
        return token
    }

    public func repositories(token: String) throws(SyncError) -> [RemoteRepository] {
        let answer = try call("GET", "/api/mgit/user/repositories", body: nil, token: token)
        let list: [Any]
        if let array = answer as? [Any] { list = array }
        else if let object = answer as? [String: Any], let array = (object["repositories"] ?? object["repos"]) as? [Any] { list = array }
        else { throw .server(status: 200, message: "the repository list is not a JSON array") }
        return list.compactMap { item in
            guard let entry = item as? [String: Any] else { return nil }
            guard let id = (entry["repoId"] ?? entry["id"] ?? entry["name"]) as? String else { return nil }
            return RemoteRepository(id: id, name: (entry["name"] as? String) ?? id,
                                    lastCommit: (entry["lastCommit"] ?? entry["updatedAt"] ?? entry["lastModified"]) as? String)
        }
    }

    public func qrPayload(repoId: String, token: String) throws(SyncError) -> [UInt8] {
        let answer = try call("GET", "/api/mgit/qr/clone/" + repoId, body: nil, token: token)
        guard let data = try? JSONSerialization.data(withJSONObject: answer) else {
            throw .server(status: 200, message: "bad QR payload")
        }
        return [UInt8](data)
    }

    // MARK: - HTTP

    private func call(_ method: String, _ path: String, body: [String: Any]?, token: String?) throws(SyncError) -> Any {
        guard let url = URL(string: base + path) else { throw .configuration("bad URL \(base + path)") }
        var request = URLRequest(url: url, timeoutInterval: timeout)
        request.httpMethod = method
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        if let token { request.setValue("Bearer " + token, forHTTPHeaderField: "Authorization") }
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = try? JSONSerialization.data(withJSONObject: body)
        }
        let (data, status) = try Self.send(request)
        let json = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        let message = ((json as? [String: Any])?["error"] as? String) ?? ((json as? [String: Any])?["message"] as? String)
            ?? "HTTP \(status)"
        switch status {
        case 200..<300:
            guard let json else { throw .server(status: status, message: "the answer is not JSON") }
            return json
        case 401: throw .unauthorized(message)
        case 403: throw .forbidden(message)
        case 500...: throw .offline("the server answered \(status)")
        default: throw .server(status: status, message: message)
        }
    }

    /// One request, waited for. URLSession verifies HTTPS certificates against the system's CAs.
    private static func send(_ request: URLRequest) throws(SyncError) -> (Data, Int) {
        let box = ResultBox()
        let task = URLSession.shared.dataTask(with: request) { data, response, error in
            box.set(data: data, status: (response as? HTTPURLResponse)?.statusCode, error: error)
        }
        task.resume()
        let (data, status, error) = box.wait()
        if let error { throw .offline("\(request.url?.host ?? "server"): \(error.localizedDescription)") }
        guard let status else { throw .offline("no answer from \(request.url?.host ?? "server")") }
        return (data ?? Data(), status)
    }
}

/// Carries a URLSession completion to the waiting thread.
private final class ResultBox: @unchecked Sendable {
    private let condition = NSCondition()
    // Guarded by condition.
    private var done = false
    private var data: Data?
    private var status: Int?
    private var error: Error?

    func set(data: Data?, status: Int?, error: Error?) {
        condition.lock()
        self.data = data; self.status = status; self.error = error; done = true
        condition.signal()
        condition.unlock()
    }

    func wait() -> (Data?, Int?, Error?) {
        condition.lock(); defer { condition.unlock() }
        while !done { condition.wait() }
        return (data, status, error)
    }
}
