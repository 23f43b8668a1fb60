import Foundation
import Testing
import TourpackTesting

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackMaps

/// The `corridor` tile selection: only tiles within `bufferMiles` of the
/// route's line or a POI, always inside the `bbox` selection.
@Suite(.offThePool) struct TileMathCorridorTests {
    static func settings(_ selection: TileSelection, zooms: ClosedRange<Int> = 12...14, bufferMiles: Double = 2) -> MapSettings {
        MapSettings(minZoom: zooms.lowerBound, maxZoom: zooms.upperBound, bufferMiles: bufferMiles, selection: selection)
    }

    /// Both selections of one route, checking what holds for every corridor.
    static func both(
        route: [Coordinate], pois: [Coordinate] = [], zooms: ClosedRange<Int> = 12...14, bufferMiles: Double = 2
    ) -> (bbox: [TileID], corridor: [TileID]) {
        let bbox = TileMath.tiles(route: route, pois: pois, settings: settings(.bbox, zooms: zooms, bufferMiles: bufferMiles))
        let corridor = TileMath.tiles(route: route, pois: pois, settings: settings(.corridor, zooms: zooms, bufferMiles: bufferMiles))
        #expect(Set(corridor).isSubset(of: Set(bbox)), "corridor tiles outside the box: \(Set(corridor).subtracting(bbox).sorted())")
        #expect(corridor == corridor.sorted(), "not sorted by z, x, y")
        #expect(Set(corridor).count == corridor.count, "duplicates")
        return (bbox, corridor)
    }

    static func tile(_ c: Coordinate, zoom: Int) -> TileID {
        let t = TileMath.tile(latitude: c.latitude, longitude: c.longitude, zoom: zoom)
        return TileID(z: zoom, x: t.x, y: t.y)
    }

    /// `miles` from `c` towards the north (negative: south), on the sphere's meridian.
    static func north(of c: Coordinate, miles: Double) -> Coordinate {
        Coordinate(latitude: c.latitude + miles * TileMath.metersPerMile / TileMath.metersPerDegree, longitude: c.longitude)
    }

