import Crypto
import Foundation
import NIOPosix
import TourpackAudio
import TourpackCore
import TourpackMaps
import TourpackState

/// How far the maps phase has come: tiles settled (fresh in the cache,
/// fetched, renewed or found empty) of all the build's tiles.
final class TileProgress: @unchecked Sendable {
    private let lock = NSLock()
    private var settled = 0
    let total: Int

    init(total: Int) { self.total = total }

    var done: Int { lock.withLock { settled } }
    func add(_ count: Int) { lock.withLock { settled += count } }
}

/// One tour's tile pack, made (or found unchanged) and waiting to be published.
struct StagedTilePack: Sendable {
    /// The pack written in staging; nil when every package's pack is already this one.
    var temp: URL?
    var sizeBytes: Int64
    var sha256: String
    var storedTiles: Int
    var emptyTiles: Int
    /// What the pack was made from (`TilePackRecords`).
    var inputKey: String
    /// Packages (by root-relative pack path) whose pack already holds exactly this.
    var upToDate: Set<String>

    var record: TilePackRecords.Record {
        .init(inputKey: inputKey, sizeBytes: sizeBytes, sha256: sha256, storedTiles: storedTiles, emptyTiles: emptyTiles)
    }

    /// package.json's `mapTiles`: the coverage plus the pack's facts.
    func coverage(_ coverage: MapCoverage, file: String, source: TileSource) -> MapCoverage {
        var coverage = coverage
        coverage.file = file
        coverage.format = source.format
        coverage.storedTiles = storedTiles
        coverage.emptyTiles = emptyTiles
        coverage.sizeBytes = sizeBytes
        coverage.sha256 = sha256
        coverage.attribution = source.attribution
        return coverage
    }
}

/// The maps phase of one tour: every tile of its selection settled through
/// the tile cache (fetched once, conditionally when stale), then the
/// MBTiles pack written in staging in z/x/y order, unless the packages
/// already hold a pack made from exactly these tiles.
///
/// Blocking work (SQLite, files, fsync) runs on `pool`; only the network
/// waits on the cooperative pool, and the curl thread does that.
struct TilePackMaker: Sendable {
    let config: PipelineConfig
    let source: TileSource
    let cache: TileCache
    let packs: TilePackRecords
    /// nil for a local extract.
    let fetcher: TileFetcher?
    let extract: MBTilesReader?
    /// A vector extract's `json` metadata (its `vector_layers`), carried into the packs.
    let extractJSON: String?
    let pool: NIOThreadPool
    let staging: StagingArea
    let layout: Layout
    let progress: TileProgress

    /// - Parameter packPaths: the pack's final path in each of the tour's packages (one per format).
    func make(tour: Tour, coverage: MapCoverage, packPaths: [StoredPath]) async throws(TourpackError) -> StagedTilePack {
        let tiles = tour.mapTiles(config.maps)
        let metadata = MBTilesMetadata(tour: tour, coverage: coverage, source: source, extractJSON: extractJSON)
        do {
            let contents: [TileID: String?]  // tile → sha256 of its bytes, or nil when empty
            let key: String
            if let fetcher {
                contents = try await settleThroughCache(tiles, fetcher: fetcher)
                key = Self.inputKey(source: source, metadata: metadata, tiles: tiles, contents: contents)
            } else {
                contents = [:]
                key = try await pool.runIfActive { [source] in try Self.extractKey(source: source, metadata: metadata, tiles: tiles) }
                progress.add(tiles.count)
            }
            // The packages whose pack is already exactly this one.
            let (packs, sizeOf) = (self.packs, Self.size(of:))
            let known: (record: TilePackRecords.Record, upToDate: Set<String>)? = try await pool.runIfActive {
                var found: TilePackRecords.Record?
                var upToDate: Set<String> = []
                for target in packPaths {
                    guard let record = try packs.record(for: target.relativePath), record.inputKey == key,
                        sizeOf(target.url) == record.sizeBytes,
                        let digest = try? FileDigest.sha256(of: target.url), digest.hex == record.sha256
                    else { continue }
                    found = record
                    upToDate.insert(target.relativePath)
                }
                return found.map { ($0, upToDate) }
            }
            if let known, known.upToDate.count == packPaths.count {
                if fetcher != nil {
                    try await pool.runIfActive { [cache, source] in try cache.touch(source: source.cacheName, tiles: tiles) }
                }
                return StagedTilePack(
                    temp: nil, sizeBytes: known.record.sizeBytes, sha256: known.record.sha256, storedTiles: known.record.storedTiles,
                    emptyTiles: known.record.emptyTiles, inputKey: key, upToDate: known.upToDate)
            }
            guard let first = packPaths.first else { throw TourpackError.invalidInput("\(tour.name): no package to put the tile pack in") }
            let temp = try staging.temporaryURL(deferringFolderOf: first.url)
            do {
                var pack = try await write(tiles, contents: contents, metadata: metadata, into: temp)
                pack.inputKey = key
                let (size, sha256) = (pack.sizeBytes, pack.sha256)
                pack.upToDate = Set(
                    try await pool.runIfActive {
                        packPaths.filter { target in
                            sizeOf(target.url) == size && (try? FileDigest.sha256(of: target.url))?.hex == sha256
                        }.map(\.relativePath)
                    })
                if pack.upToDate.count == packPaths.count {
                    staging.discard([temp])
                    pack.temp = nil
                }
                return pack
            } catch {
                staging.discard([temp])
                throw error
            }
        } catch let error as TourpackError {
            throw error
        } catch let error as MBTilesError {
            throw .storageFailed(path: error.path, operation: "write the tile pack", reason: error.message)
        } catch is CancellationError {
            throw .cancelled
        } catch {
            throw .invalidInput("\(tour.name): map tiles: \(error)")
        }
    }

