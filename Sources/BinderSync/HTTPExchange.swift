import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

/// How much of an answer binder reads, and how long it waits: every byte a server sends is
/// counted against a cap, and reading stops (the connection is closed) at the cap.
public struct AnswerLimits: Sendable {
    /// Bytes of the body, at most.
    public var maxBytes: Int
    /// The whole exchange, connect to last byte; nil for transfers whose size is the user's
    /// own data (packs), bounded by `HTTPExchange`'s idle timeout instead.
    public var deadline: TimeInterval?

    public init(maxBytes: Int, deadline: TimeInterval?) {
        self.maxBytes = maxBytes
        self.deadline = deadline
    }

    /// A challenge, a token, an error body: 64 KiB in 30 s.
    public static let json = AnswerLimits(maxBytes: 64 * 1024, deadline: 30)
    /// The repository list: 4 MiB in 60 s (tens of thousands of entries).
    public static let listing = AnswerLimits(maxBytes: 4 * 1024 * 1024, deadline: 60)
    /// A ref advertisement: 1 MiB in 60 s (a binder has one branch; a server with more refs is not one of ours).
    public static let advertisement = AnswerLimits(maxBytes: 1024 * 1024, deadline: 60)
    /// A push's report: 1 MiB (status lines and progress messages).
    public static let pushReport = AnswerLimits(maxBytes: 1024 * 1024, deadline: nil)
    /// A fetched pack: `BINDER_MAX_PACK_BYTES`, else 1 GiB.
    public static var pack: AnswerLimits {
        let configured = ProcessInfo.processInfo.environment["BINDER_MAX_PACK_BYTES"].flatMap { Int($0) }
        return AnswerLimits(maxBytes: configured.map { max(1024, $0) } ?? 1 << 30, deadline: nil)
    }
}

/// One HTTP answer, read whole (within its limits).
struct HTTPAnswer: Sendable {
    var status: Int
    var contentType: String?
    var body: [UInt8]
    /// `Retry-After`, as seconds from now (its delta-seconds, or its HTTP date less the
    /// time); nil when absent or not readable.
    var retryAfter: TimeInterval? = nil

    /// `Retry-After: 120` or `Retry-After: Wed, 21 Oct 2026 07:28:00 GMT` as seconds from `now`
    /// (never negative); nil for anything else.
    static func retryAfter(_ field: String, now: Date = Date()) -> TimeInterval? {
        let text = field.trimmingCharacters(in: .whitespaces)
        if !text.isEmpty, text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) {
            return text.count > 9 ? .greatestFiniteMagnitude : TimeInterval(Int(text) ?? 0)
        }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        guard let date = formatter.date(from: text) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }
}

