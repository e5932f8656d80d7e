import Foundation
import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// The limits a connection lives under (see `ConnectionGuard`).
public struct ConnectionLimits: Sendable {
    /// Slots one client address may hold at once: connections for a client that connects
    /// itself, requests in progress for one behind a trusted proxy (`ClientAddressRule`).
    public var perAddress: Int
    /// Past `perAddress`, this many more wait for a slot, at most `queueWait` each; past the
    /// queue or the wait, the answer is 503 with `Retry-After` (git does not retry, so a brief
    /// wait serves a burst; an HTTP answer tells the user why, where a reset would not).
    public var queuePerAddress: Int
    public var queueWait: Duration
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
    /// Whose word is taken for the client's address (`--trusted-proxy`).
    public var clientAddress: ClientAddressRule

    public init(perAddress: Int = 32, queuePerAddress: Int? = nil, queueWait: Duration = .seconds(5),
                headerTimeout: Duration = .seconds(10), bodyWindow: Duration = .seconds(15), bodyMinimumRate: Int = 1024,
                clientAddress: ClientAddressRule = ClientAddressRule()) {
        self.perAddress = perAddress
        self.queuePerAddress = queuePerAddress ?? perAddress
        self.queueWait = queueWait
        self.headerTimeout = headerTimeout
        self.bodyWindow = bodyWindow
        self.bodyMinimumRate = bodyMinimumRate
        self.clientAddress = clientAddress
    }
}

