import Foundation

/// What `serve-tiles` has served: `GET /debug/stats` returns it as JSON.
///
/// Tests read it to prove what the fetcher cannot see for itself: that a
/// rebuild sent no request for fresh tiles and conditional ones for stale
/// tiles, that each tile was fetched once, which User-Agent was sent, and
/// that the key travelled under the expected query parameter name (names
/// only: a value is never recorded).
public struct TileStatsSnapshot: Sendable, Hashable, Codable {
    /// Counts for one tile.
    public struct TileCounts: Sendable, Hashable, Codable {
        public var requests = 0
        /// 200 answers with the full tile.
        public var ok = 0
        /// 304 answers.
        public var notModified = 0
    }

    /// Every tile request (`GET /{z}/{x}/{y}.png`), whatever its answer; the debug routes are not counted.
    public var requests = 0
    /// 200 answers carrying the full tile body.
    public var ok = 0
    /// 304 answers.
    public var notModified = 0
    /// 404 or 204 answers for tiles with no data.
    public var empty = 0
    /// Injected faults of every kind, `--fail` tiles included.
    public var faults = 0
    /// Injected faults by kind (`failure`, `rateLimited`, `truncated`, `html`, `permanent`).
    public var faultsByKind: [String: Int] = [:]
    /// 401 answers: a missing or wrong key.
    public var unauthorized = 0
    /// 400 answers: not a tile, or out of range.
    public var badRequests = 0
    /// Requests for each valid tile, keyed "z/x/y".
    public var perTile: [String: TileCounts] = [:]
    /// Requests carrying `If-None-Match` or `If-Modified-Since`.
    public var conditional = 0
    /// Distinct `User-Agent` values seen, sorted.
    public var userAgents: [String] = []
    /// Distinct query parameter names seen, sorted (never their values).
    public var queryKeys: [String] = []

    public init() {}
}

/// The live counters, shared by the tile routes; thread-safe behind a lock.
public final class TileStats: @unchecked Sendable {
    private let lock = NSLock()
    private var counts = TileStatsSnapshot()
    private var userAgents: Set<String> = []
    private var queryKeys: Set<String> = []
    /// Caps the distinct values kept, so a hostile client cannot grow them without end.
    private static let distinctLimit = 1000

    public init() {}

    /// The counters now, consistent with each other.
    public var snapshot: TileStatsSnapshot {
        lock.lock()
        defer { lock.unlock() }
        var snapshot = counts
        snapshot.userAgents = userAgents.sorted()
        snapshot.queryKeys = queryKeys.sorted()
        return snapshot
    }

    /// Zeroes every counter and forgets the agents and keys seen.
    public func reset() {
        lock.lock()
        counts = TileStatsSnapshot()
        userAgents = []
        queryKeys = []
        lock.unlock()
    }

    /// The JSON `GET /debug/stats` answers: sorted keys, slashes unescaped.
    public func json() throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(snapshot))
    }

    /// Counts an arriving tile request with what it carried.
    func arrived(userAgent: String?, queryKeys names: [String], conditional: Bool) {
        lock.lock()
        counts.requests += 1
        if conditional { counts.conditional += 1 }
        if let userAgent, userAgents.count < Self.distinctLimit { userAgents.insert(userAgent) }
        for name in names where queryKeys.count < Self.distinctLimit { queryKeys.insert(name) }
        lock.unlock()
    }

    func update(_ change: (inout TileStatsSnapshot) -> Void) {
        lock.lock()
        change(&counts)
        lock.unlock()
    }

    func fault(_ fault: TileFault) {
        update {
            $0.faults += 1
            $0.faultsByKind[fault.rawValue, default: 0] += 1
        }
    }
}
