import BinderGit
import Foundation
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
    /// Why the transfer failed (set on the transfer's thread, read after libgit2 returns).
    private let lastFailure = Mutex<SyncError?>(nil)

    init(repositoryURL: String, token: String, scheme: String = "Bearer", retry: RetryPolicy, logger: Logger) {
        self.repositoryURL = repositoryURL
        self.token = token
        self.scheme = scheme
        self.retry = retry
        self.logger = logger
    }

    var failure: SyncError? { lastFailure.withLock { $0 } }

    func exchange(_ service: SmartHTTPService, body: [UInt8]) throws -> [UInt8] {
        do {
            return try retry.run({ () throws(SyncError) -> [UInt8] in try once(service, body: body) }, onRetry: { error, wait in
                logger.warning(error.retryAfter == nil ? "request failed; retrying" : "request failed; the server asked to wait, retrying",
                               metadata: ["request": "\(service.serviceName)\(service.isAdvertisement ? " refs" : "")",
                                          "in_seconds": "\(wait)", "error": "\(error)"])
            })
        } catch {
            lastFailure.withLock { $0 = error }
            throw error
        }
    }

    private func once(_ service: SmartHTTPService, body: [UInt8]) throws(SyncError) -> [UInt8] {
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
        let answer = try HTTPExchange.send(method: service.isAdvertisement ? .GET : .POST, url: repositoryURL + service.path,
                                           headers: headers, body: service.isAdvertisement ? nil : body, limits: limits)
        try ServerClient.check(answer)
        let expected = "application/x-\(service.serviceName)-" + (service.isAdvertisement ? "advertisement" : "result")
        guard answer.contentType?.lowercased().hasPrefix(expected) == true else {
            throw .server(status: answer.status, message: "not a git Smart HTTP answer (Content-Type \(answer.contentType ?? "none"))")
        }
        return answer.body
    }
}