    @Test func diagonalRouteNeedsFarFewerTilesThanTheBox() {
        let start = Coordinate(latitude: 46.0, longitude: 7.0), end = Coordinate(latitude: 46.6, longitude: 8.2)
        let (bbox, corridor) = Self.both(route: [start, end])
        #expect(Double(corridor.count) < 0.6 * Double(bbox.count), "corridor \(corridor.count) of bbox \(bbox.count)")
        // The line itself is covered at every zoom: its ends and its middle (a
        // straight line in the local plane is straight in degrees too).
        let middle = Coordinate(latitude: 46.3, longitude: 7.6)
        for zoom in 12...14 {
            for point in [start, middle, end] { #expect(corridor.contains(Self.tile(point, zoom: zoom)), "\(point) at z\(zoom)") }
        }
        // The box's far corners (north-west, south-east) are miles from the line.
        for zoom in 12...14 {
            let level = bbox.filter { $0.z == zoom }
            let minX = level.map(\.x).min()!, minY = level.map(\.y).min()!
            let maxX = level.map(\.x).max()!, maxY = level.map(\.y).max()!
            #expect(!corridor.contains(TileID(z: zoom, x: minX, y: minY)))
            #expect(!corridor.contains(TileID(z: zoom, x: maxX, y: maxY)))
        }
    }

    @Test func northSouthRouteKeepsMostOfItsNarrowBox() {
        let route = [Coordinate(latitude: 46.0137, longitude: 7.5071), Coordinate(latitude: 46.7219, longitude: 7.5071)]
        let (bbox, corridor) = Self.both(route: route)
        // Along a meridian the box is nearly the corridor: only its rounded ends differ.
        #expect(Double(corridor.count) > 0.8 * Double(bbox.count), "corridor \(corridor.count) of bbox \(bbox.count)")
        #expect(corridor.count <= bbox.count)
        // A point 1.5 miles due east of the line's middle is inside the 2-mile corridor.
        let middle = Coordinate(latitude: 46.3678, longitude: 7.5071)
        let lonPerMile = TileMath.metersPerMile / (TileMath.metersPerDegree * cos(46.3678 * .pi / 180))
        let east = Coordinate(latitude: middle.latitude, longitude: middle.longitude + 1.5 * lonPerMile)
        for zoom in 12...14 { #expect(corridor.contains(Self.tile(east, zoom: zoom))) }
    }

    @Test func poiOffTheRouteAddsItsOwnNeighbourhood() {
        let route = [Coordinate(latitude: 46.0, longitude: 7.0), Coordinate(latitude: 46.6, longitude: 8.2)]
        // About 15 miles north-west of the line.
        let poi = Coordinate(latitude: 46.4613, longitude: 7.1127)
        let without = Self.both(route: route).corridor
        let (_, with) = Self.both(route: route, pois: [poi])
        #expect(Set(without).isSubset(of: Set(with)))
        for zoom in 12...14 {
            let own = Self.tile(poi, zoom: zoom)
            #expect(!without.contains(own))
            #expect(with.contains(own))
            // One mile north of the POI is inside its 2-mile neighbourhood; five miles is not.
            #expect(with.contains(Self.tile(Self.north(of: poi, miles: 1), zoom: zoom)))
            #expect(!with.contains(Self.tile(Self.north(of: poi, miles: 5), zoom: zoom)))
        }
        #expect(with.count > without.count)
    }

    @Test func zeroBufferKeepsTheTilesOfTheLineAndThePOIs() {
        let route = [Coordinate(latitude: 46.0123, longitude: 7.0071), Coordinate(latitude: 46.6047, longitude: 8.2113)]
        let pois = [Coordinate(latitude: 46.4613, longitude: 7.1127), Coordinate(latitude: 46.1371, longitude: 8.0519)]
        let (bbox, corridor) = Self.both(route: route, pois: pois, zooms: 12...16, bufferMiles: 0)
        for zoom in 12...16 {
            for point in route + pois { #expect(corridor.contains(Self.tile(point, zoom: zoom)), "\(point) at z\(zoom)") }
            // Points along the line, in degrees: the line is straight in degrees.
            for step in 1..<20 {
                let t = Double(step) / 20
                let point = Coordinate(
                    latitude: route[0].latitude + t * (route[1].latitude - route[0].latitude),
                    longitude: route[0].longitude + t * (route[1].longitude - route[0].longitude))
                #expect(corridor.contains(Self.tile(point, zoom: zoom)))
            }
            // A lone POI at buffer 0 keeps its own tile and nothing around it
            // (these POIs are not on a tile's edge).
            for poi in pois {
                let own = Self.tile(poi, zoom: zoom)
                #expect(!corridor.contains(TileID(z: zoom, x: own.x - 1, y: own.y)))
                #expect(!corridor.contains(TileID(z: zoom, x: own.x, y: own.y + 1)))
            }
        }
        #expect(corridor.count * 10 < bbox.count)
    }

    @Test func singleWaypointIsAPoint() {
        let point = Coordinate(latitude: 46.2791, longitude: 7.6113)
        // Buffer 0: exactly the waypoint's tile at each zoom.
        let (_, alone) = Self.both(route: [point], zooms: 12...16, bufferMiles: 0)
        #expect(alone == (12...16).map { Self.tile(point, zoom: $0) })
        // Buffer 2: a disc, so at z16 (tiles of about 400 m) the box's corners fall outside.
        let (bbox, disc) = Self.both(route: [point], zooms: 12...16, bufferMiles: 2)
        let z16 = bbox.filter { $0.z == 16 }
        #expect(!disc.contains(z16.first!) && !disc.contains(z16.last!))
        for zoom in 12...16 {
            #expect(disc.contains(Self.tile(point, zoom: zoom)))
            #expect(disc.contains(Self.tile(Self.north(of: point, miles: 1.9), zoom: zoom)))
            #expect(disc.contains(Self.tile(Self.north(of: point, miles: -1.9), zoom: zoom)))
        }
        // A route that repeats one waypoint is the same point.
        #expect(Self.both(route: [point, point], zooms: 12...16, bufferMiles: 2).corridor == disc)
    }

    @Test func overlappingPiecesGiveEachTileOnce() {
        // Out and back over the same road, then on, with POIs on the road.
        let a = Coordinate(latitude: 47.0417, longitude: 12.8427), b = Coordinate(latitude: 47.0746, longitude: 12.7504)
        let c = Coordinate(latitude: 47.1213, longitude: 12.8079)
        let (_, corridor) = Self.both(route: [a, b, a, c], pois: [a, b, c], zooms: 12...16, bufferMiles: 1)
        // b→a is a→b again and the POIs are ends of the line: the tiles of a→b and a→c, once each.
        let ab = Self.both(route: [a, b], zooms: 12...16, bufferMiles: 1).corridor
        let ac = Self.both(route: [a, c], zooms: 12...16, bufferMiles: 1).corridor
        #expect(corridor == Set(ab + ac).sorted())
        #expect(corridor.count < ab.count + ac.count)
    }

    @Test func coverageDescribesTheCorridorTiles() throws {
        let route = [Coordinate(latitude: 46.0, longitude: 7.0), Coordinate(latitude: 46.6, longitude: 8.2)]
        let pois = [Coordinate(latitude: 46.4613, longitude: 7.1127)]
        let settings = Self.settings(.corridor, zooms: 12...15, bufferMiles: 2)
        let tiles = TileMath.tiles(route: route, pois: pois, settings: settings)
        let coverage = try #require(TileMath.coverage(route: route, pois: pois, settings: settings))
        let box = try #require(TileMath.coverage(of: route + pois, settings: settings))
        #expect(coverage.selection == .corridor)
        #expect(coverage.bounds == box.bounds)
        #expect(coverage.tileCount == tiles.count)
        #expect(coverage.estimatedBytes == tiles.count * 15 * 1024)
        #expect(coverage.ranges.map(\.zoom) == Array(12...15))
        for range in coverage.ranges {
            let level = tiles.filter { $0.z == range.zoom }
            #expect(range.minX == level.map(\.x).min() && range.maxX == level.map(\.x).max())
            #expect(range.minY == level.map(\.y).min() && range.maxY == level.map(\.y).max())
        }
        #expect(coverage.tileCount < box.tileCount)
    }

    @Test func bboxTilesAreEveryTileOfTheRanges() throws {
        let route = [Coordinate(latitude: 46.0, longitude: 7.0), Coordinate(latitude: 46.6, longitude: 8.2)]
        let pois = [Coordinate(latitude: 46.4613, longitude: 7.1127)]
        let settings = Self.settings(.bbox, zooms: 12...15)
        let tiles = TileMath.tiles(route: route, pois: pois, settings: settings)
        let coverage = try #require(TileMath.coverage(route: route, pois: pois, settings: settings))
        #expect(coverage == TileMath.coverage(of: route + pois, settings: settings))
        #expect(tiles.count == coverage.tileCount)
        #expect(tiles == tiles.sorted())
        var expected: [TileID] = []
        for r in coverage.ranges {
            for x in r.minX...r.maxX { for y in r.minY...r.maxY { expected.append(TileID(z: r.zoom, x: x, y: y)) } }
        }
        #expect(tiles == expected)
    }

    @Test func nothingToCoverGivesNoTiles() {
        #expect(TileMath.tiles(route: [], pois: [], settings: Self.settings(.corridor)).isEmpty)
        // POIs alone still have a corridor.
        let poi = Coordinate(latitude: 46.4613, longitude: 7.1127)
        let tiles = TileMath.tiles(route: [], pois: [poi], settings: Self.settings(.corridor))
        #expect((12...14).allSatisfy { tiles.contains(Self.tile(poi, zoom: $0)) })
    }
}

/// TileMath against an independent implementation: mercantile's tile math and
/// shapely's distances in `Resources/tilemath/crosscheck.py`, run by python3
/// (`make setup-test` installs both). Tile for tile, for bbox ranges and corridors.
@Suite(.offThePool) struct TileMathCrossCheckTests {
    struct Case {
        var name: String
        var route: [Coordinate]
        var pois: [Coordinate] = []
        var zooms: ClosedRange<Int>
        var bufferMiles: Double
    }

    // Coordinates with four or more decimals, none on a tile's edge.
    static let cases: [Case] = {
        let alps = [Coordinate(latitude: 46.0123, longitude: 7.0071), Coordinate(latitude: 46.6047, longitude: 8.2113)]
        let glockner = [(47.0417, 12.8427), (47.0746, 12.7504), (47.1213, 12.8079), (47.0871, 12.8343)]
            .map { Coordinate(latitude: $0.0, longitude: $0.1) }
        let tromso = [(69.6492, 18.9553), (69.7269, 19.3217), (70.0113, 19.8547)].map { Coordinate(latitude: $0.0, longitude: $0.1) }
        let patagonia = [(-50.9423, -73.4068), (-51.0519, -72.9874), (-50.3379, -72.2648)].map {
            Coordinate(latitude: $0.0, longitude: $0.1)
        }
        let rainier = [(46.8523, -121.7603), (46.7858, -121.7351), (46.9104, -121.6427)].map { Coordinate(latitude: $0.0, longitude: $0.1) }
        let nullIsland = [Coordinate(latitude: -0.0731, longitude: -0.1237), Coordinate(latitude: 0.2139, longitude: 0.3317)]
        // Far north with a wide buffer, where φref's push poleward moves the corridor's edge by hundreds of metres.
        let svalbard = [(78.2232, 15.6267), (78.6558, 16.3281), (78.9254, 11.9346)].map { Coordinate(latitude: $0.0, longitude: $0.1) }
        let tasmania = [(-42.8821, 147.3271), (-43.1467, 147.8526)].map { Coordinate(latitude: $0.0, longitude: $0.1) }
        var cases = [
            Case(name: "alps diagonal", route: alps, zooms: 12...14, bufferMiles: 2),
            Case(
                name: "alps diagonal, wide", route: alps, pois: [Coordinate(latitude: 46.4613, longitude: 7.1127)], zooms: 11...13,
                bufferMiles: 5),
            Case(
                name: "alps, no buffer", route: alps, pois: [Coordinate(latitude: 46.1371, longitude: 8.0519)], zooms: 12...15,
                bufferMiles: 0),
            Case(
                name: "grossglockner loop", route: glockner, pois: [Coordinate(latitude: 47.0561, longitude: 12.7933)], zooms: 12...15,
                bufferMiles: 1),
            Case(
                name: "tromsø 69°N", route: tromso, pois: [Coordinate(latitude: 69.8217, longitude: 19.0091)], zooms: 11...13,
                bufferMiles: 3),
            Case(name: "tromsø, half a mile", route: tromso, zooms: 13...14, bufferMiles: 0.5),
            Case(name: "svalbard 78°N, wide", route: svalbard, zooms: 10...12, bufferMiles: 15),
            Case(name: "patagonia south-west", route: patagonia, zooms: 10...12, bufferMiles: 5),
            Case(
                name: "rainier west", route: rainier, pois: [Coordinate(latitude: 46.8001, longitude: -121.8023)], zooms: 12...14,
                bufferMiles: 2),
            Case(name: "null island, four quadrants", route: nullIsland, zooms: 12...14, bufferMiles: 1.5),
            Case(name: "tasmania south-east", route: tasmania, zooms: 11...13, bufferMiles: 2.5),
            Case(name: "single waypoint", route: [Coordinate(latitude: 46.2791, longitude: 7.6113)], zooms: 12...16, bufferMiles: 1),
            Case(
                name: "pois only", route: [],
                pois: [Coordinate(latitude: 46.2791, longitude: 7.6113), Coordinate(latitude: 46.3013, longitude: 7.7021)], zooms: 13...15,
                bufferMiles: 0.7),
        ]
        // The demo tours, by their waypoints and POIs.
        cases.append(
            Case(
                name: "grossglockner, demo buffer", route: glockner, pois: [Coordinate(latitude: 47.0746, longitude: 12.7504)],
                zooms: 12...13, bufferMiles: 5))
        return cases
    }()

    struct PythonResult: Decodable {
        var bounds: [Double]
        var ranges: [[Int]]
        var corridor: [[Int]]
    }

    static func runPython(_ cases: [Case]) throws -> [String: PythonResult] {
        let resources = try #require(Bundle.module.url(forResource: "Resources", withExtension: nil))
        let script = resources.appendingPathComponent("tilemath/crosscheck.py")
        let scratch = try TemporaryFolder.make("tilemath")
        defer { TemporaryFolder.remove(scratch) }
        let input = scratch.appendingPathComponent("input.json")
        let json: [String: Any] = [
            "cases": cases.map { c in
                [
                    "name": c.name, "route": c.route.map { [$0.latitude, $0.longitude] },
                    "pois": c.pois.map { [$0.latitude, $0.longitude] },
                    "minZoom": c.zooms.lowerBound, "maxZoom": c.zooms.upperBound, "bufferMiles": c.bufferMiles,
                ] as [String: Any]
            }
        ]
        try JSONSerialization.data(withJSONObject: json).write(to: input)
        let output = scratch.appendingPathComponent("output.json"), errors = scratch.appendingPathComponent("errors.txt")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script.path, input.path]
        process.standardOutput = try FileHandle(forWritingTo: output)
        process.standardError = try FileHandle(forWritingTo: errors)
        try process.run()
        process.waitUntilExit()
        let stdout = try Data(contentsOf: output)
        guard process.terminationStatus == 0 else {
            let message = String(decoding: stdout + (try Data(contentsOf: errors)), as: UTF8.self)
            throw CrossCheckUnavailable(message: "crosscheck.py exited \(process.terminationStatus): \(message)")
        }
        return try JSONDecoder().decode([String: PythonResult].self, from: stdout)
    }

    struct CrossCheckUnavailable: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    @Test func swiftAndPythonChooseTheSameTiles() throws {
        let python = try Self.runPython(Self.cases)
        #expect(python.count == Self.cases.count)
        for c in Self.cases {
            let theirs = try #require(python[c.name], "no answer for \(c.name)")
            let settings = MapSettings(
                minZoom: c.zooms.lowerBound, maxZoom: c.zooms.upperBound, bufferMiles: c.bufferMiles, selection: .bbox)
            let box = try #require(TileMath.coverage(of: c.route + c.pois, settings: settings))
            let bounds = [box.bounds.south, box.bounds.west, box.bounds.north, box.bounds.east]
            #expect(zip(bounds, theirs.bounds).allSatisfy { abs($0 - $1) < 1e-9 }, "\(c.name): bounds \(bounds) vs \(theirs.bounds)")
            let ranges = box.ranges.map { [$0.zoom, $0.minX, $0.maxX, $0.minY, $0.maxY] }
            #expect(ranges == theirs.ranges, "\(c.name): bbox ranges \(ranges) vs mercantile's \(theirs.ranges)")

            var corridorSettings = settings
            corridorSettings.selection = .corridor
            let ours = Set(TileMath.tiles(route: c.route, pois: c.pois, settings: corridorSettings))
            let expected = Set(theirs.corridor.map { TileID(z: $0[0], x: $0[1], y: $0[2]) })
            let onlyOurs = ours.subtracting(expected).sorted(), onlyTheirs = expected.subtracting(ours).sorted()
            #expect(
                onlyOurs.isEmpty && onlyTheirs.isEmpty,
                "\(c.name): \(ours.count) vs \(expected.count) tiles; only Swift keeps \(onlyOurs), only Python keeps \(onlyTheirs)")
            // The comparison means something: the corridor is smaller than the box, and not empty.
            #expect(!expected.isEmpty && expected.count <= box.tileCount)
        }
    }
}
