import BinderGit
import Foundation
import Glibc
import Logging
import Synchronization

/// Carries one fetch's or push's Smart HTTP requests over `HTTPExchange`, with the bearer
/// token: every answer within its cap (advertisements 1 MiB, packs `AnswerLimits.pack`, push
/// reports 1 MiB), every request retried with backoff on its own while the server is
/// unreachable or answers 5xx/429. A retried `git-receive-pack` is safe: the server updates a
/// ref only from the old id the request names, so a push that had landed is refused the
/// second time and the next fetch finds it there.
final class GitCarrier: SmartHTTPCarrier {
    let repositoryURL: String
    private let token: String
    /// `Bearer` (a login's JWT), or `ScanToken` (a doctor's scan token: `binder open-share`).
    private let scheme: String
    let retry: RetryPolicy
    let logger: Logger
    /// Where a fetched pack is spooled (the binder's git directory: it is ciphertext, and on
    /// the same disk as the objects it becomes); nil: in memory (a doctor's small share).
    let spoolDirectory: String?
    /// Why the transfer failed (set on the transfer's thread, read after libgit2 returns).
    private let lastFailure = Mutex<SyncError?>(nil)
    /// The first bytes of the last answer libgit2 was handed, to quote when it cannot read it.
    private let lastExcerpt = Mutex<String?>(nil)

    init(repositoryURL: String, token: String, scheme: String = "Bearer", retry: RetryPolicy, logger: Logger,
         spoolDirectory: String? = nil) {
        self.repositoryURL = repositoryURL
        self.token = token
        self.scheme = scheme
        self.retry = retry
        self.logger = logger
        self.spoolDirectory = spoolDirectory
    }

    var failure: SyncError? { lastFailure.withLock { $0 } }

    /// What the server said last, quoted (its first bytes), for a transfer libgit2 could not read.
    var lastAnswer: String? { lastExcerpt.withLock { $0 } }

    func exchange(_ service: SmartHTTPService, body: [UInt8]) throws -> SmartHTTPAnswer {
        do {
            return try retry.run(within: { (patience) throws(SyncError) -> SmartHTTPAnswer in
                try once(service, body: body, patience: patience)
            }, onRetry: { error, wait in
                logger.warning(error.retryAfter == nil ? "request failed; retrying" : "request failed; the server asked to wait, retrying",
                               metadata: ["request": "\(service.serviceName)\(service.isAdvertisement ? " refs" : "")",
                                          "in_seconds": "\(wait)", "error": "\(error)"])
            })
        } catch {
            lastFailure.withLock { $0 = error }
            throw error
        }
    }

    private func once(_ service: SmartHTTPService, body: [UInt8], patience: TransferPatience) throws(SyncError) -> SmartHTTPAnswer {
        var headers = [("Authorization", scheme + " " + token)]
        let limits: AnswerLimits
        switch service {
        case .uploadPackAdvertisement, .receivePackAdvertisement:
            limits = .advertisement
        case .uploadPack:
            limits = .pack
        case .receivePack:
            limits = .pushReport
        }
        if service.isAdvertisement {
            headers.append(("Accept", "application/x-\(service.serviceName)-advertisement"))
        } else {
            headers.append(("Content-Type", "application/x-\(service.serviceName)-request"))
            headers.append(("Accept", "application/x-\(service.serviceName)-result"))
        }
        let spool = service == .uploadPack ? try spoolDirectory.map { directory throws(SyncError) in try Self.spoolFile(in: directory) } : nil
        var handedOver = false
        defer { if let spool, !handedOver { close(spool) } }
        let answer = try HTTPExchange.send(method: service.isAdvertisement ? .GET : .POST, url: repositoryURL + service.path,
                                           headers: headers, body: service.isAdvertisement ? nil : body, limits: limits,
                                           patience: patience, spool: spool)
        try ServerClient.check(answer)
        let expected = "application/x-\(service.serviceName)-" + (service.isAdvertisement ? "advertisement" : "result")
        guard answer.contentType?.lowercased().hasPrefix(expected) == true else {
            throw .garbled("not a git Smart HTTP answer (HTTP \(answer.status), Content-Type \(answer.contentType ?? "none")): \(answer.quoted)")
        }
        lastExcerpt.withLock { $0 = answer.quoted }
        guard let spool else { return .bytes(answer.body) }
        handedOver = true
        return .file(descriptor: spool)
    }

    /// A new spool file in `directory` (`SpoolFile`).
    static func spoolFile(in directory: String) throws(SyncError) -> Int32 {
        do { return try SpoolFile.create(in: directory) } catch {
            throw .storage("cannot make a file for the incoming pack: \(error)", errno: error.posixErrno ?? EIO)
        }
    }
}
