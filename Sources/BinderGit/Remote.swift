internal import CGit2
import Foundation
import Synchronization

/// How a transfer is going: objects and bytes so far (for a progress line).
public struct TransferProgress: Sendable, Equatable {
    public var receivedObjects: Int
    public var totalObjects: Int
    public var bytes: Int
    /// True while pushing (objects sent), false while fetching (objects received).
    public var pushing: Bool
}

/// Where and how to reach a remote repository over Smart HTTP.
public struct RemoteEndpoint: Sendable {
    /// `https://host/api/mgit/repos/<id>` (http only for loopback, checked by the caller).
    public var url: String
    /// Extra request headers, e.g. `Authorization: Bearer …`. Kept in memory only: libgit2 is
    /// handed copies for the duration of one call, freed right after.
    public var headers: [String]
    /// When set, every request goes through it (our own HTTP client: bounded answers, timeouts,
    /// retries) instead of libgit2's HTTP; `headers` are then the carrier's business.
    public var carrier: (any SmartHTTPCarrier)?

    public init(url: String, headers: [String] = [], carrier: (any SmartHTTPCarrier)? = nil) {
        self.url = url
        self.headers = headers
        self.carrier = carrier
    }
}

/// What a push did to the remote's branch.
public enum PushOutcome: Sendable, Equatable {
    case updated
    /// The server refused the update (for example not a fast-forward); its message.
    case rejected(String)
}

/// Fetch and push over Smart HTTP. Each transfer holds the repository's lock for its whole
/// length: a process that must keep answering meanwhile (the mount) opens a second
/// `GitRepository` for the network. `GitRepository.remotes`.
public struct GitRemotes: Sendable {
    /// The repository whose handle this owner uses, under its lock.
    let repository: GitRepository

