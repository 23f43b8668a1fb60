import Foundation
import Testing
import TourpackTesting

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackState

/// The map tile cache on a manual clock: freshness, 304 renewal, content
/// addressing, LRU eviction within the budget, and the fetch stripe locks.
@Suite struct TileCacheTests {
    static let source = "url png http://tiles.test/{z}/{x}/{y}.png"

    static func cache(_ scratch: StateScratch, clock: ManualClock) throws -> TileCache {
        let database = try StateDatabase(folder: scratch.state)
        return TileCache(database: database, folder: scratch.state.appendingPathComponent("tiles"), clock: clock.date)
    }

    static func png(_ fill: UInt8, count: Int = 1000) -> [UInt8] {
        [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array(repeating: fill, count: count)
    }

    @Test func freshTilesAreHitsAndA304RenewsWithoutNewBytes() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let clock = ManualClock()
        let cache = try Self.cache(scratch, clock: clock)
        let tile = TileID(z: 12, x: 2190, y: 1437)
        let now = clock.date().timeIntervalSince1970
        let stored = try cache.store(
            source: Self.source, tile: tile, data: Self.png(1), etag: "\"a1\"", lastModified: nil, freshUntil: now + 3600)
        #expect(cache.isFresh(stored))
        #expect(cache.read(try #require(stored.sha256)) == Self.png(1))
        clock.advance(seconds: 3601)
        let stale = try #require(try cache.entry(source: Self.source, tile: tile))
        #expect(!cache.isFresh(stale) && stale.etag == "\"a1\"")
        let renewed = try #require(try cache.renew(source: Self.source, tile: tile, etag: nil, lastModified: nil, freshUntil: now + 7200))
        #expect(cache.isFresh(renewed) && renewed.sha256 == stored.sha256 && renewed.etag == "\"a1\"")
        // Another source's tile at the same z/x/y is another tile.
        #expect(try cache.entry(source: "url png http://other.test/{z}/{x}/{y}.png", tile: tile) == nil)
        // A tile the source has no data for is remembered as empty.
        let empty = try cache.store(
            source: Self.source, tile: TileID(z: 12, x: 0, y: 0), data: nil, etag: nil, lastModified: nil, freshUntil: now + 60)
        #expect(empty.sha256 == nil && empty.bytes == 0)
    }

    @Test func identicalTilesShareOneFileAndEvictionGoesLeastRecentlyUsedFirst() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let clock = ManualClock()
        let cache = try Self.cache(scratch, clock: clock)
        let far = clock.date().timeIntervalSince1970 + 86_400 * 30
        // Two tiles of one lake: the same bytes, one file.
        let lakeA = try cache.store(
            source: Self.source, tile: TileID(z: 13, x: 1, y: 1), data: Self.png(7), etag: nil, lastModified: nil, freshUntil: far)
        let lakeB = try cache.store(
            source: Self.source, tile: TileID(z: 13, x: 1, y: 2), data: Self.png(7), etag: nil, lastModified: nil, freshUntil: far)
        #expect(lakeA.sha256 == lakeB.sha256)
        #expect(try cache.totals() == (entries: 2, bytes: 1008))
        for index in 0..<5 {
            clock.advance(seconds: 10)
            try cache.store(
                source: Self.source, tile: TileID(z: 13, x: 10 + index, y: 1), data: Self.png(UInt8(20 + index)), etag: nil,
                lastModified: nil, freshUntil: far)
        }
        // Touching the lake makes it the most recently used.
        clock.advance(seconds: 10)
        try cache.touch(source: Self.source, tiles: [TileID(z: 13, x: 1, y: 1), TileID(z: 13, x: 1, y: 2)])
        // Room for three distinct files: the three oldest others go, the lake stays.
        let removed = try cache.evict(toFit: 3 * 1008)
        #expect(removed.files == 3)
        #expect(try cache.totals() == (entries: 4, bytes: 3 * 1008))
        for index in 0..<3 { #expect(try cache.entry(source: Self.source, tile: TileID(z: 13, x: 10 + index, y: 1)) == nil) }
        #expect(try cache.entry(source: Self.source, tile: TileID(z: 13, x: 1, y: 2)) != nil)
        #expect(cache.read(try #require(lakeA.sha256)) != nil)
        // A file whose last entry goes is removed with it.
        let files = try FileManager.default.subpathsOfDirectory(atPath: cache.folder.path).filter { $0.count > 3 && !$0.hasPrefix("locks") }
        #expect(files.count == 3)
    }

    /// Issue 27, defect 4: the files are named by their SHA-256 and that is
    /// checked as they are read; a replaced or swapped file is a miss, removed.
    @Test func aFileThatIsNotWhatItsNameSaysIsAMiss() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let clock = ManualClock()
        let cache = try Self.cache(scratch, clock: clock)
        let far = clock.date().timeIntervalSince1970 + 86_400
        let a = try #require(
            try cache.store(
                source: Self.source, tile: TileID(z: 13, x: 1, y: 1), data: Self.png(1), etag: nil, lastModified: nil, freshUntil: far
            ).sha256)
        let b = try #require(
            try cache.store(
                source: Self.source, tile: TileID(z: 13, x: 1, y: 2), data: Self.png(2), etag: nil, lastModified: nil, freshUntil: far
            ).sha256)
        let c = try #require(
            try cache.store(
                source: Self.source, tile: TileID(z: 13, x: 1, y: 3), data: Self.png(3), etag: nil, lastModified: nil, freshUntil: far
            ).sha256)
        #expect(cache.read(a) == Self.png(1) && cache.verify(a, format: .png))
        // Two PNGs swapped: each is a real PNG, but not the bytes its name says.
        try Data(Self.png(2)).write(to: cache.blobURL(a))
        try Data(Self.png(1)).write(to: cache.blobURL(b))
        #expect(cache.read(a) == nil && cache.read(b) == nil)
        #expect(!cache.verify(a, format: .png) && !cache.verify(b, format: .png))
        #expect(!FileManager.default.fileExists(atPath: cache.blobURL(a).path), "a file that fails is removed, a miss")
        // An HTML page in place of a tile.
        try Data("<!DOCTYPE html><html>rate limited</html>".utf8).write(to: cache.blobURL(c))
        #expect(cache.read(c) == nil && !cache.verify(c, format: .png))
        #expect(!FileManager.default.fileExists(atPath: cache.blobURL(c).path))
    }

    @Test func oneStripeLockAtATimeEvenInOneProcess() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let cache = try Self.cache(scratch, clock: ManualClock())
        let tile = TileID(z: 14, x: 8800, y: 5750)
        let first = try #require(try cache.tryLock(source: Self.source, tile: tile))
        #expect(try cache.tryLock(source: Self.source, tile: tile) == nil)
        first.unlock()
        let again = try #require(try cache.tryLock(source: Self.source, tile: tile))
        again.unlock()
    }
}
