import Hummingbird
import Prometheus
import Synchronization

/// What `/metrics` tells, in Prometheus' text format, from a registry of this server's own
/// (not swift-metrics' global one: tests run several servers in one process). Every label is
/// from a small closed set: the route's template (`/api/mgit/repos/{repoId}/info/refs`, never
/// the id), the method (one of the standard ones, else `other`), the status code. Repository
/// ids, keys, tokens and addresses are never a label, so a scrape reveals none of them.
final class ServeMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    /// Connections open now (`ConnectionGuard`).
    let openConnections: Gauge
    /// Requests being answered now (from the router to their answer's last byte).
    let requestsInProgress: Gauge
    /// Requests waiting for their address's turn now, and those answered 503 after waiting.
    let queuedRequests: Gauge
    let refusedOverCap: Counter
    /// Body bytes received and sent, counted on the connections (after HTTP framing, before
    /// any decompression of a request).
    let bytesIn: Counter
    let bytesOut: Counter

    static let latencyBuckets: [Duration] = [.milliseconds(5), .milliseconds(25), .milliseconds(100), .milliseconds(250),
                                             .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
                                             .seconds(30), .seconds(60)]
    private static let methods: Set<String> = ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"]

    init() {
        openConnections = registry.makeGauge(descriptor: .init(namespace: "binder", metricName: "open_connections", unitName: "",
                                                               helpText: "HTTP connections open now"))
        requestsInProgress = registry.makeGauge(descriptor: .init(namespace: "binder", subsystem: "http", metricName: "requests_in_progress",
                                                                  unitName: "", helpText: "Requests being answered now"))
        queuedRequests = registry.makeGauge(descriptor: .init(namespace: "binder", metricName: "queued_requests", unitName: "",
                                                              helpText: "Requests waiting past their address's cap now"))
        refusedOverCap = registry.makeCounter(descriptor: .init(namespace: "binder", metricName: "refused_over_cap", unitName: "total",
                                                                helpText: "Requests answered 503 past their address's cap and queue"))
        bytesIn = registry.makeCounter(descriptor: .init(namespace: "binder", subsystem: "http", metricName: "received",
                                                         unitName: "bytes_total", helpText: "Request body bytes received"))
        bytesOut = registry.makeCounter(descriptor: .init(namespace: "binder", subsystem: "http", metricName: "sent",
                                                          unitName: "bytes_total", helpText: "Response body bytes sent"))
    }

    /// Counts one answered request of `route` (a template) and its time.
    func record(route: String, method: String, status: Int, duration: Duration) {
        let method = Self.methods.contains(method) ? method : "other"
        let status = (100...599).contains(status) ? "\(status)" : "other"
        registry.makeCounter(descriptor: .init(namespace: "binder", subsystem: "http", metricName: "requests", unitName: "total",
                                               helpText: "Requests answered, by route template, method and status"),
                             labels: [("route", route), ("method", method), ("status", status)]).increment()
        registry.makeDurationHistogram(descriptor: .init(namespace: "binder", subsystem: "http", metricName: "request_duration",
                                                         unitName: "seconds",
                                                         helpText: "Time from a request's head to its answer's end"),
                                       labels: [("route", route), ("status", status)], buckets: Self.latencyBuckets)
            .record(duration)
        if method == "POST" && route.hasSuffix("/git-receive-pack") {
            registry.makeCounter(descriptor: .init(namespace: "binder", subsystem: "git", metricName: "pushes", unitName: "total",
                                                   helpText: "git pushes answered, by status"),
                                 labels: [("status", status)]).increment()
        }
    }

    /// The database pool's use, set as a scrape comes (`PostgresStorage.operationsInFlight`).
    func observeDatabase(operationsInFlight: Int, maximumConnections: Int) {
        registry.makeGauge(descriptor: .init(namespace: "binder", subsystem: "database", metricName: "operations_in_flight",
                                             unitName: "", helpText: "Database operations holding or waiting for a pool connection now"))
            .set(to: Double(operationsInFlight))
        registry.makeGauge(descriptor: .init(namespace: "binder", subsystem: "database", metricName: "connections_maximum",
                                             unitName: "", helpText: "Connections this replica's pool opens at most"))
            .set(to: Double(maximumConnections))
    }

    /// The registry's text, as Prometheus scrapes it.
    func exposition() -> [UInt8] {
        registry.emitToBuffer()
    }
}

/// Records each request in `ServeMetrics` once its answer's body is sent: its route's template
/// (`context.endpointPath`; `unmatched` for a path no route has), method, status and time.
struct MetricsRecorder: RouterMiddleware {
    typealias Context = ServeContext
    let metrics: ServeMetrics

    func handle(_ request: Request, context: ServeContext, next: (Request, ServeContext) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        let method = request.method.rawValue
        let inProgress = InProgress(metrics.requestsInProgress)
        do {
            var response = try await next(request, context)
            let status = response.status.code, route = context.endpointPath ?? "unmatched"
            let body = response.body
            // Counted once the body is written (or fails); a body never written (the
            // connection gone first) ends `inProgress` as the closure is dropped.
            response.body = ResponseBody(contentLength: body.contentLength) { [metrics] writer in
                defer {
                    inProgress.end()
                    metrics.record(route: route, method: method, status: status, duration: started.duration(to: .now))
                }
                try await body.write(writer)
            }
            return response
        } catch {
            inProgress.end()
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            metrics.record(route: context.endpointPath ?? "unmatched", method: method, status: status,
                           duration: started.duration(to: .now))
            throw error
        }
    }
}

/// One request in `ServeMetrics.requestsInProgress`: counted at creation, uncounted once, by
/// `end` or when the last reference goes (an answer dropped unwritten).
final class InProgress: Sendable {
    private let gauge: Gauge
    private let ended = Atomic<Bool>(false)

    init(_ gauge: Gauge) {
        self.gauge = gauge
        gauge.increment()
    }

    func end() {
        if !ended.exchange(true, ordering: .relaxed) { gauge.decrement() }
    }

    deinit { end() }
}
