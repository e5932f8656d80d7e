import NIOCore
import NIOHTTPTypes
import Synchronization

/// The limits a connection lives under (see `ConnectionGuard`).
public struct ConnectionLimits: Sendable {
    /// Connections one remote address may hold open at once; more are closed on arrival.
    public var perAddress: Int
    /// A request's head must have arrived this long after the connection opened or the last
    /// response ended; otherwise the connection is closed (slow or absent headers, idle keep-alive).
    public var headerTimeout: Duration
    /// While a body is being received: the longest time without a byte of it (a stalled
    /// client is cut), and the grace before `bodyMinimumRate` applies.
    public var bodyWindow: Duration
    /// Bytes a second a body must average, counted from its head, past the first `bodyWindow`:
    /// a client trickling a body is cut however steadily it trickles. 1 KiB/s (8 kbit/s) is
    /// far below a slow mobile link, which therefore pushes a pack of any size; the pause of a
    /// link that drops out for less than `bodyWindow` is made up as it resumes.
    public var bodyMinimumRate: Int

    public init(perAddress: Int = 32, headerTimeout: Duration = .seconds(10), bodyWindow: Duration = .seconds(15),
                bodyMinimumRate: Int = 1024) {
        self.perAddress = perAddress
        self.headerTimeout = headerTimeout
        self.bodyWindow = bodyWindow
        self.bodyMinimumRate = bodyMinimumRate
    }
}

/// How many connections each remote address holds, shared by all connections.
final class AddressLedger: Sendable {
    /// Guards the open connections per address.
    private let open = Mutex<[String: Int]>([:])

    /// Counts one more connection from `address`; false (and not counted) past `limit`.
    func admit(_ address: String, limit: Int) -> Bool {
        open.withLock { open in
            let count = open[address, default: 0]
            guard count < limit else { return false }
            open[address] = count + 1
            return true
        }
    }

    func leave(_ address: String) {
        open.withLock { open in
            let count = open[address, default: 1] - 1
            open[address] = count > 0 ? count : nil
        }
    }
}

/// One per connection, just after Hummingbird's HTTP decoding, on the connection's event loop:
/// enforces the per-address cap, the header timeout and the body's progress (no pause as long
/// as `bodyWindow`, and at least `bodyMinimumRate` on average), and ends the connection once
/// a response has been sent before its request's body was read: a refused upload is not read
/// on. The close lingers (output shut, at most `lingerBytes` more discarded for at most
/// `lingerTime`) so that the client, still sending, reads the answer instead of a reset.
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let limits: ConnectionLimits
    private let ledger: AddressLedger
    // Event-loop confined (a channel handler is only called on its loop).
    private var address: String?
    private var readingBody = false
    /// Requests received in full, and responses sent in full, on this connection: a response
    /// that ends before its request did answered a body that was never read.
    private var requestsReceived = 0
    private var responsesSent = 0
    /// The body being received: when its head came, its bytes so far, when the last arrived.
    private var bodyStarted = NIODeadline.now()
    private var bodyBytes = 0
    private var lastBodyBytes = NIODeadline.now()
    private var timer: Scheduled<Void>?
    /// Set once the answer to an unread body is out: what arrives now is thrown away.
    private var discarding = false
    private var discarded = 0
    static let lingerBytes = 4 << 20
    static let lingerTime: Duration = .seconds(2)
    /// How often a body's progress is looked at.
    static let progressCheck: Duration = .seconds(1)

    init(limits: ConnectionLimits, ledger: AddressLedger) {
        self.limits = limits
        self.ledger = ledger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { admit(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        admit(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel(); timer = nil
        if let address { ledger.leave(address); self.address = nil }
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel(); timer = nil
        if let address { ledger.leave(address); self.address = nil }
    }

    private func admit(_ context: ChannelHandlerContext) {
        guard address == nil else { return }
        let remote = context.channel.remoteAddress?.ipAddress ?? "unknown"
        guard ledger.admit(remote, limit: limits.perAddress) else {
            context.close(promise: nil)
            return
        }
        address = remote
        awaitHead(context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        if discarding {
            if case .body(let chunk) = part { discarded += chunk.readableBytes }
            if discarded > Self.lingerBytes { context.close(promise: nil) }
            return
        }
        switch part {
        case .head:
            readingBody = true
            bodyStarted = .now()
            lastBodyBytes = bodyStarted
            bodyBytes = 0
            schedule(context, after: Self.progressCheck) { handler, context in handler.checkBodyProgress(context) }
        case .body(let chunk):
            bodyBytes += chunk.readableBytes
            if chunk.readableBytes > 0 { lastBodyBytes = .now() }
        case .end:
            readingBody = false
            requestsReceived += 1
            timer?.cancel(); timer = nil   // answering may take as long as git takes
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .end = unwrapOutboundIn(data) else {
            context.write(data, promise: promise)
            return
        }
        responsesSent += 1
        if responsesSent > requestsReceived {
            // Answered before the body was read (refused): close rather than drain it.
            discarding = true
            let written = context.writeAndFlush(data)
            written.cascade(to: promise)
            written.assumeIsolated().whenComplete { _ in context.close(mode: .output, promise: nil) }
            schedule(context, after: Self.lingerTime) { _, context in context.close(promise: nil) }
            return
        }
        context.write(data, promise: promise)
        // Idle now (nothing being received or answered): the next head has its deadline.
        if !readingBody && requestsReceived == responsesSent { awaitHead(context) }
    }

    private func awaitHead(_ context: ChannelHandlerContext) {
        schedule(context, after: limits.headerTimeout) { _, context in context.close(promise: nil) }
    }

    private func checkBodyProgress(_ context: ChannelHandlerContext) {
        guard readingBody else { return }
        let now = NIODeadline.now(), window = TimeAmount(limits.bodyWindow)
        let owed = Double(limits.bodyMinimumRate) * Double(max(0, (now - bodyStarted - window).nanoseconds)) / 1e9
        guard now - lastBodyBytes < window, Double(bodyBytes) >= owed else {
            context.close(promise: nil)
            return
        }
        schedule(context, after: Self.progressCheck) { handler, context in handler.checkBodyProgress(context) }
    }

    private func schedule(_ context: ChannelHandlerContext, after delay: Duration,
                          _ action: @escaping (ConnectionGuard, ChannelHandlerContext) -> Void) {
        timer?.cancel()
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(delay)) { [self] in
            timer = nil
            action(self, context)
        }
    }
}
