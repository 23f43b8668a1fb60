import Foundation
package import TourpackCore

/// Faults `serve-tiles` can inject, all off by default.
///
/// Tests and `tourpack-bench` use them to prove the tile fetcher survives a
/// bad tile server: slow answers, 5xx, 429 with `Retry-After`, bodies cut
/// short, an HTML error page served as 200, tiles with no data, and tiles
/// that fail for good. Random faults are drawn per request, in arrival
/// order, from a seeded generator: the same tile may fail once and succeed
/// on a retry, and a sequential run is reproducible.
package struct TileFaults: Sendable, Hashable {
    /// Every tile answer (errors included) takes at least this long from arrival.
    package var latencyMilliseconds = 0
    /// Share of requests answered 500 or 503.
    package var failureRate = 0.0
    /// Share of requests answered 429 with `Retry-After: retryAfterSeconds`.
    package var rateLimitRate = 0.0
    package var retryAfterSeconds = 1
    /// Share of requests answered 200 whose body stops before its
    /// `Content-Length`, the connection then closed.
    package var truncateRate = 0.0
    /// Share of requests answered 200 with an HTML error page, as a captive
    /// portal or a misconfigured proxy does.
    package var htmlRate = 0.0
    /// Tiles with no data: answered `emptyStatus`, every time.
    package var emptyTiles: Set<TileID> = []
    /// With N set, tiles whose (x + y) % N == 0, at every zoom, have no data.
    package var emptyEvery: Int?
    /// 404 or 204: how a tile with no data is answered.
    package var emptyStatus = 404
    /// Tiles answered 500 every time: a permanent failure.
    package var failingTiles: Set<TileID> = []
    package var seed: UInt64 = 0x7469_6c65_7321

    /// Every fault off unless named.
    package init(
        latencyMilliseconds: Int = 0, failureRate: Double = 0, rateLimitRate: Double = 0, retryAfterSeconds: Int = 1,
        truncateRate: Double = 0, htmlRate: Double = 0, emptyTiles: Set<TileID> = [], emptyEvery: Int? = nil,
        emptyStatus: Int = 404, failingTiles: Set<TileID> = [], seed: UInt64 = 0x7469_6c65_7321
    ) {
        self.latencyMilliseconds = latencyMilliseconds
        self.failureRate = failureRate
        self.rateLimitRate = rateLimitRate
        self.retryAfterSeconds = retryAfterSeconds
        self.truncateRate = truncateRate
        self.htmlRate = htmlRate
        self.emptyTiles = emptyTiles
        self.emptyEvery = emptyEvery
        self.emptyStatus = emptyStatus
        self.failingTiles = failingTiles
        self.seed = seed
    }

    /// Rates must lie in 0...1 and add up to 1 at most; times must not be
    /// negative; the empty status is 404 or 204; named tiles must exist.
    package func validated() throws -> TileFaults {
        let rates = [failureRate, rateLimitRate, truncateRate, htmlRate]
        guard rates.allSatisfy({ (0...1).contains($0) }), rates.reduce(0, +) <= 1.000_001 else {
            throw FaultConfigurationError(message: "fault rates must each be within 0...1 and add up to 1 at most")
        }
        guard latencyMilliseconds >= 0, retryAfterSeconds >= 0 else {
            throw FaultConfigurationError(message: "latency and Retry-After must not be negative")
        }
        guard emptyStatus == 404 || emptyStatus == 204 else {
            throw FaultConfigurationError(message: "the empty-tile status must be 404 or 204, not \(emptyStatus)")
        }
        if let emptyEvery, emptyEvery < 1 {
            throw FaultConfigurationError(message: "--empty-every must be at least 1")
        }
        for tile in emptyTiles.union(failingTiles) where !Self.isValid(tile) {
            throw FaultConfigurationError(message: "tile \(tile) does not exist: z must be within 0...22 and x, y within 0..<2^z")
        }
        return self
    }

    /// "Z/X/Y" as the flags spell a tile; throws when malformed or out of range.
    package static func tile(_ text: String) throws -> TileID {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3, let z = Int(parts[0]), let x = Int(parts[1]), let y = Int(parts[2]) else {
            throw FaultConfigurationError(message: "'\(text)' is not a tile: write Z/X/Y, e.g. 14/8508/5807")
        }
        let tile = TileID(z: z, x: x, y: y)
        guard isValid(tile) else {
            throw FaultConfigurationError(message: "tile \(text) does not exist: z must be within 0...22 and x, y within 0..<2^z")
        }
        return tile
    }

    /// The zooms a tile server serves, as most do.
    package static let zoomRange = 0...22

    /// True for a tile of the XYZ scheme within `zoomRange`.
    package static func isValid(_ tile: TileID) -> Bool {
        zoomRange.contains(tile.z) && (0..<(1 << tile.z)).contains(tile.x) && (0..<(1 << tile.z)).contains(tile.y)
    }

    /// True when `tile` has no data under `emptyTiles` or `emptyEvery`.
    package func isEmpty(_ tile: TileID) -> Bool {
        if emptyTiles.contains(tile) { return true }
        if let emptyEvery { return (tile.x + tile.y) % emptyEvery == 0 }
        return false
    }

    var randomRate: Double { failureRate + rateLimitRate + truncateRate + htmlRate }
}

/// The random fault one tile request gets.
enum TileFault: String, Sendable, CaseIterable {
    case failure
    case rateLimited
    case truncated
    case html
    /// Not drawn: a tile named by `--fail`.
    case permanent
}

/// Draws tile faults in arrival order from a seeded `SplitMix64`.
final class TileFaultDice: @unchecked Sendable {
    let plan: TileFaults
    private let lock = NSLock()
    private var generator: SplitMix64

    init(_ plan: TileFaults) {
        self.plan = plan
        generator = SplitMix64(seed: plan.seed)
    }

    /// The next 64 random bits.
    func next() -> UInt64 {
        lock.lock()
        defer { lock.unlock() }
        return generator.next()
    }

    /// A value in [0, 1).
    func unit() -> Double {
        lock.lock()
        defer { lock.unlock() }
        return generator.unit()
    }

    /// The fault for the next request, or nil for an honest answer. No draw
    /// is made when no rate is set, so a seed's sequence is not disturbed.
    func draw() -> TileFault? {
        guard plan.randomRate > 0 else { return nil }
        var roll = unit()
        let table: [(TileFault, Double)] = [
            (.failure, plan.failureRate), (.rateLimited, plan.rateLimitRate),
            (.truncated, plan.truncateRate), (.html, plan.htmlRate),
        ]
        for (fault, rate) in table {
            if roll < rate { return fault }
            roll -= rate
        }
        return nil
    }
}