/// One per connection, just after Hummingbird's HTTP decoding, on the connection's event loop:
/// enforces the per-address cap, the header timeout and the body's progress (no pause as long
/// as `bodyWindow`, and at least `bodyMinimumRate` on average), and ends the connection once
/// a response has been sent before its request's body was read: a refused upload is not read
/// on. The close lingers (output shut, at most `lingerBytes` more discarded for at most
/// `lingerTime`) so that the client, still sending, reads the answer instead of a reset.
///
/// The cap counts slots in `AddressLedger`. A client that connects itself holds one per
/// connection, taken as it opens (its address is the socket's). A request through a trusted
/// proxy names its client only in its head, so it holds one from its head to its answer's
/// end, under the address `ClientAddressRule` reads; the proxy's connections count nothing
/// (a request pipelined behind one in progress rides on its slot: proxies do not pipeline).
/// Past the cap the connection (or the request) waits in the address's queue with nothing
/// read; past the queue or `queueWait` it is answered 503 with `Retry-After`.
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let limits: ConnectionLimits
    private let ledger: AddressLedger
    private let metrics: ServeMetrics?
    // Event-loop confined (a channel handler is only called on its loop).
    private var peer = "unknown"
    private var peerIsProxy = false
    private var opened = false
    /// The address whose slot this connection holds, for its lifetime (a direct client).
    private var connectionSlot: String?
    /// The address whose slot the request in progress holds (a client behind a proxy).
    private var requestSlot: String?
    /// Waiting for a slot: the ticket, and the parts read meanwhile (the head first).
    private var ticket: AddressLedger.Ticket?
    private var held: [HTTPRequestPart] = []
    /// While waiting, reads are not passed on (nothing more is read); one asked for meanwhile
    /// is passed on once the slot comes.
    private var readsHeld = false
    private var readPending = false
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

    init(limits: ConnectionLimits, ledger: AddressLedger, metrics: ServeMetrics? = nil) {
        self.limits = limits
        self.ledger = ledger
        self.metrics = metrics
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { open(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        open(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        finish()
    }

    private func finish() {
        timer?.cancel(); timer = nil
        if let ticket, !ledger.cancel(ticket) { ledger.release(ticket.address) }   // granted meanwhile: give it back
        if ticket != nil { metrics?.queuedRequests.decrement() }
        ticket = nil
        held = []
        if let connectionSlot { ledger.release(connectionSlot); self.connectionSlot = nil }
        if let requestSlot { ledger.release(requestSlot); self.requestSlot = nil }
        if opened { metrics?.openConnections.decrement(); opened = false }
    }

    private func open(_ context: ChannelHandlerContext) {
        guard !opened else { return }
        opened = true
        metrics?.openConnections.increment()
        peer = context.channel.remoteAddress?.ipAddress ?? "unknown"
        peerIsProxy = limits.clientAddress.trusts(peer)
        if peerIsProxy { awaitHead(context); return }
        let client = limits.clientAddress.client(peer: peer, headers: [:])
        wait(context, for: client) { handler, context in
            handler.connectionSlot = client
            handler.awaitHead(context)
        }
    }

    /// Takes a slot for `address`, or waits for one (reads held), or answers 503.
    private func wait(_ context: ChannelHandlerContext, for address: String,
                      then proceed: @escaping (ConnectionGuard, ChannelHandlerContext) -> Void) {
        let loop = context.eventLoop
        let bound = NIOLoopBound((self, context, proceed), eventLoop: loop)
        let acquired = ledger.acquire(address, limit: limits.perAddress, queue: limits.queuePerAddress) {
            loop.execute {
                let (handler, context, proceed) = bound.value
                handler.granted(context, proceed)
            }
        }
        switch acquired {
        case .granted:
            proceed(self, context)
        case .refused:
            refuse(context)
        case .queued(let ticket):
            self.ticket = ticket
            metrics?.queuedRequests.increment()
            readsHeld = true
            schedule(context, after: limits.queueWait) { handler, context in
                guard let ticket = handler.ticket else { return }
                // Still queued: leave it and answer; else the slot's grant is on its way.
                if handler.ledger.cancel(ticket) {
                    handler.ticket = nil
                    handler.metrics?.queuedRequests.decrement()
                    handler.refuse(context)
                }
            }
        }
    }

    private func granted(_ context: ChannelHandlerContext, _ proceed: (ConnectionGuard, ChannelHandlerContext) -> Void) {
        guard ticket != nil else { return }   // closed meanwhile: `finish` gave the slot back
        ticket = nil
        metrics?.queuedRequests.decrement()
        timer?.cancel(); timer = nil
        proceed(self, context)
        guard context.channel.isActive else { return }
        readsHeld = false
        let parts = held
        held = []
        for part in parts { channelRead(context: context, data: wrapInboundOut(part)) }
        // The parts held were read in an earlier read cycle: end this one, or the stream
        // after us (NIOAsyncChannel) keeps them until the next read completes.
        context.fireChannelReadComplete()
        if readPending { readPending = false; context.read() }
    }

    /// 503 with `Retry-After`, then the connection's lingering close: what the client sends
    /// meanwhile is read and thrown away, so that it reads this answer, not a reset.
    private func refuse(_ context: ChannelHandlerContext) {
        metrics?.refusedOverCap.increment()
        held = []
        let seconds = max(1, limits.queueWait.components.seconds)
        let body = ByteBuffer(string: #"{"error":"too many requests from your address at once; try again shortly"}"# + "\n")
        var head = HTTPResponse(status: .serviceUnavailable)
        head.headerFields[.contentType] = "application/json"
        head.headerFields[.contentLength] = "\(body.readableBytes)"
        head.headerFields[.retryAfter] = "\(seconds)"
        head.headerFields[.connection] = "close"
        discarding = true
        readingBody = false
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
            context.close(mode: .output, promise: nil)
        }
        schedule(context, after: Self.lingerTime) { _, context in context.close(promise: nil) }
        readsHeld = false
        readPending = false
        context.read()
    }

    func read(context: ChannelHandlerContext) {
        if readsHeld { readPending = true; return }
        context.read()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        if discarding {
            if case .body(let chunk) = part { discarded += chunk.readableBytes }
            if discarded > Self.lingerBytes { context.close(promise: nil) }
            return
        }
        if ticket != nil {
            held.append(part)   // read before the wait began: passed on with the slot
            return
        }
        switch part {
        case .head(let request):
            if peerIsProxy && requestSlot == nil {
                let client = limits.clientAddress.client(peer: peer, headers: request.headerFields)
                timer?.cancel(); timer = nil
                held = [part]
                wait(context, for: client) { handler, context in
                    handler.requestSlot = client
                    let parts = handler.held
                    handler.held = []
                    for part in parts { handler.forward(context, part) }
                }
                return
            }
        default:
            break
        }
        forward(context, part)
    }

    /// Passes `part` on, keeping the header and body clocks.
    private func forward(_ context: ChannelHandlerContext, _ part: HTTPRequestPart) {
        switch part {
        case .head:
            readingBody = true
            bodyStarted = .now()
            lastBodyBytes = bodyStarted
            bodyBytes = 0
            schedule(context, after: Self.progressCheck) { handler, context in handler.checkBodyProgress(context) }
        case .body(let chunk):
            bodyBytes += chunk.readableBytes
            metrics?.bytesIn.increment(by: Int64(chunk.readableBytes))
            if chunk.readableBytes > 0 { lastBodyBytes = .now() }
        case .end:
            readingBody = false
            requestsReceived += 1
            timer?.cancel(); timer = nil   // answering may take as long as git takes
        }
        context.fireChannelRead(wrapInboundOut(part))
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let part = unwrapOutboundIn(data)
        if case .body(let chunk) = part { metrics?.bytesOut.increment(by: Int64(chunk.readableBytes)) }
        guard case .end = part else {
            context.write(data, promise: promise)
            return
        }
        responsesSent += 1
        if let requestSlot { ledger.release(requestSlot); self.requestSlot = nil }
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
