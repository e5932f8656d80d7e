import BinderCrypto
import Foundation
import PostgresNIO

/// Login challenges in the database: issued by one replica, consumed once by any. The
/// consumption is one `DELETE … RETURNING`, so of two replicas answering the same challenge at
/// once exactly one gets the row. At most `perClient` pending per address (its oldest go
/// first); expired ones are dropped whenever a challenge is made.
struct PostgresChallenges: ChallengeStorage {
    let storage: PostgresStorage
    var lifetime: Int64 = 300
    var perClient: Int = 32

    func make(for address: String, now: Int64) async throws(StorageError) -> String {
        let challenge = Hex.encode(randomBytes(32))
        let expiry = now + lifetime, keep = Int64(perClient - 1), logger = storage.logger
        // One statement, one round trip (it was a transaction of three, five round trips with
        // BEGIN and COMMIT, at ~1 ms each the most of a challenge's cost). Both deletes see the
        // rows as they were: an expired row ranks below every live one by expiry, so the live
        // rows kept are the address's newest `keep` either way.
        try await storage.perform("cannot make a challenge") { client in
            try await client.exec("""
                WITH expired AS (DELETE FROM binder_challenges WHERE expires_at <= \(now)),
                surplus AS (DELETE FROM binder_challenges WHERE challenge IN (
                    SELECT challenge FROM binder_challenges WHERE address = \(address)
                    ORDER BY expires_at DESC OFFSET \(keep)))
                INSERT INTO binder_challenges (challenge, address, expires_at) VALUES (\(challenge), \(address), \(expiry))
                """, logger: logger)
        }
        return challenge
    }

    func consume(_ challenge: String, now: Int64) async throws(StorageError) -> Bool {
        let logger = storage.logger
        let expiries = try await storage.perform("cannot check a challenge") { client in
            try await client.rows("DELETE FROM binder_challenges WHERE challenge = \(challenge) RETURNING expires_at",
                                  as: Int64.self, logger: logger)
        }
        return expiries.contains { $0 > now }
    }
}

/// Scan sessions in the database, by their token's SHA-256 (a token is never stored): a
/// session opened through one replica opens the repository through any, and survives restarts.
struct PostgresScanSessions: ScanSessionStorage {
    let storage: PostgresStorage

    private static func digest(_ token: String) -> String { Hex.encode(sha256(Array(token.utf8))) }

    func open(repoId: String, owner: String, now: Int64, lifetime: Int64) async throws(StorageError) -> (token: String, expiresAt: Int64) {
        let token = "sctk_" + Hex.encode(randomBytes(32))
        let digest = Self.digest(token), expiry = now + lifetime, logger = storage.logger
        try await storage.perform("cannot open a scan session") { client in
            try await client.exec("""
                INSERT INTO binder_scan_sessions (token_digest, repository, owner, expires_at)
                VALUES (\(digest), \(repoId), \(owner), \(expiry))
                """, logger: logger)
        }
        return (token, expiry)
    }

    func repository(forToken token: String, now: Int64) async throws(StorageError) -> String? {
        let digest = Self.digest(token), logger = storage.logger
        return try await storage.perform("cannot check a scan token") { client in
            try await client.rows("""
                SELECT repository FROM binder_scan_sessions WHERE token_digest = \(digest) AND expires_at > \(now)
                """, as: String.self, logger: logger).first
        }
    }

    func revoke(token: String, owner: String) async throws(StorageError) -> (repoId: String, stillShared: Bool)? {
        let digest = Self.digest(token), logger = storage.logger
        // The CTE's DELETE is not visible to the SELECT's subquery: it excludes the row by key.
        let rows = try await storage.perform("cannot revoke a scan session") { client in
            var found: [(String, Bool)] = []
            for try await row in try await client.query("""
                WITH gone AS (DELETE FROM binder_scan_sessions WHERE token_digest = \(digest) AND owner = \(owner)
                              RETURNING repository)
                SELECT g.repository, EXISTS (SELECT 1 FROM binder_scan_sessions s
                                             WHERE s.repository = g.repository AND s.token_digest <> \(digest))
                FROM gone g
                """, logger: logger).decode((String, Bool).self) {
                found.append(row)
            }
            return found
        }
        return rows.first.map { (repoId: $0.0, stillShared: $0.1) }
    }