    // MARK: The cache

    /// Settles every tile: a fresh cached tile as it is, the rest fetched
    /// (conditionally when a stale copy has validators) at most
    /// `source.concurrency` at a time. Returns each tile's content.
    private func settleThroughCache(_ tiles: [TileID], fetcher: TileFetcher) async throws -> [TileID: String?] {
        let name = source.cacheName
        let cache = self.cache
        let known = try await pool.runIfActive { try cache.entries(source: name, tiles: tiles) }
        var contents: [TileID: String?] = [:]
        contents.reserveCapacity(tiles.count)
        var pending: [(TileID, TileCache.Entry?)] = []
        var freshCount = 0
        for tile in tiles {
            if let entry = known[tile], cache.isFresh(entry) {
                contents[tile] = .some(entry.sha256)
                freshCount += 1
            } else {
                pending.append((tile, known[tile]))
            }
        }
        progress.add(freshCount)
        let width = max(1, source.concurrency * 2)
        try await withThrowingTaskGroup(of: (TileID, String?).self) { group in
            var next = 0
            func startNext() {
                guard next < pending.count else { return }
                let (tile, stale) = pending[next]
                next += 1
                group.addTask { (tile, try await settle(tile, stale: stale, fetcher: fetcher)) }
            }
            for _ in 0..<width { startNext() }
            while let (tile, sha) = try await group.next() {
                contents[tile] = .some(sha)
                progress.add(1)
                startNext()
            }
        }
        // A tile's file may have been evicted by another job since it was
        // indexed, or replaced, swapped or garbled on disk: each file is
        // checked against its name (the SHA-256 of its bytes) and the
        // format's first bytes, and a file that fails is removed, a miss.
        // Those tiles are fetched again before the pack needs them.
        let settled = contents
        let format = source.format
        let missing = try await pool.runIfActive {
            var checked: [String: Bool] = [:]
            return tiles.filter { tile in
                guard case .some(.some(let sha)) = settled[tile] else { return false }
                if let good = checked[sha] { return !good }
                let good = cache.verify(sha, format: format)
                checked[sha] = good
                return !good
            }
        }
        for tile in missing { contents[tile] = .some(try await settle(tile, stale: nil, fetcher: fetcher)) }
        try await pool.runIfActive { try cache.touch(source: name, tiles: tiles) }
        return contents
    }

    /// One tile through the cache, under its stripe lock, so that two builds
    /// sharing the state never fetch it both: the second finds it fresh.
    private func settle(_ tile: TileID, stale: TileCache.Entry?, fetcher: TileFetcher) async throws -> String? {
        let (cache, name, pool) = (self.cache, source.cacheName, self.pool)
        var lock: FileLock?
        while lock == nil {
            lock = try await pool.runIfActive { try cache.tryLock(source: name, tile: tile) }
            if lock == nil { try await Task.sleep(for: .milliseconds(15)) }
        }
        defer { lock?.unlock() }
        // Under the lock, what the cache holds now (another build may have just fetched it), and whether its file is there.
        let (current, hasFile) = try await pool.runIfActive {
            let current = try cache.entry(source: name, tile: tile)
            let previous = current ?? stale
            return (current, previous?.sha256.map { FileManager.default.fileExists(atPath: cache.blobURL($0).path) } ?? true)
        }
        if let current, cache.isFresh(current), hasFile {
            return current.sha256
        }
        let previous = current ?? stale
        let validators = previous.map { TileValidators(etag: $0.etag, lastModified: $0.lastModified) }
        let conditional = hasFile && !(validators?.isEmpty ?? true) ? validators : nil
        switch try await fetcher.fetch(tile, conditional: conditional) {
        case .tile(let bytes, let validators, let freshUntil):
            return try await pool.runIfActive {
                try cache.store(
                    source: name, tile: tile, data: bytes, etag: validators.etag, lastModified: validators.lastModified,
                    freshUntil: freshUntil
                ).sha256
            }
        case .notModified(let validators, let freshUntil):
            return try await pool.runIfActive {
                try cache.renew(
                    source: name, tile: tile, etag: validators.etag, lastModified: validators.lastModified, freshUntil: freshUntil)?.sha256
            }
        case .empty(let freshUntil):
            return try await pool.runIfActive {
                try cache.store(source: name, tile: tile, data: nil, etag: nil, lastModified: nil, freshUntil: freshUntil).sha256
            }
        }
    }

