import Foundation
import Testing

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackLoad
@testable import TourpackMaps
@testable import TourpackPlan

@Suite struct TileMathTests {
    /// Known tiles, computed independently from the OSM slippy-map formulas.
    @Test(arguments: [
        (47.0746, 12.7504, 12, 2193, 1439),  // Kaiser-Franz-Josefs-Höhe
        (47.0746, 12.7504, 16, 35089, 23030),
        (0.0, 0.0, 1, 1, 1),
        (51.5074, -0.1278, 10, 511, 340),  // London
        (-33.8688, 151.2093, 12, 3768, 2457),  // Sydney
        (85.1, 180.0, 3, 7, 0),  // clamped at the edges of the map
    ])
    func knownTiles(latitude: Double, longitude: Double, zoom: Int, x: Int, y: Int) {
        let tile = TileMath.tile(latitude: latitude, longitude: longitude, zoom: zoom)
        #expect(tile.x == x)
        #expect(tile.y == y)
    }

    @Test func bufferGrowsTheBoxByFiveMilesEachWay() throws {
        let bounds = try #require(TileMath.bufferedBounds(of: [Coordinate(latitude: 47, longitude: 12)], bufferMiles: 5))
        // 5 miles = 8046.72 m ≈ 0.0723° of latitude.
        #expect(abs((bounds.north - 47) - 0.07228) < 0.0001)
        #expect(abs((47 - bounds.south) - 0.07228) < 0.0001)
        // A degree of longitude is shorter at 47°, so the box is wider in degrees.
        #expect(bounds.east - 12 > 0.105 && bounds.east - 12 < 0.108)
    }

    @Test func coverageCountsEveryTileOfEveryZoom() throws {
        let coverage = try #require(
            TileMath.coverage(
                of: [Coordinate(latitude: 47.0417, longitude: 12.8427), Coordinate(latitude: 47.0746, longitude: 12.7504)],
                settings: MapSettings()))
        #expect(coverage.ranges.map(\.zoom) == [12, 13, 14, 15, 16])
        #expect(coverage.tileCount == coverage.ranges.reduce(0) { $0 + ($1.maxX - $1.minX + 1) * ($1.maxY - $1.minY + 1) })
        #expect(coverage.estimatedBytes == coverage.tileCount * 15 * 1024)
        // Each zoom doubles the tiles along each axis, near enough.
        let z12 = coverage.ranges[0], z13 = coverage.ranges[1]
        #expect(abs((z13.maxX - z13.minX + 1) - 2 * (z12.maxX - z12.minX + 1)) <= 2)
        // The buffered box contains the POI's own tile.
        let poi = TileMath.tile(latitude: 47.0746, longitude: 12.7504, zoom: 12)
        #expect((z12.minX...z12.maxX).contains(poi.x) && (z12.minY...z12.maxY).contains(poi.y))
    }
}

@Suite struct PlannerTests {
    @Test func planCountsPhasesCharactersAndDuration() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        let resources = Bundle.module.url(forResource: "Resources", withExtension: nil)!
        try FileManager.default.copyItem(
            at: resources.appendingPathComponent("good-tour.json"), to: fixture.root.appendingPathComponent("tours/good.json"))
        let config = try fixture.load(PipelineConfigTests.minimal + "formats: [aac, opus]\n")
        let tours = try TourLoader().loadAll(globs: config.tourGlobs)
        let plan = try Planner(config: config).plan(tours)
        #expect(plan.pois == 2)
        #expect(plan.phases == 3)
        let expectedCharacters = "Hello there.".count + "More detail here.".count + "The guided tour.".count
        #expect(plan.characters == expectedCharacters)
        #expect(plan.cacheHits == 0)
        #expect(plan.requests == plan.chunks)
        // 14 characters a second at rate 1.0, scaled by the voice's 1.25.
        #expect(abs(plan.estimatedDurationSeconds - Double(expectedCharacters) / (14 * 1.25)) < 0.001)
        #expect(plan.monthlyQuota == 1_000_000)
        // Captions on: each plain chunk goes to Google as SSML, so its `<speak>` is billed too.
        #expect(plan.quotaLeftAfter == 1_000_000 - expectedCharacters - plan.chunks * "<speak></speak>".count)
        #expect(plan.estimatedBytes(.opus) > 0 && plan.estimatedBytes(.mp3) == 0)
        let json = try PlanReport(plan: plan, config: config).json()
        let decoded = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect((decoded["totals"] as? [String: Any])?["characters"] as? Int == expectedCharacters)
        #expect(((decoded["tours"] as? [[String: Any]])?.first?["mapTiles"] as? [String: Any])?["tileCount"] != nil)
    }

    @Test("Tours planned side by side come back in tour order, each as planned alone, with every problem in tour order")
    func toursPlannedSideBySideKeepTheirOrder() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        let resources = Bundle.module.url(forResource: "Resources", withExtension: nil)!
        try FileManager.default.copyItem(
            at: resources.appendingPathComponent("good-tour.json"), to: fixture.root.appendingPathComponent("tours/good.json"))
        let config = try fixture.load(PipelineConfigTests.minimal)
        let good = try #require(try TourLoader().loadAll(globs: config.tourGlobs).first)
        let tours = (0..<24).map { index -> Tour in
            var tour = good
            tour.id = SafeID(validating: String(format: "00000000-0000-4000-8000-%012x", index + 1))!
            tour.sourceFile = "tour-\(index).json"
            tour.pois[0].narrations[.approaching] = Narration(
                text: "Tour \(index) begins here. " + String(repeating: "The road climbs. ", count: index))
            return tour
        }
        let planner = Planner(config: config)
        let plan = try planner.plan(tours)
        #expect(plan.tours.map(\.tour.id) == tours.map(\.id))
        for (tour, planned) in zip(tours, plan.tours) {
            var alone = DiagnosticCollector()
            #expect(planner.plan(tour, diagnostics: &alone)?.items == planned.items)
        }

        // Tours 5, 11 and 17 have a narration with nothing to speak.
        var broken = tours
        for index in [17, 5, 11] { broken[index].pois[0].narrations[.detailed] = Narration(text: "<speak> </speak>") }
        let error = #expect(throws: DiagnosticsError.self) { try planner.plan(broken) }
        #expect(error?.diagnostics.map(\.file) == ["tour-5.json", "tour-11.json", "tour-17.json"], "\(String(describing: error))")
    }
}
