import Foundation
import GRDB
import TourpackAudio
import TourpackCore
import TourpackMaps

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The checks of one package's tile pack (`mapTiles.file`) against its
/// package.json: present, the right bytes, an MBTiles file whose SQLite
/// pages are intact, metadata that agrees, and tiles that are all where the
/// coverage says and of the format it names.
///
/// The pack is opened read-only through `MBTilesReader` and only after its
/// header shows a rollback-journal database (a WAL one would need `-shm`
/// and `-wal` files beside it), so validating never writes beside a pack.
/// Tiles are streamed with a cursor, never loaded together (a pack can hold
/// 60,000), and each kind of bad tile is reported once with up to
/// `shownTiles` of them by z/x/y. Everything is one check, `tilePack`, at
/// the pack's root-relative path.
///
/// Blocking (hashing, SQLite); `BundleValidator` runs it on its thread pool.
struct TilePackCheck: Sendable {
    /// Bad tiles named per kind of problem; the rest are counted.
    static let shownTiles = 5
    /// The most tiles a box may hold for validate to recompute a corridor
    /// over it; a hostile bufferMiles could otherwise ask for billions. A
    /// build's corridor is far smaller (`maps.maxTiles`, 60,000 by default):
    /// 10 million covers the box of a 1,000 km diagonal at zooms 12–16.
    static let maxRecomputedTiles = 10_000_000

    var package: String
    /// `OfflineTours/<package>/tiles.mbtiles`: already checked to be this package's pack.
    var path: String
    var url: URL
    var mapTiles: MapCoverage
    var route: [Coordinate]
    var pois: [Coordinate]

    func run() -> [CheckOutcome] {
        var record = OutcomeRecorder(package: package, subject: path)
        record.ran(.tilePack)
        check(&record)
        return record.outcomes
    }

    private func check(_ record: inout OutcomeRecorder) {
        guard let format = mapTiles.format, let storedTiles = mapTiles.storedTiles,
            let sizeBytes = mapTiles.sizeBytes, let sha256 = mapTiles.sha256
        else { return }
        var status = stat()
        guard stat(url.path, &status) == 0 else {
            let code = errno
            record.error(
                .tilePack,
                code == ENOENT
                    ? "missing: package.json lists this tile pack but it is not there" : "cannot be read: \(errnoDescription(code))")
            return
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            record.error(.tilePack, "not a regular file")
            return
        }
        do {
            let (size, digest) = try FileDigest.sha256(of: url)
            if size != sizeBytes {
                record.error(.tilePack, "\(size) bytes, package.json says \(sizeBytes)\(size < sizeBytes ? " (truncated?)" : "")")
            }
            if digest != sha256 {
                record.error(.tilePack, "sha256 is \(digest), package.json says \(sha256)")
            }
        } catch {
            record.error(.tilePack, "cannot be read: \(error)")
            return
        }
        guard checkHeader(&record) else { return }

        do {
            let reader = try MBTilesReader(url)
            try reader.read { db in
                guard try checkSchema(db, &record) else { return }
                let integrity = try String.fetchAll(db, sql: "PRAGMA integrity_check(\(Self.shownTiles))")
                guard integrity == ["ok"] else {
                    record.error(.tilePack, "SQLite's integrity check fails: \(integrity.joined(separator: "; "))")
                    return
                }
                try checkMetadata(db, format: format, &record)
                let count = try Int.fetchOne(db, sql: "SELECT count(*) FROM tiles") ?? 0
                if count != storedTiles {
                    record.error(.tilePack, "holds \(count) tiles, package.json's storedTiles is \(storedTiles)")
                }
                try checkTiles(db, format: format, &record)
            }
        } catch let error as MBTilesError {
            record.error(.tilePack, "cannot be read as MBTiles: \(error.message)")
        } catch {
            record.error(.tilePack, "cannot be read as MBTiles: \(error)")
        }
    }

