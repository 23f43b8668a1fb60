import Foundation
package import TourpackCore

/// Slippy-map (XYZ, Web Mercator) tile math for the offline map coverage.
package enum TileMath {
    /// Web Mercator cannot show the poles; latitudes are clamped here.
    package static let maxLatitude = 85.051_128_779_806_59
    /// Metres per degree of latitude on the Web Mercator sphere (2πR/360, R = 6 378 137 m).
    package static let metersPerDegree = 2 * Double.pi * 6_378_137 / 360
    package static let metersPerMile = 1_609.344

    /// The tile containing a coordinate at a zoom level.
    package static func tile(latitude: Double, longitude: Double, zoom: Int) -> (x: Int, y: Int) {
        let n = Double(1 << zoom)
        let lat = min(max(latitude, -maxLatitude), maxLatitude) * .pi / 180
        let x = (longitude + 180) / 360 * n
        let y = (1 - asinh(tan(lat)) / .pi) / 2 * n
        let last = (1 << zoom) - 1
        // Clamped as a Double before the conversion: a longitude of 1e17 (a
        // package.json's hostile bufferMiles grows a box that far) would trap `Int(_:)`.
        func index(_ value: Double) -> Int {
            value.isNaN ? 0 : Int(min(max(value.rounded(.down), 0), Double(last)))
        }
        return (index(x), index(y))
    }

    /// The smallest box holding every coordinate, grown by `bufferMiles` on each side.
    package static func bufferedBounds(of coordinates: [Coordinate], bufferMiles: Double) -> MapBounds? {
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
    package static func coverage(of coordinates: [Coordinate], settings: MapSettings) -> MapCoverage? {
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
    package static func coverage(route: [Coordinate], pois: [Coordinate], settings: MapSettings) -> MapCoverage? {
        guard var coverage = coverage(of: route + pois, settings: settings) else { return nil }
        guard settings.selection == .corridor else { return coverage }
        let selected = tiles(route: route, pois: pois, settings: settings)
        // `selected` is sorted by zoom, so each zoom's tiles are one run of it.
        var ranges: [TileRange] = []
        for tile in selected {
            if let last = ranges.last, last.zoom == tile.z {
                ranges[ranges.count - 1].minX = min(last.minX, tile.x); ranges[ranges.count - 1].maxX = max(last.maxX, tile.x)
                ranges[ranges.count - 1].minY = min(last.minY, tile.y); ranges[ranges.count - 1].maxY = max(last.maxY, tile.y)
            } else {
                ranges.append(TileRange(zoom: tile.z, minX: tile.x, maxX: tile.x, minY: tile.y, maxY: tile.y))
            }
        }
        coverage.selection = .corridor
        coverage.ranges = ranges
        coverage.tileCount = selected.count
        coverage.estimatedBytes = selected.count * settings.tileKB * 1024
        return coverage
    }

    /// Every tile `settings.selection` keeps, sorted by zoom, x, y, without duplicates.
    ///
    /// - `bbox`: every tile of the ranges of `coverage(of:settings:)` for `route + pois`.
    /// - `corridor`: the tiles of those same ranges (so always a subset of
    ///   `bbox`) whose rectangle comes within `bufferMiles` of the route's
    ///   line or of a POI. The line is the waypoints joined in order
    ///   (w0–w1, w1–w2, …); a single waypoint is a point, and so is a POI.
    ///
    /// The corridor's distance, exactly, so that another implementation can
    /// reproduce it (`Tests/TourpackKitTests/Resources/tilemath/crosscheck.py` does):
    /// - Latitudes are clamped to ±`maxLatitude`, as `tile(latitude:longitude:zoom:)`
    ///   does. Longitudes stay in [-180, 180]: a route is never wrapped across
    ///   the antimeridian, as `bbox` never is.
    /// - Each segment (and each point) is measured in its own local
    ///   equirectangular plane, in metres: y = latitude × `metersPerDegree`,
    ///   x = longitude × cos(φref) × `metersPerDegree`. φref is the most
    ///   poleward |latitude| of the segment's two ends, pushed poleward by the
    ///   buffer's latitude delta (bufferMiles × `metersPerMile` / `metersPerDegree`)
    ///   and clamped to `maxLatitude` and 89°: the rule `bufferedBounds` uses
    ///   for the whole box. A smaller cosine makes distances shorter, so the
    ///   corridor is never short, and never wider in longitude than the box.
    /// - A tile's rectangle is its longitude/latitude bounds (west = x/2^z × 360 − 180,
    ///   north = atan(sinh(π(1 − 2y/2^z))) in degrees), an axis-aligned
    ///   rectangle in that plane.
    /// - The distance between the rectangle and the segment is 0 when they
    ///   intersect, else the least of: each segment end to the rectangle, and
    ///   each rectangle corner to the segment (Euclidean, in the plane).
    /// - A tile is kept when that distance, for some segment or POI, is at most
    ///   bufferMiles × `metersPerMile` + 1e-6 m. The micrometre absorbs
    ///   rounding, so with a buffer of 0 a POI still keeps the tile it is in.
    ///
    /// Cost: each segment tests only the tiles of its own box grown by the
    /// buffer (and within a column only until the first kept tile from each
    /// end), and the kept tiles are gathered as runs per column, so a long
    /// route costs about segments × (the buffer's tiles), never tiles × segments.
    package static func tiles(route: [Coordinate], pois: [Coordinate], settings: MapSettings) -> [TileID] {
        guard let bounds = bufferedBounds(of: route + pois, bufferMiles: settings.bufferMiles) else { return [] }
        let ranges = boxRanges(bounds, settings: settings)
        switch settings.selection {
        case .bbox:
            var tiles: [TileID] = []
            tiles.reserveCapacity(ranges.reduce(0) { $0 + $1.tileCount })
            for range in ranges {
                for x in range.minX...range.maxX {
                    for y in range.minY...range.maxY { tiles.append(TileID(z: range.zoom, x: x, y: y)) }
                }
            }
            return tiles
        case .corridor:
            let pieces = CorridorPiece.pieces(route: route, pois: pois, bufferMiles: settings.bufferMiles)
            let reach = settings.bufferMiles * metersPerMile + corridorEpsilonMeters
            return ranges.flatMap { corridorTiles(in: $0, pieces: pieces, reach: reach) }
        }
    }

    /// Slack on the corridor's distance test, in metres: rounding, not geography.
    static let corridorEpsilonMeters = 1e-6

    /// The western edge of column `x` at `zoom`, in degrees (the eastern edge is column x + 1's).
    static func tileWest(_ x: Int, zoom: Int) -> Double {
        Double(x) / Double(1 << zoom) * 360 - 180
    }

    /// The northern edge of row `y` at `zoom`, in degrees (the southern edge is row y + 1's).
    static func tileNorth(_ y: Int, zoom: Int) -> Double {
        atan(sinh(.pi * (1 - 2 * Double(y) / Double(1 << zoom)))) * 180 / .pi
    }

    /// The tiles of `range` within `reach` metres of some piece, sorted by x, y.
    static func corridorTiles(in range: TileRange, pieces: [CorridorPiece], reach: Double) -> [TileID] {
        let zoom = range.zoom
        // The box's tile edges, once per zoom: column x spans west[x − minX] to west[x − minX + 1].
        let west = (range.minX...range.maxX + 1).map { tileWest($0, zoom: zoom) }
        let north = (range.minY...range.maxY + 1).map { tileNorth($0, zoom: zoom) * metersPerDegree }
        // Kept rows per column, as runs; a column's runs from different pieces may overlap.
        var runs = [[ClosedRange<Int>]](repeating: [], count: range.maxX - range.minX + 1)
        // Candidates come from the piece's box grown a metre past `reach`, so
        // no tile within reach is missed at the box's edge; the test decides.
        let margin = (reach + 1) / metersPerDegree
        for piece in pieces {
            let lonMargin = margin / piece.scale
            let northWest = tile(
                latitude: min(max(piece.a.latitude, piece.b.latitude) + margin, maxLatitude),
                longitude: max(min(piece.a.longitude, piece.b.longitude) - lonMargin, -180), zoom: zoom)
            let southEast = tile(
                latitude: max(min(piece.a.latitude, piece.b.latitude) - margin, -maxLatitude),
                longitude: min(max(piece.a.longitude, piece.b.longitude) + lonMargin, 180), zoom: zoom)
            let x0 = max(northWest.x, range.minX), x1 = min(southEast.x, range.maxX)
            let y0 = max(northWest.y, range.minY), y1 = min(southEast.y, range.maxY)
            guard x0 <= x1, y0 <= y1 else { continue }
            let toX = piece.scale * metersPerDegree
            // A column's strip meets the segment's buffer (a convex shape) in a
            // convex set, so the rows it keeps are one run: scan in from both ends.
            for x in x0...x1 {
                let left = west[x - range.minX] * toX, right = west[x - range.minX + 1] * toX
                func keeps(_ y: Int) -> Bool {
                    piece.distance(left: left, right: right, bottom: north[y - range.minY + 1], top: north[y - range.minY]) <= reach
                }
                var first = y0
                while first <= y1, !keeps(first) { first += 1 }
                guard first <= y1 else { continue }
                var last = y1
                while last > first, !keeps(last) { last -= 1 }
                runs[x - range.minX].append(first...last)
            }
        }
        var tiles: [TileID] = []
        for (column, columnRuns) in runs.enumerated() where !columnRuns.isEmpty {
            var next = Int.min  // the first row not yet emitted in this column
            for run in columnRuns.sorted(by: { $0.lowerBound < $1.lowerBound }) where run.upperBound >= next {
                for y in max(run.lowerBound, next)...run.upperBound {
                    tiles.append(TileID(z: zoom, x: range.minX + column, y: y))
                }
                next = run.upperBound + 1
            }
        }
        return tiles
    }

    /// One piece of the corridor's spine, a segment in its own local plane
    /// (see `tiles(route:pois:settings:)`). A point is a segment from itself to itself.
    struct CorridorPiece {
        /// The ends, latitudes clamped to ±`maxLatitude`.
        var a: Coordinate
        var b: Coordinate
        /// cos(φref): the plane's metres per degree of longitude, over `metersPerDegree`.
        var scale: Double
        // The ends in the plane, in metres.
        private var ax: Double, ay: Double, bx: Double, by: Double

        init(_ a: Coordinate, _ b: Coordinate, latitudeDelta: Double) {
            let a = Coordinate(latitude: min(max(a.latitude, -maxLatitude), maxLatitude), longitude: a.longitude)
            let b = Coordinate(latitude: min(max(b.latitude, -maxLatitude), maxLatitude), longitude: b.longitude)
            let reference = min(min(max(abs(a.latitude), abs(b.latitude)) + latitudeDelta, maxLatitude), 89)
            self.a = a
            self.b = b
            scale = cos(reference * .pi / 180)
            ax = a.longitude * scale * metersPerDegree; ay = a.latitude * metersPerDegree
            bx = b.longitude * scale * metersPerDegree; by = b.latitude * metersPerDegree
        }

        /// The route's segments (a lone waypoint as a point), then each POI as a point.
        static func pieces(route: [Coordinate], pois: [Coordinate], bufferMiles: Double) -> [CorridorPiece] {
            let latitudeDelta = bufferMiles * metersPerMile / metersPerDegree
            var pieces: [CorridorPiece] = []
            if route.count == 1 { pieces.append(CorridorPiece(route[0], route[0], latitudeDelta: latitudeDelta)) }
            for (a, b) in zip(route, route.dropFirst()) { pieces.append(CorridorPiece(a, b, latitudeDelta: latitudeDelta)) }
            for poi in pois { pieces.append(CorridorPiece(poi, poi, latitudeDelta: latitudeDelta)) }
            return pieces
        }

        /// Metres from this piece to the rectangle [left, right] × [bottom, top] of its plane:
        /// 0 when they meet, else the least of end-to-rectangle and corner-to-segment.
        func distance(left: Double, right: Double, bottom: Double, top: Double) -> Double {
            if meets(left: left, right: right, bottom: bottom, top: top) { return 0 }
            func toRectangle(_ x: Double, _ y: Double) -> Double {
                let dx = max(max(left - x, x - right), 0), dy = max(max(bottom - y, y - top), 0)
                return dx * dx + dy * dy
            }
            let dx = bx - ax, dy = by - ay, length = dx * dx + dy * dy
            func toSegment(_ x: Double, _ y: Double) -> Double {
                let t = length == 0 ? 0 : min(max(((x - ax) * dx + (y - ay) * dy) / length, 0), 1)
                let ex = ax + t * dx - x, ey = ay + t * dy - y
                return ex * ex + ey * ey
            }
            let ends = min(toRectangle(ax, ay), toRectangle(bx, by))
            let corners = min(min(toSegment(left, bottom), toSegment(left, top)), min(toSegment(right, bottom), toSegment(right, top)))
            return min(ends, corners).squareRoot()
        }

        /// Whether the segment touches the closed rectangle (Liang–Barsky clipping).
        private func meets(left: Double, right: Double, bottom: Double, top: Double) -> Bool {
            var enter = 0.0, leave = 1.0
            // Each edge: the segment is inside where p·t ≤ q.
            func clip(_ p: Double, _ q: Double) -> Bool {
                if p == 0 { return q >= 0 }
                let t = q / p
                if p < 0 { enter = max(enter, t) } else { leave = min(leave, t) }
                return enter <= leave
            }
            let dx = bx - ax, dy = by - ay
            return clip(-dx, ax - left) && clip(dx, right - ax) && clip(-dy, ay - bottom) && clip(dy, top - ay)
        }
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
    package func mapCoverage(_ settings: MapSettings) -> MapCoverage? {
        TileMath.coverage(route: route.waypoints.map(\.coordinate), pois: pois.map(\.location), settings: settings)
    }

    /// The tiles of the tour's map under `settings`, sorted by zoom, x, y.
    package func mapTiles(_ settings: MapSettings) -> [TileID] {
        TileMath.tiles(route: route.waypoints.map(\.coordinate), pois: pois.map(\.location), settings: settings)
    }
}