/// binder's one HTTP client (AsyncHTTPClient): HTTPS with the system's trusted certificates,
/// no redirects (a token never follows one), no decompression (what is counted is what
/// arrives), no retries of its own, a connect timeout of 10 s and an idle timeout of `BINDER_HTTP_IDLE_TIMEOUT`
/// seconds (default 30) between two reads. Blocking calls: used from the command's thread
/// and the sync thread (never from Swift concurrency's pool or an event loop).
enum HTTPExchange {
    /// Process-wide and never shut down (a static is never deinitialised).
    static let client: HTTPClient = {
        let idle = ProcessInfo.processInfo.environment["BINDER_HTTP_IDLE_TIMEOUT"].flatMap { Double($0) } ?? 30
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(10), read: .milliseconds(Int64(max(0.1, idle) * 1000))),
            decompression: .disabled)
        configuration.httpVersion = .http1Only
        // A refused or failed connection is reported at once: `RetryPolicy` is the one place
        // that decides when to try again (AsyncHTTPClient would retry until the connect timeout).
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    /// Sends one request and reads its answer within `limits`. Throws `SyncError` only:
    /// `.offline` when no answer came (refused, reset, timed out), `.untrusted` for a
    /// certificate, `.server` for an answer past the cap.
    static func send(method: HTTPMethod, url: String, headers: [(String, String)], body: [UInt8]?,
                     limits: AnswerLimits) throws(SyncError) -> HTTPAnswer {
        let host = URL(string: url)?.host ?? "the server"
        let request: HTTPClient.Request
        do {
            var fields = HTTPHeaders()
            for (name, value) in headers { fields.add(name: name, value: value) }
            request = try HTTPClient.Request(url: url, method: method, headers: fields, body: body.map { .bytes($0) })
        } catch {
            throw .configuration("bad URL \(url)")
        }
        let delegate = CappedCollector(limit: limits.maxBytes)
        let deadline = limits.deadline.map { NIODeadline.now() + .milliseconds(Int64($0 * 1000)) }
        do {
            return try client.execute(request: request, delegate: delegate, deadline: deadline).wait()
        } catch let error as AnswerTooLarge {
            throw .server(status: error.status, message: "the answer from \(host) is larger than \(error.limit) bytes (stopped reading)")
        } catch {
            throw classify(error, host: host)
        }
    }

    /// Words for a failed exchange, by the error's type: a TLS failure is `.untrusted` (no
    /// use retrying), anything else that kept an answer from arriving is `.offline`.
    static func classify(_ error: any Error, host: String) -> SyncError {
        switch error {
        case is NIOSSLError, is BoringSSLError, is NIOSSLExtraError:
            return .untrusted("\(host): \(error)")
        case let client as HTTPClientError:
            switch client {
            case .readTimeout, .deadlineExceeded: return .offline("\(host) stopped answering (timed out)")
            case .connectTimeout, .tlsHandshakeTimeout: return .offline("cannot connect to \(host) (timed out)")
            case .remoteConnectionClosed: return .offline("\(host) closed the connection")
            default: return .offline("\(host): \(client)")
            }
        case let connection as NIOConnectionError:
            let reasons = connection.connectionErrors.map { failure in
                (failure.error as? IOError).map { String(cString: strerror($0.errnoCode)) } ?? "\(failure.error)"
            }
            return .offline("cannot connect to \(host)" + (reasons.isEmpty ? "" : ": " + Set(reasons).sorted().joined(separator: ", ")))
        case let io as IOError:
            return .offline("\(host): \(String(cString: strerror(io.errnoCode)))")
        default:
            return .offline("\(host): \(error)")
        }
    }
}

/// Past the cap: reading stopped.
struct AnswerTooLarge: Error {
    let status: Int
    let limit: Int
}

/// Collects an answer's body up to `limit` bytes; fails the request (closing the connection)
/// as soon as a `Content-Length` or the bytes received go past it.
private final class CappedCollector: HTTPClientResponseDelegate {
    typealias Response = HTTPAnswer
    let limit: Int
    /// Touched from the request's event loop only; the Mutex makes that checkable.
    private let state = Mutex(HTTPAnswer(status: 0, contentType: nil, body: []))

    init(limit: Int) { self.limit = limit }

    func didReceiveHead(task: HTTPClient.Task<HTTPAnswer>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        let status = Int(head.status.code)
        let retryAfter = head.headers.first(name: "Retry-After").flatMap { HTTPAnswer.retryAfter($0) }
        state.withLock { $0.status = status; $0.contentType = head.headers.first(name: "Content-Type"); $0.retryAfter = retryAfter }
        if let length = head.headers.first(name: "Content-Length").flatMap({ Int($0) }), length > limit {
            return task.eventLoop.makeFailedFuture(AnswerTooLarge(status: status, limit: limit))
        }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<HTTPAnswer>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        let failure: AnswerTooLarge? = state.withLock { answer in
            guard answer.body.count + buffer.readableBytes <= limit else { return AnswerTooLarge(status: answer.status, limit: limit) }
            answer.body.append(contentsOf: buffer.readableBytesView)
            return nil
        }
        if let failure { return task.eventLoop.makeFailedFuture(failure) }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didFinishRequest(task: HTTPClient.Task<HTTPAnswer>) throws -> HTTPAnswer {
        state.withLock { $0 }
    }
}