    /// The 100-byte SQLite header, read before SQLite opens the file: an
    /// SQLite database, and not in WAL mode (read and write versions 2).
    private func checkHeader(_ record: inout OutcomeRecorder) -> Bool {
        let header: [UInt8]
        do {
            header = Array(try FileReading.bytes(of: url, limit: 100).prefix(100))
        } catch {
            record.error(.tilePack, "cannot be read: \(error)")
            return false
        }
        guard header.count == 100, header.starts(with: Array("SQLite format 3\0".utf8)) else {
            record.error(.tilePack, "not an SQLite database (an MBTiles pack is one): the header is missing or wrong")
            return false
        }
        if header[18] == 2 || header[19] == 2 {
            record.error(.tilePack, "in WAL mode, which needs -wal and -shm files beside it; write packs with journal_mode DELETE or OFF")
            return false
        }
        return true
    }

    /// `tiles` and `metadata`, each a plain table with the columns MBTiles
    /// names (`MBTilesReader.schemaProblems`): a view could hide an endless query.
    private func checkSchema(_ db: Database, _ record: inout OutcomeRecorder) throws -> Bool {
        let problems = try MBTilesReader.schemaProblems(db)
        for problem in problems { record.error(.tilePack, problem) }
        return problems.isEmpty
    }

    /// The keys the contract requires, and the ones package.json repeats agree with it.
    private func checkMetadata(_ db: Database, format: TileFormat, _ record: inout OutcomeRecorder) throws {
        // Any storage class: other tools write minzoom as an INTEGER.
        let metadata = try MBTilesReader.metadata(db)
        let required = ["name", "format", "bounds", "center", "minzoom", "maxzoom", "attribution"]
        let missing = required.filter { metadata[$0] == nil }
        if !missing.isEmpty {
            record.error(.tilePack, "the metadata lacks \(missing.joined(separator: ", "))")
        }
        if let value = metadata["format"], (value.lowercased() == "jpeg" ? "jpg" : value.lowercased()) != format.rawValue {
            record.error(.tilePack, "the metadata's format is \(Self.shown(value)), package.json says \(format.rawValue)")
        }
        for (key, expected) in [("minzoom", mapTiles.minZoom), ("maxzoom", mapTiles.maxZoom)] {
            if let value = metadata[key], Int(value) != expected {
                record.error(.tilePack, "the metadata's \(key) is \(Self.shown(value)), package.json says \(expected)")
            }
        }
        if let value = metadata["attribution"], value != (mapTiles.attribution ?? "") {
            record.error(
                .tilePack, "the metadata's attribution is \(Self.shown(value)), package.json says \(Self.shown(mapTiles.attribution ?? ""))"
            )
        }
        if let value = metadata["bounds"] {
            let numbers = Self.numbers(value)
            let b = mapTiles.bounds
            if numbers?.count != 4 {
                record.error(.tilePack, "the metadata's bounds \(Self.shown(value)) are not west,south,east,north")
            } else if let numbers, zip(numbers, [b.west, b.south, b.east, b.north]).contains(where: { abs($0 - $1) > 1e-6 }) {
                record.error(
                    .tilePack,
                    "the metadata's bounds \(Self.shown(value)) are not package.json's (W \(b.west), S \(b.south), E \(b.east), N \(b.north))"
                )
            }
        }
        if let value = metadata["center"], Self.numbers(value)?.count != 3 || Self.numbers(value)?.last.map({ $0.rounded() == $0 }) != true
        {
            record.error(.tilePack, "the metadata's center \(Self.shown(value)) is not longitude,latitude,zoom")
        }
    }