    /// Whether `id` can name a repository on an mgit server: it becomes a folder name there
    /// (`<id>.git`), so 1–100 of ASCII letters, digits, `-`, `_`, `.`, not starting with a dot
    /// and not ending in `.git`. The client and `binder serve` both hold to this.
    public static func isValidRepositoryID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 100 && !id.hasPrefix(".") && !id.hasSuffix(".git")
            && id.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-_.".unicodeScalars.contains($0)) }
    }

    /// Fetches `branch` from `endpoint` into `refs/remotes/origin/<branch>` and returns its new
    /// tip (nil when the remote has no such branch: an empty repository). Objects are written
    /// to this repository's object database; nothing else changes. Holds the lock for the
    /// whole transfer: use a `GitRepository` of its own for network work, so that readers of
    /// another instance on the same path are never blocked by the network.
    public func fetch(_ endpoint: RemoteEndpoint, branch: String = "main",
                      progress: (@Sendable (TransferProgress) -> Void)? = nil) throws(GitError) -> ObjectID? {
        let tracking = GitRefs.trackingRef(branch)
        try repository.locked { () throws(GitError) in
            let remote = try anonymousRemoteLocked(endpoint.url)
            var options = git_fetch_options()
            try check(git_fetch_options_init(&options, UInt32(GIT_FETCH_OPTIONS_VERSION)), "init fetch options")
            options.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE
            options.update_fetchhead = 0
            let box = RemoteCallbackBox(progress, carrier: endpoint.carrier)
            let payload = Unmanaged.passRetained(box)
            defer { payload.release() }
            options.callbacks.payload = payload.toOpaque()
            if box.carried != nil { options.callbacks.transport = CarriedTransport.transportCallback }
            if progress != nil {
                options.callbacks.transfer_progress = { stats, payload in
                    guard let stats, let payload else { return 0 }
                    let box = Unmanaged<RemoteCallbackBox>.fromOpaque(payload).takeUnretainedValue()
                    box.report(TransferProgress(receivedObjects: Int(stats.pointee.received_objects),
                                                totalObjects: Int(stats.pointee.total_objects),
                                                bytes: Int(stats.pointee.received_bytes), pushing: false))
                    return 0
                }
            }
            let refspec = "+refs/heads/\(branch):\(tracking)"
            let rc = withStringArray(endpoint.headers) { headers in
                options.custom_headers = headers
                return withStringArray([refspec]) { refspecs in
                    var refspecs = refspecs
                    return git_remote_fetch(remote.pointer, &refspecs, &options, "fetch")
                }
            }
            try check(rc, "fetch from \(endpoint.url)")
        }
        return try repository.refs.reference(tracking)
    }

    /// Pushes local `branch` to the same branch of `endpoint` (never forced: the server keeps
    /// its history). On success `refs/remotes/origin/<branch>` follows.
    public func push(_ endpoint: RemoteEndpoint, branch: String = "main",
                     progress: (@Sendable (TransferProgress) -> Void)? = nil) throws(GitError) -> PushOutcome {
        let outcome: PushOutcome = try repository.locked { () throws(GitError) in
            let remote = try anonymousRemoteLocked(endpoint.url)
            var options = git_push_options()
            try check(git_push_options_init(&options, UInt32(GIT_PUSH_OPTIONS_VERSION)), "init push options")
            let box = RemoteCallbackBox(progress, carrier: endpoint.carrier)
            let payload = Unmanaged.passRetained(box)
            defer { payload.release() }
            options.callbacks.payload = payload.toOpaque()
            if box.carried != nil { options.callbacks.transport = CarriedTransport.transportCallback }
            options.callbacks.push_update_reference = { _, status, payload in
                guard let payload else { return 0 }
                let box = Unmanaged<RemoteCallbackBox>.fromOpaque(payload).takeUnretainedValue()
                if let status { box.rejection.withLock { $0 = String(cString: status) } }
                return 0
            }
            if progress != nil {
                options.callbacks.push_transfer_progress = { current, total, bytes, payload in
                    guard let payload else { return 0 }
                    let box = Unmanaged<RemoteCallbackBox>.fromOpaque(payload).takeUnretainedValue()
                    box.report(TransferProgress(receivedObjects: Int(current), totalObjects: Int(total),
                                                bytes: Int(bytes), pushing: true))
                    return 0
                }
            }
            let refspec = "refs/heads/\(branch):refs/heads/\(branch)"
            let rc = withStringArray(endpoint.headers) { headers in
                options.custom_headers = headers
                return withStringArray([refspec]) { refspecs in
                    var refspecs = refspecs
                    return git_remote_push(remote.pointer, &refspecs, &options)
                }
            }
            try check(rc, "push to \(endpoint.url)")
            if let rejection = box.rejection.withLock({ $0 }) { return .rejected(rejection) }
            return .updated
        }
        if outcome == .updated, let tip = try repository.refs.branchTip(branch) {
            _ = try? repository.refs.setReference(GitRefs.trackingRef(branch), to: tip, expected: nil, force: true,
                                  message: "push")
        }
        return outcome
    }

    // MARK: - Lock held

    private func anonymousRemoteLocked(_ url: String) throws(GitError) -> RemoteHandle {
        var pointer: OpaquePointer?
        try check(git_remote_create_anonymous(&pointer, repository.repo.pointer, url), "set up remote \(url)")
        return RemoteHandle(pointer!)
    }
}


/// Carries a progress closure, the transport carrier and a push's rejection through libgit2's
/// `void *payload` (one fetch or push; used on its thread only, but for `rejection`).
final class RemoteCallbackBox: @unchecked Sendable {
    let progress: (@Sendable (TransferProgress) -> Void)?
    /// Our subtransport when the endpoint has a carrier.
    let carried: CarriedTransport?
    /// A rejected ref update's message (libgit2 reports it in a callback).
    let rejection = Mutex<String?>(nil)
    init(_ progress: (@Sendable (TransferProgress) -> Void)?, carrier: (any SmartHTTPCarrier)?) {
        self.progress = progress
        carried = carrier.map(CarriedTransport.init)
    }
    func report(_ value: TransferProgress) { progress?(value) }
}

/// Calls `body` with a `git_strarray` of copies of `strings`, zeroed and freed afterwards (the
/// header copies carry a bearer token).
private func withStringArray<T>(_ strings: [String], _ body: (git_strarray) -> T) -> T {
    var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
    defer { for pointer in pointers { if let pointer { explicit_bzero(pointer, strlen(pointer)); free(pointer) } } }
    return pointers.withUnsafeMutableBufferPointer { buffer in
        body(git_strarray(strings: buffer.baseAddress, count: buffer.count))
    }
}
