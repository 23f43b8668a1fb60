import Foundation
import GRDB
import Testing

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackMaps

/// The tile pack writer: MBTiles 1.3 that `MBTilesReader` reads back, in
/// TMS rows, with the same bytes for the same tiles.
@Suite struct MBTilesWriterTests {
    static let metadata = MBTilesMetadata(
        name: "Validate Road", format: .png,
        bounds: MapBounds(south: 46.969_298_3, west: 12.644_051_2, north: 47.197_301_7, east: 12.948_948_8),
        minZoom: 12, maxZoom: 13, attribution: "© OpenStreetMap contributors", description: "tourpack test pack")

    /// Not a real PNG, just its signature and a payload per tile: the writer stores bytes, it never decodes them.
    static func bytes(_ tile: TileID) -> [UInt8] {
        [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array("\(tile)".utf8) + [UInt8](repeating: UInt8(tile.x & 0xFF), count: 300)
    }

    /// 2,500 tiles: more than two transactions' worth.
    static let tiles: [TileID] = (12...13).flatMap { z in
        (0..<50).flatMap { x in (0..<25).map { y in TileID(z: z, x: 2_180 + x, y: 1_450 + y) } }
    }

    static func write(_ url: URL, tiles: [TileID] = tiles) throws -> (size: Int64, sha256: String) {
        let writer = try MBTilesWriter(creating: url, metadata: metadata)
        for tile in tiles { try writer.add(tile, data: bytes(tile)) }
        try writer.finish()
        return try writer.digest()
    }

    @Test func writesAPackTheReaderReadsBack() throws {
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        let url = scratch.root.appendingPathComponent("tiles.mbtiles")
        let (size, sha256) = try Self.write(url)
        #expect(size > 0 && sha256.count == 64)
        // Nothing beside it: the pack is built without a journal.
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.root.path) == ["tiles.mbtiles"])

        let reader = try MBTilesReader(url)
        let metadata = try reader.metadata()
        #expect(metadata["bounds"] == "12.6440512,46.9692983,12.9489488,47.1973017")
        #expect(metadata["center"] == "12.7965,47.0833,12")
        #expect(metadata["format"] == "png" && metadata["minzoom"] == "12" && metadata["maxzoom"] == "13")
        #expect(metadata["attribution"] == "© OpenStreetMap contributors" && metadata["name"] == "Validate Road")
        #expect(metadata["type"] == "baselayer" && metadata["version"] == "1")
        let tile = TileID(z: 13, x: 2_200, y: 1_460)
        #expect(try reader.tile(tile) == Self.bytes(tile))
        #expect(try reader.tile(TileID(z: 13, x: 2_200, y: 1_490)) == nil)

        try reader.read { db in
            #expect(try Int.fetchOne(db, sql: "PRAGMA application_id") == 0x4d50_4258)
            #expect(try Int.fetchOne(db, sql: "PRAGMA page_size") == 4096)
            #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM tiles") == Self.tiles.count)
            // TMS rows: row = 2^z − 1 − y.
            let row = try Int.fetchOne(
                db, sql: "SELECT tile_row FROM tiles WHERE zoom_level = 13 AND tile_column = 2200 AND tile_data = ?",
                arguments: [Data(Self.bytes(tile))])
            #expect(row == (1 << 13) - 1 - 1_460)
            #expect(try String.fetchAll(db, sql: "PRAGMA integrity_check") == ["ok"])
        }
    }

    @Test func theSameTilesGiveTheSameBytes() throws {
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        let first = scratch.root.appendingPathComponent("a.mbtiles")
        let second = scratch.root.appendingPathComponent("b.mbtiles")
        let a = try Self.write(first)
        let b = try Self.write(second)
        #expect(a == b)
        #expect(try Data(contentsOf: first) == Data(contentsOf: second))
        // And a different tile set gives a different file.
        let third = scratch.root.appendingPathComponent("c.mbtiles")
        #expect(try Self.write(third, tiles: Array(Self.tiles.dropLast())).sha256 != a.sha256)
    }

    @Test func theTempAtomicFileMakesIsAcceptedAndAFullFileIsNot() throws {
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        let final = scratch.root.appendingPathComponent("tiles.mbtiles")
        let temp = try AtomicFile.temporaryURL(for: final)
        _ = try Self.write(temp, tiles: Array(Self.tiles.prefix(3)))
        #expect(throws: MBTilesError.self) { try MBTilesWriter(creating: temp, metadata: Self.metadata) }
    }

    @Test func tilesOutOfOrderOrOffTheMapAreRefused() throws {
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        let writer = try MBTilesWriter(creating: scratch.root.appendingPathComponent("tiles.mbtiles"), metadata: Self.metadata)
        try writer.add(TileID(z: 12, x: 5, y: 5), data: [1])
        #expect(throws: MBTilesError.self) { try writer.add(TileID(z: 12, x: 5, y: 5), data: [1]) }
        #expect(throws: MBTilesError.self) { try writer.add(TileID(z: 12, x: 4, y: 9), data: [1]) }
        #expect(throws: MBTilesError.self) { try writer.add(TileID(z: 12, x: 4096, y: 0), data: [1]) }
        try writer.add(TileID(z: 13, x: 0, y: 0), data: [1])
        try writer.finish()
        #expect(throws: MBTilesError.self) { try writer.add(TileID(z: 13, x: 0, y: 1), data: [1]) }
    }

    /// MBTiles 1.3 requires a `json` row with `vector_layers` for vector tiles, and only for them.
    @Test func vectorPacksCarryTheirLayers() {
        let box = MapBounds(south: 46, west: 7, north: 47, east: 8)
        let raster = MBTilesMetadata(name: "r", format: .png, bounds: box, minZoom: 10, maxZoom: 12, attribution: "a")
        #expect(!raster.rows.contains { $0.name == "json" })
        let vector = MBTilesMetadata(name: "v", format: .pbf, bounds: box, minZoom: 10, maxZoom: 12, attribution: "a")
        #expect(vector.rows.first { $0.name == "json" }?.value == #"{"vector_layers":[]}"#)
        let layers = #"{"vector_layers":[{"id":"roads","fields":{}}]}"#
        let extract = MBTilesMetadata(name: "v", format: .pbf, bounds: box, minZoom: 10, maxZoom: 12, attribution: "a", json: layers)
        #expect(extract.rows.first { $0.name == "json" }?.value == layers)
        #expect(extract.rows.map(\.name) == extract.rows.map(\.name).sorted())
    }

    @Test func numbersHaveOneFixedForm() {
        #expect(MBTilesMetadata.number(12.5) == "12.5")
        #expect(MBTilesMetadata.number(-0.000_000_000_1) == "0")
        #expect(MBTilesMetadata.number(1e-7) == "0.0000001")
        #expect(MBTilesMetadata.number(-180) == "-180")
        #expect(MBTilesMetadata.number(47.123_456_789_4) == "47.123456789")
    }
}
