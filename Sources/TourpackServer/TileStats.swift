import Foundation

/// What `serve-tiles` has served: `GET /debug/stats` returns it as JSON.
///
/// Tests read it to prove what the fetcher cannot see for itself: that a
/// rebuild sent no request for fresh tiles and conditional ones for stale
/// tiles, that each tile was fetched once, which User-Agent was sent, and
/// that the key travelled under the expected query parameter name (names
/// only: a value is never recorded).
package struct TileStatsSnapshot: Sendable, Hashable, Codable {
    /// Counts for one tile.
    package struct TileCounts: Sendable, Hashable, Codable {
        package var requests = 0
        /// 200 answers with the full tile.
        package var ok = 0
        /// 304 answers.
        package var notModified = 0
    }

    /// Every tile request (`GET /{z}/{x}/{y}.png`), whatever its answer; the debug routes are not counted.
    package var requests = 0
    /// 200 answers carrying the full tile body.
    package var ok = 0
    /// 304 answers.
    package var notModified = 0
    /// 404 or 204 answers for tiles with no data.
    package var empty = 0
    /// Injected faults of every kind, `--fail` tiles included.
    package var faults = 0
    /// Injected faults by kind (`failure`, `rateLimited`, `truncated`, `html`, `permanent`).
    package var faultsByKind: [String: Int] = [:]
    /// 401 answers: a missing or wrong key.
    package var unauthorized = 0
    /// 400 answers: not a tile, or out of range.
    package var badRequests = 0
    /// Requests for each valid tile, keyed "z/x/y".
    package var perTile: [String: TileCounts] = [:]
    /// Requests carrying `If-None-Match` or `If-Modified-Since`.
    package var conditional = 0
    /// Distinct `User-Agent` values seen, sorted.
    package var userAgents: [String] = []
    /// Distinct query parameter names seen, sorted (never their values).
    package var queryKeys: [String] = []

    package init() {}
}

/// The live counters, shared by the tile routes; thread-safe behind a lock.
package final class TileStats: @unchecked Sendable {
    private let lock = NSLock()
    private var counts = TileStatsSnapshot()
    private var userAgents: Set<String> = []
    private var queryKeys: Set<String> = []
    /// Caps the distinct values kept, so a hostile client cannot grow them without end.
    private static let distinctLimit = 1000

    package init() {}

    /// The counters now, consistent with each other.
    package var snapshot: TileStatsSnapshot {
        lock.lock()
        defer { lock.unlock() }
        var snapshot = counts
        snapshot.userAgents = userAgents.sorted()
        snapshot.queryKeys = queryKeys.sorted()
        return snapshot
    }

    /// Zeroes every counter and forgets the agents and keys seen.
    package func reset() {
        lock.lock()
        counts = TileStatsSnapshot()
        userAgents = []
        queryKeys = []
        lock.unlock()
    }

    /// The JSON `GET /debug/stats` answers: sorted keys, slashes unescaped.
    package func json() throws -> [UInt8] {
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