    /// Every tile, streamed: its zoom, column and row exist, it is inside
    /// package.json's range for its zoom (and the corridor, for one), it is
    /// stored once, and its bytes start as the format's do.
    private func checkTiles(_ db: Database, format: TileFormat, _ record: inout OutcomeRecorder) throws {
        let ranges = Dictionary(mapTiles.ranges.map { ($0.zoom, $0) }, uniquingKeysWith: { first, _ in first })
        let corridor = corridorTiles()
        var problems = TileProblems()
        var seen = Set<TileID>()
        let cursor = try Row.fetchCursor(db, sql: "SELECT zoom_level, tile_column, tile_row, tile_data FROM tiles")
        while let row = try cursor.next() {
            let values = (0..<3).map { row[$0] as DatabaseValue }
            guard case .int64(let z64) = values[0].storage, case .int64(let column) = values[1].storage,
                case .int64(let tmsRow) = values[2].storage
            else {
                problems.add(
                    "whose zoom_level, tile_column or tile_row is not an integer", "\(values.map(\.description).joined(separator: "/"))")
                continue
            }
            // Comparisons, not ranges: the file's numbers may be anything, even minZoom > maxZoom.
            guard z64 >= Int64(mapTiles.minZoom), z64 <= Int64(mapTiles.maxZoom), z64 <= 30 else {
                problems.add(
                    "at a zoom outside minzoom...maxzoom (\(mapTiles.minZoom)...\(mapTiles.maxZoom))", "\(z64)/\(column)/row \(tmsRow)")
                continue
            }
            let z = Int(z64)
            let side = Int64(1) << z
            guard (0..<side).contains(column), (0..<side).contains(tmsRow) else {
                problems.add("whose column or row is outside 0..<2^zoom", "\(z)/\(column)/row \(tmsRow)")
                continue
            }
            let tile = TileID(z: z, x: Int(column), y: Int(side - 1 - tmsRow))
            if !seen.insert(tile).inserted {
                problems.add("stored twice", tile.description)
            }
            if let range = ranges[z], range.minX <= tile.x, tile.x <= range.maxX, range.minY <= tile.y, tile.y <= range.maxY {
                if let corridor, !corridor.contains(tile) {
                    problems.add("outside the corridor of the route and POIs", tile.description)
                }
            } else {
                problems.add("outside package.json's range for their zoom", tile.description)
            }
            switch (row[3] as DatabaseValue).storage {
            case .blob(let data):
                if !format.matches(data) {
                    problems.add("that are not \(format.rawValue) by their first bytes", "\(tile) (starts \(Self.hexPrefix(data)))")
                }
            case .string:
                problems.add("that are not \(format.rawValue) by their first bytes", "\(tile) (text, not a blob)")
            default:
                problems.add("that are not \(format.rawValue) by their first bytes", "\(tile) (no bytes)")
            }
        }
        for problem in problems.kinds {
            let count = problem.samples.count + problem.more
            let more = problem.more == 0 ? "" : " and \(problem.more) more"
            // "1 tile that is not png", "2 tiles that are not png".
            let kind = count == 1 ? problem.kind.replacingOccurrences(of: "that are ", with: "that is ") : problem.kind
            record.error(
                .tilePack, "\(count) tile\(count == 1 ? "" : "s") \(kind): \(problem.samples.joined(separator: ", "))\(more)")
        }
    }

    /// The tiles a corridor package selects, recomputed; nil for bbox (the
    /// ranges say it all) or when the box is too large to go through.
    private func corridorTiles() -> Set<TileID>? {
        let tiles = mapTiles
        guard tiles.selection == .corridor, (0...22).contains(tiles.minZoom), (0...22).contains(tiles.maxZoom),
            tiles.minZoom <= tiles.maxZoom, tiles.bufferMiles.isFinite, tiles.bufferMiles >= 0
        else { return nil }
        let settings = MapSettings(minZoom: tiles.minZoom, maxZoom: tiles.maxZoom, bufferMiles: tiles.bufferMiles, selection: .corridor)
        guard let box = TileMath.coverage(of: route + pois, settings: settings), box.tileCount <= Self.maxRecomputedTiles else {
            return nil
        }
        return Set(TileMath.tiles(route: route, pois: pois, settings: settings))
    }

    /// Each kind of bad tile with the first few of them.
    private struct TileProblems {
        var kinds: [(kind: String, samples: [String], more: Int)] = []

        mutating func add(_ kind: String, _ tile: String) {
            guard let index = kinds.firstIndex(where: { $0.kind == kind }) else {
                kinds.append((kind, [tile], 0))
                return
            }
            if kinds[index].samples.count < TilePackCheck.shownTiles {
                kinds[index].samples.append(tile)
            } else {
                kinds[index].more += 1
            }
        }
    }

    private static func numbers(_ text: String) -> [Double]? {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map { Double($0.trimmingCharacters(in: .whitespaces)) }
        return parts.contains(nil) ? nil : parts.compactMap { $0 }
    }

    private static func hexPrefix(_ data: Data) -> String {
        data.prefix(4).map { String(format: "%02X", $0) }.joined(separator: " ")
    }

    /// A metadata value from the file, escaped and cut short.
    private static func shown(_ value: String) -> String {
        "'\(ValidationFinding.printable(value, limit: 80))'"
    }
}
