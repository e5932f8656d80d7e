import BinderGit
import Foundation

/// binder's own git Smart HTTP server over any `GitObjectHome` (issue 42): protocol v0/v1
/// with stateless RPC, as git's `upload-pack`/`receive-pack --stateless-rpc` answer it, no git
/// process spawned. A client asking for protocol v2 (`Git-Protocol: version=2`) is answered
/// in v0, which git, libgit2 and dulwich take as the server's choice. Shallow and filtered
/// fetches are refused with an `ERR` line. Packs are built by libgit2's pack builder and
/// pushed ones indexed by its indexer (thin packs completed), checked as git's
/// `receive.fsckObjects` checks them, then handed to the home's `store`. Answers go through a
/// spool file; libgit2 runs off the event loops (`BlockingWork`).
struct GitEngine: SmartHTTPEndpoint {
    let home: any GitObjectHome
    /// Where answers are spooled.
    let spoolFolder: String
    let work: BlockingWork
    /// No pushed object, nor a delta's result, may be larger: libgit2 holds each whole while
    /// it indexes it (the folder store gives its largest push).
    var maximumObjectBytes = ServeLimits().pushBytes

    static let agent = "agent=binder/1"
    static let zeroID = String(repeating: "0", count: 40)
    /// Requests are read whole up to here (upload-pack's wants and haves; a push's commands).
    static let commandBytes = 1 << 20
    static let uploadCapabilities = ["multi_ack_detailed", "side-band-64k", "side-band", "thin-pack", "ofs-delta", "no-progress"]
    static let receiveCapabilities = ["report-status", "side-band-64k", "ofs-delta", "quiet", "atomic"]

    func advertiseRefs(_ service: GitService, protocolHeader: String?) async throws(StorageError) -> [UInt8] {
        let refs = try await home.refs()
        var lines: [String] = []
        let main = refs.first { $0.name == "refs/heads/main" }
        var capabilities = service == .uploadPack ? Self.uploadCapabilities : Self.receiveCapabilities
        if service == .uploadPack, main != nil { capabilities.append("symref=HEAD:refs/heads/main") }
        capabilities.append(Self.agent)
        var advertised: [(String, String)] = refs.map { ($0.target, $0.name) }
        if service == .uploadPack, let main { advertised.insert((main.target, "HEAD"), at: 0) }
        // An empty repository: one line naming the capabilities, as git writes it.
        if advertised.isEmpty { advertised = [(Self.zeroID, "capabilities^{}")] }
        for (index, (target, name)) in advertised.enumerated() {
            lines.append(index == 0 ? "\(target) \(name)\0\(capabilities.joined(separator: " "))\n" : "\(target) \(name)\n")
        }
        return PacketLine.line("# service=\(service.rawValue)\n") + PacketLine.flush
            + lines.flatMap(PacketLine.line) + PacketLine.flush
    }

    func uploadPack(_ request: SpoolFile, protocolHeader: String?) async throws(StorageError) -> PackResponse {
        let body = try read(request)
        let answer = try spool()
        guard let parsed = UploadPackRequest.parse(body) else {
            return try await finish { try Self.refuse("upload-pack: not a request of protocol v0/v1", into: answer) }
        }
        guard !parsed.asksShallow else {
            return try await finish {
                try Self.refuse("shallow and partial fetches are not served: fetch the whole history (no --depth, --shallow-*, --filter)",
                                into: answer)
            }
        }
        guard !parsed.wants.isEmpty else { return try await finish { try AnswerWriter(file: answer, capabilities: []).response() } }
        let refs = try await home.refs()
        let path = try await home.objectRepository()
        return try await finish { try UploadPackExchange(request: parsed, answer: answer, refs: refs).run(repositoryPath: path) }
    }

    func receivePack(_ request: SpoolFile, protocolHeader: String?) async throws(StorageError) -> PackResponse {
        let answer = try spool()
        let prefix = try read(request)
        guard let push = ReceivePackRequest.parse(prefix) else {
            // git's probe before a large push (a lone flush) and an empty body: nothing to do.
            guard prefix.isEmpty || prefix == PacketLine.flush else { throw .badRefUpdate(ref: "(a request that does not parse)") }
            return try await finish { try AnswerWriter(file: answer, capabilities: []).response() }
        }
        guard !push.commands.isEmpty else { return try await finish { try AnswerWriter(file: answer, capabilities: []).response() } }
        let refs = try await home.refs()
        let path = try await home.objectRepository()
        let exchange = ReceivePackExchange(push: push, request: request, answer: answer, refs: refs, home: home,
                                           maximumObjectBytes: maximumObjectBytes)
        return try await exchange.run(repositoryPath: path, work: work)
    }

    /// The request body, at most `commandBytes` of it.
    private func read(_ request: SpoolFile) throws(StorageError) -> [UInt8] {
        do {
            try request.rewind()
            return try request.read(upTo: Self.commandBytes)
        } catch { throw .backend(operation: "cannot read the request", detail: "\(error)") }
    }

