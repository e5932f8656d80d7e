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

extension GitRepository {
    /// Whether `id` can name a repository on an mgit server: it becomes a folder name there
    /// (`<id>.git`), so 1–100 of ASCII letters, digits, `-`, `_`, `.`, not starting with a dot
    /// and not ending in `.git`. The client and `binder serve` both hold to this.
    public static func isValidRepositoryID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 100 && !id.hasPrefix(".") && !id.hasSuffix(".git")
            && id.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-_.".unicodeScalars.contains($0)) }
    }

    /// The remote-tracking ref a fetch of `branch` updates.
    public static func trackingRef(_ branch: String = "main") -> String { "refs/remotes/origin/" + branch }

    /// Fetches `branch` from `endpoint` into `refs/remotes/origin/<branch>` and returns its new
    /// tip (nil when the remote has no such branch: an empty repository). Objects are written
    /// to this repository's object database; nothing else changes. Holds the lock for the
    /// whole transfer: use a `GitRepository` of its own for network work, so that readers of
    /// another instance on the same path are never blocked by the network.
    public func fetch(_ endpoint: RemoteEndpoint, branch: String = "main",
                      progress: (@Sendable (TransferProgress) -> Void)? = nil) throws(GitError) -> ObjectID? {
        let tracking = Self.trackingRef(branch)
        try locked { () throws(GitError) in
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
        return try reference(tracking)
    }

    /// Pushes local `branch` to the same branch of `endpoint` (never forced: the server keeps
    /// its history). On success `refs/remotes/origin/<branch>` follows.
    public func push(_ endpoint: RemoteEndpoint, branch: String = "main",
                     progress: (@Sendable (TransferProgress) -> Void)? = nil) throws(GitError) -> PushOutcome {
        let outcome: PushOutcome = try locked { () throws(GitError) in
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
        if outcome == .updated, let tip = try branchTip(branch) {
            _ = try? setReference(Self.trackingRef(branch), to: tip, expected: nil, force: true,
                                  message: "push")
        }
        return outcome
    }

    // MARK: - References and history

    /// The commit a full reference name (`refs/…`) points at; nil if there is no such ref.
    public func reference(_ name: String) throws(GitError) -> ObjectID? {
        try locked { () throws(GitError) in
            var oid = git_oid()
            let rc = git_reference_name_to_id(&oid, repo.pointer, name)
            if rc == GIT_ENOTFOUND.rawValue { return nil }
            try check(rc, "read \(name)")
            return ObjectID(&oid)
        }
    }

    /// Points `name` at `target`. Unless `force`, only if it still points at `expected` (nil:
    /// only if it does not exist yet): a compare-and-swap that throws `.branchMoved` when
    /// another writer got there first. The ref is fsynced before this returns.
    public func setReference(_ name: String, to target: ObjectID, expected: ObjectID?, force: Bool = false,
                             message: String) throws(GitError) {
        try locked { () throws(GitError) in
            var newOid = target.oid
            var reference: OpaquePointer?
            let rc: Int32
            if force {
                rc = git_reference_create(&reference, repo.pointer, name, &newOid, 1, message)
            } else if let expected {
                var old = expected.oid
                rc = git_reference_create_matching(&reference, repo.pointer, name, &newOid, 1, &old, message)
            } else {
                rc = git_reference_create(&reference, repo.pointer, name, &newOid, 0, message)
            }
            if let reference { _ = ReferenceHandle(reference) }
            if !force && (rc == GIT_EMODIFIED.rawValue || rc == GIT_EEXISTS.rawValue || rc == GIT_ENOTFOUND.rawValue) {
                var oid = git_oid()
                let actual = git_reference_name_to_id(&oid, repo.pointer, name) == 0 ? ObjectID(&oid) : nil
                throw GitError.branchMoved(branch: name, expected: expected, actual: actual)
            }
            try check(rc, "update \(name)")
        }
    }

    /// The best common ancestor of two commits; nil when their histories are unrelated.
    public func mergeBase(_ one: ObjectID, _ two: ObjectID) throws(GitError) -> ObjectID? {
        try locked { () throws(GitError) in
            var out = git_oid()
            var a = one.oid, b = two.oid
            let rc = git_merge_base(&out, repo.pointer, &a, &b)
            if rc == GIT_ENOTFOUND.rawValue { return nil }
            try check(rc, "find the merge base of \(one) and \(two)")
            return ObjectID(&out)
        }
    }

    /// How many commits `local` has that `upstream` lacks, and the reverse. A nil side counts
    /// as an empty history. Asked at every read of a mount's status: the last answer is kept,
    /// and a local branch that only moved forward is counted from where it was (see
    /// `CommitCount`), so that a status read costs the commits made since, not the history.
    public func aheadBehind(local: ObjectID?, upstream: ObjectID?) throws(GitError) -> (ahead: Int, behind: Int) {
        try locked { () throws(GitError) in
            if let last = lastCount, last.local == local, last.upstream == upstream { return (last.ahead, last.behind) }
            let counted: (ahead: Int, behind: Int)
            switch (local, upstream) {
            case (nil, nil): counted = (0, 0)
            case (let local?, nil): counted = (try countCommitsLocked(from: local, since: lastCount), 0)
            case (nil, let upstream?): counted = (0, try countReachableLocked(from: upstream, hiding: nil))
            case (let local?, let upstream?):
                var ahead = 0, behind = 0
                var a = local.oid, b = upstream.oid
                try check(git_graph_ahead_behind(&ahead, &behind, repo.pointer, &a, &b), "count commits ahead/behind")
                counted = (ahead, behind)
            }
            lastCount = CommitCount(local: local, upstream: upstream, ahead: counted.ahead, behind: counted.behind)
            return counted
        }
    }

    /// The commits reachable from `tip`: those reachable from the tip counted last, plus the
    /// new ones, when that tip is an ancestor of this one (the branch moved forward); all of
    /// them otherwise. Lock held.
    private func countCommitsLocked(from tip: ObjectID, since last: CommitCount?) throws(GitError) -> Int {
        if let last, last.upstream == nil, let before = last.local {
            var a = tip.oid, b = before.oid
            if git_graph_descendant_of(repo.pointer, &a, &b) == 1 {
                return last.ahead + (try countReachableLocked(from: tip, hiding: before))
            }
        }
        return try countReachableLocked(from: tip, hiding: nil)
    }

    /// How many commits are reachable from `tip` and not from `hidden`, walked in no order and
    /// never read whole (libgit2 parses only their parents). Lock held.
    private func countReachableLocked(from tip: ObjectID, hiding hidden: ObjectID?) throws(GitError) -> Int {
        let operation = "count the commits of \(tip)"
        var pointer: OpaquePointer?
        try check(git_revwalk_new(&pointer, repo.pointer), operation)
        let walk = RevwalkHandle(pointer!)
        var start = tip.oid
        try check(git_revwalk_push(walk.pointer, &start), operation)
        if let hidden {
            var hide = hidden.oid
            try check(git_revwalk_hide(walk.pointer, &hide), operation)
        }
        var count = 0
        var oid = git_oid()
        while true {
            let rc = git_revwalk_next(&oid, walk.pointer)
            if rc == GIT_ITEROVER.rawValue { return count }
            try check(rc, operation)
            count += 1
        }
    }

    // MARK: - Configuration

    /// A value of the repository's own config (`.git/config`); nil when unset.
    public func configValue(_ name: String) throws(GitError) -> String? {
        try locked { () throws(GitError) in
            var config: OpaquePointer?
            try check(git_repository_config(&config, repo.pointer), "open config")
            defer { git_config_free(config) }
            var buffer = git_buf()
            defer { git_buf_dispose(&buffer) }
            let rc = git_config_get_string_buf(&buffer, config, name)
            if rc == GIT_ENOTFOUND.rawValue { return nil }
            try check(rc, "read config \(name)")
            return String(cString: buffer.ptr)
        }
    }

    /// Sets a value in the repository's own config file.
    public func setConfigValue(_ name: String, _ value: String) throws(GitError) {
        try locked { () throws(GitError) in
            var config: OpaquePointer?
            try check(git_repository_config(&config, repo.pointer), "open config")
            defer { git_config_free(config) }
            var local: OpaquePointer?
            try check(git_config_open_level(&local, config, GIT_CONFIG_LEVEL_LOCAL), "open local config")
            defer { git_config_free(local) }
            try check(git_config_set_string(local, name, value), "write config \(name)")
        }
    }

    // MARK: - Lock held

    private func anonymousRemoteLocked(_ url: String) throws(GitError) -> RemoteHandle {
        var pointer: OpaquePointer?
        try check(git_remote_create_anonymous(&pointer, repo.pointer, url), "set up remote \(url)")
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

/// An answer of `GitRepository.aheadBehind`, kept for the next question.
struct CommitCount {
    let local: ObjectID?
    let upstream: ObjectID?
    let ahead: Int
    let behind: Int
}
