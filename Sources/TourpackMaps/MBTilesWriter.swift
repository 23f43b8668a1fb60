package import Foundation
import GRDB
package import TourpackCore

/// The `metadata` table of a tile pack (MBTiles 1.3): what a map viewer
/// needs to show the tiles without looking at them.
///
/// `center` is the middle of `bounds` at `minZoom`: the zoom the whole
/// area fits best at, which is where the app opens the map.
package struct MBTilesMetadata: Sendable, Hashable {
    /// The tour's name, so a person who opens the pack knows what it is.
    package var name: String
    package var format: TileFormat
    package var bounds: MapBounds
    package var minZoom: Int
    package var maxZoom: Int
    /// The tile licence's required credit; the app shows it under the map.
    package var attribution: String
    package var description: String
    /// `baselayer`: the pack is the map itself, not an overlay on another.
    package var type: String
    /// The pack's own version; the tiles change with the build, not this.
    package var version: String
    /// Vector tiles (`pbf`) only: the `json` row with `vector_layers`, which
    /// MBTiles 1.3 requires for them. Copied from a local extract; for a URL
    /// source tourpack cannot know the layers and writes `{"vector_layers":[]}`.
    package var json: String?

    package init(
        name: String, format: TileFormat, bounds: MapBounds, minZoom: Int, maxZoom: Int, attribution: String,
        description: String = "", type: String = "baselayer", version: String = "1", json: String? = nil
    ) {
        self.json = json ?? (format == .pbf ? #"{"vector_layers":[]}"# : nil)
        self.name = name
        self.format = format
        self.bounds = bounds
        self.minZoom = minZoom
        self.maxZoom = maxZoom
        self.attribution = attribution
        self.description = description
        self.type = type
        self.version = version
    }

    /// The middle of `bounds` (longitude, latitude) at `minZoom`.
    package var center: (longitude: Double, latitude: Double, zoom: Int) {
        ((bounds.west + bounds.east) / 2, (bounds.south + bounds.north) / 2, minZoom)
    }

    /// The rows of the `metadata` table, sorted by name. `bounds` is
    /// `west,south,east,north` and `center` `lon,lat,zoom`, as MBTiles has them.
    package var rows: [(name: String, value: String)] {
        let b = bounds
        let c = center
        let vector: [(name: String, value: String)] = json.map { [("json", $0)] } ?? []
        return [
            ("attribution", attribution),
            ("bounds", [b.west, b.south, b.east, b.north].map(Self.number).joined(separator: ",")),
            ("center", "\(Self.number(c.longitude)),\(Self.number(c.latitude)),\(c.zoom)"),
            ("description", description),
            ("format", format.rawValue),
        ] + vector + [
            ("maxzoom", String(maxZoom)),
            ("minzoom", String(minZoom)),
            ("name", name),
            ("type", type),
            ("version", version),
        ]
    }

    /// A coordinate in one fixed form, so the same bounds give the same
    /// bytes: at most 9 decimals (0.1 mm), trailing zeros dropped, never an
    /// exponent, never `-0`.
    package static func number(_ value: Double) -> String {
        var text = String(format: "%.9f", value)
        while text.hasSuffix("0") { text.removeLast() }
        if text.hasSuffix(".") { text.removeLast() }
        return text == "-0" ? "0" : text
    }
}

/// Writes a tile pack: an MBTiles 1.3 file (SQLite) with a `metadata`
/// table and a `tiles` table in TMS rows (row = 2^z − 1 − y), marked with
/// `application_id` `MPBX`.
///
/// The file is a temp that the caller fsyncs and renames into place, so it
/// is built without a journal (`journal_mode OFF`, `synchronous OFF`): a
/// crash leaves a temp that the next build deletes, never a half pack at
/// the final path. Tiles arrive in ascending (z, x, y) order and are
/// committed 1,000 at a time, so memory stays flat for 60,000 tiles.
///
/// Deterministic: the same metadata and the same tiles in the same order
/// give the same bytes (fixed page size, sorted metadata, fixed number
/// form), so an unchanged map gives an unchanged `sha256`.
///
/// Blocking (SQLite); call it from a thread pool.
package final class MBTilesWriter {
    /// MBTiles' `application_id`: "MPBX".
    package static let applicationID: Int32 = 0x4d50_4258
    package static let pageSize = 4096
    /// Tiles per transaction.
    package static let batchSize = 1000

    package let url: URL
    private var queue: DatabaseQueue?
    private var pending: [(tile: TileID, data: Data)] = []
    private var last: TileID?
    /// Tiles added so far.
    package private(set) var tileCount = 0

    /// Creates the pack at `url`, which must not exist or be empty (the
    /// fresh temp `AtomicFile.temporaryURL(for:)` makes), and writes its
    /// schema and metadata.
    /// - Throws: `MBTilesError` naming `url`, with SQLite's message.
    package init(creating url: URL, metadata: MBTilesMetadata) throws {
        self.url = url
        if let size = (try? FileManager.default.attributesOfItem(atPath: url.path))?[.size] as? NSNumber, size.int64Value > 0 {
            throw MBTilesError(path: url.path, message: "already holds \(size.int64Value) bytes; a pack is written to a new file")
        }
        var configuration = Configuration()
        configuration.label = "tourpack.mbtiles-writer"
        configuration.prepareDatabase { db in
            // Before the first write: the page size is fixed when the file gets its header.
            try db.execute(sql: "PRAGMA page_size = \(MBTilesWriter.pageSize)")
            try db.execute(sql: "PRAGMA journal_mode = OFF")
            try db.execute(sql: "PRAGMA synchronous = OFF")
        }
        do {
            let queue = try DatabaseQueue(path: url.path, configuration: configuration)
            try queue.write { db in
                try db.execute(sql: "PRAGMA application_id = \(MBTilesWriter.applicationID)")
                try db.execute(
                    sql: """
                        CREATE TABLE metadata (name TEXT, value TEXT);
                        CREATE UNIQUE INDEX metadata_name ON metadata (name);
                        CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB);
                        CREATE UNIQUE INDEX tile_index ON tiles (zoom_level, tile_column, tile_row);
                        """)
                for row in metadata.rows {
                    try db.execute(sql: "INSERT INTO metadata (name, value) VALUES (?, ?)", arguments: [row.name, row.value])
                }
            }
            self.queue = queue
        } catch {
            throw MBTilesError(path: url.path, message: MBTilesReader.describe(error))
        }
    }

    /// Adds one tile (XYZ; stored in TMS rows). Tiles must come in strictly
    /// ascending (z, x, y) order, which also rules out a tile twice.
    package func add(_ tile: TileID, data: some Collection<UInt8>) throws {
        guard queue != nil else { throw MBTilesError(path: url.path, message: "tile \(tile) added after finish()") }
        guard (0...30).contains(tile.z), (0..<(1 << tile.z)).contains(tile.x), (0..<(1 << tile.z)).contains(tile.y) else {
            throw MBTilesError(path: url.path, message: "tile \(tile) does not exist (x and y run from 0 to 2^z − 1)")
        }
        if let last, !(last < tile) {
            throw MBTilesError(path: url.path, message: "tile \(tile) added after \(last); tiles go in ascending z, x, y order")
        }
        last = tile
        pending.append((tile, Data(data)))
        tileCount += 1
        if pending.count >= Self.batchSize { try flush() }
    }

    /// Commits the last tiles and closes the file. Then fsync and rename it;
    /// `digest()` gives what package.json records.
    package func finish() throws {
        guard let queue else { return }
        try flush()
        do {
            try queue.close()
        } catch {
            throw MBTilesError(path: url.path, message: MBTilesReader.describe(error))
        }
        self.queue = nil
    }

    /// The finished file's size and lowercase hex SHA-256 (`mapTiles.sizeBytes` and `sha256`).
    package func digest() throws -> (size: Int64, sha256: String) {
        try finish()
        do {
            let (size, hex) = try FileDigest.sha256(of: url)
            return (size, hex)
        } catch {
            throw MBTilesError(path: url.path, message: "cannot be read back: \(error)")
        }
    }

    private func flush() throws {
        guard let queue, !pending.isEmpty else { return }
        let batch = pending
        pending.removeAll(keepingCapacity: true)
        do {
            try queue.write { db in
                let insert = try db.cachedStatement(
                    sql: "INSERT INTO tiles (zoom_level, tile_column, tile_row, tile_data) VALUES (?, ?, ?, ?)")
                for (tile, data) in batch {
                    try insert.execute(arguments: [tile.z, tile.x, tile.tmsRow, data])
                }
            }
        } catch {
            throw MBTilesError(path: url.path, message: MBTilesReader.describe(error))
        }
    }
}

extension MapCoverage {
    /// Records a finished pack in package.json's `mapTiles`: its path
    /// (`OfflineTours/<packageId>/tiles.mbtiles`), format, tile counts,
    /// size, hash and attribution. `emptyTiles` is what the selection
    /// holds beyond the stored tiles: tiles the source has no data for.
    package mutating func recordPack(
        file: String, format: TileFormat, storedTiles: Int, sizeBytes: Int64, sha256: String, attribution: String
    ) {
        self.file = file
        self.format = format
        self.storedTiles = storedTiles
        self.emptyTiles = tileCount - storedTiles
        self.sizeBytes = sizeBytes
        self.sha256 = sha256
        self.attribution = attribution
    }
}
