import BinderGit
import Foundation

/// One push answered: the pack indexed into a quarantine folder (thin packs completed from the
/// repository), every object checked as `receive.fsckObjects` checks it, each command checked
/// (a full ref name, no deletion, the new object there and on a branch a commit, the ref still
/// at its old id, a fast-forward of it), the rest stored by the home in one transaction with
/// the pack, and git's `report-status` written (over side-band when asked). The quarantine
/// folder is removed whatever happens.
struct ReceivePackExchange: Sendable {
    let push: ReceivePackRequest
    let request: SpoolFile
    let answer: SpoolFile
    let refs: [StoredRef]
    let home: any GitObjectHome
    /// No object, nor a delta's result, may be larger (`PackSizeScan`).
    let maximumObjectBytes: Int

    /// The pack as checked, and the reason of each command refused so far.
    private struct Checked: Sendable {
        var pack: ReceivedPack?
        /// nil: the pack was stored in quarantine and passed; else git's `unpack` reason.
        var unpackError: String?
        var messages: [String] = []
        var refusals: [String: String] = [:]
    }

    func run(repositoryPath: String, work: BlockingWork) async throws(StorageError) -> PackResponse {
        let folder: String
        do { folder = try Self.makeQuarantine(in: home.quarantine) } catch {
            throw .backend(operation: "cannot make a quarantine folder", detail: "\(error)")
        }
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let checked: Checked
        do { checked = try await work.run { [self] in try check(repositoryPath: repositoryPath, quarantine: folder) } } catch {
            throw .backend(operation: "cannot check the push", detail: "\(error)")
        }
        var outcomes: [String: RefOutcome] = [:]
        for command in push.commands {
            if let reason = checked.unpackError != nil ? "unpacker error" : checked.refusals[command.ref] {
                outcomes[command.ref] = .refused(reason)
            }
        }
        let atomic = push.capabilities.contains("atomic")
        if atomic, !outcomes.isEmpty {
            for command in push.commands where outcomes[command.ref] == nil { outcomes[command.ref] = .refused("atomic push failed") }
        }
        let accepted = push.commands.filter { outcomes[$0.ref] == nil }.map { command in
            RefCommand(ref: command.ref, old: Self.id(command.old), new: Self.id(command.new))
        }
        if !accepted.isEmpty {
            let stored = try await home.store(checked.pack, commands: accepted)
            for (command, outcome) in zip(accepted, stored) { outcomes[command.ref] = outcome }
        }
        do {
            let decided = outcomes
            return try await work.run { [self] in try report(checked, decided) }
        } catch { throw .backend(operation: "cannot answer the push", detail: "\(error)") }
    }

    /// The blocking part: index, check objects, check commands.
    private func check(repositoryPath: String, quarantine: String) throws -> Checked {
        var checked = Checked()
        let repository = try ServedRepository.open(path: repositoryPath)
        if push.packObjects != nil {
            do {
                try request.handle.seek(toOffset: UInt64(push.packOffset))
                try PackSizeScan.check(request.handle, limit: maximumObjectBytes)
                try request.handle.seek(toOffset: UInt64(push.packOffset))
                let indexed = try repository.indexPack(from: request.handle, into: quarantine)
                if indexed.objects > 0 {
                    try repository.checkTrees(of: indexed)
                    try repository.include(indexed)
                    let size = ((try? FileManager.default.attributesOfItem(atPath: indexed.packPath))?[.size] as? Int) ?? 0
                    checked.pack = ReceivedPack(packPath: indexed.packPath, indexPath: indexed.indexPath, checksum: indexed.checksum,
                                                objects: indexed.objects, bytes: Int64(size))
                }
            } catch let refusal as IncomingObjectRefusal {
                checked.unpackError = "fsck error in packed object"
                checked.messages.append("error: \(refusal)\n")
                return checked
            } catch let refusal as PackScanRefusal {
                checked.unpackError = "index-pack failed"
                checked.messages.append("error: \(refusal)\n")
                return checked
            } catch {
                // libgit2's indexer refused the pack: not a pack, a missing base or link, an
                // object that does not parse.
                checked.unpackError = "index-pack failed"
                checked.messages.append("error: \(error)\n")
                return checked
            }
        }
        let current = Dictionary(refs.map { ($0.name, $0.target) }, uniquingKeysWith: { first, _ in first })
        for command in push.commands {
            if let reason = refusal(of: command, current: current[command.ref], in: repository) {
                checked.refusals[command.ref] = reason
            }
        }
        return checked
    }

    /// Why one command is refused (git's words in `report-status`), nil when it may go on.
    private func refusal(of command: ReceivePackRequest.Command, current: String?, in repository: ServedRepository) -> String? {
        guard FolderRepository.isRefName(command.ref) else { return "funny refname" }
        guard let newHex = Self.id(command.new), let new = ObjectID(hex: newHex) else { return "deletion prohibited" }
        guard let kind = repository.kind(of: new) else { return "missing necessary objects" }
        if command.ref.hasPrefix("refs/heads/"), kind != .commit { return "not a commit" }
        let old = Self.id(command.old)
        guard old == current else { return "non-fast-forward" }
        guard let old, let oldID = ObjectID(hex: old) else { return nil }
        return repository.isFastForward(from: oldID, to: new) ? nil : "non-fast-forward"
    }

    /// git's `report-status`, in band 1 when the client asked for side-band (messages in band 2).
    private func report(_ checked: Checked, _ outcomes: [String: RefOutcome]) throws -> PackResponse {
        let writer = AnswerWriter(file: answer, capabilities: push.capabilities)
        for message in checked.messages { try writer.message(message) }
        guard push.capabilities.contains("report-status") else {
            if writer.packetLength != nil { try writer.flush() }
            return try writer.response()
        }
        var status = PacketLine.line("unpack \(checked.unpackError ?? "ok")\n")
        for command in push.commands {
            switch outcomes[command.ref] ?? .refused("not applied") {
            case .applied: status += PacketLine.line("ok \(command.ref)\n")
            case .refused(let reason): status += PacketLine.line("ng \(command.ref) \(reason)\n")
            }
        }
        status += PacketLine.flush
        if writer.packetLength != nil {
            try status.withUnsafeBytes { try writer.data($0) }
            try writer.finishData()
            try writer.flush()
        } else {
            try writer.write(status)
        }
        return try writer.response()
    }

    /// nil for git's zero id.
    static func id(_ hex: String) -> String? { hex.allSatisfy { $0 == "0" } ? nil : hex }

    /// A new private folder in `parent` for one push's pack.
    static func makeQuarantine(in parent: String) throws -> String {
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
        var template = Array((parent + "/push-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        return String(cString: made)
    }
}
