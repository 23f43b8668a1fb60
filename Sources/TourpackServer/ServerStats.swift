import TourpackKit
import Foundation

/// What `serve-tts` has served: `GET /debug/stats` returns it as JSON.
///
/// Tests read it to prove things the client cannot see for itself: how many
/// requests arrived (an incremental build must cause 0), the most that were
/// in flight at once (the client's concurrency cap), and which faults fired.
public struct ServerStatsSnapshot: Sendable, Hashable, Codable {
    /// Every HTTP request, any path.
    public var totalRequests = 0
    /// Requests to `text:synthesize` and `audio/speech`.
    public var synthesizeRequests = 0
    /// Characters in synthesize requests answered 200 (injected truncation and garbage included).
    public var characters = 0
    /// Synthesize requests being handled right now.
    public var inFlight = 0
    /// The most synthesize requests ever handled at once.
    public var maxInFlight = 0
    /// Faults injected, by kind (`failure`, `rateLimited`, `truncated`, `garbage`, `stalled`).
    public var faultsInjected: [String: Int] = [:]
    /// Answers by HTTP status, as strings ("200", "400").
    public var responsesByStatus: [String: Int] = [:]

    public init() {}

    /// All faults injected, every kind together.
    public var totalFaults: Int { faultsInjected.values.reduce(0, +) }
}

/// The live counters; shared by the routes and the access-log middleware.
public final class ServerStats: Sendable {
    private let counts = LockedCounts(ServerStatsSnapshot())

    public init() {}

    /// The counters now, consistent with each other.
    public var snapshot: ServerStatsSnapshot { counts.snapshot }

    /// Zeroes every counter except the requests in flight now.
    public func reset() {
        counts.update { stats in
            let inFlight = stats.inFlight
            stats = ServerStatsSnapshot()
            stats.inFlight = inFlight
            stats.maxInFlight = inFlight
        }
    }

    func update(_ change: (inout ServerStatsSnapshot) -> Void) {
        counts.update(change)
    }

    func synthesizeBegan() {
        update {
            $0.synthesizeRequests += 1
            $0.inFlight += 1
            $0.maxInFlight = max($0.maxInFlight, $0.inFlight)
        }
    }

    func synthesizeEnded() { update { $0.inFlight -= 1 } }
}
