import AsyncHTTPClient
import BinderGit
import Foundation
import Glibc
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

/// One HTTP answer, read whole (within its limits), or spooled to a file.
struct HTTPAnswer: Sendable {
    var status: Int
    var contentType: String?
    /// The body, unless it was spooled (`spooledBytes`).
    var body: [UInt8]
    /// `Retry-After`, as seconds from now (its delta-seconds, or its HTTP date less the
    /// time); nil when absent or not readable.
    var retryAfter: TimeInterval? = nil
    /// Bytes of a 2xx body written to the spool file instead of `body`.
    var spooledBytes = 0
    /// The body's first bytes (spooled or not), for an error that quotes the server.
    var excerpt: [UInt8] = []

    /// How many bytes of a body `excerpt` keeps.
    static let excerptLength = 200

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

    /// `excerpt` as printable text (control bytes and invalid UTF-8 shown as `?`), for an error.
    var quoted: String {
        let text = String(decoding: excerpt, as: UTF8.self).unicodeScalars.map { scalar -> String in
            scalar == "\u{FFFD}" || (scalar.properties.generalCategory == .control && scalar != " ") ? "?" : String(scalar)
        }.joined()
        return "\"" + text + (excerpt.count >= Self.excerptLength ? "…" : "") + "\""
    }
}

/// When a transfer counts as stalled: less than `progressBytes` sent or received in
/// `seconds`. A slow link that keeps moving is never cut (a first clone of 1 GiB may take an
/// hour); one byte every 20 s is not moving.
struct StallRule: Sendable {
    var seconds: TimeInterval
    /// What counts as progress: this many more bytes (or an answer's head).
    static let progressBytes = 1024