    // MARK: The pack

    /// Writes the pack, tiles in z/x/y order, on the pool; fsyncs it.
    private func write(_ tiles: [TileID], contents: [TileID: String?], metadata: MBTilesMetadata, into temp: URL) async throws
        -> StagedTilePack
    {
        let (cache, extract, format) = (self.cache, self.extract, source.format)
        return try await pool.runIfActive {
            let writer = try MBTilesWriter(creating: temp, metadata: metadata)
            var stored = 0
            var empty = 0
            for tile in tiles {
                let bytes: [UInt8]?
                if let extract {
                    // An extract's tiles are checked as fetched ones are: bytes of the format it names.
                    do { bytes = try extract.tile(tile) } catch {
                        throw TourpackError.invalidInput("maps.source.mbtiles: \(error)")
                    }
                    if let bytes, !format.matches(bytes) {
                        throw TourpackError.invalidInput(
                            "maps.source.mbtiles: \(extract.url.path): tile \(tile) is not \(format.rawValue) by its first bytes (\(Self.firstBytes(bytes)))"
                        )
                    }
                } else if case .some(.some(let sha)) = contents[tile] {
                    // Checked against its digest again as it is read (`TileCache.read`).
                    guard let data = cache.read(sha), format.matches(data) else {
                        throw TourpackError.storageFailed(
                            path: cache.blobURL(sha).path, operation: "read cached tile \(tile)",
                            reason: "missing, unreadable or not the bytes its name (their SHA-256) says")
                    }
                    bytes = data
                } else {
                    bytes = nil
                }
                if let bytes {
                    try writer.add(tile, data: bytes)
                    stored += 1
                } else {
                    empty += 1
                }
            }
            try writer.finish()
            try AtomicFile.syncFile(temp)
            let digest = try FileDigest.sha256(of: temp)
            return StagedTilePack(
                temp: temp, sizeBytes: digest.size, sha256: digest.hex, storedTiles: stored, emptyTiles: empty, inputKey: "", upToDate: [])
        }
    }

    /// What a pack from a URL source is made of: the source, the metadata,
    /// and every tile's content hash in order.
    static func inputKey(source: TileSource, metadata: MBTilesMetadata, tiles: [TileID], contents: [TileID: String?]) -> String {
        var hasher = SHA256()
        hasher.update(data: Data("tourpack tile pack 1\n\(source.cacheName)\n\(Self.describe(metadata))\n".utf8))
        for tile in tiles {
            let content: String
            if case .some(.some(let sha)) = contents[tile] { content = sha } else { content = "-" }
            hasher.update(data: Data("\(tile)=\(content)\n".utf8))
        }
        return hasher.finalize().lowercaseHex
    }

    /// For a local extract: the extract's identity (size and modification
    /// time), the metadata and the tiles asked for.
    static func extractKey(source: TileSource, metadata: MBTilesMetadata, tiles: [TileID]) throws -> String {
        guard case .mbtiles(let file) = source.location else { return "" }
        let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
        let size = (attributes[.size] as? NSNumber)?.int64Value ?? -1
        let modified = (attributes[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
        var hasher = SHA256()
        hasher.update(data: Data("tourpack tile pack 1\n\(source.cacheName)\n\(size) \(modified)\n\(Self.describe(metadata))\n".utf8))
        for tile in tiles { hasher.update(data: Data("\(tile)\n".utf8)) }
        return hasher.finalize().lowercaseHex
    }

    /// The metadata rows as they go into the pack, one `name=value` a line.
    static func describe(_ metadata: MBTilesMetadata) -> String {
        metadata.rows.map { "\($0.name)=\($0.value)" }.joined(separator: "\n")
    }

    /// A tile's first bytes in hex, for a message; "empty" for none.
    static func firstBytes(_ bytes: [UInt8]) -> String {
        bytes.isEmpty ? "empty" : "starts " + bytes.prefix(4).map { String(format: "%02X", $0) }.joined(separator: " ")
    }

    static func size(of url: URL) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: url.path))?[.size] as? NSNumber)?.int64Value ?? -1
    }
}

extension MBTilesMetadata {
    /// A tour's pack: named by the tour, its coverage's box and zooms, the
    /// source's format and attribution, and a vector extract's layers.
    init(tour: Tour, coverage: MapCoverage, source: TileSource, extractJSON: String? = nil) {
        self.init(
            name: tour.name, format: source.format, bounds: coverage.bounds, minZoom: coverage.minZoom, maxZoom: coverage.maxZoom,
            attribution: source.attribution, json: source.format == .pbf ? extractJSON : nil)
    }
}