    func expire(now: Int64) async throws(StorageError) -> [String] {
        let logger = storage.logger
        return try await storage.perform("cannot expire scan sessions") { client in
            try await client.rows("""
                WITH gone AS (DELETE FROM binder_scan_sessions WHERE expires_at <= \(now) RETURNING repository)
                SELECT DISTINCT g.repository FROM gone g
                WHERE NOT EXISTS (SELECT 1 FROM binder_scan_sessions s WHERE s.repository = g.repository AND s.expires_at > \(now))
                """, as: String.self, logger: logger)
        }
    }

    func isShared(_ repoId: String) async throws(StorageError) -> Bool {
        let logger = storage.logger
        return try await storage.perform("cannot check a scan session") { client in
            try await client.rows("SELECT EXISTS (SELECT 1 FROM binder_scan_sessions WHERE repository = \(repoId))",
                                  as: Bool.self, logger: logger).first ?? false
        }
    }

    /// Due for one replica in all once a minute: the row's update is conditional, so of two
    /// replicas asking at once one sees the row returned.
    func orphanSweepDue(now: Date) async throws(StorageError) -> Bool {
        try await PostgresSweeps(storage: storage).due("orphans", every: 60, now: now)
    }
}

/// When a periodic job last ran, shared by the replicas (`binder_sweeps`).
struct PostgresSweeps {
    let storage: PostgresStorage

    /// True (and recorded) when `name` last ran `every` seconds ago or more, or never.
    func due(_ name: String, every seconds: Double, now: Date) async throws(StorageError) -> Bool {
        let time = now.timeIntervalSince1970, logger = storage.logger
        return try await storage.perform("cannot schedule \(name)") { client in
            try await !client.rows("""
                INSERT INTO binder_sweeps (name, last_run) VALUES (\(name), \(time))
                ON CONFLICT (name) DO UPDATE SET last_run = EXCLUDED.last_run
                WHERE binder_sweeps.last_run <= EXCLUDED.last_run - \(seconds)
                RETURNING 1
                """, as: Int.self, logger: logger).isEmpty
        }
    }
}

/// The login rate limits, shared by every replica: a fixed window per counter and address
/// (`perMinute` requests in each `window` seconds, the windows aligned on the database's
/// clock, so replicas with skewed clocks agree). Coarser than the folder store's token
/// bucket (a client may spend two allowances across a window's edge), but one row and one
/// statement per request, counted the same whichever replica the request reaches.
struct PostgresRateCounters: RateCounters {
    let storage: PostgresStorage
    let perMinute: Int
    /// The window's length in seconds; a minute in service (tests use a longer one, so no
    /// window ends during a test).
    var window: Int64 = 60

    func take(_ counter: RateCounter, address: String) async throws(StorageError) -> Bool {
        let name = counter == .challenge ? "challenge" : "verify", window = window, logger = storage.logger
        let taken = try await storage.perform("cannot count a request") { client in
            let count = try await client.rows("""
                WITH now AS (SELECT (floor(extract(epoch FROM clock_timestamp()) / \(window)) * \(window))::bigint AS start)
                INSERT INTO binder_rate_counters (counter, address, window_start, taken)
                SELECT \(name), \(address), start, 1 FROM now
                ON CONFLICT (counter, address) DO UPDATE SET
                    taken = CASE WHEN binder_rate_counters.window_start < EXCLUDED.window_start THEN 1
                                 ELSE binder_rate_counters.taken + 1 END,
                    window_start = GREATEST(binder_rate_counters.window_start, EXCLUDED.window_start)
                RETURNING taken
                """, as: Int.self, logger: logger).first ?? Int.max
            // Rows of windows long past are dropped now and then, by whichever request draws it.
            if Int.random(in: 0..<256) == 0 {
                try await client.exec("""
                    DELETE FROM binder_rate_counters
                    WHERE window_start < extract(epoch FROM clock_timestamp())::bigint - 2 * \(window)
                    """, logger: logger)
            }
            return count
        }
        return taken <= perMinute
    }
}
