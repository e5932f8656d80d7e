import Hummingbird

/// Per-user and per-request limits of `binder serve` (all configurable; see ServeCommand).
public struct ServeLimits: Sendable {
    /// Repositories one user may own.
    public var repositoriesPerUser: Int
    /// Bytes one user's repositories may take on disk; a push may bring at most what is left.
    public var bytesPerUser: Int64
    /// Largest push (receive-pack body, decompressed).
    public var pushBytes: Int
    /// Largest fetch request (upload-pack body, decompressed: wants and haves).
    public var fetchRequestBytes: Int
    /// Largest JSON body (the login), for anyone.
    public var jsonBytes: Int
    /// Challenge and verify requests per minute from one address (each).
    public var loginsPerMinute: Int
    /// git processes running at once.
    public var gitProcesses: Int
    public var gitTimeout: Duration

    public init(repositoriesPerUser: Int = 100, bytesPerUser: Int64 = 1 << 30, pushBytes: Int = 512 << 20,
                fetchRequestBytes: Int = 8 << 20, jsonBytes: Int = 16 << 10, loginsPerMinute: Int = 30,
                gitProcesses: Int = 8, gitTimeout: Duration = .seconds(600)) {
        self.repositoriesPerUser = repositoriesPerUser
        self.bytesPerUser = bytesPerUser
        self.pushBytes = pushBytes
        self.fetchRequestBytes = fetchRequestBytes
        self.jsonBytes = jsonBytes
        self.loginsPerMinute = loginsPerMinute
        self.gitProcesses = gitProcesses
        self.gitTimeout = gitTimeout
    }
}

/// The mgit-api endpoints (docs/FORMAT.md, "The server"), one route collection per job:
/// login (`LoginRoutes`, open to anyone, rate-limited), the account's repositories and clone
/// QRs (`RepositoryRoutes`) and scan sessions (`ScanSessionRoutes`), both behind
/// `AccountAuthentication`, and git Smart HTTP (`SmartHTTPRoutes`, behind `FaultInjection` and
/// `GitAuthentication`). Every protected route has its token checked by middleware before a
/// byte of the body is read; bodies are read through `RequestBodyReader` within the route's
/// limit. What the server keeps is behind `ServerStorage`.
struct Routes: Sendable {
    let environment: ServeEnvironment
    /// Testing aid: this fraction of git requests fails with 503 (0: none).
    let faultRate: Double

    func register(on router: Router<ServeContext>) {
        let sweeper = ShareSweeper(storage: environment.storage, logger: environment.logger)
        router.addRoutes(LoginRoutes(environment: environment).collection())
        router.addRoutes(ScanSessionRoutes(environment: environment, sweeper: sweeper).collection())
        router.addRoutes(RepositoryRoutes(environment: environment).collection())
        router.addRoutes(SmartHTTPRoutes(environment: environment, sweeper: sweeper, faultRate: faultRate).collection())
    }

    /// Called once the server listens on `url`.
    func listening(at url: String) {
        environment.localURL.set(url)
    }
}
