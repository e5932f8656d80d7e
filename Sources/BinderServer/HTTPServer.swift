import Dispatch
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import NIOPosix

/// `binder serve`: the mgit-api protocol over HTTP/1.1 on SwiftNIO. Request bodies may be
/// chunked or gzip/deflate-encoded; each request is answered off the event loops (git runs as
/// a child process).
public final class BinderServer: Sendable {
    public struct Options: Sendable {
        public var repositories: String
        public var host: String
        public var port: Int
        public var tokenLifetime: Int64
        public var rotateSecret: Bool
        public var publicURL: String?
        public var faultRate: Double
        /// Largest request body accepted, after decompression.
        public var maxBodyBytes: Int

        public init(repositories: String, host: String = "127.0.0.1", port: Int = 8417, tokenLifetime: Int64 = 86_400,
                    rotateSecret: Bool = false, publicURL: String? = nil, faultRate: Double = 0,
                    maxBodyBytes: Int = 2 << 30) {
            self.repositories = repositories
            self.host = host
            self.port = port
            self.tokenLifetime = tokenLifetime
            self.rotateSecret = rotateSecret
            self.publicURL = publicURL
            self.faultRate = faultRate
            self.maxBodyBytes = maxBodyBytes
        }
    }

    private let options: Options
    private let router: Router
    private let group: MultiThreadedEventLoopGroup
    private let logger: Logger

    public init(options: Options, logger: Logger) throws {
        self.options = options
        self.logger = logger
        try FileManager.default.createDirectory(atPath: options.repositories + "/.binder-serve",
                                                withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let secret = try TokenAuthority.loadSecret(at: options.repositories + "/.binder-serve/jwt-secret",
                                                   rotate: options.rotateSecret)
        router = Router(repositories: RepositoryStore(root: options.repositories),
                        tokens: TokenAuthority(secret: secret, lifetime: options.tokenLifetime),
                        logger: logger, publicURL: options.publicURL, faultRate: options.faultRate)
        group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
    }

    /// Binds and serves until `SIGINT`/`SIGTERM`; `ready` is told the bound port first.
    public func run(ready: (Int) -> Void) throws {
        let router = self.router, limit = options.maxBodyBytes, logger = self.logger
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(NIOHTTPRequestDecompressor(limit: .size(limit)))
                    try channel.pipeline.syncOperations.addHandler(RequestHandler(router: router, limit: limit, logger: logger))
                }
            }
            .childChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
        let channel: Channel
        do {
            channel = try bootstrap.bind(host: options.host, port: options.port).wait()
        } catch {
            try? group.syncShutdownGracefully()
            throw ServerError.setup("cannot listen on \(options.host):\(options.port): \(error)")
        }
        let signals = [SIGINT, SIGTERM].map { number -> DispatchSourceSignal in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { channel.close(promise: nil) }
            source.resume()
            return source
        }
        ready(channel.localAddress?.port ?? options.port)
        try channel.closeFuture.wait()
        signals.forEach { $0.cancel() }
        try group.syncShutdownGracefully()
    }
}

/// Collects one request (head, body, end), hands it to the router on a global queue, and
/// writes the response back on the channel's event loop.
private final class RequestHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let router: Router
    private let limit: Int
    private let logger: Logger
    // Event-loop confined (a channel handler is only called on its loop).
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    private var tooLarge = false
    private var bodyLimit = 0
    static let anonymousLimit = 64 << 10

    init(router: Router, limit: Int, logger: Logger) {
        self.router = router
        self.limit = limit
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = []
            tooLarge = false
            // Only a login may come without a token, and its body is small: an anonymous client
            // cannot make the server buffer much.
            bodyLimit = head.headers.contains(name: "authorization") ? limit : Self.anonymousLimit
        case .body(var chunk):
            if body.count + chunk.readableBytes > bodyLimit { tooLarge = true; return }
            if let bytes = chunk.readBytes(length: chunk.readableBytes) { body += bytes }
        case .end:
            guard let head else { return }
            self.head = nil
            let keepAlive = head.isKeepAlive
            let version = head.version
            let started = DispatchTime.now()
            let loop = context.eventLoop
            let bound = NIOLoopBound(context, eventLoop: loop)
            if tooLarge {
                respond(bound, loop, Response.error(413, "request body too large"), version: version, keepAlive: false)
                return
            }
            let request = Self.request(head, body: body)
            body = []
            let router = self.router, logger = self.logger
            DispatchQueue.global().async {
                let response = router.handle(request)
                let ms = Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e6
                // Never the query string or headers: a token could be in them.
                logger.info("\(request.method) \(request.path) \(response.status)",
                            metadata: ["ms": "\(Int(ms))", "in": "\(request.body.count)", "out": "\(response.body.count)"])
                Self.respond(bound, loop, response, version: version, keepAlive: keepAlive)
            }
        }
    }

    private func respond(_ bound: NIOLoopBound<ChannelHandlerContext>, _ loop: EventLoop, _ response: Response,
                         version: HTTPVersion, keepAlive: Bool) {
        Self.respond(bound, loop, response, version: version, keepAlive: keepAlive)
    }

    private static func respond(_ bound: NIOLoopBound<ChannelHandlerContext>, _ loop: EventLoop, _ response: Response,
                                version: HTTPVersion, keepAlive: Bool) {
        loop.execute {
            let context = bound.value
            var headers = HTTPHeaders()
            for (name, value) in response.headers { headers.add(name: name, value: value) }
            headers.add(name: "Content-Length", value: "\(response.body.count)")
            headers.add(name: "Connection", value: keepAlive ? "keep-alive" : "close")
            let head = HTTPResponseHead(version: version, status: HTTPResponseStatus(statusCode: response.status),
                                        headers: headers)
            context.write(NIOAny(HTTPServerResponsePart.head(head)), promise: nil)
            if !response.body.isEmpty {
                let buffer = context.channel.allocator.buffer(bytes: response.body)
                context.write(NIOAny(HTTPServerResponsePart.body(.byteBuffer(buffer))), promise: nil)
            }
            let done = context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)))
            if !keepAlive {
                done.whenComplete { _ in bound.value.close(promise: nil) }
            }
        }
    }

    private static func request(_ head: HTTPRequestHead, body: [UInt8]) -> Request {
        let (path, query) = RequestTarget.split(head.uri)
        var headers: [String: String] = [:]
        for (name, value) in head.headers { headers[name.lowercased()] = value }
        return Request(method: head.method.rawValue, path: path, query: query, headers: headers, body: body)
    }
}