    /// `BINDER_STALL_SECONDS` (not a secret; for tests), else 60 s.
    static var configured: StallRule {
        StallRule(seconds: ProcessInfo.processInfo.environment["BINDER_STALL_SECONDS"].flatMap { Double($0) }.map { max(0.5, $0) } ?? 60)
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
    /// `.offline` when no answer came (refused, reset, timed out, stalled), `.untrusted` for a
    /// certificate, `.server` for an answer past the cap, `.garbled` for one that is not HTTP,
    /// `.storage` when the spool file cannot be written.
    ///
    /// The exchange is watched: it is given up when it makes no progress (`StallRule`), or,
    /// with a deadline, when `patience` runs out; each progress is reported to `patience`. A
    /// bounded answer (`limits.deadline`) also ends within that time and what is left of the
    /// patience. With `spool`, a 2xx body is written to that file descriptor (not held in
    /// memory) and `HTTPAnswer.spooledBytes` says how much; other answers are read into
    /// memory (their words), at most 64 KiB.
    static func send(method: HTTPMethod, url: String, headers: [(String, String)], body: [UInt8]?,
                     limits: AnswerLimits, patience: TransferPatience? = nil, spool: Int32? = nil) throws(SyncError) -> HTTPAnswer {
        let host = URL(string: url)?.host ?? "the server"
        let request: HTTPClient.Request
        do {
            var fields = HTTPHeaders()
            for (name, value) in headers { fields.add(name: name, value: value) }
            request = try HTTPClient.Request(url: url, method: method, headers: fields, body: body.map(chunked))
        } catch {
            throw .configuration("bad URL \(url)")
        }
        let stall = StallRule.configured
        let delegate = WatchedCollector(limit: limits.maxBytes, spool: spool, patience: patience, stall: stall)
        // A bounded answer ends within its time and what is left of the deadline; an unbounded
        // one (a pack) only when it stops moving: the watchdog.
        let seconds = limits.deadline.map { min($0, patience?.remaining ?? $0) }
        let deadline = seconds.map { NIODeadline.now() + .milliseconds(Int64($0 * 1000)) }
        do {
            let task = client.execute(request: request, delegate: delegate, deadline: deadline)
            let every = TimeAmount.milliseconds(Int64(min(1, stall.seconds / 4) * 1000))
            let watchdog = task.eventLoop.scheduleRepeatedTask(initialDelay: every, delay: every) { _ in
                if let reason = delegate.giveUpReason() { task.fail(reason: reason) }
            }
            defer { watchdog.cancel() }
            return try task.wait()
        } catch let error as AnswerTooLarge {
            throw .server(status: error.status, message: "the answer from \(host) is larger than \(error.limit) bytes (stopped reading)")
        } catch let error as NoProgress {
            switch error {
            case .stalled(let seconds):
                throw .offline("\(host) sent less than \(StallRule.progressBytes) bytes in \(Self.seconds(seconds)) (stalled)")
            case .deadline(let seconds):
                throw .offline("\(host) stopped answering (nothing in \(Self.seconds(seconds)), the deadline)")
            }
        } catch let error as SpoolFailure {
            throw .storage("cannot write what \(host) sends to disk: \(String(cString: strerror(error.errno)))", errno: error.errno)
        } catch {
            throw classify(error, host: host)
        }
    }

    /// "60 s", "0.5 s".
    static func seconds(_ value: TimeInterval) -> String {
        value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }

    /// A request body sent in 64 KiB parts, so that a slow upload shows progress part by part
    /// (AsyncHTTPClient's own `.bytes` writes 4 MiB at a time).
    static func chunked(_ bytes: [UInt8]) -> HTTPClient.Body {
        let part = 64 * 1024
        guard bytes.count > part else { return .bytes(bytes) }
        return .stream(contentLength: Int64(bytes.count)) { writer in
            @Sendable func write(from offset: Int) -> EventLoopFuture<Void> {
                let end = min(offset + part, bytes.count)
                let sent = writer.write(.byteBuffer(ByteBuffer(bytes: bytes[offset..<end])))
                return end == bytes.count ? sent : sent.flatMap { write(from: end) }
            }
            return write(from: 0)
        }
    }

    /// Words for a failed exchange, by the error's type: a TLS failure is `.untrusted` (no
    /// use retrying), anything else that kept an answer from arriving is `.offline`.
    static func classify(_ error: any Error, host: String) -> SyncError {
        switch error {
        case is NIOSSLError, is BoringSSLError, is NIOSSLExtraError:
            return .untrusted("\(host): \(error)")
        case let parser as HTTPParserError:
            // Bytes came back, but not HTTP: an answer, not a network failure.
            return .garbled("\(host) answered with something that is not HTTP (\(parser))")
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

/// Why the watchdog gave an exchange up.
enum NoProgress: Error {
    /// Less than `StallRule.progressBytes` in this many seconds.
    case stalled(TimeInterval)
    /// The command's deadline passed without progress.
    case deadline(TimeInterval)
}

/// Writing the spool file failed (a full disk, say).
struct SpoolFailure: Error {
    let errno: Int32
}

/// Collects an answer's body up to `limit` bytes, in memory or into `spool`; fails the request
/// (closing the connection) as soon as a `Content-Length` or the bytes received go past it.
/// Keeps when the exchange last made progress, for the watchdog (`giveUpReason`).
private final class WatchedCollector: HTTPClientResponseDelegate, Sendable {
    typealias Response = HTTPAnswer
    let limit: Int
    let spool: Int32?
    let patience: TransferPatience?
    let stall: StallRule

    struct State {
        var answer = HTTPAnswer(status: 0, contentType: nil, body: [])
        /// The body goes to `spool` (a 2xx answer with a spool file).
        var spooling = false
        /// When the last `StallRule.progressBytes` (or the head, or a request part) went.
        var lastProgress = NIODeadline.now()
        /// Bytes since then.
        var sinceProgress = 0
    }
    /// Touched from the request's event loop and the watchdog (the same loop); the Mutex makes
    /// that checkable.
    private let state = Mutex(State())

    init(limit: Int, spool: Int32?, patience: TransferPatience?, stall: StallRule) {
        self.limit = limit
        self.spool = spool
        self.patience = patience
        self.stall = stall
    }

    /// Why to give up now, if so.
    func giveUpReason() -> NoProgress? {
        let idle = state.withLock { NIODeadline.now() - $0.lastProgress }
        if idle > .milliseconds(Int64(stall.seconds * 1000)) { return .stalled(stall.seconds) }
        if let patience, let deadline = patience.deadline, patience.remaining == 0 { return .deadline(deadline) }
        return nil
    }

    /// `count` more bytes moved (or, with `count` nil, something that is progress in itself).
    private func moved(_ count: Int?, counts: Bool) {
        let progressed = state.withLock { state -> Bool in
            state.sinceProgress += count ?? StallRule.progressBytes
            guard state.sinceProgress >= StallRule.progressBytes else { return false }
            state.sinceProgress = 0
            state.lastProgress = .now()
            return true
        }
        if progressed && counts { patience?.progressed() }
    }

    func didSendRequestPart(task: HTTPClient.Task<HTTPAnswer>, _ part: IOData) {
        moved(part.readableBytes, counts: true)
    }

    func didReceiveHead(task: HTTPClient.Task<HTTPAnswer>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        let status = Int(head.status.code)
        let retryAfter = head.headers.first(name: "Retry-After").flatMap { HTTPAnswer.retryAfter($0) }
        let spooling = spool != nil && (200..<300).contains(status)
        state.withLock {
            $0.answer.status = status
            $0.answer.contentType = head.headers.first(name: "Content-Type")
            $0.answer.retryAfter = retryAfter
            $0.spooling = spooling
        }
        // Only an answer that says yes is progress for the deadline: a server answering 503
        // on every try is not getting anywhere.
        moved(nil, counts: (200..<300).contains(status))
        let cap = spool != nil && !spooling ? min(limit, 64 * 1024) : limit
        if let length = head.headers.first(name: "Content-Length").flatMap({ Int($0) }), length > cap {
            return task.eventLoop.makeFailedFuture(AnswerTooLarge(status: status, limit: cap))
        }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<HTTPAnswer>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        let failure: (any Error)? = state.withLock { state in
            let received = state.answer.body.count + state.answer.spooledBytes
            let cap = spool != nil && !state.spooling ? min(limit, 64 * 1024) : limit
            guard received + buffer.readableBytes <= cap else { return AnswerTooLarge(status: state.answer.status, limit: cap) }
            if state.answer.excerpt.count < HTTPAnswer.excerptLength {
                state.answer.excerpt.append(contentsOf: buffer.readableBytesView.prefix(HTTPAnswer.excerptLength - state.answer.excerpt.count))
            }
            guard state.spooling, let spool else {
                state.answer.body.append(contentsOf: buffer.readableBytesView)
                return nil
            }
            // A plain write on the event loop: a local file, in parts of at most 64 KiB as
            // they arrive; waiting for the disk here also slows the reading (back pressure).
            let written = buffer.withUnsafeReadableBytes { SpoolFile.append($0, to: spool) }
            if written != 0 { return SpoolFailure(errno: written) }
            state.answer.spooledBytes += buffer.readableBytes
            return nil
        }
        if let failure { return task.eventLoop.makeFailedFuture(failure) }
        moved(buffer.readableBytes, counts: true)
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didFinishRequest(task: HTTPClient.Task<HTTPAnswer>) throws -> HTTPAnswer {
        state.withLock { $0.answer }
    }
}
