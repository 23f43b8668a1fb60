import Foundation
import Hummingbird
import NIOPosix
import TourpackCore

/// One tile's PNG and its validator.
struct RenderedTile: Sendable {
    let png: ByteBuffer
    /// `"<first 16 hex digits of the PNG's SHA-256>"`, quotes included, as sent in `ETag`.
    let etag: String
}

/// Renders tiles off the event loop and keeps the most recently used ones.
///
/// Drawing and PNG encoding are blocking C work, so they run on a
/// `NIOThreadPool`; the small LRU means a bench that fetches the same area
/// again is not bound by rendering.
struct TileImages: Sendable {
    let cache: RenderedTileCache
    let pool: NIOThreadPool

    init(capacity: Int, pool: NIOThreadPool = .singleton) {
        cache = RenderedTileCache(capacity: capacity)
        self.pool = pool
    }

    func image(for tile: TileID) async throws -> RenderedTile {
        if let cached = cache[tile] { return cached }
        let rendered = try await pool.runIfActive { try Self.render(tile) }
        cache[tile] = rendered
        return rendered
    }

    /// Draws and encodes one tile, on the calling thread.
    static func render(_ tile: TileID) throws -> RenderedTile {
        let png = try TilePNG.encode(rgb: TileRenderer.pixels(for: tile), width: TileRenderer.size, height: TileRenderer.size)
        return RenderedTile(png: ByteBuffer(bytes: png), etag: "\"\(TilePNG.sha256Hex(png).prefix(16))\"")
    }
}

/// A least-recently-used map from tile to rendered PNG, behind a lock.
///
/// Eviction scans for the oldest entry; at a few hundred entries that costs
/// less than one PNG encode, and it keeps the structure obvious.
final class RenderedTileCache: @unchecked Sendable {
    let capacity: Int
    private let lock = NSLock()
    private var entries: [TileID: (tile: RenderedTile, used: UInt64)] = [:]
    private var clock: UInt64 = 0

    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return entries.count
    }

    subscript(tile: TileID) -> RenderedTile? {
        get {
            lock.lock()
            defer { lock.unlock() }
            guard let entry = entries[tile] else { return nil }
            clock += 1
            entries[tile] = (entry.tile, clock)
            return entry.tile
        }
        set {
            guard let newValue, capacity > 0 else { return }
            lock.lock()
            defer { lock.unlock() }
            clock += 1
            if entries[tile] == nil, entries.count >= capacity,
                let oldest = entries.min(by: { $0.value.used < $1.value.used })?.key
            {
                entries[oldest] = nil
            }
            entries[tile] = (newValue, clock)
        }
    }
}
