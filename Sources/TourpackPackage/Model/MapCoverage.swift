/// A latitude/longitude box (degrees).
public struct MapBounds: Sendable, Hashable, Codable {
    public var south: Double
    public var west: Double
    public var north: Double
    public var east: Double

    public init(south: Double, west: Double, north: Double, east: Double) {
        self.south = south
        self.west = west
        self.north = north
        self.east = east
    }
}

/// The tiles of one zoom level, inclusive on both ends.
public struct TileRange: Sendable, Hashable, Codable {
    public var zoom: Int
    public var minX: Int
    public var maxX: Int
    public var minY: Int
    public var maxY: Int
    public var tileCount: Int { (maxX - minX + 1) * (maxY - minY + 1) }

    public init(zoom: Int, minX: Int, maxX: Int, minY: Int, maxY: Int) {
        self.zoom = zoom
        self.minX = minX
        self.maxX = maxX
        self.minY = minY
        self.maxY = maxY
    }
}

/// The offline map of a tour (package.json's `mapTiles`): the coverage,
/// and, when the pipeline names a tile source, the pack that carries it.
public struct MapCoverage: Sendable, Hashable, Codable {
    public var minZoom: Int
    public var maxZoom: Int
    public var bufferMiles: Double
    public var selection: TileSelection
    public var bounds: MapBounds
    /// Per zoom, the smallest range holding every selected tile.
    public var ranges: [TileRange]
    /// Tiles selected: every tile of the ranges for `bbox`, fewer for `corridor`.
    public var tileCount: Int
    /// `tileCount` × `tileKB` KiB (15 KiB by default).
    public var estimatedBytes: Int

    // The pack, when there is one (all set or all nil).
    /// `OfflineTours/<packageId>/tiles.mbtiles`, relative to the output root.
    public var file: String?
    public var format: TileFormat?
    /// Tiles in the pack: `tileCount` − `emptyTiles`.
    public var storedTiles: Int?
    /// Tiles the source has no data for (404 or 204): not in the pack.
    public var emptyTiles: Int?
    public var sizeBytes: Int64?
    /// Lowercase hex SHA-256 of the pack file.
    public var sha256: String?
    public var attribution: String?

    public init(
        minZoom: Int, maxZoom: Int, bufferMiles: Double, selection: TileSelection, bounds: MapBounds,
        ranges: [TileRange], tileCount: Int, estimatedBytes: Int
    ) {
        self.minZoom = minZoom
        self.maxZoom = maxZoom
        self.bufferMiles = bufferMiles
        self.selection = selection
        self.bounds = bounds
        self.ranges = ranges
        self.tileCount = tileCount
        self.estimatedBytes = estimatedBytes
    }
}
