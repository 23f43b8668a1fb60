public import Foundation
package import GRDB
public import TourpackCore

/// Reads an MBTiles 1.3 file (a local extract, or a pack `validate` checks):
/// its metadata and its tiles, opened read-only so nothing is ever written
/// beside it. Tiles are addressed in XYZ; the file's TMS rows are converted.
///
/// Blocking (SQLite); call it from a thread pool.
public final class MBTilesReader: Sendable {
    public let url: URL
    private let queue: DatabaseQueue

    public init(_ url: URL) throws {
        self.url = url
        var configuration = Configuration()
        configuration.readonly = true
        configuration.label = "tourpack.mbtiles"
        do {
            queue = try DatabaseQueue(path: url.path, configuration: configuration)
        } catch {
            throw MBTilesError(path: url.path, message: Self.describe(error))
        }
    }

    /// The `metadata` table as name → value.
    public func metadata() throws -> [String: String] {
        try read { db in
            var values: [String: String] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT name, value FROM metadata") {
                if let name = row["name"] as String?, let value = row["value"] as String? { values[name] = value }
            }
            return values
        }
    }

    /// The bytes of one tile, or nil when the file has no such tile.
    public func tile(_ id: TileID) throws -> [UInt8]? {
        try read { db in
            try Data.fetchOne(
                db, sql: "SELECT tile_data FROM tiles WHERE zoom_level = ? AND tile_column = ? AND tile_row = ?",
                arguments: [id.z, id.x, id.tmsRow]
            ).map { Array($0) }
        }
    }

    /// Every tile the file holds, in XYZ, sorted: what a map may ask the
    /// pack for (`tourpack review` draws nothing else).
    package func tileIDs() throws -> [TileID] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT zoom_level, tile_column, tile_row FROM tiles").compactMap { row -> TileID? in
                guard let z = row[0] as Int?, let x = row[1] as Int?, let row = row[2] as Int?, (0...30).contains(z) else { return nil }
                return TileID(z: z, x: x, y: (1 << z) - 1 - row)
            }.sorted()
        }
    }

    /// Runs `body` on the file; SQLite's errors become `MBTilesError`s naming it.
    package func read<T>(_ body: (Database) throws -> T) throws -> T {
        do {
            return try queue.read(body)
        } catch let error as MBTilesError {
            throw error
        } catch {
            throw MBTilesError(path: url.path, message: Self.describe(error))
        }
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? DatabaseError { return error.message ?? "\(error.resultCode)" }
        return "\(error)"
    }
}

/// A tile pack or extract that cannot be read as MBTiles.
public struct MBTilesError: Error, Sendable, CustomStringConvertible {
    public var path: String
    public var message: String
    public var description: String { "\(path): \(message)" }
}

/// A local extract named by `maps.source.mbtiles`.
public enum MBTilesExtract {
    /// The tiles' format from the extract's `format` metadata.
    public static func format(of url: URL) throws -> TileFormat {
        let metadata = try MBTilesReader(url).metadata()
        guard let name = metadata["format"] else {
            throw MBTilesError(path: url.path, message: "the metadata names no format; set maps.source.format")
        }
        guard let format = TileFormat(rawValue: name.lowercased() == "jpeg" ? "jpg" : name.lowercased()) else {
            throw MBTilesError(path: url.path, message: "format '\(name)' is not one of png, jpg, webp, pbf")
        }
        return format
    }
}
