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

    /// The tiles an app must download to cover `bounds` at each zoom.
    public static func coverage(of coordinates: [Coordinate], settings: MapSettings) -> MapCoverage? {
        guard let bounds = bufferedBounds(of: coordinates, bufferMiles: settings.bufferMiles) else { return nil }
        var ranges: [TileRange] = []
        for zoom in settings.minZoom...settings.maxZoom {
            let northWest = tile(latitude: bounds.north, longitude: bounds.west, zoom: zoom)
            let southEast = tile(latitude: bounds.south, longitude: bounds.east, zoom: zoom)
            ranges.append(TileRange(zoom: zoom, minX: northWest.x, maxX: southEast.x, minY: northWest.y, maxY: southEast.y))
        }
        let count = ranges.reduce(0) { $0 + $1.tileCount }
        return MapCoverage(
            minZoom: settings.minZoom, maxZoom: settings.maxZoom, bufferMiles: settings.bufferMiles, bounds: bounds,
            ranges: ranges, tileCount: count, estimatedBytes: count * settings.tileKB * 1024
        )
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

/// The offline map an app must fetch for a tour (package.json's `mapTiles`).
public struct MapCoverage: Sendable, Hashable, Codable {
    public var minZoom: Int
    public var maxZoom: Int
    public var bufferMiles: Double
    public var bounds: MapBounds
    public var ranges: [TileRange]
    public var tileCount: Int
    /// `tileCount` × `tileKB` KiB (15 KiB by default).
    public var estimatedBytes: Int
}
