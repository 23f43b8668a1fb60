import Foundation

/// Slippy-map (XYZ, Web Mercator) tile math for the offline map coverage.
public enum TileMath {
    /// Web Mercator cannot show the poles; latitudes are clamped here.
    public static let maxLatitude = 85.051_128_779_806_59
    /// Metres per degree of latitude on the Web Mercator sphere (2πR/360, R = 6 378 137 m).
    public static let metersPerDegree = 2 * Double.pi * 6_378_137 / 360
    public static let metersPerMile = 1_609.344

    /// The tile containing a coordinate at a zoom level.
    public static func tile(latitude: Double, longitude: Double, zoom: Int) -> (x: Int, y: Int) {
        let n = Double(1 << zoom)
        let lat = min(max(latitude, -maxLatitude), maxLatitude) * .pi / 180
        let x = (longitude + 180) / 360 * n
        let y = (1 - asinh(tan(lat)) / .pi) / 2 * n
        let last = (1 << zoom) - 1
        return (min(max(Int(x.rounded(.down)), 0), last), min(max(Int(y.rounded(.down)), 0), last))
    }

    /// The smallest box holding every coordinate, grown by `bufferMiles` on each side.
    public static func bufferedBounds(of coordinates: [Coordinate], bufferMiles: Double) -> MapBounds? {
        guard let first = coordinates.first else { return nil }
        var south = first.latitude, north = first.latitude, west = first.longitude, east = first.longitude
        for c in coordinates.dropFirst() {
            south = min(south, c.latitude); north = max(north, c.latitude)
            west = min(west, c.longitude); east = max(east, c.longitude)
        }
        let latDelta = bufferMiles * metersPerMile / metersPerDegree
        let bufferedSouth = max(south - latDelta, -maxLatitude)
        let bufferedNorth = min(north + latDelta, maxLatitude)
        // A degree of longitude shrinks with latitude; use the widest (most poleward) edge so the buffer is never short.
        let widestLatitude = min(max(abs(bufferedSouth), abs(bufferedNorth)), 89.0) * .pi / 180
        let lonDelta = latDelta / cos(widestLatitude)
        return MapBounds(
            south: bufferedSouth, west: max(west - lonDelta, -180),
            north: bufferedNorth, east: min(east + lonDelta, 180)
        )
    }

    /// The tiles an app must download to cover the buffered box of `coordinates` at each zoom (`bbox`).
    public static func coverage(of coordinates: [Coordinate], settings: MapSettings) -> MapCoverage? {
        guard let bounds = bufferedBounds(of: coordinates, bufferMiles: settings.bufferMiles) else { return nil }
        let ranges = boxRanges(bounds, settings: settings)
        let count = ranges.reduce(0) { $0 + $1.tileCount }
        return MapCoverage(
            minZoom: settings.minZoom, maxZoom: settings.maxZoom, bufferMiles: settings.bufferMiles, selection: .bbox,
            bounds: bounds, ranges: ranges, tileCount: count, estimatedBytes: count * settings.tileKB * 1024
        )
    }

    /// The coverage of a tour under `settings.selection`. `bounds` is the
    /// buffered box of the route and POIs either way; for `corridor`,
    /// `ranges` hold the selected tiles and `tileCount` counts only them.
    public static func coverage(route: [Coordinate], pois: [Coordinate], settings: MapSettings) -> MapCoverage? {
        guard var coverage = coverage(of: route + pois, settings: settings) else { return nil }
        guard settings.selection == .corridor else { return coverage }
        let selected = tiles(route: route, pois: pois, settings: settings)
        var ranges: [TileRange] = []
        for zoom in settings.minZoom...settings.maxZoom {
            let level = selected.filter { $0.z == zoom }
            guard let first = level.first else { continue }
            var range = TileRange(zoom: zoom, minX: first.x, maxX: first.x, minY: first.y, maxY: first.y)
            for tile in level {
                range.minX = min(range.minX, tile.x); range.maxX = max(range.maxX, tile.x)
                range.minY = min(range.minY, tile.y); range.maxY = max(range.maxY, tile.y)
            }
            ranges.append(range)
        }
        coverage.selection = .corridor
        coverage.ranges = ranges
        coverage.tileCount = selected.count
        coverage.estimatedBytes = selected.count * settings.tileKB * 1024
        return coverage
    }

    /// Every tile `settings.selection` keeps, sorted by zoom, x, y.
    public static func tiles(route: [Coordinate], pois: [Coordinate], settings: MapSettings) -> [TileID] {
        guard let bounds = bufferedBounds(of: route + pois, bufferMiles: settings.bufferMiles) else { return [] }
        var tiles: [TileID] = []
        // TODO(corridor): keep only tiles within bufferMiles of the route's line and the POIs.
        for range in boxRanges(bounds, settings: settings) {
            for x in range.minX...range.maxX {
                for y in range.minY...range.maxY { tiles.append(TileID(z: range.zoom, x: x, y: y)) }
            }
        }
        return tiles
    }

    /// The tile ranges of a box at each zoom of `settings`.
    static func boxRanges(_ bounds: MapBounds, settings: MapSettings) -> [TileRange] {
        (settings.minZoom...settings.maxZoom).map { zoom in
            let northWest = tile(latitude: bounds.north, longitude: bounds.west, zoom: zoom)
            let southEast = tile(latitude: bounds.south, longitude: bounds.east, zoom: zoom)
            return TileRange(zoom: zoom, minX: northWest.x, maxX: southEast.x, minY: northWest.y, maxY: southEast.y)
        }
    }
}

extension Tour {
    /// The tour's map coverage under `settings`: its route's waypoints and its POIs.
    public func mapCoverage(_ settings: MapSettings) -> MapCoverage? {
        TileMath.coverage(route: route.waypoints.map(\.coordinate), pois: pois.map(\.location), settings: settings)
    }

    /// The tiles of the tour's map under `settings`, sorted by zoom, x, y.
    public func mapTiles(_ settings: MapSettings) -> [TileID] {
        TileMath.tiles(route: route.waypoints.map(\.coordinate), pois: pois.map(\.location), settings: settings)
    }
}

/// A latitude/longitude box (degrees).
public struct MapBounds: Sendable, Hashable, Codable {
    public var south: Double
    public var west: Double
    public var north: Double
    public var east: Double
}

/// The tiles of one zoom level, inclusive on both ends.
public struct TileRange: Sendable, Hashable, Codable {
    public var zoom: Int
    public var minX: Int
    public var maxX: Int
    public var minY: Int
    public var maxY: Int
    public var tileCount: Int { (maxX - minX + 1) * (maxY - minY + 1) }
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

    /// Whether package.json names a tile pack.
    public var hasPack: Bool { file != nil }
}