    private func spool() throws(StorageError) -> SpoolFile {
        do { return try SpoolFile(folder: spoolFolder) } catch { throw .backend(operation: "cannot make a spool file", detail: "\(error)") }
    }

    /// `body` run off the event loop; its failures are the storage's.
    private func finish(_ body: @escaping @Sendable () throws -> PackResponse) async throws(StorageError) -> PackResponse {
        do { return try await work.run(body) } catch let error as StorageError { throw error } catch {
            throw .backend(operation: "git engine failed", detail: "\(error)")
        }
    }

    /// An `ERR` line: git prints it as "remote error: …" and stops.
    static func refuse(_ message: String, into answer: SpoolFile) throws -> PackResponse {
        let writer = AnswerWriter(file: answer, capabilities: [])
        try writer.line("ERR \(message)\n")
        return try writer.response()
    }
}

/// One upload-pack request answered (blocking: runs on `BlockingWork`): git's negotiation for
/// multi_ack_detailed (`ACK <id> common`, `ACK <id> ready`, `NAK`), and after `done` the pack of
/// the wants less the common haves over side-band.
struct UploadPackExchange {
    let request: UploadPackRequest
    let answer: SpoolFile
    /// The refs as the home gave them: a clone wants all of them.
    let refs: [StoredRef]
    /// At most this many descendant checks to say "ready" (each is a walk); past it the client
    /// goes on sending haves until it gives up by itself (git's limit of 256 in vain).
    static let readinessChecks = 4096

    func run(repositoryPath: String) throws -> PackResponse {
        let repository = try ServedRepository.open(path: repositoryPath)
        var wants: [ObjectID] = []
        for want in request.wants {
            // Any object the repository holds may be asked for (uploadpack.allowAnySHA1InWant):
            // a repository is one owner's, and whoever may fetch it may read all of it.
            guard let id = ObjectID(hex: want), repository.kind(of: id) != nil else {
                return try GitEngine.refuse("upload-pack: not our ref \(want)", into: answer)
            }
            wants.append(id)
        }
        let writer = AnswerWriter(file: answer, capabilities: request.capabilities)
        let detailed = request.capabilities.contains("multi_ack_detailed")
        var common: [ObjectID] = []
        var last: ObjectID?
        var gotCommon = false, gotOther = false, sentReady = false
        for have in request.haves {
            guard let id = ObjectID(hex: have), repository.kind(of: id) != nil else {
                gotOther = true
                if detailed, !sentReady, isReady(wants, common, repository) {
                    sentReady = true
                    try writer.line("ACK \(have) ready\n")
                }
                continue
            }
            gotCommon = true
            common.append(id)
            last = id
            if detailed { try writer.line("ACK \(have) common\n") }
        }
        guard request.done else {
            if detailed, gotCommon, !gotOther, !sentReady, let last, isReady(wants, common, repository) {
                try writer.line("ACK \(last.hex) ready\n")
            }
            try writer.line("NAK\n")
            return try writer.response()
        }
        if let last { try writer.line("ACK \(last.hex)\n") } else { try writer.line("NAK\n") }
        do {
            if common.isEmpty, let stored = reusablePack(wants, repository) {
                try Self.copy(stored, to: writer)
            } else {
                _ = try repository.writePack(wants: wants, haves: common) { bytes in (try? writer.data(bytes)) != nil }
            }
            try writer.finishData()
        } catch {
            try writer.message("error: cannot make the pack\n", band: 3)
        }
        if writer.packetLength != nil { try writer.flush() }
        return try writer.response()
    }

    /// The stored pack to send as it is, for a clone: nothing in common, the wants exactly the
    /// refs' targets (a fetch of less gets a pack of less), a client that reads `ofs-delta`
    /// entries (a stored pack may have them), and a repository that is one pack holding the
    /// wants' whole history (`ServedRepository.soleStoredPack`, checked by a walk in that pack alone).
    private func reusablePack(_ wants: [ObjectID], _ repository: ServedRepository) -> FileHandle? {
        guard request.capabilities.contains("ofs-delta"), !refs.isEmpty,
              Set(wants.map(\.hex)) == Set(refs.map(\.target)) else { return nil }
        return repository.soleStoredPack(reaching: wants)
    }

    /// `pack` copied on band 1, a MiB at a time, and closed.
    private static func copy(_ pack: FileHandle, to writer: AnswerWriter) throws {
        defer { try? pack.close() }
        while let chunk = try pack.read(upToCount: 1 << 20), !chunk.isEmpty {
            try chunk.withUnsafeBytes { try writer.data($0) }
        }
    }

    /// git's `ok_to_give_up`: every want is a common commit or has one in its history.
    private func isReady(_ wants: [ObjectID], _ common: [ObjectID], _ repository: ServedRepository) -> Bool {
        guard !common.isEmpty, wants.count * common.count <= Self.readinessChecks else { return false }
        return wants.allSatisfy { want in common.contains { repository.isFastForward(from: $0, to: want) } }
    }
}
